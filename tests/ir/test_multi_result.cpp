// Instructions with several results (the test family test.dup.v1: x -> (a x, b x)): the golden text and DOT forms,
// text and JSON round trips, dense numbering across results, and the pinned errors of the builder, the parser, the
// JSON reader, the registry and the verifier when results are missing, extra, mistyped or not defined.
#include "ir/Extension.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "support/DupFamily.h"
#include "support/ErrorOf.h"
#include "support/Golden.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <filesystem>

using namespace einstage;
using einstage::test::error_of;

namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(EINSTAGE_SOURCE_DIR) / "tests" / "ir" / "golden";

const ExtensionRegistry& registry() {
  static const ExtensionRegistry r = [] {
    ExtensionRegistry reg;
    testing::register_dup_family(reg);
    return reg;
  }();
  return r;
}

std::shared_ptr<const ExtensionPayload> dup(double a, double b) { return std::make_shared<testing::DupPayload>(a, b); }

Program pairs() { return testing::dup_pairs_program(registry()); }

}  // namespace

// The text golden, multi_result.ir, is one of test_program_golden.cpp's cases (with its round trips).
TEST_CASE("multi-result: golden DOT, dense numbering across results") {
  Program p = pairs();
  REQUIRE(p.instructions.size() == 4);
  CHECK(p.instructions[0].results.size() == 2);
  CHECK(instruction_name(p, 1) == "%2");
  CHECK(instruction_name(p, 3) == "%5");
  test::check_golden_file(kGoldenDir / "multi_result.dot", print_dot(p));
}

TEST_CASE("multi-result: parse -> print and JSON round trips") {
  Program p = pairs();
  std::string text = print_program(p);
  Program q = parse_program(text, &registry());
  CHECK(print_program(q) == text);
  REQUIRE(q.instructions[2].results.size() == 2);
  CHECK(q.instructions[2].results[1].type == p.instructions[2].results[1].type);
  std::string json = program_to_json(p, -1);
  CHECK(json.find(R"("results":["%0","%1"])") != std::string::npos);
  CHECK(json.find(R"("types":["f64[n,3]","f64[n,3]"])") != std::string::npos);
  CHECK(json.find(R"("result":"%2")") != std::string::npos);  // one result keeps the single-result form
  CHECK(print_program(program_from_json(json, &registry())) == text);
}

TEST_CASE("multi-result: emit refuses an op with several results before appending anything") {
  Builder b("m", &registry());
  Value x = b.parameter("x", {DType::f64, {2}});
  CHECK(error_of([&] { b.extension(dup(1, 2), {x}); }) ==
        "'test.dup.v1' at %0 in @m: has 2 results but emit returns one value; use emit_results (or "
        "extension_results) to receive all of them");
  CHECK(b.program().instructions.empty());
  std::vector<Value> r = b.extension_results(dup(1, 2), {x});
  CHECK(r[0].id != r[1].id);
  CHECK(b.neg(r[1]).type == x.type);
  CHECK(print_program(b.program()).find("  %2 = neg(%1) : f64[2]") != std::string::npos);
}

TEST_CASE("multi-result: a family needs infer_type or infer_types") {
  ExtensionRegistry reg;
  ExtensionSemantics s;
  s.family = "test.none.v1";
  s.module = "einstage.test";
  s.parse_text = [](std::string_view) -> std::unique_ptr<ExtensionPayload> { return nullptr; };
  s.parse_json = s.parse_text;
  CHECK(error_of([&] { reg.register_family(s); }) ==
        "extension family 'test.none.v1' (module 'einstage.test') has no infer_type (or infer_types) rule; it is "
        "required");
}

