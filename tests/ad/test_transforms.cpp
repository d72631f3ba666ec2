// The transformations as a whole: second order (grad of grad against an analytic second derivative, Hessian-vector
// products as jvp of grad against finite differences of the gradient), programs with symbolic dims, symbolic zeros
// (unused paths emit nothing), JAX's complex convention for grad, the golden VJP program of `ij,jk->ik`, and the
// errors (missing rules name the op, non-linear transposes, grad's output requirements, bad wrt lists).
#include "AdTestUtil.h"

#include "compiler/Trace.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Parser.h"
#include "support/ErrorOf.h"
#include "support/Golden.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace einstage;
using namespace einstage::ad_test;
using einstage::test::error_of;

namespace {

int count_ops(const Program& p, std::string_view name) {
  int n = 0;
  for (const Instruction& i : p.instructions) n += op_name(i.op) == name;
  return n;
}

Value scalar(Builder& b, double v) { return b.constant(Tensor::scalar<double>(v)); }

}  // namespace

TEST_CASE("grad of grad of a scalar function equals the analytic second derivative") {
  // g(x) = x^3 + exp(2x) + log(x) + sqrt(x) / x
  Builder b("g", registry());
  Value x = b.parameter("x", {DType::f64, {}});
  Value cube = b.mul(b.mul(x, x), x);
  Value e = b.exp(b.mul(scalar(b, 2), x));
  Value g = b.add(b.add(cube, e), b.add(b.log(x), b.div(b.sqrt(x), x)));
  Program p = b.finish({g});
  Program d1 = ad::grad(p, std::vector<int>{0}, registry());
  Program d2 = ad::grad(d1, std::vector<int>{0}, registry());
  Program d3 = ad::grad(d2, std::vector<int>{0}, registry());
  for (double v : {0.3, 0.7, 1.9}) {
    CAPTURE(v);
    Tensor xt = Tensor::scalar<double>(v);
    // g' = 3x^2 + 2e^{2x} + 1/x - x^{-3/2}/2;  g'' = 6x + 4e^{2x} - 1/x^2 + 3/4 x^{-5/2};
    // g''' = 6 + 8e^{2x} + 2/x^3 - 15/8 x^{-7/2}
    double g1 = 3 * v * v + 2 * std::exp(2 * v) + 1 / v - 0.5 * std::pow(v, -1.5);
    double g2 = 6 * v + 4 * std::exp(2 * v) - 1 / (v * v) + 0.75 * std::pow(v, -2.5);
    double g3 = 6 + 8 * std::exp(2 * v) + 2 / (v * v * v) - 15.0 / 8 * std::pow(v, -3.5);
    CHECK(run(d1, {xt})[0].at<double>({}) == doctest::Approx(g1).epsilon(1e-13));
    CHECK(run(d2, {xt})[0].at<double>({}) == doctest::Approx(g2).epsilon(1e-13));
    CHECK(run(d3, {xt})[0].at<double>({}) == doctest::Approx(g3).epsilon(1e-12));
  }
}

TEST_CASE("Hessian-vector products (jvp of grad) of an einsum loss match finite differences of the gradient") {
  // loss(A, B, c) = sum(einsum("ij,jk,k->ik")^2) + sum(exp(A) * A)
  ExtensionRegistry const* reg = registry();
  TraceContext ctx("loss", reg);
  TracedTensor a = ctx.parameter("A", DType::f64, {3, 4});
  TracedTensor bm = ctx.parameter("B", DType::f64, {4, 2});
  TracedTensor c = ctx.parameter("c", DType::f64, {2});
  TracedTensor y = einsum::einsum(ctx, "ij,jk,k->ik", {a, bm, c});
  Program loss = ctx.finish({sum(y * y) + sum(exp(a) * a)});
  std::vector<int> wrt = {0, 1, 2};
  Program g = ad::grad(loss, wrt, reg);
  Program hvp = ad::jvp(g, wrt, reg);
  Rng rng{2024};
  std::vector<Tensor> x, v;
  for (const Shape& s : {Shape{3, 4}, Shape{4, 2}, Shape{2}}) {
    x.push_back(random_tensor(DType::f64, s, rng));
    v.push_back(random_tensor(DType::f64, s, rng));
  }
  std::vector<Tensor> in = x;
  in.insert(in.end(), v.begin(), v.end());
  std::vector<Tensor> out = run(hvp, in);  // gradients, then H v
  REQUIRE(out.size() == 6);
  const double h = 1e-5;
  std::vector<Tensor> plus = x, minus = x;
  for (size_t i = 0; i < 3; ++i) {
    plus[i] = axpy(x[i], h, v[i]);
    minus[i] = axpy(x[i], -h, v[i]);
  }
  std::vector<Tensor> gp = run(g, plus), gm = run(g, minus), g0 = run(g, x);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(close(out[i], g0[i], 1e-13));
    Tensor fd = axpy(Tensor::zeros(DType::f64, gp[i].shape()), 1 / (2 * h), axpy(gp[i], -1, gm[i]));
    std::string why;
    CHECK_MESSAGE(close(out[3 + i], fd, 1e-6, &why), why);
  }
}

