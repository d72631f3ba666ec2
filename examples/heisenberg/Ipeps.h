// The square-lattice Heisenberg antiferromagnet by a C4v-symmetric single-site iPEPS (issue 37; Liao, Liu, Wang,
// Xiang, PRX 9, 031041 (2019)), first part: the ansatz, the traced C4v CTMRG step and the energy per site from the
// environment. Stage: example code (examples/), a user of the public layers: compiler/Trace.h, compiler/ad, the einsum
// and linalg extensions and the Runtime.
//
// - The state: one real tensor A[s, u, l, d, r] (physical s of dimension 2, bond dimension D) on every site, projected
//   onto the A1 representation of C4v acting on its virtual legs (`c4v_symmetrize`). The sublattice rotation (a π
//   rotation about y on one sublattice) is folded into the bond Hamiltonian, H = −SˣSˣ + SʸSʸ − SᶻSᶻ (real), so the
//   Néel state is the product state |↑↑…⟩ and one tensor describes it.
// - The double layer a[U, L, D, R] = Σ_s A[s,u,l,d,r] A[s,u',l',d',r'], each leg (u, u') merged with the ket index
//   fastest (column-major), extent D².
// - One C4v CTMRG step on the corner C[χ, χ] and the edge T[χ, D², χ] (both symmetric in their χ legs): the enlarged
//   corner M[(p,d),(q,r)] = Σ C[x,y] T[x,l,p] T[y,u,q] a[u,l,d,r], symmetrised; its eigendecomposition (eigh) and
//   the eigenvectors P of the χ eigenvalues of largest modulus, in ascending order of the eigenvalue (symmetric
//   corners often have pairs ±λ, which an SVD would mix), fewer when the χ-th and the next are one multiplet (moduli
//   within 1e-6, relative): the whole multiplet is dropped and its columns of P are zero, as are those of eigenvalues
//   below 1e-8 of the largest (rounding noise, whose eigenvectors are not reproducible); each column's sign fixed by
//   its overlap with a fixed generic vector and then multiplied by the step's `gauge` input (±1 per column, ones
//   while iterating); C' = Pᵀ M P, T' = Pᵀ (T a) P, symmetrised, normalised to unit Frobenius norm, T's overall sign
//   fixed by a generic overlap too. Outputs (C', T', the kept eigenvalues normalised).
// - The gauge. The column signs are a gauge (C and T change by T -> S T S, the physics does not), and a rule on the
//   step's output alone cannot be covariant with the gauge of its input: the iteration with gauge = ones converges
//   in every gauge-invariant quantity (the corner spectrum, the energy) but may settle on a period-2 orbit T, S T S.
//   `Ctmrg::converge` iterates on the spectrum, then on with each output brought back to its input's gauge by the
//   signs S closest to it, until the environment converges element-wise; with gauge = S the step has the converged
//   environment as an element-wise fixed point, which is what ad::FixedPointAdjoint needs (state {C, T}, wrt {a},
//   the gauge held fixed: it is piecewise constant). Exactly degenerate eigenvalues (multiplets) leave a rotation
//   inside each multiplet that signs cannot fix: such an environment does not converge element-wise.
// - The energy per site: 2 Tr(ρ H) / Tr ρ with ρ the nearest-neighbour two-site reduced density matrix contracted
//   from four corners, six edges and the ket and bra tensors of the two sites (one einsum of 14 operands).
#pragma once

#include "compiler/Trace.h"
#include "ir/Program.h"
#include "ir/Tensor.h"
#include "runtime/Runtime.h"

#include <cstdint>
#include <functional>

