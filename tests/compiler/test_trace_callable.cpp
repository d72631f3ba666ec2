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

TEST_CASE("trace: slice(x, axis, begin, end, step) takes Tensor::slice's arguments and gives its elements") {
  // The oracle is Tensor::slice on the same data: every (axis, begin, end, step) below, on a [3,4,5] tensor.
  std::vector<double> data(60);
  for (size_t k = 0; k < data.size(); ++k) data[k] = 0.5 * double(k) - 7;
  const Tensor x = Tensor::from_col_major<double>({3, 4, 5}, data);
  struct Case { int axis; int64_t begin, end, step; };
  for (const Case c : {Case{0, 0, 3, 1}, Case{0, 1, 3, 1}, Case{1, 1, 4, 2}, Case{2, 0, 5, 3}, Case{2, 4, 5, 1},
                       Case{1, 2, 2, 1}, Case{2, 1, 5, 7}}) {
    CAPTURE(c.axis);
    CAPTURE(c.begin);
    CAPTURE(c.end);
    CAPTURE(c.step);
    Program p = trace("s", {{"x", DType::f64, {3, 4, 5}}},
                      [&](TracedTensor t) { return slice(t, c.axis, c.begin, c.end, c.step); }, &registry());
    const Tensor want = x.slice(c.axis, c.begin, c.end, c.step);
    const Tensor got = evaluate(p, std::vector<Tensor>{x}).at(0);
    CHECK(got.shape() == want.shape());
    CHECK(bitwise_equal(got, want));
  }
  // The op is the one strided_slice writes: every axis whole but the sliced one.
  Program p = trace("s", {{"x", DType::f64, {Dim::symbol("n"), 4}}},
                    [](TracedTensor t) { return slice(t, 1, 1, 4, 2); }, &registry());
  CHECK(print_program(p) == "program @s(%x: f64[n,4]) -> (f64[n,2]) {\n"
                            "  %0 = slice(%x) {size = [n, 2], start = [0, 1], stride = [1, 2]} : f64[n,2]\n"
                            "  return %0\n"
                            "}\n");
  // The same rule and messages as Tensor::slice, and the axis checked against the rank.
  TraceContext ctx("bad", &registry());
  TracedTensor t = ctx.parameter("t", DType::f64, {3, Dim::symbol("n")});
  CHECK(error_of([&] { slice(t, 0, 1, 4); }) == "slice [1, 4) is out of range for axis 0 of extent 3; need end <= 3");
  CHECK(error_of([&] { x.slice(0, 1, 4); }) == "slice [1, 4) is out of range for axis 0 of extent 3; need end <= 3");
  CHECK(error_of([&] { slice(t, 1, 2, 1); }) == "slice [2, 1) is out of range for axis 1; need 0 <= begin <= end");
  CHECK(error_of([&] { slice(t, 0, -1, 2); }) == "slice [-1, 2) is out of range for axis 0; need 0 <= begin <= end");
  CHECK(error_of([&] { slice(t, 0, 0, 2, 0); }) == "slice: step must be positive, got 0");
  CHECK(error_of([&] { slice(t, 2, 0, 1); }) ==
        "slice: axis 2 is out of range for f64[3,n] of rank 2; give an axis in [0, 2)");
  CHECK(slice(t, 1, 0, 7).dims() == std::vector<Dim>{3, 7});  // a symbolic extent does not bound end while tracing
}

TEST_CASE("trace: reshape, transpose, slice, pad and every elementwise function take no context argument") {
  // Each call below names no TraceContext: the operands carry it. The printed program is the oracle of what ran.
  Program p = trace("free", {{"x", DType::f64, {2, 3}}, {"y", DType::f64, {2, 3}}},
                    [](TracedTensor x, TracedTensor y) {
                      TracedTensor a = reshape(transpose(x, {1, 0}), {6});
                      TracedTensor b = pad(slice(a, 0, 0, 4), {1}, {6}, {1});
                      TracedTensor c = exp(y) + log(abs(y) + 1.0) * sqrt(abs(x)) - tanh(y) / (cos(x) + 2.0);
                      TracedTensor d = select(Comparison::gt, x, y, pow(x, 2.0), neg(sign(y)));
                      return std::tuple{b, reduce_sum(c, {0}), max(convert(d, DType::f32))};
                    }, &registry());
  REQUIRE(p.outputs.size() == 3);
  CHECK(p.outputs[0].type.to_string() == "f64[6]");
  CHECK(p.outputs[1].type.to_string() == "f64[3]");
  CHECK(p.outputs[2].type.to_string() == "f32[]");
}
