// The property-test table over every standard op (JAX's lax_autodiff_test grad_test_spec rows): each row is an op
// with its attributes, operand shapes, the dtypes it runs in and its input domain; every (row, dtype, wrt) case goes
// through jvp vs central differences, the dot-product test and transpose adjointness (AdTestUtil.h). A table check
// ties the rows to the op table: every standard op has a row, a linearize rule, and a transpose rule unless it is
// non-linear (exp, log, sqrt, sin, cos, tanh, sinh, cosh, abs, sign, pow, reduce_max, first_max_mask), has a zero
// derivative by definition (stop_gradient, whose row therefore skips the finite differences) or has no operands
// (constant). select is linear in its selected operands, so it has a transpose rule.
#include "AdTestUtil.h"

#include "compiler/ad/Rules.h"
#include "ir/Printer.h"
#include "support/Golden.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <limits>
#include <set>

using namespace einstage;
using namespace einstage::ad_test;

namespace {

struct OpRow {
  std::string name;
  OpKind kind;                  // the op the row covers
  std::vector<Shape> shapes;    // operand shapes
  std::vector<DType> dtypes;    // operand dtype of each case
  std::function<Value(Builder&, const std::vector<Value>&)> build;
  bool positive = false;        // inputs in [0.5, 1.5): log, sqrt, divisors
  bool finite_differences = true;  // false: the rule is not the derivative of the values (stop_gradient)
};

std::vector<OpRow> op_table() {
  const std::vector<DType> real = {DType::f64, DType::f32}, all = {DType::f64, DType::c128, DType::f32},
                           fc = {DType::f64, DType::c128};
  using V = const std::vector<Value>&;
  return {
      {"dot_general matmul", OpKind::dot_general, {{2, 3}, {3, 4}}, all,
       [](Builder& b, V x) { return b.dot_general(x[0], x[1], {1}, {0}); }},
      {"dot_general batched", OpKind::dot_general, {{3, 2, 5}, {5, 3, 4}}, fc,
       [](Builder& b, V x) { return b.dot_general(x[0], x[1], {2}, {0}, {0}, {1}); }},
      {"dot_general two contracting pairs", OpKind::dot_general, {{2, 3, 4}, {4, 5, 3}}, fc,
       [](Builder& b, V x) { return b.dot_general(x[0], x[1], {1, 2}, {2, 0}); }},
      {"dot_general outer", OpKind::dot_general, {{2}, {3}}, fc,
       [](Builder& b, V x) { return b.dot_general(x[0], x[1], {}, {}); }},
      {"transpose", OpKind::transpose, {{2, 3, 4}}, fc, [](Builder& b, V x) { return b.transpose(x[0], {2, 0, 1}); }},
      {"reshape", OpKind::reshape, {{2, 3, 2}}, fc, [](Builder& b, V x) { return b.reshape(x[0], {6, 2}); }},
      {"broadcast_in_dim new axis", OpKind::broadcast_in_dim, {{3}}, fc,
       [](Builder& b, V x) { return b.broadcast_in_dim(x[0], {1}, {2, 3}); }},
      {"broadcast_in_dim length-1 axis", OpKind::broadcast_in_dim, {{1, 3}}, fc,
       [](Builder& b, V x) { return b.broadcast_in_dim(x[0], {0, 1}, {4, 3}); }},
      {"broadcast_in_dim both", OpKind::broadcast_in_dim, {{2, 1}}, all,
       [](Builder& b, V x) { return b.broadcast_in_dim(x[0], {0, 1}, {2, 3, 5}); }},
      {"reduce_sum", OpKind::reduce_sum, {{2, 3, 4}}, all, [](Builder& b, V x) { return b.reduce_sum(x[0], {0, 2}); }},
      {"reduce_sum all", OpKind::reduce_sum, {{2, 3}}, fc, [](Builder& b, V x) { return b.reduce_sum(x[0], {0, 1}); }},
      {"reduce_max", OpKind::reduce_max, {{2, 3, 4}}, real, [](Builder& b, V x) { return b.reduce_max(x[0], {0, 2}); }},
      {"reduce_max all of a product", OpKind::reduce_max, {{2, 3}, {2, 3}}, real,
       [](Builder& b, V x) { return b.reduce_max(b.mul(x[0], x[1]), {0, 1}); }},
      {"reduce_max over no axes", OpKind::reduce_max, {{2, 3}}, real, [](Builder& b, V x) { return b.reduce_max(x[0], {}); }},
      {"first_max_mask times x", OpKind::first_max_mask, {{3, 4}}, real,
       [](Builder& b, V x) { return b.mul(b.first_max_mask(x[0], {1}), x[0]); }},
      {"extract_diag", OpKind::extract_diag, {{3, 2, 3}}, fc, [](Builder& b, V x) { return b.extract_diag(x[0], 0, 2); }},
      {"extract_diag reversed", OpKind::extract_diag, {{3, 2, 3}}, fc,
       [](Builder& b, V x) { return b.extract_diag(x[0], 2, 0); }},
      {"embed_diag", OpKind::embed_diag, {{3, 2}}, fc, [](Builder& b, V x) { return b.embed_diag(x[0], 0, 2); }},
      {"embed_diag first", OpKind::embed_diag, {{3, 2}}, fc, [](Builder& b, V x) { return b.embed_diag(x[0], 1, 0); }},
      {"slice", OpKind::slice, {{5, 4}}, all, [](Builder& b, V x) { return b.slice(x[0], {1, 0}, {2, 3}, {2, 1}); }},
      {"slice strided to the last element", OpKind::slice, {{7, 2, 3}}, fc,
       [](Builder& b, V x) { return b.slice(x[0], {0, 1, 0}, {3, 1, 2}, {3, 1, 2}); }},
      {"pad", OpKind::pad, {{2, 3}}, all, [](Builder& b, V x) { return b.pad(x[0], {1, 0}, {5, 4}, {2, 1}); }},
      {"pad of a slice", OpKind::pad, {{4, 3}}, fc,
       [](Builder& b, V x) { return b.pad(b.slice(x[0], {1, 0}, {2, 3}, {2, 1}), {0, 1}, {3, 5}, {2, 1}); }},
      {"add", OpKind::add, {{2, 3}, {2, 3}}, all, [](Builder& b, V x) { return b.add(x[0], x[1]); }},
      {"add same operand", OpKind::add, {{2, 3}}, fc, [](Builder& b, V x) { return b.add(x[0], x[0]); }},
      {"sub", OpKind::sub, {{2, 3}, {2, 3}}, all, [](Builder& b, V x) { return b.sub(x[0], x[1]); }},
      {"mul", OpKind::mul, {{2, 3}, {2, 3}}, all, [](Builder& b, V x) { return b.mul(x[0], x[1]); }},
      {"mul square", OpKind::mul, {{4}}, fc, [](Builder& b, V x) { return b.mul(x[0], x[0]); }},
      {"div", OpKind::div, {{2, 3}, {2, 3}}, all, [](Builder& b, V x) { return b.div(x[0], x[1]); }, true},
      {"select lt", OpKind::select, {{2, 3}, {2, 3}, {2, 3}, {2, 3}}, real,
       [](Builder& b, V x) { return b.select(Comparison::lt, x[0], x[1], x[2], x[3]); }},
      {"select ge of its own operands (a maximum)", OpKind::select, {{2, 3}, {2, 3}}, real,
       [](Builder& b, V x) { return b.select(Comparison::ge, x[0], x[1], x[0], x[1]); }},
      {"select complex values by their real parts", OpKind::select, {{2, 3}, {2, 3}}, fc,
       [](Builder& b, V x) {
         const Value square = b.mul(x[1], x[1]);  // one emitting operand per expression (the golden below)
         const Value b_real = b.real(x[1]);
         return b.select(Comparison::gt, b.real(x[0]), b_real, x[0], square);
       }},
      {"select ne of complex operands", OpKind::select, {{2, 3}, {2, 3}}, fc,
       [](Builder& b, V x) { return b.select(Comparison::ne, x[0], x[1], x[1], b.neg(x[0])); }},
      {"neg", OpKind::neg, {{2, 3}}, all, [](Builder& b, V x) { return b.neg(x[0]); }},
      {"conj", OpKind::conj, {{2, 3}}, fc, [](Builder& b, V x) { return b.conj(x[0]); }},
      {"real", OpKind::real, {{2, 3}}, fc, [](Builder& b, V x) { return b.real(x[0]); }},
      {"imag", OpKind::imag, {{2, 3}}, fc, [](Builder& b, V x) { return b.imag(x[0]); }},
      {"exp", OpKind::exp, {{2, 3}}, all, [](Builder& b, V x) { return b.exp(x[0]); }},
      {"sin", OpKind::sin, {{2, 3}}, all, [](Builder& b, V x) { return b.sin(x[0]); }},
      {"cos", OpKind::cos, {{2, 3}}, all, [](Builder& b, V x) { return b.cos(x[0]); }},
      {"tanh", OpKind::tanh, {{2, 3}}, all, [](Builder& b, V x) { return b.tanh(x[0]); }},
      {"sinh", OpKind::sinh, {{2, 3}}, all, [](Builder& b, V x) { return b.sinh(x[0]); }},
      {"cosh", OpKind::cosh, {{2, 3}}, all, [](Builder& b, V x) { return b.cosh(x[0]); }},
      {"abs", OpKind::abs, {{2, 3}}, all, [](Builder& b, V x) { return b.abs(x[0]); }},
      {"abs of a product", OpKind::abs, {{2, 3}, {2, 3}}, fc, [](Builder& b, V x) { return b.abs(b.mul(x[0], x[1])); }},
      {"sign", OpKind::sign, {{2, 3}}, all, [](Builder& b, V x) { return b.sign(x[0]); }},
      {"sign times x", OpKind::sign, {{2, 3}}, fc, [](Builder& b, V x) { return b.mul(b.sign(x[0]), x[0]); }},
      {"stop_gradient", OpKind::stop_gradient, {{2, 3}, {2, 3}}, all,
       [](Builder& b, V x) { return b.mul(b.stop_gradient(x[0]), x[1]); }, false, false},
      {"pow 2.5", OpKind::pow, {{2, 3}}, all, [](Builder& b, V x) { return b.pow(x[0], 2.5); }, true},
      {"pow -1.5", OpKind::pow, {{2, 3}}, fc, [](Builder& b, V x) { return b.pow(x[0], -1.5); }, true},
      {"pow 3", OpKind::pow, {{2, 3}}, all, [](Builder& b, V x) { return b.pow(x[0], 3); }},
      {"pow 2", OpKind::pow, {{2, 3}}, fc, [](Builder& b, V x) { return b.pow(x[0], 2); }},
      {"pow 1 and pow 0", OpKind::pow, {{2, 3}}, fc,
       [](Builder& b, V x) {
         const Value zeroth = b.pow(x[0], 0);
         return b.add(b.pow(x[0], 1), zeroth);
       }},
      {"log", OpKind::log, {{2, 3}}, all, [](Builder& b, V x) { return b.log(x[0]); }, true},
      {"sqrt", OpKind::sqrt, {{2, 3}}, all, [](Builder& b, V x) { return b.sqrt(x[0]); }, true},
      {"convert to f64", OpKind::convert, {{2, 3}}, {DType::f32}, [](Builder& b, V x) { return b.convert(x[0], DType::f64); }},
      {"convert to f32", OpKind::convert, {{2, 3}}, {DType::f64}, [](Builder& b, V x) { return b.convert(x[0], DType::f32); }},
      {"convert to c128", OpKind::convert, {{2, 3}}, {DType::f64, DType::c64},
       [](Builder& b, V x) { return b.convert(x[0], DType::c128); }},
      {"constant", OpKind::constant, {{2, 2}}, {DType::f64},
       [](Builder& b, V x) {
         return b.mul(x[0], b.constant(Tensor::from_col_major<double>({2, 2}, {1.5, -2.0, 0.25, 3.0})));
       }},
  };
}

// Builds the one-op program of a row in `dtype`.
Program row_program(const OpRow& row, DType dtype) {
  Builder b("op", registry());
  std::vector<Value> params;
  for (size_t i = 0; i < row.shapes.size(); ++i) {
    TensorType t{dtype, {}};
    for (int64_t e : row.shapes[i]) t.dims.push_back(Dim(e));
    params.push_back(b.parameter(fmt::format("x{}", i), t));
  }
  Value out = row.build(b, params);
  return b.finish({out});
}

}  // namespace

