// The fixed-point adjoint (compiler/ad/FixedPoint.h) on cases with closed-form derivatives: the linear fixed point
// x = A x + B θ (real and complex; θ̄ = Bᴴ (I − A)⁻ᴴ x̄, Ā = w x*ᴴ), and the power iteration x -> A x / |A x| whose
// fixed point is the dominant eigenvector (its derivative from the eigendecomposition, first-order perturbation
// theory). Oracles: Eigen's dense LU and self-adjoint eigensolver, and central finite differences of the forward
// iteration run to convergence. Then the solvers' failure paths: GMRES capped (the Neumann fallback answers),
// neither converging (the error and the report mode, residuals derived by hand), inputs that are not a fixed point,
// and bad construction arguments, each with its message pinned.
#include "compiler/Trace.h"
#include "compiler/ad/FixedPoint.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "runtime/Runtime.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <Eigen/Dense>
#include <doctest/doctest.h>

#include <cmath>
#include <complex>

using namespace einstage;
using einstage::test::error_of;

namespace {

using Mat = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;
using CMat = Eigen::MatrixXcd;
using CVec = Eigen::VectorXcd;
using cd = std::complex<double>;

Runtime& runtime() {
  static Runtime rt = [] {
    Runtime r;
    r.add_module(einsum::module_descriptor());
    return r;
  }();
  return rt;
}

template <typename M>
Tensor to_tensor(const M& m, bool vector) {
  using S = typename M::Scalar;
  std::vector<S> data(m.data(), m.data() + m.size());  // Eigen is column-major like einstage
  Shape shape = vector ? Shape{m.rows()} : Shape{m.rows(), m.cols()};
  return Tensor::from_col_major<S>(shape, data);
}
Tensor tensor_of(const Mat& m) { return to_tensor(m, false); }
Tensor tensor_of(const Vec& v) { return to_tensor(v, true); }
Tensor tensor_of(const CMat& m) { return to_tensor(m, false); }
Tensor tensor_of(const CVec& v) { return to_tensor(v, true); }
Mat mat_of(const Tensor& t) {
  std::vector<double> d = t.to_col_major<double>();
  return Eigen::Map<Mat>(d.data(), t.shape()[0], t.rank() > 1 ? t.shape()[1] : 1);
}
CMat cmat_of(const Tensor& t) {
  std::vector<cd> d = t.to_col_major<cd>();
  return Eigen::Map<CMat>(d.data(), t.shape()[0], t.rank() > 1 ? t.shape()[1] : 1);
}

Mat random_matrix(test::SplitMix64& rng, int rows, int cols) {
  Mat m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = rng.symmetric();
  return m;
}
CMat random_cmatrix(test::SplitMix64& rng, int rows, int cols) {
  CMat m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = cd(rng.symmetric(), rng.symmetric());
  return m;
}

// @linear(%x: T[n], %a: T[n,n], %b: T[n,p], %theta: T[p]) -> (T[n]): x -> a x + b theta.
Program linear_step(DType dtype, int n, int p) {
  TraceContext ctx("linear", &runtime().registry());
  TracedTensor x = ctx.parameter("x", dtype, {n});
  TracedTensor a = ctx.parameter("a", dtype, {n, n});
  TracedTensor b = ctx.parameter("b", dtype, {n, p});
  TracedTensor theta = ctx.parameter("theta", dtype, {p});
  TracedTensor ax = einsum::einsum(ctx, "ij,j->i", {a, x});
  TracedTensor bt = einsum::einsum(ctx, "ij,j->i", {b, theta});
  return ctx.finish({ax + bt});
}

// @power(%x: f64[n], %a: f64[n,n]) -> (f64[n], f64[]): x -> a x / |a x|, and |a x| (the eigenvalue; ignored by the
// adjoint, which reads only the first output).
Program power_step(int n) {
  TraceContext ctx("power", &runtime().registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {n});
  TracedTensor a = ctx.parameter("a", DType::f64, {n, n});
  TracedTensor y = einsum::einsum(ctx, "ij,j->i", {a, x});
  TracedTensor yy = y * y;
  TracedTensor norm = sqrt(sum(yy));
  return ctx.finish({y / norm, norm});
}

// Runs the step from inputs[0] until the state stops changing (relative 1e-15 or 4000 steps); returns the state.
Tensor iterate(const Executable& step, std::vector<Tensor> inputs) {
  for (int k = 0; k < 4000; ++k) {
    Tensor next = step.run(inputs).at(0);
    std::vector<double> a = inputs[0].to_col_major<double>(), b = next.to_col_major<double>();
    double d = 0, s = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      d += (a[i] - b[i]) * (a[i] - b[i]);
      s += b[i] * b[i];
    }
    inputs[0] = next;
    if (std::sqrt(d) <= 1e-15 * std::sqrt(s)) break;
  }
  return inputs[0];
}

