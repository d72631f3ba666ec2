// The Heisenberg iPEPS optimisation (examples/heisenberg/Optimize.h): the gradient in the unconstrained parameters
// against central finite differences of the energy (each side with CTMRG started afresh), the staggered
// magnetisation of the Néel state, and L-BFGS reaching the published D = 2 C4v optimum (energy −0.66023109348 per
// site, staggered magnetisation 0.3911; Liao et al., PRX 9, 031041 (2019), and the acceptance values) at
// χ = 16 from random starts of five seeds; the unrolled adjoint against the fixed-point one and finite differences,
// and its checkpoints under the memory policy.
#include "examples/heisenberg/Optimize.h"

#include "HeisenbergTest.h"
#include "runtime/Context.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

using namespace einstage;
using namespace einstage::heisenberg;

namespace {

using heisenberg_test::runtime;

Tensor axpy(double alpha, const Tensor& x, const Tensor& y) {  // alpha x + y
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  for (size_t i = 0; i < a.size(); ++i) b[i] += alpha * a[i];
  return Tensor::from_col_major<double>(y.shape(), b);
}

double dot(const Tensor& x, const Tensor& y) {
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("heisenberg optimize: the gradient in the raw parameters equals finite differences") {
  const int d = 2, chi = 8;
  Tensor theta = random_parameters(d, 1);  // not C4v-symmetric: the gradient is projected
  CtmrgOptions tight;  // the differences divide the energies' error by 2h
  tight.tolerance = 1e-14;
  IpepsEnergy energy(runtime(), d, chi, tight);
  Evaluation e = energy.evaluate(theta);
  CHECK(e.adjoint.converged);
  for (uint64_t seed : {99, 98}) {
    Tensor dir = random_parameters(d, seed);
    const double h = 3e-6;
    IpepsEnergy plus(runtime(), d, chi, tight), minus(runtime(), d, chi, tight);
    double fd = (plus.measure(axpy(h, dir, theta)).first - minus.measure(axpy(-h, dir, theta)).first) / (2 * h);
    CAPTURE(fd);
    CHECK(std::abs(fd - dot(e.gradient, dir)) < 1e-6);
  }
}

TEST_CASE("heisenberg optimize: the Neel state's staggered magnetisation is 1/2") {
  IpepsEnergy energy(runtime(), 2, 4);
  auto [e, m] = energy.measure(neel_biased_parameters(2, 1, 0.0));
  CHECK(std::abs(e + 0.5) < 1e-14);
  CHECK(std::abs(m - 0.5) < 1e-14);
}

TEST_CASE("heisenberg optimize: L-BFGS reaches the published D = 2 optimum at chi = 16") {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    OptimizeOptions o;
    o.d = 2;
    o.chi = 16;
    o.seed = seed;
    int evaluations = 0;
    o.progress = [&](const Progress& p) { evaluations = p.evaluation; };
    OptimizeResult r = optimize(runtime(), o);
    CAPTURE(seed);
    CAPTURE(r.energy);
    CAPTURE(r.magnetization);
    CAPTURE(r.iterations);
    CAPTURE(r.stop_reason);
    CHECK(evaluations == r.evaluations);
    CHECK(std::abs(r.energy - -0.66023109348) < 1e-8);
    CHECK(std::abs(r.magnetization - 0.3911) < 1e-3);
  }
}

TEST_CASE("heisenberg optimize: the energy and its gradient are the same bits at 1 and 2 threads") {
  Tensor theta = random_parameters(2, 7);
  std::vector<Evaluation> results;
  for (int threads : {1, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime rt(options);
    rt.add_module(einsum::module_descriptor());
    rt.add_module(linalg::module_descriptor());
    IpepsEnergy energy(rt, 2, 8);
    results.push_back(energy.evaluate(theta));
  }
  CHECK(results[0].energy == results[1].energy);
  CHECK(results[0].ctmrg_steps == results[1].ctmrg_steps);
  CHECK(bitwise_equal(results[0].gradient, results[1].gradient));
}

TEST_CASE("heisenberg optimize: the unrolled gradient equals the fixed-point gradient and finite differences") {
  const int d = 2, chi = 8;
  Tensor theta = random_parameters(d, 1);
  CtmrgOptions tight;
  tight.tolerance = 1e-14;
  IpepsEnergy fixed(runtime(), d, chi, tight), unrolled(runtime(), d, chi, tight, {}, AdjointMethod::unrolled);
  Evaluation f = fixed.evaluate(theta), u = unrolled.evaluate(theta);
  CHECK(u.unrolled);
  CHECK(u.fallback.empty());
  CHECK(u.unrolled_stats.steps == u.ctmrg_steps);
  CHECK(u.unrolled_stats.interval == 1);
  double diff = 0, norm = 0;
  std::vector<double> gf = f.gradient.to_col_major<double>(), gu = u.gradient.to_col_major<double>();
  for (size_t i = 0; i < gf.size(); ++i) {
    diff += (gf[i] - gu[i]) * (gf[i] - gu[i]);
    norm += gf[i] * gf[i];
  }
  CAPTURE(std::sqrt(diff / norm));
  CHECK(std::sqrt(diff / norm) < 1e-8);
  for (uint64_t seed : {99, 98}) {
    Tensor dir = random_parameters(d, seed);
    const double h = 3e-6;
    IpepsEnergy plus(runtime(), d, chi, tight), minus(runtime(), d, chi, tight);
    double fd = (plus.measure(axpy(h, dir, theta)).first - minus.measure(axpy(-h, dir, theta)).first) / (2 * h);
    CAPTURE(fd);
    CHECK(std::abs(fd - dot(u.gradient, dir)) < 1e-6);
  }
}

TEST_CASE("heisenberg optimize: the unrolled gradient's checkpoints under ad_keep_bytes give the same bits") {
  const int d = 2, chi = 8;
  Tensor theta = random_parameters(d, 3);
  IpepsEnergy all(runtime(), d, chi, {}, {}, AdjointMethod::unrolled);
  Evaluation e_all = all.evaluate(theta);
  ConfigOptions config;
  config.ad_keep_bytes = 5 * (chi * chi + chi * d * d * chi) * 8;  // five checkpoints
  RuntimeOptions options;
  options.context = std::make_shared<ExecutionContext>(config);
  Runtime rt(options);
  rt.add_module(einsum::module_descriptor());
  rt.add_module(linalg::module_descriptor());
  IpepsEnergy few(rt, d, chi, {}, {}, AdjointMethod::unrolled);
  Evaluation e_few = few.evaluate(theta);
  CAPTURE(e_all.unrolled_stats.steps);
  CHECK(e_all.unrolled_stats.interval == 1);
  CHECK(e_all.unrolled_stats.recomputed_steps == 0);
  CHECK(e_few.unrolled_stats.interval > 1);
  CHECK(e_few.unrolled_stats.checkpoint_bytes <= 5 * (chi * chi + chi * d * d * chi) * 8);
  CHECK(e_few.unrolled_stats.recomputed_steps > 0);
  CHECK(e_few.energy == e_all.energy);
  CHECK(bitwise_equal(e_few.gradient, e_all.gradient));
}

TEST_CASE("heisenberg optimize: the element-wise CTMRG phase stops after fixed_point_max_steps when it stalls") {
  // Seed 2's start has an exactly two-fold degenerate corner spectrum at chi = 16: no sign gauge makes its
  // environment an element-wise fixed point, so that phase stalls and must end at its own cap, not the step cap.
  const int d = 2, chi = 16;
  Ctmrg ctm(runtime(), d, chi);
  Tensor a = c4v_symmetrize(random_start(d, 2));
  CtmrgOptions spectrum_only;
  spectrum_only.fixed_point_tolerance = std::numeric_limits<double>::infinity();
  const int spectrum_steps = ctm.converge(a, initial_environment(a, chi), spectrum_only).steps;
  CtmrgOptions capped;
  capped.fixed_point_max_steps = 30;
  CtmrgResult r = ctm.converge(a, initial_environment(a, chi), capped);
  CAPTURE(spectrum_steps);
  CAPTURE(r.fixed_point_change);
  CHECK(r.fixed_point_change > capped.fixed_point_tolerance);
  CHECK(r.steps == spectrum_steps + 30);
}