TEST_CASE("every standard op has a linearize rule, a transpose rule when linear, and a row in the table") {
  const std::set<OpKind> nonlinear = {OpKind::exp,  OpKind::log,  OpKind::sqrt, OpKind::sin,           OpKind::cos,
                                      OpKind::tanh, OpKind::sinh, OpKind::cosh, OpKind::abs,           OpKind::sign,
                                      OpKind::pow,  OpKind::constant, OpKind::stop_gradient, OpKind::reduce_max,
                                      OpKind::first_max_mask};
  std::set<OpKind> covered;
  for (const OpRow& row : op_table()) covered.insert(row.kind);
  for (size_t i = 0; i < kStdOpCount; ++i) {
    OpKind k = static_cast<OpKind>(i);
    CAPTURE(op_kind_name(k));
    const bool has_linearize = ad::std_ad_rules(k).linearize != nullptr;
    const bool has_transpose = ad::std_ad_rules(k).transpose != nullptr;
    CHECK(has_linearize);
    CHECK(has_transpose == !nonlinear.count(k));
    CHECK(covered.count(k) == 1);
  }
}

TEST_CASE("property table: jvp vs finite differences, dot-product test and adjointness for every standard op") {
  uint64_t seed = 1000;
  for (const OpRow& row : op_table()) {
    for (DType dtype : row.dtypes) {
      Program p = row_program(row, dtype);
      std::vector<std::vector<int>> wrts = {{}};
      for (size_t i = 0; i < row.shapes.size(); ++i) wrts[0].push_back(static_cast<int>(i));
      if (row.shapes.size() == 2) wrts.push_back({1});  // one operand without tangent: symbolic zeros
      for (const std::vector<int>& wrt : wrts) {
        Rng rng{++seed};
        std::vector<Tensor> inputs;
        for (const Shape& s : row.shapes) inputs.push_back(random_tensor(dtype, s, rng, row.positive));
        std::string context = fmt::format("row '{}', dtype {}, wrt [{}], seed {}", row.name, name(dtype),
                                          fmt::join(wrt, ","), seed);
        check_derivatives(p, wrt, inputs, rng, tolerance_for(dtype), context, row.finite_differences);
      }
    }
  }
}