namespace einstage::heisenberg {

/// The bond Hamiltonian with the sublattice rotation folded in, H[s1, s2, s1', s2'] = ⟨s1 s2| H |s1' s2'⟩
/// (f64[2,2,2,2]):
/// −SˣSˣ + SʸSʸ − SᶻSᶻ, whose eigenvalues are those of S·S (−3/4 once, 1/4 three times).
Tensor rotated_bond_hamiltonian();

/// The A1 projection of A[s, u, l, d, r] (f64[2, D, D, D, D]): the average of A over the eight elements of C4v acting
/// on the virtual legs (u, l, d, r) as the symmetries of a square. Idempotent; fails naming a wrong rank or dtype.
Tensor c4v_symmetrize(const Tensor& a);
/// The same, traced (the average of the eight transposes).
TracedTensor c4v_symmetrize(const TracedTensor& a);

/// a[U, L, D, R] (extent D² each, ket index fastest) from A[s, u, l, d, r].
TracedTensor double_layer(TraceContext& ctx, const TracedTensor& a);

/// Which program of the CTMRG step to trace. `differentiable`: the full eigh of the enlarged corner, whose
/// derivative (written out for the kept columns) the fixed-point and unrolled adjoints use. `forward`: eigh with
/// keep = χ (LinalgOp.h), only the eigenvectors of the χ largest moduli computed and back-transformed, and no
/// derivative term; its outputs are the differentiable step's to rounding (the same eigenvalues and selection, the
/// kept eigenvectors back-transformed by GEMMs over fewer columns; tests/heisenberg), at two thirds of the eigh's
/// time at D = 3, χ = 54 (docs/ipeps.md). Ctmrg::converge iterates it; it cannot be differentiated.
enum class StepKind { differentiable, forward };

/// @ctmrg_step(%c: f64[chi,chi], %t: f64[chi,D²,chi], %a: f64[2,D,D,D,D], %gauge: f64[chi]) -> (f64[chi,chi],
/// f64[chi,D²,chi], f64[chi]): one C4v CTMRG step (above) for a C4v-symmetric A. The registry must provide einsum
/// and linalg.
/// d >= 1, chi >= 1 (checked).
Program trace_ctmrg_step(const ExtensionRegistry* registry, int d, int chi,
                         StepKind kind = StepKind::differentiable);

/// @energy(%c, %t, %a) -> (f64[]): the energy per site 2 Tr(ρ H) / Tr ρ of a C4v-symmetric A in the environment
/// (C, T).
Program trace_energy(const ExtensionRegistry* registry, int d, int chi);

/// The environment (C [χ, χ], T [χ, D², χ]) to start CTMRG from.
struct CtmEnvironment {
  Tensor c, t;
};
/// @unrolled_energy(%c, %t, %a, %gauge) -> (f64[]): `steps` CTMRG steps from (C, T) with the given gauge, then the
/// energy per site: the program whose reverse-mode gradient is the unrolled alternative to the fixed-point adjoint
/// (it keeps every step's residuals, so its backward memory grows with `steps`). From a converged environment its
/// gradient in `a` is the fixed-point gradient with the Neumann series truncated after `steps` terms.
Program trace_unrolled_energy(const ExtensionRegistry* registry, int d, int chi, int steps);

/// x + y element-wise for two f64 tensors of one shape (host-side sums of gradient parts; the shapes are the caller's).
Tensor add_f64(const Tensor& x, const Tensor& y);

/// The open-boundary start: the double layer with its outer legs closed by b = vec(identity) on (ket, bra),
/// C0[d, r] = Σ b_u b_l a[u, l, d, r] and T0[u, r, d] = Σ b_l a[u, l, d, r], zero-padded from D² to χ and
/// normalised. It is even under the ket-bra swap, as the fixed point is (a random start has an odd part that
/// alternates in sign from step to step and never converges element-wise). Fails when chi < D² or the boundary is
/// zero or not finite.
CtmEnvironment initial_environment(const Tensor& a, int chi);

struct CtmrgOptions {
  int max_steps = 2000;
  /// Converged when the normalised corner spectrum (gauge-invariant) changes by at most this in a step.
  double tolerance = 1e-10;
  /// Then, with the gauge read, iterated on (within max_steps) until no element of C or T (unit norm) changes by
  /// more than this in a step: the spectrum is stationary in the eigenvectors, so its convergence to ε leaves the
  /// environment only ~√ε from the fixed point, and the fixed-point adjoint's accuracy is that distance.
  double fixed_point_tolerance = 1e-11;
  /// The element-wise phase's own step cap (within max_steps). It converges geometrically or not at all: an exactly
  /// degenerate corner multiplet (near an optimum with U(1) symmetry) stalls it at a change that more steps do not
  /// lower, and D = 2, chi = 16 spent 2000 steps, a third of a whole optimisation, there.
  int fixed_point_max_steps = 200;
};

struct CtmrgResult {
  CtmEnvironment env;
  Tensor gauge;                // f64[chi]: the signs with which env is an element-wise fixed point of the step
  int steps = 0;               // steps in all (until the spectrum converged, then element-wise with the gauge)
  double spectrum_change = 0;  // the last step's change of the normalised corner spectrum
  double fixed_point_change = 0;  // max |step(env, gauge) − env| element-wise: at most fixed_point_tolerance unless
                                  // the step cap ended the element-wise phase
};

/// The CTMRG step and the energy prepared on a Runtime (with the einsum and linalg modules).
class Ctmrg {
 public:
  Ctmrg(const Runtime& runtime, int d, int chi);
  /// Iterates the step from `start` for the C4v-symmetric `a` until the corner spectrum converges, then finds the
  /// gauge (above); fails naming the last change when the spectrum does not converge within options.max_steps.
  /// `on_step`, when given, sees every step's input environment and gauge input in order (the unrolled adjoint's
  /// checkpoints, Unrolled.h): running the forward step on them reproduces the iteration bit for bit.
  using StepObserver = std::function<void(const CtmEnvironment& input, const Tensor& gauge)>;
  CtmrgResult converge(const Tensor& a, CtmEnvironment start, const CtmrgOptions& options = {},
                       const StepObserver& on_step = {}) const;
  double energy(const CtmEnvironment& env, const Tensor& a) const;
  /// The differentiable step (the adjoints'), and the forward one that converge() runs (StepKind).
  const Program& step_program() const { return step_; }
  const Program& forward_program() const { return forward_; }
  const Program& energy_program() const { return energy_; }
  int d() const { return d_; }
  int chi() const { return chi_; }

 private:
  int d_, chi_;
  Program step_, forward_, energy_;
  Executable run_forward_, run_energy_;
};

}  // namespace einstage::heisenberg