TEST_CASE("multi-result: parse errors name the results and the types") {
  auto parse = [](std::string body) {
    return error_of([&] { parse_program("program @f(%x: f64[3]) -> () {\n" + body + "  return\n}\n", &registry()); });
  };
  CHECK(parse("  %0 = test.dup.v1(%x) {a = 1, b = 2} : f64[3]\n") ==
        "line 2: 'test.dup.v1' gives 2 results but 1 is named; name each result: '%0, %1 = ...'");
  CHECK(parse("  %0, %1 = test.dup.v1(%x) {a = 1, b = 2} : f64[3]\n") ==
        "line 2: 2 results are named but 1 type is given; give one type per result");
  CHECK(parse("  %0, %2 = test.dup.v1(%x) {a = 1, b = 2} : f64[3], f64[3]\n") ==
        "line 2: expected result '%1' (results are numbered densely), got '%2'");
  CHECK(parse("  %0, %1 = test.dup.v1(%x) {a = 1, b = 2} : f64[3], f64[4]\n") ==
        "line 2: 'test.dup.v1' result 1 is printed with type f64[4] but its type rule gives f64[3]");
  CHECK(parse("  %0, %1 = neg(%x) : f64[3], f64[3]\n") ==
        "line 2: 'neg' gives 1 result but 2 are named; name each result: '%0 = ...'");
  // The op has results %0 and %1 only: %2 does not exist yet.
  CHECK(parse("  %0, %1 = test.dup.v1(%x) {a = 1, b = 2} : f64[3], f64[3]\n  %2 = neg(%2) : f64[3]\n") ==
        "line 3: use of undefined value '%2'");
}

TEST_CASE("multi-result: malformed JSON instructions") {
  std::string json = program_to_json(pairs(), -1);
  auto with = [&](std::string from, std::string to) {
    std::string j = json;
    size_t at = j.find(from);
    REQUIRE(at != std::string::npos);
    j.replace(at, from.size(), to);
    return error_of([&] { program_from_json(j, &registry()); });
  };
  CHECK(with(R"("types":["f64[n,3]","f64[n,3]"])", R"("types":["f64[n,3]"])") ==
        "malformed JSON program: instructions[0]: \"results\" has 2 entries and \"types\" 1; give one type per "
        "result, at least one");
  CHECK(with(R"("results":["%0","%1"])", R"("results":["%0","%1"],"result":"%0")") ==
        "malformed JSON program: instructions[0]: give either \"result\" and \"type\" (one result) or \"results\" and "
        "\"types\" (several), not both");
  CHECK(with(R"("results":["%0","%1"],"types":["f64[n,3]","f64[n,3]"])", R"("result":"%0","type":"f64[n,3]")") ==
        "malformed JSON program: instructions[0]: 'test.dup.v1' gives 2 results but 1 is recorded");
  CHECK(with(R"("results":["%0","%1"])", R"("results":["%0","%7"])") ==
        "malformed JSON program: instructions[0]: expected result \"%1\", got \"%7\"");
}

TEST_CASE("multi-result: the verifier checks the result count, each result's type and uses of results") {
  Program p = pairs();
  Program missing = p;
  missing.instructions[0].results.pop_back();
  missing.instructions[1].operands[1] = missing.instructions[1].operands[0];
  CHECK(error_of([&] { verify(missing, &registry()); }) ==
        "'test.dup.v1' at %0 in @pairs: the instruction has 1 result but the type rule gives 2; give it one result "
        "per type the rule returns\n"
        "while verifying:\n"
        "  program @pairs(%x: f64[n,3]) -> (f64[n,3], f64[n,3], f64[n,3]) {\n"
        ">   %0 = test.dup.v1(%x) {a = 2, b = -0.5} : f64[n,3]\n"
        "    %1 = mul(%0, %0) : f64[n,3]\n"
        "    %2, %3 = test.dup.v1(%?2) {a = 1, b = 3} : f64[n,3], f64[n,3]\n"
        "    %4 = add(%2, %3) : f64[n,3]");
  Program mistyped = p;
  mistyped.instructions[2].results[1].type = {DType::f64, {Dim::symbol("n"), 4}};
  CHECK(error_of([&] { verify(mistyped, &registry()); }).starts_with(
        "'test.dup.v1' at %3 in @pairs: result 1 type is f64[n,4] but the type rule gives f64[n,3]\n"));
  // A use of a result the instruction does not have (its id is defined nowhere).
  Program beyond = p;
  beyond.instructions[1].operands[1].id = 99;
  CHECK(error_of([&] { verify(beyond, &registry()); }).starts_with(
        "'mul' at %2 in @pairs: operand 1 (%?99) is not defined before this use\n"));
  Program twice = p;
  twice.instructions[0].results[1].id = twice.instructions[0].results[0].id;
  CHECK(error_of([&] { verify(twice, &registry()); }).starts_with(
        "'test.dup.v1' at %0 in @pairs: result 1 value id 1 is negative or already defined (SSA values are defined "
        "once)\n"));
}
