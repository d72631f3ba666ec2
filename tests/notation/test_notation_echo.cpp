// Subscripts echoed in error messages stay whole and short (ir/Quote.h): a newline or a NUL is escaped with the caret
// under its escape, and 100,000-label subscripts echo a few hundred bytes, not 100 KB, in the parser's, the binder's
// and the plan spec's messages.
#include "support/ErrorOf.h"

#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/notation/Grouped.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/planner/PlanSpec.h"

#include <doctest/doctest.h>

#include <string>

using namespace einstage;
using namespace einstage::einsum;
using test::error_of;
using namespace std::string_literals;

TEST_CASE("echo: a newline or a NUL in subscripts is escaped and the caret points at the escape") {
  CHECK(error_of([] { parse_notation("ij,j\nk->ik"); }) ==
        "einsum \"ij,j\\nk->ik\": character U+000A cannot be a label (control or white-space character)\n"
        "  ij,j\\nk->ik\n"
        "      ^");
  CHECK(error_of([] { parse_notation("ij,jk\0->ik"s); }) ==
        "einsum \"ij,jk\\0->ik\": character U+0000 cannot be a label (control or white-space character)\n"
        "  ij,jk\\0->ik\n"
        "       ^");
  CHECK(error_of([] { parse_grouped("Ai\0,iB->AB"s); }).starts_with("grouped einsum \"Ai\\0,iB->AB\": "));
  CHECK(error_of([] { PlanSpec::parse("greedy\n(0,1)"); }).starts_with("plan spec \"greedy\\n(0,1)\" at column"));
}

TEST_CASE("echo: 100,000-label subscripts give short messages that keep the head, the tail and the caret") {
  const std::string labels(100'000, 'a');
  const std::string parse_message = error_of([&] { parse_notation(labels + "->b"); });
  CHECK(parse_message.size() < 600);
  CHECK(parse_message.starts_with("einsum \"" + std::string(80, 'a') + "<... 99843 bytes elided ...>"));
  CHECK(parse_message.find("output label 'b' appears in no input term") != std::string::npos);
  const std::string caret_line = parse_message.substr(parse_message.rfind('\n') + 1);
  const std::string text_line = parse_message.substr(0, parse_message.rfind('\n'));
  const std::string shown = text_line.substr(text_line.rfind('\n') + 1);
  REQUIRE(caret_line.size() <= shown.size());
  CHECK(shown[caret_line.size() - 1] == 'b');  // the caret sits under the 'b' of the shortened line

  const Tensor v = Tensor::zeros(DType::f64, {3});
  const std::string rank_message = error_of([&] { einsum::einsum(labels + "->", {v}); });
  CHECK(rank_message.size() < 700);
  CHECK(rank_message.find("operand 0 has rank 1 but its term \"" + std::string(80, 'a') +
                          "<... 99840 bytes elided ...>" + std::string(80, 'a') + "\" names 100000 labels") !=
        std::string::npos);
}
