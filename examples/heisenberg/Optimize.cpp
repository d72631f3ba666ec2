#include "examples/heisenberg/Optimize.h"

#include "compiler/ad/Ad.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/einsum/planner/Random.h"
#include "ir/Error.h"

#include <Eigen/Core>
#include <LBFGS.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace einstage::heisenberg {
namespace {

constexpr double kRejected = 1.0;  // the energy reported for a rejected trial point
// A warm-started CTMRG whose environment is further than this (max element-wise, C and T of unit norm) from a fixed
// point of the gauged step is retried from the state's own start (the fixed-point adjoint needs ~ rounding).
constexpr double kWarmFixedPoint = 1e-8;

Tensor from_vector(const Shape& shape, const double* data, int64_t n) {
  return Tensor::from_col_major<double>(shape, std::span<const double>(data, size_t(n)));
}

}  // namespace

Tensor random_parameters(int d, uint64_t seed) {
  if (d < 1) fail(ErrorKind::invalid_argument, "heisenberg-ipeps: D = {} must be at least 1", d);
  const int64_t n = 2 * int64_t(d) * d * d * d;
  std::vector<double> v(static_cast<size_t>(n));
  einsum::SplitMix64 rng(seed);  // the planner's generator (extensions/einsum/planner/Random.h)
  for (double& x : v) x = 2 * (double(rng.next() >> 11) * 0x1.0p-53) - 1;
  return Tensor::from_col_major<double>({2, d, d, d, d}, v);
}

Tensor random_start(int d, uint64_t seed) {
  std::vector<double> v = random_parameters(d, seed).to_col_major<double>();
  double n = 0;
  for (double x : v) n += x * x;
  for (double& x : v) x /= std::sqrt(n);
  return Tensor::from_col_major<double>({2, d, d, d, d}, v);
}

Tensor neel_biased_parameters(int d, uint64_t seed, double noise) {
  std::vector<double> v = random_parameters(d, seed).to_col_major<double>();
  for (double& x : v) x *= noise;
  v[0] += 1;
  return Tensor::from_col_major<double>({2, d, d, d, d}, v);
}

Program trace_magnetization(const ExtensionRegistry* registry, int d, int chi) {
  if (d < 1 || chi < 1)
    fail(ErrorKind::invalid_argument, "heisenberg-ipeps: D = {} and chi = {} must be at least 1", d, chi);
  const int64_t x = chi;
  TraceContext ctx("magnetization", registry);
  TracedTensor c = ctx.parameter("c", DType::f64, {x, x});
  TracedTensor t = ctx.parameter("t", DType::f64, {x, int64_t(d) * d, x});
  TracedTensor a = ctx.parameter("a", DType::f64, {2, d, d, d, d});
  TracedTensor t4 = reshape(t, {Dim(x), Dim(d), Dim(d), Dim(x)});
  // C1 Tu C2 / Tl A Tr / C3 Td C4 around one site: ket legs k m n p (u l d r), bra the capitals.
  TracedTensor rho = einsum::einsum(ctx, "ab,bkKc,cd,amMf,skmnp,SKMNP,dpPg,fh,hnNi,ig->sS",
                                    {c, t4, c, t4, a, a, t4, c, t4, c});
  TracedTensor sx = ctx.constant(Tensor::from_col_major<double>({2, 2}, {0, 0.5, 0.5, 0}));
  TracedTensor sz = ctx.constant(Tensor::from_col_major<double>({2, 2}, {0.5, 0, 0, -0.5}));
  TracedTensor norm = einsum::einsum(ctx, "ss->", {rho});
  TracedTensor mx = einsum::einsum(ctx, "sS,Ss->", {rho, sx}) / norm;
  TracedTensor mz = einsum::einsum(ctx, "sS,Ss->", {rho, sz}) / norm;
  TracedTensor mx2 = mx * mx;
  TracedTensor mz2 = mz * mz;
  return ctx.finish({sqrt(mx2 + mz2)});
}

