// The fixed-point adjoint: the vector-Jacobian product of a converged iteration x* = f(x*, θ) with respect to θ,
// computed from one step instead of from every iteration. By the implicit function theorem
// θ̄ = (∂f/∂θ)ᵀ w with w the solution of the adjoint system (I − ∂f/∂x)ᵀ w = x̄, which is solved matrix-free with
// GMRES (Eigen's unsupported IterativeSolvers), falling back to the truncated Neumann series w = Σ_k (∂f/∂x)ᵀᵏ x̄;
// each solver step is one run of the transposed linearisation of the step at x*. Memory is that of one step (its
// residuals) whatever the number of forward iterations; the forward loop is the caller's. Stage: compiler (AD);
// depends on ir only: programs are run through a ProgramPreparer the caller passes (`preparer_of(runtime)` makes
// one from a Runtime without compiler/ including runtime/). docs/ad.md, "Fixed points", has the conventions.
//
//   Program step = ...;                                  // @step(%x: f64[n], %a: f64[n,n]) -> (f64[n])
//   ad::FixedPointAdjoint adjoint(step, {0}, {1}, &rt.registry(), ad::preparer_of(rt));
//   ad::FixedPointVjp r = adjoint.vjp({x_star, a}, {x_bar});   // r.cotangents[0] = ā; r.report says how
#pragma once

#include "ir/Extension.h"
#include "ir/Program.h"
#include "ir/Tensor.h"

#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace einstage::ad {

/// A program prepared to run on concrete inputs (one per parameter); returns its outputs.
using PreparedProgram = std::function<std::vector<Tensor>(std::span<const Tensor>)>;
/// Prepares a program once; the result is run many times.
using ProgramPreparer = std::function<PreparedProgram(const Program&)>;

/// A ProgramPreparer from anything with `prepare(program)` returning an object with `run(std::span<const Tensor>)`:
/// a Runtime (runtime/Runtime.h). `rt` must outlive the preparer and what it prepares.
template <class RuntimeLike>
ProgramPreparer preparer_of(const RuntimeLike& rt) {
  return [&rt](const Program& program) -> PreparedProgram {
    auto exe = rt.prepare(program);
    return [exe](std::span<const Tensor> inputs) { return exe.run(inputs); };
  };
}

/// What to do when neither solver reaches `tolerance`.
enum class FixedPointFailure {
  throw_error,  // an einstage::Error (ErrorKind::runtime) naming both solvers' residuals (the default)
  report,       // return the best iterate with report.converged = false and report.message set; the caller must look
};

enum class FixedPointMethod { none, gmres, neumann };
std::string_view to_string(FixedPointMethod method);

struct FixedPointOptions {
  /// Relative residual of the adjoint system, ‖x̄ − (I − ∂f/∂x)ᵀ w‖ / ‖x̄‖, that counts as solved; checked on the
  /// true residual after either solver (one more step run), not on a solver's own estimate.
  double tolerance = 1e-10;
  /// GMRES: total iterations (one step run each) and the Krylov dimension before a restart. 0 iterations skips GMRES.
  int gmres_max_iterations = 200;
  int gmres_restart = 30;
  /// The Neumann series, tried when GMRES does not reach `tolerance`: terms at most (one step run each). It converges
  /// when every eigenvalue of ∂f/∂x has modulus below 1 (a contracting iteration); 0 disables the fallback.
  int neumann_max_iterations = 1000;
  /// ‖f(x, θ) − x‖ / ‖x‖ over the state parameters above which the inputs are not taken for a fixed point (the
  /// adjoint is exact only there): an error, whatever `on_failure` says. Infinity skips the check.
  double fixed_point_tolerance = 1e-6;
  FixedPointFailure on_failure = FixedPointFailure::throw_error;
};

/// How the adjoint system was solved. Norms are 2-norms over all state tensors (complex entries count as two reals).
struct FixedPointReport {
  bool converged = false;
  FixedPointMethod method = FixedPointMethod::none;  // the solver whose result was returned
  double fixed_point_residual = 0;                   // ‖f(x, θ) − x‖ / ‖x‖ at the given inputs
  int gmres_iterations = 0;
  double gmres_residual = -1;                        // true relative residual after GMRES; -1 when it did not run
  int neumann_iterations = 0;
  double neumann_residual = -1;                      // true relative residual after the series; -1 when not run
  double residual = 0;                               // the returned w's true relative residual
  int step_runs = 0;                                 // runs of the transposed step (the cost of the solve)
  std::string message;                               // empty when converged; the error text otherwise
};

struct FixedPointVjp {
  std::vector<Tensor> cotangents;  // one per `wrt` entry: (∂f/∂θ)ᵀ w, of that parameter's type
  std::vector<Tensor> adjoint;     // w, one per state parameter
  FixedPointReport report;
};

/// The fixed-point adjoint of one step program. `step`'s first outputs are the new values of its state parameters
/// `state` (parameter indices, in that order, same types); further outputs (a convergence measure, say) are ignored.
/// `wrt` are the parameters θ to differentiate (disjoint from `state`); any other parameter is held fixed. The
/// constructor builds and prepares three programs once: the step's primal part (outputs and residuals at x*), and
/// the two halves of its transposed linearisation, x̄-part and θ̄-part. Where the fixed point is defined only up to
/// a gauge, the step must fix the gauge so that the iteration converges element-wise.
class FixedPointAdjoint {
 public:
  FixedPointAdjoint(const Program& step, std::span<const int> state, std::span<const int> wrt,
                    const ExtensionRegistry* registry, ProgramPreparer prepare, FixedPointOptions options = {});
  FixedPointAdjoint(const Program& step, std::initializer_list<int> state, std::initializer_list<int> wrt,
                    const ExtensionRegistry* registry, ProgramPreparer prepare, FixedPointOptions options = {})
      : FixedPointAdjoint(step, std::span<const int>(state.begin(), state.size()),
                          std::span<const int>(wrt.begin(), wrt.size()), registry, std::move(prepare), options) {}

  /// θ̄ for the cotangents `state_cotangents` (x̄, one per state parameter, of its input's shape and dtype) at
  /// `inputs` (one per step parameter, the state ones at the fixed point).
  FixedPointVjp vjp(std::span<const Tensor> inputs, std::span<const Tensor> state_cotangents) const;
  FixedPointVjp vjp(std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> state_cotangents) const {
    return vjp(std::span<const Tensor>(inputs.begin(), inputs.size()),
               std::span<const Tensor>(state_cotangents.begin(), state_cotangents.size()));
  }

  const FixedPointOptions& options() const { return options_; }
  void set_options(const FixedPointOptions& options);
  /// The programs it runs: primal (step parameters -> new states, residuals), state_adjoint (residuals, w -> the
  /// state cotangents (∂f/∂x)ᵀ w), wrt_adjoint (residuals, w -> (∂f/∂θ)ᵀ w).
  const Program& primal_program() const { return primal_; }
  const Program& state_adjoint_program() const { return state_adjoint_; }
  const Program& wrt_adjoint_program() const { return wrt_adjoint_; }

 private:
  std::string name_;
  std::vector<int> state_, wrt_;
  std::vector<TensorType> param_types_;
  std::vector<std::string> param_names_;
  int num_residuals_ = 0;
  Program primal_, state_adjoint_, wrt_adjoint_;
  PreparedProgram run_primal_, run_state_adjoint_, run_wrt_adjoint_;
  FixedPointOptions options_;
};

}  // namespace einstage::ad