// The printed jvp and vjp of every row pin the order of the instructions each rule emits. A rule that builds an
// expression whose operands both emit instructions (b.sub(b.full(...), b.mul(...))) leaves their order to the
// compiler (gcc evaluates a call's arguments right to left, clang left to right), so the same program would print and
// schedule differently under the two; the rules make one traced operand per statement, and this golden, checked in
// the gcc and clang builds, holds them to it.
TEST_CASE("golden: the jvp and vjp programs of every row, the same under every compiler") {
  std::string text;
  for (const OpRow& row : op_table()) {
    for (DType dtype : row.dtypes) {
      if (dtype == DType::f32) continue;  // the f64 program with other types
      Program p = row_program(row, dtype);
      std::vector<int> wrt;
      for (size_t i = 0; i < row.shapes.size(); ++i) wrt.push_back(static_cast<int>(i));
      text += fmt::format("# {} {}\n{}{}\n", row.name, name(dtype), print_program(ad::jvp(p, wrt)),
                          print_program(ad::vjp(p, wrt)));
    }
  }
  einstage::test::check_golden_file(std::string(EINSTAGE_SOURCE_DIR) + "/tests/ad/golden/std_rules.ir", text);
}

TEST_CASE("integer values carry no tangent: a converted i64 parameter is a constant") {
  Builder b("scaled", registry());
  Value x = b.parameter("x", {DType::f64, {3}});
  Value n = b.parameter("n", {DType::i64, {3}});
  Program p = b.finish({b.mul(x, b.convert(n, DType::f64))});
  Rng rng{7};
  std::vector<Tensor> inputs = {random_tensor(DType::f64, {3}, rng),
                                Tensor::from_col_major<int64_t>({3}, {2, -1, 3})};
  check_derivatives(p, {0}, inputs, rng, Tolerance{}, "seed 7");
  std::string err;
  try {
    ad::vjp(p, std::vector<int>{1}, registry());
  } catch (const Error& e) {
    err = e.what();
  }
  CHECK(err == "vjp: cannot differentiate with respect to parameter 1 (%n: i64[3]): only floating parameters (f32, "
               "f64, c64, c128) have tangents");
}