double max_rel_diff(const Mat& got, const Mat& want) {
  return (got - want).cwiseAbs().maxCoeff() / want.cwiseAbs().maxCoeff();
}

// A with spectral radius 0.5 (a random matrix scaled by its largest eigenvalue modulus).
Mat contracting(test::SplitMix64& rng, int n) {
  Mat a = random_matrix(rng, n, n);
  double rho = a.eigenvalues().cwiseAbs().maxCoeff();
  return a * (0.5 / rho);
}

}  // namespace

TEST_CASE("fixed point: linear x = A x + B theta against the closed form and finite differences") {
  const int n = 6, p = 3;
  test::SplitMix64 rng{37};
  Mat a = contracting(rng, n), b = random_matrix(rng, n, p);
  Vec theta = random_matrix(rng, p, 1), c = random_matrix(rng, n, 1);
  Program step = linear_step(DType::f64, n, p);
  Executable run = runtime().prepare(step);
  auto solve = [&](const Mat& aa, const Vec& th) {
    return iterate(run, {tensor_of(Vec(Vec::Zero(n))), tensor_of(aa), tensor_of(b), tensor_of(th)});
  };
  Tensor x_star = solve(a, theta);
  Vec x_closed = (Mat::Identity(n, n) - a).lu().solve(b * theta);
  CHECK(max_rel_diff(mat_of(x_star), x_closed) < 1e-13);

  // L = c·x*: w = (I − A)⁻ᵀ c, θ̄ = Bᵀ w, Ā = w x*ᵀ.
  Vec w = (Mat::Identity(n, n) - a).transpose().lu().solve(c);
  Mat a_bar = w * x_closed.transpose();
  Vec theta_bar = b.transpose() * w;

  ad::FixedPointAdjoint adjoint(step, {0}, {1, 3}, &runtime().registry(), ad::preparer_of(runtime()));
  ad::FixedPointVjp r = adjoint.vjp({x_star, tensor_of(a), tensor_of(b), tensor_of(theta)}, {tensor_of(c)});
  CHECK(r.report.converged);
  CHECK(r.report.method == ad::FixedPointMethod::gmres);
  CHECK(r.report.residual <= 1e-10);
  CHECK(r.report.fixed_point_residual < 1e-14);
  CHECK(r.report.message.empty());
  REQUIRE(r.cotangents.size() == 2);
  CHECK(max_rel_diff(mat_of(r.cotangents[0]), a_bar) < 1e-9);
  CHECK(max_rel_diff(mat_of(r.cotangents[1]), theta_bar) < 1e-9);
  CHECK(max_rel_diff(mat_of(r.adjoint.at(0)), w) < 1e-9);

  // Central finite differences of L through the forward iteration.
  auto loss = [&](const Mat& aa, const Vec& th) { return c.dot(mat_of(solve(aa, th)).col(0)); };
  const double h = 1e-5;
  for (int i = 0; i < p; ++i) {
    Vec tp = theta, tm = theta;
    tp[i] += h;
    tm[i] -= h;
    CHECK(std::abs((loss(a, tp) - loss(a, tm)) / (2 * h) - theta_bar[i]) < 1e-8);
  }
  for (int j : {0, 3, 5})
    for (int i : {0, 2, 4}) {
      Mat ap = a, am = a;
      ap(i, j) += h;
      am(i, j) -= h;
      CHECK(std::abs((loss(ap, theta) - loss(am, theta)) / (2 * h) - a_bar(i, j)) < 1e-8);
    }

  // The Neumann series alone (GMRES off) gives the same gradient.
  ad::FixedPointOptions neumann;
  neumann.gmres_max_iterations = 0;
  adjoint.set_options(neumann);
  ad::FixedPointVjp rn = adjoint.vjp({x_star, tensor_of(a), tensor_of(b), tensor_of(theta)}, {tensor_of(c)});
  CHECK(rn.report.converged);
  CHECK(rn.report.method == ad::FixedPointMethod::neumann);
  CHECK(rn.report.gmres_residual == -1);
  CHECK(rn.report.neumann_iterations > 10);  // spectral radius 0.5: about log2(1e10) terms
  CHECK(max_rel_diff(mat_of(rn.cotangents[1]), theta_bar) < 1e-9);
}