IpepsEnergy::IpepsEnergy(const Runtime& runtime, int d, int chi, CtmrgOptions ctmrg, ad::FixedPointOptions adjoint,
                         AdjointMethod method)
    : runtime_(runtime), ctmrg_(runtime, d, chi), ctmrg_options_(ctmrg),
      energy_grad_(runtime.prepare(ad::value_and_grad(ctmrg_.energy_program(), {0, 1, 2}, &runtime.registry()))),
      magnetization_(runtime.prepare(trace_magnetization(&runtime.registry(), d, chi))),
      adjoint_(ctmrg_.step_program(), {0, 1}, {2}, &runtime.registry(), ad::preparer_of(runtime), adjoint),
      method_(method) {}

Tensor IpepsEnergy::unrolled_gradient(const Tensor& a, Evaluation& e) {
  if (!unrolled_) unrolled_.emplace(runtime_, ctmrg_);
  unrolled_->begin();
  CtmrgOptions o = ctmrg_options_;
  o.fixed_point_tolerance = std::numeric_limits<double>::infinity();  // reverse mode needs no element-wise phase
  CtmrgResult r = ctmrg_.converge(a, initial_environment(a, ctmrg_.chi()), o,
                                  [&](const CtmEnvironment& in, const Tensor& g) { unrolled_->record(in, g); });
  std::vector<Tensor> vg = energy_grad_.run({r.env.c, r.env.t, a});
  e.energy = vg[0].at<double>({});
  e.ctmrg_steps = r.steps;
  e.unrolled = true;
  return add_f64(vg[3], unrolled_->backward(a, vg[1], vg[2], &e.unrolled_stats));
}

CtmrgResult IpepsEnergy::converge(const Tensor& a, bool* fresh, bool elementwise) {
  if (fresh) *fresh = false;
  CtmrgOptions options = ctmrg_options_;
  // Gauge-invariant quantities (the energy, the magnetisation) need only the spectrum converged; the element-wise
  // phase is for the fixed-point adjoint, and near an optimum whose corner spectrum has exact multiplets it runs to
  // the step cap (measured: D = 2, chi = 16, 2000 steps, a third of a whole optimisation's time).
  if (!elementwise) options.fixed_point_tolerance = std::numeric_limits<double>::infinity();
  std::optional<CtmrgResult> r;
  if (last_) {
    // A tenth of the step cap: a warm start that needs more is usually cycling, and a fresh start is cheaper.
    CtmrgOptions warm = options;
    warm.max_steps = std::max(1, options.max_steps / 10);
    try {
      r = ctmrg_.converge(a, *last_, warm);
    } catch (const Error&) {
    }
    // Not converged (or NaN) from the previous state's environment, or converged in the spectrum but to an
    // environment that no sign gauge makes an element-wise fixed point (seen from environments of distant states):
    // retry once from this state's own start.
    if (r && elementwise && !(r->fixed_point_change <= kWarmFixedPoint)) r.reset();
    if (!r && fresh) *fresh = true;
  }
  if (!r) r = ctmrg_.converge(a, initial_environment(a, ctmrg_.chi()), options);
  last_ = r->env;
  return *std::move(r);
}

Evaluation IpepsEnergy::evaluate(const Tensor& theta) {
  Tensor a = c4v_symmetrize(theta);
  Evaluation e;
  if (method_ == AdjointMethod::unrolled) {
    e.gradient = c4v_symmetrize(unrolled_gradient(a, e));
    return e;
  }
  bool fresh = false;
  CtmrgResult r = converge(a, &fresh);
  // dE/dA = the energy's own derivative in A plus the converged environment's response (x̄ = dE/d(C, T)).
  std::vector<Tensor> vg = energy_grad_.run({r.env.c, r.env.t, a});
  e.energy = vg[0].at<double>({});
  e.ctmrg_steps = r.steps;
  e.fresh_start = fresh;
  try {
    ad::FixedPointVjp fp = adjoint_.vjp({r.env.c, r.env.t, a, r.gauge}, {vg[1], vg[2]});
    e.gradient = c4v_symmetrize(add_f64(vg[3], fp.cotangents.at(0)));
    e.adjoint = fp.report;
  } catch (const Error& error) {
    // No fixed point to differentiate (or no solution of the adjoint system): reverse mode through the iteration
    // still differentiates the energy as computed.
    e.fallback = error.what();
    e.gradient = c4v_symmetrize(unrolled_gradient(a, e));
  }
  return e;
}

std::pair<double, double> IpepsEnergy::measure(const Tensor& theta) {
  Tensor a = c4v_symmetrize(theta);
  CtmrgResult r = converge(a, nullptr, /*elementwise=*/false);
  double m = magnetization_.run({r.env.c, r.env.t, a}).at(0).at<double>({});
  return {ctmrg_.energy(r.env, a), m};
}