TEST_CASE("transformed programs pass the same checks: jvp, vjp and grad of composite programs, differentiated again") {
  // p(x, w, v) mixes complex and real values, an einsum using one operand twice, a repeated label, broadcasting
  // against a length-1 axis and every kind of elementwise op; its jvp, vjp and value_and_grad programs are
  // differentiated again (all of their floating parameters) and checked like any program.
  const ExtensionRegistry* reg = registry();
  TraceContext ctx("p", reg);
  TracedTensor x = ctx.parameter("x", DType::c128, {3, 2});
  TracedTensor w = ctx.parameter("w", DType::f64, {2, 2});
  TracedTensor v = ctx.parameter("v", DType::f64, {1, 2});
  einsum::TraceEinsumOptions bc;
  bc.allow_broadcast = true;
  TracedTensor y = einsum::einsum(ctx, "ij,jk,jj,ik->ik", {x, w, w, v}, bc);  // v broadcasts along i
  TracedTensor e = exp(y * 0.3) / sqrt(conj(y) * y + 2.0);
  TracedTensor r = real(e) * imag(y) + log(real(y * conj(y)) + 1.5);
  Program p = ctx.finish({sum(r), e});
  Rng rng{4242};
  std::vector<Tensor> in = {random_tensor(DType::c128, {3, 2}, rng), random_tensor(DType::f64, {2, 2}, rng),
                            random_tensor(DType::f64, {1, 2}, rng)};
  check_derivatives(p, {0, 1, 2}, in, rng, Tolerance{}, "composite, seed 4242");

  auto all_params = [](const Program& q) {
    std::vector<int> idx;
    for (size_t i = 0; i < q.params.size(); ++i) idx.push_back(static_cast<int>(i));
    return idx;
  };
  Program j = ad::jvp(p, std::vector<int>{0, 2}, reg);
  std::vector<Tensor> jin = in;
  jin.push_back(random_tensor(DType::c128, {3, 2}, rng));
  jin.push_back(random_tensor(DType::f64, {1, 2}, rng));
  check_derivatives(j, all_params(j), jin, rng, Tolerance{}, "jvp of composite, seed 4242");

  Program vj = ad::vjp(p, std::vector<int>{0, 1}, reg);
  std::vector<Tensor> vin = in;
  vin.push_back(random_tensor(DType::f64, {}, rng));
  vin.push_back(random_tensor(DType::c128, {3, 2}, rng));
  check_derivatives(vj, all_params(vj), vin, rng, Tolerance{}, "vjp of composite, seed 4242");

  TraceContext ctx2("q", reg);
  TracedTensor a = ctx2.parameter("a", DType::f64, {3, 3});
  TracedTensor b = ctx2.parameter("b", DType::f64, {3});
  TracedTensor q = einsum::einsum(ctx2, "ij,j,i->", {a, b, b});
  Program qp = ctx2.finish({q * q + sum(exp(a))});
  Program vg = ad::value_and_grad(qp, std::vector<int>{0, 1}, reg);
  std::vector<Tensor> qin = {random_tensor(DType::f64, {3, 3}, rng), random_tensor(DType::f64, {3}, rng)};
  check_derivatives(vg, {0, 1}, qin, rng, Tolerance{}, "value_and_grad of a quadratic form, seed 4242");
}

