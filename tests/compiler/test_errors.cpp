// Error messages pinned: shape mismatch at trace time, unknown op in parsed text, malformed JSON programs and
// payloads, a verifier type error, unknown families, and lowering without a rule.
#include "CompilerTestUtil.h"

#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Verifier.h"

using namespace einstage;
using namespace compiler_test;

TEST_CASE("errors: a constant extent mismatch fails at trace time naming the instruction, label and extents") {
  TraceContext ctx("mm", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {4, 5});
  TracedTensor y = exp(x);
  CHECK(error_of([&] { einsum::einsum(ctx, "ij,jk->ik", {y, w}); }) ==
        "'einstage.einsum.v1' at %1 in @mm: einsum \"ij,jk->ik\": label 'j' has extent 3 in operand 0 (axis 1) but 4 "
        "in operand 1 (axis 0); the extents of a label must agree (or one of them be 1 with broadcasting allowed)");
  // Nothing was appended by the failed call.
  CHECK(ctx.program().instructions.size() == 1);
  CHECK(error_of([&] { einsum::einsum(ctx, "ij,jk->ik", {x}); }) ==
        "'einstage.einsum.v1' at %1 in @mm: einsum \"ij,jk->ik\": 1 operands given but the subscripts have 2 input "
        "terms");
  CHECK(error_of([&] { einsum::einsum(ctx, "ijk,jk->ik", {x, w}); }).find("operand 0 has rank 2 but its term") !=
        std::string::npos);
  CHECK(error_of([&] { einsum::einsum(ctx, "ii->i", {x}); }) ==
        "'einstage.einsum.v1' at %1 in @mm: einsum \"ii->i\": label 'i' is repeated in operand 0 with extents 2 (axis "
        "0) and 3 (axis 1); a repeated label takes a diagonal and needs equal extents");
  TracedTensor u = ctx.parameter("u", DType::f64, {Dim::symbol("n"), 3});
  CHECK(error_of([&] { einsum::einsum(ctx, "ij,jk->ik", {u, w}); }).find("label 'j' has extent 3") !=
        std::string::npos);
  CHECK(error_of([&] { x + w; }) ==
        "'add' at %1 in @mm: operand 1 axis 0 (operand 0 is f64[2,3], operand 1 is f64[4,5]): extent 2 does not match "
        "extent 4");
  // The notation's own errors keep their caret.
  CHECK(error_of([&] { einsum::einsum(ctx, "ij,j-k->ik", {x, w}); }).find("^") != std::string::npos);
}

TEST_CASE("errors: parsing text with an unknown op or family, or a bad einsum payload") {
  const char* unknown_op =
      "program @p(%x: f64[3]) -> (f64[3]) {\n"
      "  %0 = frobnicate(%x) : f64[3]\n"
      "  return %0\n"
      "}\n";
  CHECK(error_of([&] { parse_program(unknown_op, &registry()); }).find("frobnicate") != std::string::npos);
  const char* unknown_family =
      "program @p(%x: f64[3]) -> (f64[3]) {\n"
      "  %0 = acme.warp.v2(%x) : f64[3]\n"
      "  return %0\n"
      "}\n";
  CHECK(error_of([&] { parse_program(unknown_family, &registry()); }).find("acme.warp.v2") != std::string::npos);
  const char* bad_plan =
      "program @p(%x: f64[2,3], %w: f64[3,4]) -> (f64[2,4]) {\n"
      "  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = sometimes, subscripts = \"ij,jk->ik\"} : f64[2,4]\n"
      "  return %0\n"
      "}\n";
  CHECK(error_of([&] { parse_program(bad_plan, &registry()); }).find("'einstage.einsum.v1' attribute 'plan'") !=
        std::string::npos);
  const char* missing =
      "program @p(%x: f64[2,3], %w: f64[3,4]) -> (f64[2,4]) {\n"
      "  %0 = einstage.einsum.v1(%x, %w) {plan = auto, subscripts = \"ij,jk->ik\"} : f64[2,4]\n"
      "  return %0\n"
      "}\n";
  CHECK(error_of([&] { parse_program(missing, &registry()); })
            .find("'einstage.einsum.v1' needs the attributes broadcast, plan and subscripts") != std::string::npos);
  const char* wrong_type =
      "program @p(%x: f64[2,3], %w: f64[3,4]) -> (f64[2,5]) {\n"
      "  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"} : f64[2,5]\n"
      "  return %0\n"
      "}\n";
  CHECK(error_of([&] { parse_program(wrong_type, &registry()); }).find("f64[2,4]") != std::string::npos);
  CHECK(error_of([&] { einsum::EinsumPayload::parse_text("broadcast = maybe, plan = auto, subscripts = \"i->i\""); }) ==
        "'einstage.einsum.v1' attribute 'broadcast': expected true or false (got maybe)");
  CHECK(error_of([&] { einsum::EinsumPayload::parse_text("broadcast = false, plan = auto, subscripts = {\"inputs\": "
                                                         "[[0]], \"output\": [1]}"); })
            .find("output label 1 (output axis 0) appears in no input") != std::string::npos);
  CHECK(error_of([&] { einsum::EinsumPayload::parse_text("broadcast = false, colour = red, plan = auto, "
                                                         "subscripts = \"i->i\""); }) ==
        "'einstage.einsum.v1' has no attribute 'colour'; it takes broadcast, output_shape (optional), plan, "
        "subscripts");
}