TEST_CASE("stop_gradient: the gradient of sum(x * stop_gradient(x)) is x, not 2x; abs picks 0 at 0") {
  Builder b("half", registry());
  Value x = b.parameter("x", {DType::f64, {3}});
  Program p = b.finish({b.reduce_sum(b.add(b.mul(x, b.stop_gradient(x)), b.abs(x)), {0})});
  Program v = ad::vjp(p, std::vector<int>{0}, registry());
  std::vector<Tensor> out = run(v, {Tensor::from_col_major<double>({3}, {1.5, -2.0, 0.0}), Tensor::scalar<double>(1)});
  REQUIRE(out.size() == 2);
  CHECK(out[0].at<double>({}) == 1.5 * 1.5 + 4.0 + 1.5 + 2.0);
  CHECK(out[1].to_col_major<double>() == std::vector<double>{1.5 + 1, -2.0 - 1, 0.0});
}

TEST_CASE("select: the gradient goes to x where the comparison holds, to y elsewhere, and never to a or b") {
  // f = sum(c * select(a < b, x, y)): df/dx = c where a < b, df/dy = c elsewhere (nan and -0.0 < 0.0 are false).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Builder b("routed", registry());
  std::vector<Value> in;
  for (const char* n : {"a", "b", "x", "y"}) in.push_back(b.parameter(n, {DType::f64, {4}}));
  Value c = b.constant(Tensor::from_col_major<double>({4}, {1.5, -2.0, 3.0, 0.5}));
  Program p = b.finish({b.reduce_sum(b.mul(c, b.select(Comparison::lt, in[0], in[1], in[2], in[3])), {0})});
  Program g = ad::grad(p, std::vector<int>{0, 1, 2, 3}, registry());
  std::vector<Tensor> out = run(g, {Tensor::from_col_major<double>({4}, {1.0, 2.0, nan, -0.0}),
                                    Tensor::from_col_major<double>({4}, {2.0, 1.0, 0.0, 0.0}),
                                    Tensor::from_col_major<double>({4}, {7.0, 7.0, 7.0, 7.0}),
                                    Tensor::from_col_major<double>({4}, {9.0, 9.0, 9.0, 9.0})});
  REQUIRE(out.size() == 4);
  CHECK(out[0].to_col_major<double>() == std::vector<double>(4, 0.0));
  CHECK(out[1].to_col_major<double>() == std::vector<double>(4, 0.0));
  CHECK(out[2].to_col_major<double>() == std::vector<double>{1.5, 0.0, 0.0, 0.0});
  CHECK(out[3].to_col_major<double>() == std::vector<double>{0.0, -2.0, 3.0, 0.5});
  // A comparison of a linear input is not linear: its transpose fails naming the op.
  Builder lb("f", registry());
  Value x = lb.parameter("x", {DType::f64, {2}});
  Value k = lb.parameter("k", {DType::f64, {2}});
  Program not_linear = lb.finish({lb.select(Comparison::lt, x, k, k, x)});
  std::string err;
  try {
    ad::transpose(not_linear, std::vector<int>{0}, registry());
  } catch (const Error& e) {
    err = e.what();
  }
  CHECK(err == "transpose of %0 in @f: 'select' is not linear in its compared operands (0 and 1); transpose needs a "
               "program whose comparisons do not depend on its linear inputs");
}

