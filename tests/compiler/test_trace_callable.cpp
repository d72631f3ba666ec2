// einstage::trace (compiler/Trace.h): a C++ callable traced into a program, its parameters spread as arguments or
// passed as one span, its outputs returned as a tensor, a vector, a tuple, a pair or an array; each program printed
// identically to the one built by hand with a TraceContext (the oracle). einsum without a context argument, and the
// pinned errors: a callable that takes another number of tensors, no operands, operands of two traces. Elementwise
// operators broadcast as NumPy does (printed program, values against the rule written out).
#include "CompilerTestUtil.h"

#include "compiler/Trace.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "runtime/Interpreter.h"

#include <array>
#include <tuple>
#include <utility>

using namespace einstage;
using namespace compiler_test;

namespace {

const std::vector<ParamSpec> kSpecs = {{"x", DType::f64, {Dim::symbol("n"), 3}}, {"w", DType::f64, {3, 4}}};

// loss(x, w) = (sum((x·w)²), x·w) traced by hand: the oracle for the callables below.
std::string by_hand(bool two_outputs) {
  TraceContext ctx("loss", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  TracedTensor y2 = y * y;
  TracedTensor s = sum(y2);
  return print_program(two_outputs ? ctx.finish({s, y}) : ctx.finish({s}));
}

}  // namespace

TEST_CASE("trace: a callable with one argument per spec gives the program traced by hand") {
  Program p = trace("loss", kSpecs, [](TracedTensor x, TracedTensor w) {
    TracedTensor y = einsum::einsum("ij,jk->ik", {x, w});  // no context argument: the operands' own
    TracedTensor y2 = y * y;
    return sum(y2);
  }, &registry());
  CHECK(print_program(p) == by_hand(false));
}

TEST_CASE("trace: outputs as a vector, tuple, pair or array; parameters as one span") {
  const std::string want = by_hand(true);
  auto step = [](const TracedTensor& x, const TracedTensor& w) {
    TracedTensor y = einsum::einsum("ij,jk->ik", {x, w});
    TracedTensor y2 = y * y;
    return std::pair{sum(y2), y};
  };
  CHECK(print_program(trace("loss", kSpecs, step, &registry())) == want);
  auto as_tuple = [&](TracedTensor x, TracedTensor w) { return std::apply(
      [](auto a, auto b) { return std::tuple{a, b}; }, step(x, w)); };
  CHECK(print_program(trace("loss", kSpecs, as_tuple, &registry())) == want);
  auto as_vector = [&](TracedTensor x, TracedTensor w) {
    auto [s, y] = step(x, w);
    return std::vector<TracedTensor>{s, y};
  };
  CHECK(print_program(trace("loss", kSpecs, as_vector, &registry())) == want);
  auto as_array = [&](TracedTensor x, TracedTensor w) {
    auto [s, y] = step(x, w);
    return std::array<TracedTensor, 2>{s, y};
  };
  CHECK(print_program(trace("loss", kSpecs, as_array, &registry())) == want);
  auto from_span = [&](std::span<const TracedTensor> p) { return step(p[0], p[1]); };
  CHECK(print_program(trace("loss", kSpecs, from_span, &registry())) == want);
}

TEST_CASE("trace: errors name the program, the counts and the fix") {
  CHECK(error_of([] { trace("loss", kSpecs, [](TracedTensor x) { return x; }, &registry()); }) ==
        "trace: @loss has 2 parameter specs but the callable takes neither 2 TracedTensor arguments nor one "
        "std::span<const TracedTensor>; give one spec per argument (up to 8 arguments, or take a span)");
  CHECK(error_of([] { einsum::einsum("->", std::span<const TracedTensor>()); }) ==
        "einsum: no operands to take the trace context from; pass the TraceContext as the first argument");
  TraceContext a("a", &registry()), b("b", &registry());
  TracedTensor x = a.parameter("x", DType::f64, {2});
  TracedTensor y = b.parameter("y", DType::f64, {2});
  CHECK(error_of([&] { einsum::einsum("i,i->", {x, y}); }) ==
        "einsum: operand 1 comes from another trace than operand 0 (@b and @a); trace every operand in one "
        "TraceContext");
}

TEST_CASE("elementwise ops broadcast as NumPy does: missing leading axes and extent-1 axes stretch") {
  Program p = trace("bc", {{"a", DType::f64, {2, 1}}, {"b", DType::f64, {1, 3}}, {"c", DType::f64, {3}}},
                    [](TracedTensor a, TracedTensor b, TracedTensor c) {
                      TracedTensor ab = a * b;  // [2,1] * [1,3] -> [2,3]
                      return ab + c;            // [2,3] + [3] -> [2,3] (c along the last axis, as in NumPy)
                    }, &registry());
  CHECK(print_program(p) ==
        "program @bc(%a: f64[2,1], %b: f64[1,3], %c: f64[3]) -> (f64[2,3]) {\n"
        "  %0 = reshape(%a) {shape = [2]} : f64[2]\n"
        "  %1 = broadcast_in_dim(%0) {dims = [0], shape = [2, 3]} : f64[2,3]\n"
        "  %2 = reshape(%b) {shape = [3]} : f64[3]\n"
        "  %3 = broadcast_in_dim(%2) {dims = [1], shape = [2, 3]} : f64[2,3]\n"
        "  %4 = mul(%1, %3) : f64[2,3]\n"
        "  %5 = broadcast_in_dim(%c) {dims = [1], shape = [2, 3]} : f64[2,3]\n"
        "  %6 = add(%4, %5) : f64[2,3]\n"
        "  return %6\n"
        "}\n");
  // Values against NumPy's rule written out: out[i, j] = a[i, 0] * b[0, j] + c[j].
  const Tensor a = Tensor::from_col_major<double>({2, 1}, {2, -3});
  const Tensor b = Tensor::from_col_major<double>({1, 3}, {1, 10, 100});
  const Tensor c = Tensor::from_col_major<double>({3}, {0.5, 0.25, 0.125});
  const Tensor out = evaluate(p, std::vector<Tensor>{a, b, c}).at(0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      CHECK(out.at<double>({i, j}) ==
            a.at<double>({i, 0}) * b.at<double>({0, j}) + c.at<double>({j}));
  // Extents that differ with neither 1 are still the op's error, naming both types.
  TraceContext ctx("mm", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  TracedTensor y = ctx.parameter("y", DType::f64, {2});
  CHECK(error_of([&] { x + y; }) == "'add' at %0 in @mm: operand 1 has type f64[2] but operand 0 has f64[2,3]; "
                                    "operands must have equal shapes (insert a broadcast_in_dim)");
}