TEST_CASE("fixed point: complex linear fixed point follows vjp's real-inner-product adjoint") {
  const int n = 4, p = 2;
  test::SplitMix64 rng{371};
  CMat a = random_cmatrix(rng, n, n);
  a *= 0.5 / a.eigenvalues().cwiseAbs().maxCoeff();
  CMat b = random_cmatrix(rng, n, p);
  CVec theta = random_cmatrix(rng, p, 1), c = random_cmatrix(rng, n, 1);
  CVec x_closed = (CMat::Identity(n, n) - a).lu().solve(b * theta);
  // <θ̄, dθ> = Re cᴴ dx with dx = (I − A)⁻¹ B dθ: θ̄ = Bᴴ (I − A)⁻ᴴ c, Ā = w x*ᴴ.
  CVec w = (CMat::Identity(n, n) - a).adjoint().lu().solve(c);
  CVec theta_bar = b.adjoint() * w;
  CMat a_bar = w * x_closed.adjoint();
  Program step = linear_step(DType::c128, n, p);
  ad::FixedPointAdjoint adjoint(step, {0}, {3, 1}, &runtime().registry(), ad::preparer_of(runtime()));
  ad::FixedPointVjp r =
      adjoint.vjp({tensor_of(x_closed), tensor_of(a), tensor_of(b), tensor_of(theta)}, {tensor_of(c)});
  CHECK(r.report.converged);
  CHECK(r.cotangents.at(0).dtype() == DType::c128);
  CHECK((cmat_of(r.cotangents[0]) - theta_bar).cwiseAbs().maxCoeff() < 1e-9 * theta_bar.cwiseAbs().maxCoeff());
  CHECK((cmat_of(r.cotangents[1]) - a_bar).cwiseAbs().maxCoeff() < 1e-9 * a_bar.cwiseAbs().maxCoeff());
}

TEST_CASE("fixed point: power iteration's dominant eigenvector against perturbation theory and finite differences") {
  const int n = 5;
  test::SplitMix64 rng{3737};
  // A = Q diag(λ) Qᵀ, dominant λ = 4, the others at most 2 in modulus (the iteration contracts by 1/2).
  Mat q = random_matrix(rng, n, n).householderQr().householderQ();
  Vec lambda(n);
  lambda << 4, 2, -1.5, 1, 0.25;
  Mat a = q * lambda.asDiagonal() * q.transpose();
  Vec c = random_matrix(rng, n, 1);
  Vec start = Vec::Ones(n);
  Program step = power_step(n);
  Executable run = runtime().prepare(step);
  auto solve = [&](const Mat& aa) { return mat_of(iterate(run, {tensor_of(start), tensor_of(aa)})).col(0).eval(); };
  Vec v = solve(a);

  // dv = Σ_{i>0} v_i (v_iᵀ dA v) / (λ_0 − λ_i) for any dA (A symmetric: left = right eigenvectors), so
  // Ā = Σ_{i>0} (c·v_i) / (λ_0 − λ_i) v_i vᵀ.
  Eigen::SelfAdjointEigenSolver<Mat> eig(a);
  Mat vecs = eig.eigenvectors();  // ascending eigenvalues: the dominant one (4) is last
  Vec vals = eig.eigenvalues();
  CHECK(std::abs(vals[n - 1] - 4) < 1e-12);
  CHECK(std::abs(std::abs(vecs.col(n - 1).dot(v)) - 1) < 1e-12);
  Mat a_bar = Mat::Zero(n, n);
  for (int i = 0; i < n - 1; ++i)
    a_bar += (c.dot(vecs.col(i)) / (vals[n - 1] - vals[i])) * vecs.col(i) * v.transpose();

  ad::FixedPointAdjoint adjoint(step, {0}, {1}, &runtime().registry(), ad::preparer_of(runtime()));
  CHECK(adjoint.state_adjoint_program().outputs.size() == 1);
  ad::FixedPointVjp r = adjoint.vjp({tensor_of(v), tensor_of(a)}, {tensor_of(c)});
  CHECK(r.report.converged);
  CHECK(r.report.method == ad::FixedPointMethod::gmres);
  CHECK(max_rel_diff(mat_of(r.cotangents.at(0)), a_bar) < 1e-9);

  const double h = 1e-6;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      Mat ap = a, am = a;
      ap(i, j) += h;
      am(i, j) -= h;
      double fd = (c.dot(solve(ap)) - c.dot(solve(am))) / (2 * h);
      CHECK(std::abs(fd - a_bar(i, j)) < 1e-7);
    }
}