TEST_CASE("errors: malformed JSON programs and payloads") {
  CHECK(error_of([&] { program_from_json("{not json", &registry()); }).find("malformed JSON program") !=
        std::string::npos);
  TraceContext ctx("j", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  Program p = ctx.finish({einsum::einsum(ctx, "ij->ji", {x})});
  std::string json = program_to_json(p, -1);
  std::string broken = json;
  broken.replace(broken.find("\"plan\":\"auto\""), 13, "\"plan\":7");
  CHECK(error_of([&] { program_from_json(broken, &registry()); }).find("'einstage.einsum.v1' attribute 'plan'") !=
        std::string::npos);
  CHECK(error_of([&] { einsum::EinsumPayload::parse_json("[1, 2]"); }) ==
        "'einstage.einsum.v1' payload: expected a JSON object (got [1, 2])");
  CHECK(error_of([&] { einsum::EinsumPayload::parse_json(R"({"plan":"auto","subscripts":"i->i"})"); }) ==
        "'einstage.einsum.v1' payload: missing \"broadcast\" (got {\"plan\":\"auto\",\"subscripts\":\"i->i\"})");
}

TEST_CASE("errors: the verifier catches a result type that disagrees with the einsum type rule") {
  TraceContext ctx("v", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  Program p = ctx.finish({einsum::einsum(ctx, "ij,jk->ik", {x, w})});
  p.instructions[0].results[0].type = TensorType{DType::f64, {2, 5}};
  p.outputs[0].type = p.instructions[0].results[0].type;
  std::string msg = error_of([&] { verify(p, &registry()); });
  CHECK(msg.rfind("'einstage.einsum.v1' at %0 in @v: result type is f64[2,5] but the type rule gives f64[2,4]", 0) == 0);
  CHECK(msg.find("> ") != std::string::npos);
  // Without the family registered, the verifier names it.
  CHECK(error_of([&] { verify(p, nullptr); }).find("einstage.einsum.v1") != std::string::npos);
}

TEST_CASE("errors: registration is explicit and once; lowering without a rule names the family") {
  ExtensionRegistry reg;
  einsum::register_einsum_semantics(reg);
  CHECK(error_of([&] { einsum::register_einsum_semantics(reg); }).find("einstage.einsum.v1") != std::string::npos);
  reg.find_mutable(einsum::kEinsumFamily)->lower = nullptr;
  TraceContext ctx("nolower", &reg);
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  Program p = ctx.finish({einsum::einsum(ctx, "ij->ji", {x})});
  CHECK(error_of([&] { lower_to_standard_ops(p, {}, reg); }) ==
        "lower_to_standard_ops: 'einstage.einsum.v1' at %0 in @nolower has no lowering rule (module "
        "'einstage.einsum' registers none); run the program with a runtime that loads the module instead, or lower "
        "partially (LowerOptions::keep_unlowerable) to keep such ops");
}
