// Echoes of user text in error messages (ir/Quote.h): control characters, NUL and bytes that are not UTF-8 are
// escaped, long text keeps its head and tail, caret columns follow the escapes; and the readers that echo user text
// (.npy headers, IR text, JSON programs, attribute text) keep a message whole when the text holds a NUL or a newline.
#include "support/ErrorOf.h"

#include "ir/Json.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "ir/Quote.h"

#include <doctest/doctest.h>

#include <string>

using namespace einstage;
using test::error_of;
using namespace std::string_literals;

TEST_CASE("quote: control characters, NUL, non-UTF-8 bytes and the quote are escaped; UTF-8 labels are kept") {
  CHECK(quote_for_message("ij,jk->ik") == "\"ij,jk->ik\"");
  CHECK(quote_for_message("ij\n,jk") == "\"ij\\n,jk\"");
  CHECK(quote_for_message("a\0b"s) == "\"a\\0b\"");
  CHECK(quote_for_message("a\tb\rc\x1b[31m") == "\"a\\tb\\rc\\x1b[31m\"");
  CHECK(quote_for_message("a\xff\xfe b") == "\"a\\xff\\xfe b\"");
  CHECK(quote_for_message("\xc3(") == "\"\\xc3(\"");  // a truncated two-byte sequence
  CHECK(quote_for_message("say \"hi\" \\ there") == "\"say \\\"hi\\\" \\\\ there\"");
  CHECK(quote_for_message("αβ,βγ->αγ 甲") == "\"αβ,βγ->αγ 甲\"");
  CHECK(quote_for_message("a\u2028b\u202ec\u0085d") == "\"a\\u2028b\\u202ec\\u0085d\"");
  CHECK(escape_for_message("it's \"x\"", '\'') == "it\\'s \"x\"");
}

TEST_CASE("quote: long text keeps head and tail and says how many bytes were elided") {
  const std::string text = std::string(100'000, 'a') + "XYZ";
  const std::string q = quote_for_message(text);
  CHECK(q.size() < 220);
  CHECK(q == "\"" + std::string(80, 'a') + "<... 99843 bytes elided ...>" + std::string(77, 'a') + "XYZ\"");
  CHECK(quote_for_message(std::string(160, 'b')) == "\"" + std::string(160, 'b') + "\"");
  // Multi-byte characters are never cut.
  std::string greek;
  for (int i = 0; i < 200; ++i) greek += "α";
  const std::string g = escape_for_message(greek);
  CHECK(g.find("\\x") == std::string::npos);
  CHECK(g.find("<... 240 bytes elided ...>") != std::string::npos);
}

TEST_CASE("quote: caret columns follow escapes, wide characters and the shortened text") {
  const size_t at[] = {3, 6};
  EchoLine line = echo_with_columns("a\tb,c\0d"s, at);
  CHECK(line.text == "a\\tb,c\\0d");
  CHECK(line.columns == std::vector<size_t>{4, 8});
  const size_t wide[] = {3};
  CHECK(echo_with_columns("甲乙x", wide).columns == std::vector<size_t>{2});
  const size_t end[] = {6};
  CHECK(echo_with_columns("甲乙x", end).columns == std::vector<size_t>{4});
  // A caret deep inside a long text: a window around it is kept and its column points into the window.
  const std::string text = std::string(50'000, 'a') + "!" + std::string(50'000, 'b');
  const size_t mid[] = {50'000};
  EchoLine long_line = echo_with_columns(text, mid);
  CHECK(long_line.text.size() < 260);
  REQUIRE(long_line.columns[0] != std::string::npos);
  CHECK(long_line.text[long_line.columns[0]] == '!');
  CHECK(long_line.text.find("bytes elided") != std::string::npos);
}

TEST_CASE("quote: a NUL or a newline in a .npy header, IR text, JSON or attribute text keeps the message whole") {
  std::string dict = "{'descr': '<f8\0', 'fortran_order': False, 'shape': (2,), }"s;
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  const std::string npy = "\x93NUMPY\x01\x00"s + char(dict.size()) + '\0' + dict;
  CHECK(error_of([&] { read_npy_bytes(npy, nullptr, "'x.npy'"); }).starts_with(
      "'x.npy': unsupported dtype '<f8\\0'; supported dtypes are f4 (f32)"));
  std::string key_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x\0y\tz': 1}"s;
  CHECK(error_of([&] { read_npy_bytes("\x93NUMPY\x01\x00"s + char(key_dict.size()) + '\0' + key_dict); })
            .starts_with("npy bytes: malformed .npy header: unexpected key 'x\\0y\\tz' (the keys are"));

  CHECK(error_of([] { parse_program("program @f(%x: f64[3]) -> (f64[3]) {\n  %0 = ne\0g(%x) : f64[3]\n  return %0\n}\n"s); })
            .starts_with("line 2: unknown op 'ne\\0g'; standard ops are ["));
  CHECK(error_of([] { parse_program("program @f(%x: f64[3\0]) -> (f64[3]) {\n}\n"s); }) ==
        "line 1: 'f64[3\\0]' is not a tensor type like f64[n,4]");
  const std::string head =
      R"({"format": "einstage.ir", "version": 1, "name": "f", "params": [{"name": "x", "type": "f64[3]"}], )";
  CHECK(error_of([&] {
          program_from_json(head + R"("instructions": [{"result": "%0", "op": "fr\u0000o\nb", "operands": [], "type": "f64[3]"}], "constraints": [], "outputs": []})");
        }) == "malformed JSON program: instructions[0]: unknown op 'fr\\0o\\nb'");
  CHECK(error_of([&] {
          program_from_json(head + R"("instructions": [{"result": "%0", "op": "neg", "operands": ["%x"], "attributes": {}, "type": "f64[\u0000]"}], "constraints": [], "outputs": []})");
        }) == "malformed JSON program: instructions[0]: 'f64[\\0]' is not a tensor type like f64[n,4]");
  CHECK(error_of([] {
          parse_program("program @f(%x: f64[3]) -> (f64[3]) {\n  %0 = transpose(%x) {perm = [0\n"s);
        }).find('\n') == std::string::npos);
}
