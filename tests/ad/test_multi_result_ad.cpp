// AD through instructions with several results (the test family test.dup.v1: x -> (a x, b x), linear, with
// linearize_results and transpose_results rules): jvp vs finite differences, the dot-product test and transpose
// adjointness (AdTestUtil.h) on programs that read one, the other or both results; the gradient against its
// closed form; only the read results' cotangents flow back; a missing several-results rule names the family.
#include "AdTestUtil.h"

#include "support/ErrorOf.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::ad_test;
using einstage::test::error_of;

namespace {

std::vector<Value> dup(Builder& b, const Value& x, double a, double c) {
  return b.extension_results(std::make_shared<testing::DupPayload>(a, c), {x});
}

}  // namespace

TEST_CASE("multi-result ad: jvp, vjp and transpose agree with finite differences and each other") {
  Rng rng{11};
  for (DType dtype : {DType::f64, DType::c128, DType::f32}) {
    CAPTURE(name(dtype));
    // Both results read, nonlinearly: r0 * r1 + exp(r1).
    Builder b("both", registry());
    Value x = b.parameter("x", {dtype, {3, 2}});
    std::vector<Value> r = dup(b, x, 2, -0.5);
    Program both = b.finish({b.add(b.mul(r[0], r[1]), b.exp(r[1]))});
    check_derivatives(both, {0}, {random_tensor(dtype, {3, 2}, rng)}, rng, tolerance_for(dtype), "both results");
    // Only the second result read, and a chain of two: the first instruction's r0 gets a zero cotangent.
    Builder c("second", registry());
    Value y = c.parameter("y", {dtype, {4}});
    Value w = c.parameter("w", {dtype, {4}});
    std::vector<Value> s = dup(c, y, 3, 1.5);
    std::vector<Value> t = dup(c, c.mul(s[1], w), -1, 0.25);
    Program second = c.finish({t[0], c.mul(t[1], t[1])});
    check_derivatives(second, {0, 1}, {random_tensor(dtype, {4}, rng), random_tensor(dtype, {4}, rng)}, rng,
                      tolerance_for(dtype), "second result only, chained");
  }
}

TEST_CASE("multi-result ad: grad of sum(a x * b x) is 2 a b x") {
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {5}});
  std::vector<Value> r = dup(b, x, 2, 3);
  Program f = b.finish({b.reduce_sum(b.mul(r[0], r[1]), {0})});
  Program g = ad::grad(f, std::vector<int>{0}, registry());
  Rng rng{3};
  Tensor xs = random_tensor(DType::f64, {5}, rng);
  Tensor gs = run(g, {xs})[0];
  for (int64_t i = 0; i < 5; ++i) CHECK(gs.at<double>({i}) == doctest::Approx(12 * xs.at<double>({i})).epsilon(1e-14));
}

TEST_CASE("multi-result ad: the transposed program reads only the cotangents that flow") {
  // L(t) = first result of dup(t): the transpose gets (ct, zero) and returns a * ct without materialising zeros.
  Builder b("lin", registry());
  Value t = b.parameter("t", {DType::f64, {2}});
  Program lin = b.finish({dup(b, t, 4, 7)[0]});
  Program tr = ad::transpose(lin, std::vector<int>{0}, registry());
  CHECK(print_program(tr) ==
        "program @lin_t(%ct_0: f64[2]) -> (f64[2]) {\n"
        "  %0 = constant() {value = f64[]<[4]>} : f64[]\n"
        "  %1 = broadcast_in_dim(%0) {dims = [], shape = [2]} : f64[2]\n"
        "  %2 = mul(%1, %ct_0) : f64[2]\n"
        "  return %2\n"
        "}\n");
}

TEST_CASE("multi-result ad: a family without the several-results rules is named") {
  ExtensionRegistry reg;
  testing::register_dup_family(reg);
  reg.find_mutable(testing::kDupFamily)->linearize_results = nullptr;
  reg.find_mutable(testing::kDupFamily)->transpose_results = nullptr;
  Builder b("m", &reg);
  Value x = b.parameter("x", {DType::f64, {2}});
  Program p = b.finish({dup(b, x, 1, 2)[1]});
  CHECK(error_of([&] { ad::jvp(p, std::vector<int>{0}, &reg); }) ==
        "differentiation rule for 'test.dup.v1' not implemented (needed by %0 in @m; module 'einstage.test' "
        "registers no linearize_results rule)");
  CHECK(error_of([&] { ad::transpose(p, std::vector<int>{0}, &reg); }) ==
        "transpose rule for 'test.dup.v1' not implemented (needed for reverse mode by %0 in @m; module "
        "'einstage.test' registers no transpose_results rule)");
}
