// Variational optimisation of the C4v iPEPS for the Heisenberg antiferromagnet (issue 37): the energy per site and
// its gradient through the converged CTMRG (Ipeps.h; the fixed-point adjoint, compiler/ad/FixedPoint.h), minimised
// by L-BFGS (LBFGSpp, Debian's liblbfgspp-dev, with its line search), and the staggered magnetisation. Stage:
// example code (examples/), a user of the public layers.
//
// The parameters θ are an unconstrained real tensor of A's shape; the state is A = c4v_symmetrize(θ), so the
// gradient in θ is the projection of the gradient in A (the projection is linear and self-adjoint). The energy does
// not depend on A's norm, so neither does anything else here.
#pragma once

#include "compiler/ad/FixedPoint.h"
#include "examples/heisenberg/Ipeps.h"
#include "examples/heisenberg/Unrolled.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace einstage::heisenberg {

/// θ with entries uniform in [-1, 1) from `seed` (SplitMix64), f64[2,D,D,D,D].
Tensor random_parameters(int d, uint64_t seed);

/// random_parameters(d, seed) scaled to unit 2-norm: the default start of `optimize`. The energy does not depend on
/// θ's norm, but L-BFGS's stopping rule and first step do (the gradient scales as 1/|θ|), so every start has one scale.
Tensor random_start(int d, uint64_t seed);

/// The Néel product state (every virtual leg on index 0, spin up in the rotated frame) plus `noise` times
/// random_parameters(d, seed).
Tensor neel_biased_parameters(int d, uint64_t seed, double noise = 0.1);

/// @magnetization(%c, %t, %a) -> (f64[]): |⟨S⟩| per site, sqrt(⟨Sˣ⟩² + ⟨Sᶻ⟩²) from the one-site reduced density
/// matrix (⟨Sʸ⟩ of a real state is 0); in the rotated frame this is the staggered magnetisation.
Program trace_magnetization(const ExtensionRegistry* registry, int d, int chi);

/// How the gradient goes through CTMRG: the fixed-point adjoint at the converged environment (memory independent of
/// the number of CTMRG steps), or reverse mode through every step of a convergence from initial_environment
/// (Unrolled.h; memory grows with the steps).
enum class AdjointMethod { fixed_point, unrolled };

struct Evaluation {
  double energy = 0;
  Tensor gradient;           // dE/dθ, of θ's shape
  int ctmrg_steps = 0;       // steps until the corner spectrum converged (of the fresh start, when there was one)
  bool fresh_start = false;  // CTMRG from the previous environment did not converge; from initial_environment it did
  ad::FixedPointReport adjoint;  // (fixed point only)
  bool unrolled = false;         // the gradient came from the unrolled adjoint (by request, or as the fallback)
  std::string fallback;          // non-empty: the fixed-point adjoint failed with this error and the unrolled one ran
  UnrolledStats unrolled_stats;  // (unrolled only)
};

/// The energy and its gradient for one (D, χ), the programs prepared once on a Runtime with the einsum and linalg
/// modules. Each evaluation starts CTMRG from the environment the previous one converged to (the first from
/// initial_environment), so not thread-safe. A warm start that does not converge within a tenth of the step cap
/// (CTMRG can settle on a cycle from an environment of a distant state) is retried once from initial_environment
/// with the whole cap; only when that fails too is the evaluation an error (with the fresh start's last change).
///
/// With the fixed-point method, an environment the adjoint cannot use (no sign gauge makes it an element-wise fixed
/// point, as when an exactly degenerate corner multiplet rotates from step to step; or GMRES and the Neumann series
/// both fail) falls back to the unrolled adjoint for that evaluation, and Evaluation::fallback says why. The unrolled
/// method starts every evaluation from initial_environment and differentiates every step until the spectrum
/// converges (no element-wise phase: reverse mode does not need a fixed point).
class IpepsEnergy {
 public:
  IpepsEnergy(const Runtime& runtime, int d, int chi, CtmrgOptions ctmrg = {}, ad::FixedPointOptions adjoint = {},
              AdjointMethod method = AdjointMethod::fixed_point);
  Evaluation evaluate(const Tensor& theta);
  /// The energy and the staggered magnetisation (no gradient; CTMRG converged in the corner spectrum only, both
  /// being gauge-invariant).
  std::pair<double, double> measure(const Tensor& theta);
  const Ctmrg& ctmrg() const { return ctmrg_; }