TEST_CASE("fixed point: GMRES capped falls back to the Neumann series") {
  const int n = 6, p = 3;
  test::SplitMix64 rng{73};
  Mat a = contracting(rng, n), b = random_matrix(rng, n, p);
  Vec theta = random_matrix(rng, p, 1), c = random_matrix(rng, n, 1);
  Vec x = (Mat::Identity(n, n) - a).lu().solve(b * theta);
  Vec theta_bar = b.transpose() * (Mat::Identity(n, n) - a).transpose().lu().solve(c);
  ad::FixedPointOptions capped;
  capped.gmres_max_iterations = 1;
  capped.gmres_restart = 1;
  ad::FixedPointAdjoint adjoint(linear_step(DType::f64, n, p), {0}, {3}, &runtime().registry(),
                                ad::preparer_of(runtime()), capped);
  ad::FixedPointVjp r = adjoint.vjp({tensor_of(x), tensor_of(a), tensor_of(b), tensor_of(theta)}, {tensor_of(c)});
  CHECK(r.report.converged);
  CHECK(r.report.method == ad::FixedPointMethod::neumann);
  CHECK(r.report.gmres_iterations == 1);
  CHECK(r.report.gmres_residual > 1e-3);
  CHECK(r.report.neumann_residual <= 1e-10);
  CHECK(max_rel_diff(mat_of(r.cotangents.at(0)), theta_bar) < 1e-9);
}

TEST_CASE("fixed point: neither solver converging is an error, or a report the caller sees") {
  // A = diag(2, 3), B = I, θ = (1, 1): x* = (I − A)⁻¹ θ = (−1, −1/2) is a fixed point the iteration leaves, and the
  // adjoint system's operator is I − Aᵀ = diag(−1, −2). For x̄ = (1, 1):
  // - one GMRES step from the guess x̄: r0 = x̄ − diag(−1, −2) x̄ = (2, 3), the best multiple of M r0 = (−2, −6)
  //   leaves (0.9, −0.3), relative |.| / |x̄| = sqrt(0.9 / 2) = 0.671;
  // - the Neumann series: term k+1 minus term k is Aᵏ⁺¹ x̄, so after 10 terms the returned (9th) partial sum has
  //   residual |(2¹⁰, 3¹⁰)| / sqrt(2) = 4.18e+04.
  Mat a = Vec(Eigen::Vector2d(2, 3)).asDiagonal();
  Mat b = Mat::Identity(2, 2);
  Vec theta = Vec::Ones(2), x(2);
  x << -1, -0.5;
  std::vector<Tensor> inputs = {tensor_of(x), tensor_of(a), tensor_of(b), tensor_of(theta)};
  std::vector<Tensor> x_bar = {tensor_of(Vec(Vec::Ones(2)))};
  ad::FixedPointOptions o;
  o.gmres_max_iterations = 1;
  o.gmres_restart = 1;
  o.neumann_max_iterations = 10;
  ad::FixedPointAdjoint adjoint(linear_step(DType::f64, 2, 2), {0}, {3}, &runtime().registry(),
                                ad::preparer_of(runtime()), o);
  const std::string expected =
      "fixed_point_adjoint: the adjoint system (I - df/dx)^T w = x_bar of @linear did not converge: GMRES reached "
      "0.671 after 1 iterations (restart 1) and the Neumann series 4.18e+04 after 10 terms, relative residuals above "
      "tolerance 1e-10; raise gmres_max_iterations or gmres_restart (the series converges only when every "
      "eigenvalue of df/dx has modulus below 1), or check that the step contracts near its fixed point";
  CHECK(error_of([&] { adjoint.vjp(inputs, x_bar); }) == expected);

  o.on_failure = ad::FixedPointFailure::report;
  adjoint.set_options(o);
  ad::FixedPointVjp r = adjoint.vjp(inputs, x_bar);
  CHECK_FALSE(r.report.converged);
  CHECK(r.report.message == expected);
  CHECK(r.report.method == ad::FixedPointMethod::gmres);  // the smaller residual of the two
  CHECK(std::abs(r.report.residual - std::sqrt(0.45)) < 1e-12);
  CHECK(r.report.neumann_residual == doctest::Approx(std::hypot(1024.0, 59049.0) / std::sqrt(2.0)).epsilon(1e-12));

  // With GMRES off, the message says so.
  o.on_failure = ad::FixedPointFailure::throw_error;
  o.gmres_max_iterations = 0;
  adjoint.set_options(o);
  CHECK(error_of([&] { adjoint.vjp(inputs, x_bar); }).find(
            "did not converge: GMRES was off (gmres_max_iterations 0) and the Neumann series 4.18e+04 after 10 "
            "terms") != std::string::npos);

  // Unrestricted GMRES solves this (non-contracting) system: the iteration diverges, the fixed point does not.
  adjoint.set_options(ad::FixedPointOptions{});
  ad::FixedPointVjp ok = adjoint.vjp(inputs, x_bar);
  CHECK(ok.report.converged);
  CHECK(ok.report.method == ad::FixedPointMethod::gmres);
  Vec want = (Mat::Identity(2, 2) - a).transpose().lu().solve(Vec::Ones(2));  // B = I: θ̄ = w = (−1, −1/2)
  CHECK(max_rel_diff(mat_of(ok.cotangents.at(0)), want) < 1e-12);
}

