// Differentiating one output, or some outputs, of a program with several, without retracing (compiler/ad/Ad.h:
// select_outputs, grad / value_and_grad with an output index, vjp with ad::Outputs): gradients and cotangents
// against central differences of the original program's own outputs, the dropped outputs' instructions gone, the
// cotangents named after the outputs they belong to, and the pinned errors for a bad index.
#include "AdTestUtil.h"

#include "compiler/Trace.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>

using namespace einstage;
using namespace einstage::ad_test;
using einstage::test::error_of;

namespace {

// f(x: f64[3], w: f64[3,2]) -> (sum(sin(x)), einsum("i,ij->j", x, w), (sum_ij x_i w_ij x_i)²): three outputs, the
// second a vector, the third a scalar that reads both parameters through an einsum of its own.
Program three_outputs() {
  TraceContext ctx("f", registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 2});
  TracedTensor s = sum(sin(x));
  TracedTensor v = einsum::einsum(ctx, "i,ij->j", {x, w});
  TracedTensor q = einsum::einsum(ctx, "i,ij,i->", {x, w, x});
  TracedTensor q2 = q * q;
  return ctx.finish({s, v, q2});
}

// The point every derivative is taken at.
const Tensor& x0() {
  static const Tensor t = Tensor::from_col_major<double>({3}, {0.3, -0.8, 1.2});
  return t;
}
const Tensor& w0() {
  static const Tensor t = Tensor::from_col_major<double>({3, 2}, {0.5, -1.1, 0.7, 2.0, 0.1, -0.4});
  return t;
}

// Central differences of scalar g(inputs) with respect to every element of input `param`.
std::vector<double> central_differences(const std::function<double(const std::vector<Tensor>&)>& g, int param) {
  std::vector<double> base = x0().to_col_major<double>(), other = w0().to_col_major<double>();
  std::vector<double> at = param == 0 ? base : other, out;
  const double h = 1e-6;
  for (size_t i = 0; i < at.size(); ++i) {
    auto inputs_with = [&](double delta) {
      std::vector<double> moved = at;
      moved[i] += delta;
      Tensor t = Tensor::from_col_major<double>(param == 0 ? Shape{3} : Shape{3, 2}, moved);
      return param == 0 ? std::vector<Tensor>{t, w0()} : std::vector<Tensor>{x0(), t};
    };
    out.push_back((g(inputs_with(h)) - g(inputs_with(-h))) / (2 * h));
  }
  return out;
}

void check_close_to(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = t.to_col_major<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
}

size_t count_einsums(const Program& p) {
  size_t n = 0;
  for (const Instruction& inst : p.instructions)
    if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) n += ext->family() == "einstage.einsum.v1";
  return n;
}

}  // namespace

TEST_CASE("select outputs: grad and value_and_grad of one output of three match central differences") {
  const Program f = three_outputs();
  auto output = [&](int k) {
    return [&f, k](const std::vector<Tensor>& in) { return run(f, in).at(size_t(k)).at<double>({}); };
  };

  const Program g0 = ad::grad(f, 0, {0, 1}, registry());  // d sum(sin(x)): cos(x), and nothing for w
  CHECK(g0.name == "f_grad");
  CHECK(count_einsums(g0) == 0);  // the einsums only outputs 1 and 2 read are gone
  const std::vector<Tensor> d0 = run(g0, {x0(), w0()});
  REQUIRE(d0.size() == 2);
  check_close_to(d0[0], central_differences(output(0), 0), 1e-8);
  CHECK(d0[1].to_col_major<double>() == std::vector<double>(6, 0.0));  // w does not enter output 0

  const Program vg2 = ad::value_and_grad(f, 2, {1, 0}, registry());
  const std::vector<Tensor> d2 = run(vg2, {x0(), w0()});
  REQUIRE(d2.size() == 3);
  CHECK(d2[0].at<double>({}) == run(f, {x0(), w0()}).at(2).at<double>({}));
  check_close_to(d2[1], central_differences(output(2), 1), 1e-7);
  check_close_to(d2[2], central_differences(output(2), 0), 1e-7);
}

TEST_CASE("select outputs: vjp of outputs 2 and 1 takes ct_2 and ct_1 and matches central differences") {
  const Program f = three_outputs();
  const Program v = ad::vjp(f, ad::Outputs{2, 1}, {0}, registry());
  REQUIRE(v.params.size() == 4);
  CHECK(v.params[2].name == "ct_2");
  CHECK(v.params[3].name == "ct_1");
  const Tensor c2 = Tensor::scalar<double>(0.7), c1 = Tensor::from_col_major<double>({2}, {-1.3, 0.4});
  const std::vector<Tensor> out = run(v, {x0(), w0(), c2, c1});
  REQUIRE(out.size() == 3);  // output 2, output 1, d/dx
  const std::vector<Tensor> primal = run(f, {x0(), w0()});
  CHECK(bitwise_equal(out[0], primal[2]));
  CHECK(bitwise_equal(out[1], primal[1]));
  // <c, f_selected(x)> differentiated by central differences.
  auto pairing = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> y = run(f, in);
    return 0.7 * y[2].at<double>({}) - 1.3 * y[1].at<double>({0}) + 0.4 * y[1].at<double>({1});
  };
  check_close_to(out[2], central_differences(pairing, 0), 1e-7);
}

TEST_CASE("select outputs: an index out of range or given twice, and a vector output for grad, are errors") {
  const Program f = three_outputs();
  CHECK(error_of([&] { ad::grad(f, 3, {0}, registry()); }) ==
        "grad: output index 3 is out of range for @f, which has 3 outputs (f64[], f64[2], f64[]); give an index from "
        "0 to 2");
  CHECK(error_of([&] { ad::value_and_grad(f, -1, {0}, registry()); }) ==
        "value_and_grad: output index -1 is out of range for @f, which has 3 outputs (f64[], f64[2], f64[]); give an "
        "index from 0 to 2");
  CHECK(error_of([&] { ad::vjp(f, ad::Outputs{1, 1}, {0}, registry()); }) ==
        "vjp: output 1 of @f is selected twice; give each output once");
  CHECK(error_of([&] { ad::grad(f, 1, {0}, registry()); }) ==
        "grad: @f returns f64[2] but grad needs a scalar output; reduce it first (e.g. sum), or use vjp with a "
        "cotangent of that shape");
  CHECK(error_of([&] { ad::select_outputs(f, ad::Outputs{0, 5}); }) ==
        "select_outputs: output index 5 is out of range for @f, which has 3 outputs (f64[], f64[2], f64[]); give an "
        "index from 0 to 2");
  // Selecting keeps the program's shape constraints and parameters: it accepts the same inputs.
  const Program only1 = ad::select_outputs(f, ad::Outputs{1});
  CHECK(only1.params.size() == 2);
  CHECK(bitwise_equal(run(only1, {x0(), w0()}).at(0), run(f, {x0(), w0()}).at(1)));
}