 private:
  // `elementwise`: also the element-wise phase (the fixed-point adjoint needs it; measure does not).
  CtmrgResult converge(const Tensor& a, bool* fresh = nullptr, bool elementwise = true);
  // ∂E/∂a by the unrolled adjoint from initial_environment; fills e's energy, steps and unrolled fields.
  Tensor unrolled_gradient(const Tensor& a, Evaluation& e);

  const Runtime& runtime_;
  Ctmrg ctmrg_;
  CtmrgOptions ctmrg_options_;
  Executable energy_grad_, magnetization_;
  ad::FixedPointAdjoint adjoint_;
  AdjointMethod method_;
  std::optional<UnrolledGradient> unrolled_;  // prepared on first use
  std::optional<CtmEnvironment> last_;
};

struct Progress {
  int evaluation = 0;
  double energy = 0, gradient_norm = 0, seconds = 0;
  int ctmrg_steps = 0;
  int adjoint_iterations = 0;  // GMRES (or Neumann) iterations of the fixed-point adjoint
  bool fresh_start = false;    // CTMRG was restarted from initial_environment (Evaluation::fresh_start)
  bool unrolled = false;       // the gradient came from the unrolled adjoint (Evaluation::unrolled)
  std::string fallback;        // Evaluation::fallback
  std::string rejected;        // non-empty: this trial point was rejected (energy 1), with the error that said why
};

struct OptimizeOptions {
  int d = 2, chi = 16;
  uint64_t seed = 1;
  int max_iterations = 200;          // L-BFGS iterations
  /// Stop when |g| |θ| <= this (scale-free: E(sθ) = E(θ), so g(sθ) = g(θ) / s). LBFGSpp's test is |g| <= epsilon;
  /// it is given this / |θ₀|, and |θ| grows only slowly from there (g is orthogonal to θ).
  double gradient_tolerance = 1e-7;
  /// L-BFGS's memory (LBFGSpp's m, the correction pairs kept). LBFGSpp's default of 6 left D = 3 creeping down at
  /// ~1e-7 per iteration 2.5e-4 above the optimum: the landscape is ill-conditioned, and more pairs pay (peps-torch
  /// and torch.optim.LBFGS keep 100).
  int lbfgs_memory = 30;
  CtmrgOptions ctmrg;
  ad::FixedPointOptions adjoint;
  AdjointMethod method = AdjointMethod::fixed_point;
  std::function<void(const Progress&)> progress;  // called after every evaluation (each line-search trial too)
};

struct OptimizeResult {
  Tensor theta;  // the optimised parameters; A = c4v_symmetrize(theta)
  double energy = 0, magnetization = 0, seconds = 0;
  int iterations = 0, evaluations = 0;  // iterations: L-BFGS's count when it finished (0 when it stopped early)
  std::string stop_reason;               // empty, or why LBFGSpp stopped early (its line search's message)
};

/// L-BFGS from `start` (default: random_start(d, seed)). A trial point whose CTMRG or fixed-point adjoint
/// does not converge is rejected (reported through `progress`, energy 1) and the line search steps back; at the first
/// point that is an error. A line search that fails after progress ends the run with the best point so far and
/// LBFGSpp's reason in stop_reason.
OptimizeResult optimize(const Runtime& runtime, const OptimizeOptions& options, const Tensor* start = nullptr);

}  // namespace einstage::heisenberg