TEST_CASE("programs with symbolic dims: gradients run at several sizes, broadcast axes are summed") {
  const ExtensionRegistry* reg = registry();
  for (bool broadcast : {false, true}) {
    CAPTURE(broadcast);
    TraceContext ctx("loss", reg);
    Dim n = Dim::symbol("n"), m = Dim::symbol("m");
    TracedTensor x = ctx.parameter("x", DType::f64, {n, broadcast ? Dim(1) : Dim(3)});
    TracedTensor w = ctx.parameter("w", DType::f64, {3, m});
    einsum::TraceEinsumOptions opt;
    opt.allow_broadcast = broadcast;
    TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w}, opt);
    Program loss = ctx.finish({sum(y * y)});
    Program g = ad::value_and_grad(loss, std::vector<int>{0, 1}, reg);
    INFO(print_program(g));
    CHECK(g.params[0].value.type.to_string() == (broadcast ? "f64[n,1]" : "f64[n,3]"));
    CHECK(g.outputs[1].type == g.params[0].value.type);
    CHECK(g.outputs[2].type == g.params[1].value.type);
    Executable exe = runtime().prepare(g);
    for (auto [nv, mv] : {std::pair<int64_t, int64_t>{2, 4}, {5, 1}, {1, 3}}) {
      CAPTURE(nv);
      CAPTURE(mv);
      Rng rng{static_cast<uint64_t>(nv * 10 + mv)};
      std::vector<Tensor> in = {random_tensor(DType::f64, {nv, broadcast ? 1 : 3}, rng),
                                random_tensor(DType::f64, {3, mv}, rng)};
      std::vector<Tensor> out = exe.run(std::span<const Tensor>(in));
      CHECK(out[1].shape() == in[0].shape());
      CHECK(out[2].shape() == in[1].shape());
      // Directional derivative check against central differences of the loss.
      std::vector<Tensor> t = {random_tensor(DType::f64, in[0].shape(), rng), random_tensor(DType::f64, in[1].shape(), rng)};
      const double h = 1e-6;
      std::vector<Tensor> plus = {axpy(in[0], h, t[0]), axpy(in[1], h, t[1])};
      std::vector<Tensor> minus = {axpy(in[0], -h, t[0]), axpy(in[1], -h, t[1])};
      double fd = (run(loss, plus)[0].at<double>({}) - run(loss, minus)[0].at<double>({})) / (2 * h);
      double dir = inner(out[1], t[0]) + inner(out[2], t[1]);
      CHECK(dir == doctest::Approx(fd).epsilon(1e-7));
      CHECK(out[0].at<double>({}) == doctest::Approx(run(loss, in)[0].at<double>({})).epsilon(1e-14));
    }
  }
}

TEST_CASE("linear and transposed programs with symbolic dims run on their own (a parameter binds a zero's symbol)") {
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {Dim::symbol("n")}});
  Value y = b.parameter("y", {DType::f64, {Dim::symbol("m"), 2}});
  Program p = b.finish({b.reduce_sum(b.mul(x, x), {0}), b.mul(y, y)});
  // With respect to x only, the second output's tangent is a zero of type f64[m,2]: the linear program gets y as a
  // residual so that m is bound when it runs alone.
  ad::Linearized lin = ad::linearize(p, std::vector<int>{0}, registry());
  INFO(print_program(lin.linear));
  bool has_y = false;
  for (const Parameter& par : lin.linear.params) has_y |= par.name == "y";
  CHECK(has_y);
  Rng rng{31};
  std::vector<Tensor> in = {random_tensor(DType::f64, {4}, rng), random_tensor(DType::f64, {3, 2}, rng)};
  check_derivatives(p, {0}, in, rng, Tolerance{}, "symbolic dims, seed 31");
}

TEST_CASE("symbolic zeros: paths without a tangent or cotangent emit no instructions") {
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {3}});
  Value y = b.parameter("y", {DType::f64, {3}});
  Value out = b.add(b.reduce_sum(b.exp(y), {0}), b.reduce_sum(b.mul(x, x), {0}));
  Program p = b.finish({out});
  // Tangent with respect to x only: exp(y)'s rule is never asked, so no mul by exp(y) and no zero tensor.
  Program j = ad::jvp(p, std::vector<int>{0}, registry());
  INFO(print_program(j));
  CHECK(count_ops(j, "constant") == 0);
  CHECK(count_ops(j, "broadcast_in_dim") == 0);
  CHECK(count_ops(j, "mul") == 3);  // x*x, and the two terms t*x + x*t
  // Gradient with respect to y: the x*x branch gets no cotangent, so nothing of it is transposed.
  Program g = ad::grad(p, std::vector<int>{1}, registry());
  INFO(print_program(g));
  CHECK(count_ops(g, "mul") == 1);  // ct * exp(y)
  CHECK(count_ops(g, "add") == 0);
  std::vector<Tensor> r = run(ad::grad(p, std::vector<int>{0, 1}, registry()),
                              {Tensor::from_col_major<double>({3}, {1, 2, 3}), Tensor::from_col_major<double>({3}, {0, 0, 0})});
  CHECK(r[0].to_col_major<double>() == std::vector<double>{2, 4, 6});
  CHECK(r[1].to_col_major<double>() == std::vector<double>{1, 1, 1});
  // A parameter nothing depends on gets its zero gradient materialised once, at the output.
  Builder b2("h", registry());
  Value u = b2.parameter("u", {DType::f64, {3}});
  b2.parameter("unused", {DType::f64, {2}});
  Program h = b2.finish({b2.reduce_sum(u, {0})});
  Program gh = ad::grad(h, std::vector<int>{0, 1}, registry());
  INFO(print_program(gh));
  CHECK(count_ops(gh, "constant") == 2);  // the seed 1 and the zero, nothing else
  std::vector<Tensor> rh = run(gh, {Tensor::from_col_major<double>({3}, {1, 2, 3}), Tensor::zeros(DType::f64, {2})});
  CHECK(rh[1].to_col_major<double>() == std::vector<double>{0, 0});
}