TEST_CASE("fixed point: errors name the inputs, the step and the fix") {
  Mat a = Vec(Eigen::Vector2d(2, 3)).asDiagonal();
  Mat b = Mat::Identity(2, 2);
  Vec theta = Vec::Ones(2), x(2);
  x << 0, 0.5;  // f(x) = (1, 2.5): |f(x) - x| / |x| = sqrt(5) / 0.5 = 4.47
  Program step = linear_step(DType::f64, 2, 2);
  ad::FixedPointAdjoint adjoint(step, {0}, {3}, &runtime().registry(), ad::preparer_of(runtime()));
  std::vector<Tensor> x_bar = {tensor_of(Vec(Vec::Ones(2)))};
  CHECK(error_of([&] { adjoint.vjp({tensor_of(x), tensor_of(a), tensor_of(b), tensor_of(theta)}, {x_bar[0]}); }) ==
        "fixed_point_adjoint: the inputs of @linear are not at a fixed point: |f(x) - x| / |x| = 4.47 over the state "
        "parameters, above fixed_point_tolerance 1e-06; iterate the step until it converges (with the gauge fixed, "
        "so that x converges element-wise) before differentiating, or raise fixed_point_tolerance");
  CHECK(error_of([&] { adjoint.vjp({tensor_of(x), tensor_of(a)}, {x_bar[0]}); }) ==
        "fixed_point_adjoint: 2 inputs for @linear with 4 parameters; pass one per parameter, the state ones at the "
        "fixed point");
  CHECK(error_of([&] {
          adjoint.vjp({tensor_of(x), tensor_of(a), tensor_of(b), tensor_of(theta)}, {tensor_of(Vec(Vec::Ones(3)))});
        }) == "fixed_point_adjoint: the cotangent of state parameter 'x' of @linear is f64[3] but its input is f64[2]; "
              "a cotangent has its state's dtype and shape");
  CHECK(error_of([&] { ad::FixedPointAdjoint(step, {0}, {0, 3}, &runtime().registry(), ad::preparer_of(runtime())); })
        == "fixed_point_adjoint: parameter 0 ('x') of @linear is both a state parameter and in wrt; list it in one "
           "of them (the state is what the step iterates, wrt what the fixed point depends on)");
  CHECK(error_of([&] { ad::FixedPointAdjoint(step, {1}, {3}, &runtime().registry(), ad::preparer_of(runtime())); }) ==
        "fixed_point_adjoint: output 0 of @linear has type f64[2] but state parameter 'a' (index 1) has f64[2,2]; the "
        "step's first outputs must be the new values of the state parameters, in the order of `state`");
  ad::FixedPointOptions bad;
  bad.gmres_restart = 0;
  CHECK(error_of([&] { adjoint.set_options(bad); }) ==
        "fixed_point_adjoint: options for @linear out of range (tolerance 1e-10, gmres_max_iterations 200, "
        "gmres_restart 0, neumann_max_iterations 1000, fixed_point_tolerance 1e-06); tolerances must be positive, "
        "iteration counts at least 0 and the restart at least 1");
}