OptimizeResult optimize(const Runtime& runtime, const OptimizeOptions& options, const Tensor* start) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  IpepsEnergy energy(runtime, options.d, options.chi, options.ctmrg, options.adjoint, options.method);
  Tensor theta = start ? *start : random_start(options.d, options.seed);
  const Shape shape = theta.shape();
  std::vector<double> x0 = theta.to_col_major<double>();
  Eigen::VectorXd x = Eigen::Map<Eigen::VectorXd>(x0.data(), Eigen::Index(x0.size()));

  OptimizeResult result;
  double best = std::numeric_limits<double>::infinity();
  Eigen::VectorXd best_x = x;
  auto objective = [&](const Eigen::VectorXd& v, Eigen::VectorXd& grad) {
    // LBFGSpp's direction can turn NaN (seen at D = 3, chi = 27 after line searches that evaluated the same point
    // again and again); every later trial point was NaN and rejected one by one until its line search gave up.
    // Stop at once instead: the best point so far is the result, stop_reason says why.
    if (!v.allFinite())
      throw std::runtime_error("L-BFGS proposed a non-finite point (its line search had stopped making progress)");
    ++result.evaluations;
    Evaluation e;
    try {
      e = energy.evaluate(from_vector(shape, v.data(), v.size()));
    } catch (const Error& error) {
      // A trial point whose CTMRG or adjoint does not converge (typically a far line-search trial near a
      // truncation-boundary degeneracy) is rejected: an energy above every state's (the bond energy is at most
      // 1/4, so 1/2 per site) makes the line search step back. Its gradient is never used by the interpolation that
      // follows. The first point must evaluate.
      if (result.evaluations == 1) throw;
      if (options.progress) {
        Progress p;
        p.evaluation = result.evaluations;
        p.energy = kRejected;
        p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        p.rejected = error.what();
        options.progress(p);
      }
      grad = Eigen::VectorXd::Zero(v.size());
      return kRejected;
    }
    std::vector<double> g = e.gradient.to_col_major<double>();
    grad = Eigen::Map<Eigen::VectorXd>(g.data(), Eigen::Index(g.size()));
    if (e.energy < best) {
      best = e.energy;
      best_x = v;
    }
    if (options.progress) {
      Progress p;
      p.evaluation = result.evaluations;
      p.energy = e.energy;
      p.gradient_norm = grad.norm();
      p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      p.ctmrg_steps = e.ctmrg_steps;
      p.fresh_start = e.fresh_start;
      p.unrolled = e.unrolled;
      p.fallback = e.fallback;
      p.adjoint_iterations = e.adjoint.method == ad::FixedPointMethod::neumann ? e.adjoint.neumann_iterations
                                                                                : e.adjoint.gmres_iterations;
      options.progress(p);
    }
    return e.energy;
  };
  LBFGSpp::LBFGSParam<double> param;
  param.epsilon = options.gradient_tolerance / std::max(x.norm(), std::numeric_limits<double>::min());
  param.epsilon_rel = 0;
  param.m = options.lbfgs_memory;
  param.max_iterations = options.max_iterations;
  param.linesearch = LBFGSpp::LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE;  // the curvature condition keeps the
  // L-BFGS matrix positive definite (Armijo alone let it turn indefinite: "the moving direction increases ...")
  LBFGSpp::LBFGSSolver<double, LBFGSpp::LineSearchNocedalWright> solver(param);
  double fx = 0;
  try {
    result.iterations = solver.minimize(objective, x, fx);
  } catch (const std::runtime_error& e) {
    // LBFGSpp gives up when the line search cannot decrease the energy further (at the optimum to rounding, or
    // when the gradient is inaccurate there); keep the best point seen, unless nothing was gained at all.
    if (result.evaluations <= 1)
      fail(ErrorKind::runtime, "heisenberg-ipeps: L-BFGS stopped at its first step: {}", e.what());
    result.stop_reason = e.what();
  }
  result.theta = from_vector(shape, best_x.data(), best_x.size());
  auto [e, m] = energy.measure(result.theta);
  result.energy = e;
  result.magnetization = m;
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

}  // namespace einstage::heisenberg