TEST_CASE("complex parameters: grad follows JAX (df/dx - i df/dy), vjp is the adjoint") {
  Builder b("f", registry());
  Value z = b.parameter("z", {DType::c128, {2}});
  Value out = b.reduce_sum(b.real(b.mul(z, b.conj(z))), {0});  // sum |z|^2
  Program p = b.finish({out});
  Tensor zt = Tensor::from_col_major<c128>({2}, {c128(3, 4), c128(-1, 0.5)});
  std::vector<Tensor> g = run(ad::grad(p, std::vector<int>{0}, registry()), {zt});
  CHECK(g[0].at<c128>({0}) == c128(6, -8));  // JAX: grad(lambda z: abs(z)**2)(3+4j) == 6-8j
  CHECK(g[0].at<c128>({1}) == c128(-2, -1));
  std::vector<Tensor> v = run(ad::vjp(p, std::vector<int>{0}, registry()), {zt, Tensor::scalar<double>(1.0)});
  CHECK(v[1].at<c128>({0}) == c128(6, 8));  // the adjoint cotangent: df/dx + i df/dy
}

TEST_CASE("golden: the VJP program of ij,jk->ik") {
  Builder b("matmul", registry());
  Value a = b.parameter("a", {DType::f64, {2, 3}});
  Value w = b.parameter("b", {DType::f64, {3, 4}});
  Value y = b.extension(std::make_shared<einsum::EinsumPayload>(einsum::parse_subscripts("ij,jk->ik"),
                                                                einsum::PlanSpec{}, false),
                        {a, w});
  Program v = ad::vjp(b.finish({y}), std::vector<int>{0, 1}, registry());
  const std::string text = print_program(v);
  einstage::test::check_golden_file(std::string(EINSTAGE_SOURCE_DIR) + "/tests/ad/golden/vjp_matmul.ir", text);
  CHECK(print_program(parse_program(text, registry())) == text);
  // And it computes (c b^T, a^T c).
  Tensor at = Tensor::from_row_major<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor bt = Tensor::from_row_major<double>({3, 4}, {1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1});
  Tensor ct = Tensor::from_row_major<double>({2, 4}, {1, 1, 1, 1, 0, 1, 0, 2});
  std::vector<Tensor> r = run(v, {at, bt, ct});
  CHECK(r[1].to_row_major<double>() == std::vector<double>{2, 2, 2, 2, 3, 2});
  CHECK(r[2].to_row_major<double>() == std::vector<double>{1, 5, 1, 9, 2, 7, 2, 12, 3, 9, 3, 15});
}

namespace {

// A payload for the error tests: an identity op of a family that may or may not register AD rules.
class IdentityPayload final : public ExtensionPayload {
 public:
  std::string_view family() const override { return "test.identity.v1"; }
  std::string to_text() const override { return ""; }
  std::string to_json() const override { return "{}"; }
  uint64_t hash() const override { return 1; }
  bool equals(const ExtensionPayload&) const override { return true; }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<IdentityPayload>(); }
};

ExtensionRegistry identity_registry(bool with_linearize) {
  ExtensionRegistry r;
  ExtensionSemantics s;
  s.family = "test.identity.v1";
  s.module = "test.identity";
  s.parse_text = [](std::string_view) -> std::unique_ptr<ExtensionPayload> { return std::make_unique<IdentityPayload>(); };
  s.parse_json = s.parse_text;
  s.infer_type = [](const ExtensionPayload&, Types in, TypeContext&) { return in[0]; };
  if (with_linearize)
    s.linearize = [](Builder& b, const Instruction& inst, std::span<const Value>,
                     std::span<const std::optional<Value>> t) -> std::optional<Value> {
      return b.emit(inst.op, {*t[0]});
    };
  r.register_family(std::move(s));
  return r;
}

}  // namespace

