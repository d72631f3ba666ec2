// The compiler's passes on instructions with several results (the test family test.dup.v1: x -> (a x, b x)):
// tracing returns every result, DCE keeps such an instruction while any result is read and removes it only when all
// are dead, CSE merges two equal ones result by result, and lowering maps each result to its standard-op value.
#include "compiler/Cse.h"
#include "compiler/Dce.h"
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "ir/Printer.h"
#include "runtime/Interpreter.h"
#include "support/DupFamily.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <doctest/doctest.h>

using namespace einstage;
using einstage::test::error_of;

namespace {

const ExtensionRegistry& dup_registry() {
  static const ExtensionRegistry r = [] {
    ExtensionRegistry reg;
    testing::register_dup_family(reg);
    return reg;
  }();
  return r;
}

std::vector<TracedTensor> dup(TraceContext& ctx, const TracedTensor& x, double a, double b) {
  return ctx.extension_results(std::make_shared<testing::DupPayload>(a, b), {&x, 1});
}

}  // namespace

TEST_CASE("multi-result: tracing returns every result; emit refuses the op") {
  TraceContext ctx("t", &dup_registry());
  TracedTensor x = ctx.parameter("x", DType::f32, {Dim::symbol("n")});
  std::vector<TracedTensor> r = dup(ctx, x, 2, 3);
  REQUIRE(r.size() == 2);
  CHECK(r[1].type() == x.type());
  CHECK(error_of([&] { ctx.extension(std::make_shared<testing::DupPayload>(1, 1), {&x, 1}); }) ==
        "'test.dup.v1' at %2 in @t: has 2 results but emit returns one value; use emit_results (or "
        "extension_results) to receive all of them");
  Program p = ctx.finish({r[1] * r[0]});
  CHECK(print_program(p) ==
        "program @t(%x: f32[n]) -> (f32[n]) {\n"
        "  %0, %1 = test.dup.v1(%x) {a = 2, b = 3} : f32[n], f32[n]\n"
        "  %2 = mul(%1, %0) : f32[n]\n"
        "  return %2\n"
        "}\n");
}

TEST_CASE("multi-result: dce removes an instruction only when all its results are dead") {
  TraceContext ctx("d", &dup_registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {3});
  std::vector<TracedTensor> used_second = dup(ctx, x, 1, 2);
  std::vector<TracedTensor> dead = dup(ctx, x, 5, 6);
  (void)neg(dead[0]);
  Program p = ctx.finish({neg(used_second[1])});
  REQUIRE(p.instructions.size() == 4);
  CHECK(print_program(eliminate_dead_code(p)) ==
        "program @d(%x: f64[3]) -> (f64[3]) {\n"
        "  %0, %1 = test.dup.v1(%x) {a = 1, b = 2} : f64[3], f64[3]\n"
        "  %2 = neg(%1) : f64[3]\n"
        "  return %2\n"
        "}\n");
}

TEST_CASE("multi-result: cse merges equal instructions result by result") {
  TraceContext ctx("c", &dup_registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {3});
  std::vector<TracedTensor> a = dup(ctx, x, 1, 2);
  std::vector<TracedTensor> b = dup(ctx, x, 1, 2);  // equal: merged
  std::vector<TracedTensor> c = dup(ctx, x, 1, 3);  // another payload: kept
  Program p = ctx.finish({a[0] - b[1], b[0] + a[1], c[1]});
  CHECK(print_program(eliminate_dead_code(eliminate_common_subexpressions(p))) ==
        "program @c(%x: f64[3]) -> (f64[3], f64[3], f64[3]) {\n"
        "  %0, %1 = test.dup.v1(%x) {a = 1, b = 2} : f64[3], f64[3]\n"
        "  %2, %3 = test.dup.v1(%x) {a = 1, b = 3} : f64[3], f64[3]\n"
        "  %4 = sub(%0, %1) : f64[3]\n"
        "  %5 = add(%0, %1) : f64[3]\n"
        "  return %4, %5, %3\n"
        "}\n");
}

TEST_CASE("multi-result: lowering maps each result to its standard-op value, numerically equal to the oracle") {
  TraceContext ctx("l", &dup_registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 2});
  std::vector<TracedTensor> r = dup(ctx, x, 2, -3);
  Program p = ctx.finish({r[1], exp(r[0])});
  Program lowered = lower_to_standard_ops(p, {{"n", 4}}, dup_registry());
  for (const Instruction& inst : lowered.instructions) CHECK(kind(inst.op) != OpKind::extension);
  test::SplitMix64 rng{7};
  Tensor xs = Tensor::empty(DType::f64, {4, 2});
  for (int64_t i = 0; i < 8; ++i) xs.data<double>()[i] = rng.symmetric();
  std::vector<Tensor> out = evaluate(lowered, std::vector<Tensor>{xs});
  for (int64_t i = 0; i < 8; ++i) {
    CHECK(out[0].data<double>()[i] == -3 * xs.data<double>()[i]);
    CHECK(out[1].data<double>()[i] == doctest::Approx(std::exp(2 * xs.data<double>()[i])).epsilon(1e-15));
  }
  // A family without lower_results cannot lower its several-result instructions.
  ExtensionRegistry bare;
  testing::register_dup_family(bare);
  bare.find_mutable(testing::kDupFamily)->lower_results = nullptr;
  CHECK(error_of([&] { lower_to_standard_ops(p, {{"n", 4}}, bare); }) ==
        "lower_to_standard_ops: 'test.dup.v1' at %0 in @l has no lowering rule (module 'einstage.test' registers no "
        "lower_results rule for its several results); run the program with a runtime that loads the module instead, "
        "or lower partially (LowerOptions::keep_unlowerable) to keep such ops");
}
