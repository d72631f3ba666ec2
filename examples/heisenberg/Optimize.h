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

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace einstage::heisenberg {

/// θ with entries uniform in [-1, 1) from `seed` (SplitMix64), f64[2,D,D,D,D].
Tensor random_parameters(int d, uint64_t seed);

/// The Néel product state (every virtual leg on index 0, spin up in the rotated frame) plus `noise` times
/// random_parameters(d, seed): the start the optimisation reaches the D = 2 optimum from. (From a purely random
/// start L-BFGS may wander into states whose CTMRG cycles instead of converging; those trial points are rejected,
/// but the run can stall there.)
Tensor neel_biased_parameters(int d, uint64_t seed, double noise = 0.1);

/// @magnetization(%c, %t, %a) -> (f64[]): |⟨S⟩| per site, sqrt(⟨Sˣ⟩² + ⟨Sᶻ⟩²) from the one-site reduced density
/// matrix (⟨Sʸ⟩ of a real state is 0); in the rotated frame this is the staggered magnetisation.
Program trace_magnetization(const ExtensionRegistry* registry, int d, int chi);

struct Evaluation {
  double energy = 0;
  Tensor gradient;           // dE/dθ, of θ's shape
  int ctmrg_steps = 0;       // steps until the corner spectrum converged
  ad::FixedPointReport adjoint;
};

/// The energy and its gradient for one (D, χ), the programs prepared once on a Runtime with the einsum and linalg
/// modules. Each evaluation starts CTMRG from the environment the previous one converged to (the first from
/// initial_environment), so not thread-safe.
class IpepsEnergy {
 public:
  IpepsEnergy(const Runtime& runtime, int d, int chi, CtmrgOptions ctmrg = {}, ad::FixedPointOptions adjoint = {});
  Evaluation evaluate(const Tensor& theta);
  /// The energy and the staggered magnetisation (no gradient).
  std::pair<double, double> measure(const Tensor& theta);
  const Ctmrg& ctmrg() const { return ctmrg_; }

 private:
  CtmrgResult converge(const Tensor& a);

  const Runtime& runtime_;
  Ctmrg ctmrg_;
  CtmrgOptions ctmrg_options_;
  Executable energy_grad_, magnetization_;
  ad::FixedPointAdjoint adjoint_;
  std::optional<CtmEnvironment> last_;
};

struct Progress {
  int evaluation = 0;
  double energy = 0, gradient_norm = 0, seconds = 0;
  int ctmrg_steps = 0;
  int adjoint_iterations = 0;  // GMRES (or Neumann) iterations of the fixed-point adjoint
  std::string rejected;        // non-empty: this trial point was rejected (energy 1), with the error that said why
};

struct OptimizeOptions {
  int d = 2, chi = 16;
  uint64_t seed = 1;
  int max_iterations = 200;          // L-BFGS iterations
  double gradient_tolerance = 1e-7;  // stop when |g| <= this * max(1, |θ|) (LBFGSpp's epsilon)
  CtmrgOptions ctmrg;
  ad::FixedPointOptions adjoint;
  std::function<void(const Progress&)> progress;  // called after every evaluation (each line-search trial too)
};

struct OptimizeResult {
  Tensor theta;  // the optimised parameters; A = c4v_symmetrize(theta)
  double energy = 0, magnetization = 0, seconds = 0;
  int iterations = 0, evaluations = 0;  // iterations: L-BFGS's count when it finished (0 when it stopped early)
  std::string stop_reason;               // empty, or why LBFGSpp stopped early (its line search's message)
};

/// L-BFGS from `start` (default: neel_biased_parameters(d, seed)). A trial point whose CTMRG or fixed-point adjoint
/// does not converge is rejected (reported through `progress`, energy 1) and the line search steps back; at the first
/// point that is an error. A line search that fails after progress ends the run with the best point so far and
/// LBFGSpp's reason in stop_reason.
OptimizeResult optimize(const Runtime& runtime, const OptimizeOptions& options, const Tensor* start = nullptr);

}  // namespace einstage::heisenberg