TEST_CASE("errors: missing rules name the op; non-linear transposes; grad's output; wrt lists") {
  {
    ExtensionRegistry reg = identity_registry(false);
    Builder b("f", &reg);
    Value x = b.parameter("x", {DType::f64, {2}});
    Program p = b.finish({b.extension(std::make_shared<IdentityPayload>(), {x})});
    CHECK(error_of([&] { ad::jvp(p, std::vector<int>{0}, &reg); }) ==
          "differentiation rule for 'test.identity.v1' not implemented (needed by %0 in @f; module 'test.identity' "
          "registers no linearize rule)");
  }
  {
    ExtensionRegistry reg = identity_registry(true);
    Builder b("f", &reg);
    Value x = b.parameter("x", {DType::f64, {2}});
    Program p = b.finish({b.extension(std::make_shared<IdentityPayload>(), {x})});
    CHECK(ad::jvp(p, std::vector<int>{0}, &reg).instructions.size() == 2);
    CHECK(error_of([&] { ad::vjp(p, std::vector<int>{0}, &reg); }) ==
          "transpose rule for 'test.identity.v1' not implemented (needed for reverse mode by %0 in @f_lin; module "
          "'test.identity' registers no transpose rule)");
  }
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {2}});
  Value z = b.parameter("z", {DType::c128, {}});
  Program exp_p = b.finish({b.exp(x)});
  CHECK(error_of([&] { ad::transpose(exp_p, std::vector<int>{0}, registry()); }) ==
        "transpose rule for 'exp' not implemented (needed for reverse mode by %0 in @f: the op is not linear, so the "
        "program is not linear in its linear inputs)");
  x = b.parameter("x", {DType::f64, {2}});
  Program square = b.finish({b.mul(x, x)});
  CHECK(error_of([&] { ad::transpose(square, std::vector<int>{0}, registry()); }) ==
        "transpose of %0 in @f: 'mul' is not linear when operands 0 and 1 both depend on the linear inputs; "
        "transpose needs a program linear in them (this is a product of two linear values)");
  x = b.parameter("x", {DType::f64, {2}});
  Program dot = b.finish({b.extension(std::make_shared<einsum::EinsumPayload>(einsum::parse_subscripts("i,i->"),
                                                                              einsum::PlanSpec{}, false),
                                      {x, x})});
  CHECK(error_of([&] { ad::transpose(dot, std::vector<int>{0}, registry()); }) ==
        "transpose of %0 in @f: 'einstage.einsum.v1' \"i,i->\" is linear in each operand separately, but operands 0 "
        "and 1 both depend on the linear inputs; transpose needs a program linear in them");
  CHECK(error_of([&] { ad::grad(square, std::vector<int>{0}, registry()); }) ==
        "grad: @f returns f64[2] but grad needs a scalar output; reduce it first (e.g. sum), or use vjp with a "
        "cotangent of that shape");
  x = b.parameter("x", {DType::f64, {2}});
  z = b.parameter("z", {DType::c128, {}});
  Program two = b.finish({b.reduce_sum(x, {0}), b.mul(z, z)});
  CHECK(error_of([&] { ad::grad(two, std::vector<int>{0}, registry()); }) ==
        "grad: @f has 2 outputs but grad needs exactly one (a real scalar); choose one by index (grad(program, "
        "output, wrt, registry)), or use vjp with a cotangent per output");
  x = b.parameter("x", {DType::f64, {2}});
  z = b.parameter("z", {DType::c128, {}});
  Program complex_out = b.finish({b.mul(z, z)});
  CHECK(error_of([&] { ad::grad(complex_out, std::vector<int>{1}, registry()); }) ==
        "grad: @f returns c128[] but grad needs a real output (as JAX's grad); take real() or the squared magnitude "
        "first, or use vjp with a cotangent");
  CHECK(error_of([&] { ad::vjp(complex_out, std::vector<int>{2}, registry()); }) ==
        "vjp: wrt index 2 is out of range; @f has 2 parameters (0..1)");
  CHECK(error_of([&] { ad::jvp(complex_out, std::vector<int>{1, 1}, registry()); }) ==
        "jvp: wrt lists parameter 1 (%z) twice");
  // A hand-built program's name is user text: echoed escaped, on one line.
  Program renamed = two;
  renamed.name = "f\n\xff";
  CHECK(error_of([&] { ad::grad(renamed, std::vector<int>{0}, registry()); }) ==
        "grad: @f\\n\\xff has 2 outputs but grad needs exactly one (a real scalar); choose one by index "
        "(grad(program, output, wrt, registry)), or use vjp with a cotangent per output");
}