TEST_CASE("reduce_max: the gradient goes to the first of tied maxima, and grad of grad goes through it") {
  // f(x) = max_i x_i^2 at x = (-3, 1, 3): x_0^2 = x_2^2 = 9 tie, the first (i = 0) is taken: df/dx = (2 x_0, 0, 0)
  // and d2f/dx_0^2 = 2, the Hessian's only non-zero entry.
  Builder b("tied", registry());
  Value x = b.parameter("x", {DType::f64, {3}});
  Program p = b.finish({b.reduce_max(b.mul(x, x), {0})});
  Program g = ad::grad(p, std::vector<int>{0}, registry());
  Tensor x0 = Tensor::from_col_major<double>({3}, {-3.0, 1.0, 3.0});
  CHECK(run(g, {x0})[0].to_col_major<double>() == std::vector<double>{-6.0, 0.0, 0.0});
  // Hessian columns: jvp of the gradient along each unit vector.
  Program h = ad::jvp(g, std::vector<int>{0}, registry());
  for (int j = 0; j < 3; ++j) {
    std::vector<double> e(3, 0.0);
    e[static_cast<size_t>(j)] = 1;
    std::vector<Tensor> out = run(h, {x0, Tensor::from_col_major<double>({3}, e)});
    REQUIRE(out.size() == 2);
    std::vector<double> want(3, 0.0);
    if (j == 0) want[0] = 2;
    CHECK(out[1].to_col_major<double>() == want);
  }
}
