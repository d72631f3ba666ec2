// The 2D Ising model by Levin–Nave TRG as one traced C++ program of the inverse temperature β, differentiated twice
// by AD: ln Z per site, the energy per site u = −∂(ln Z/N)/∂β and the specific heat c = β² ∂²(ln Z/N)/∂β²
// (issue 17; the algorithm of Liao, Liu, Wang and Xiang, PRX 9, 031041 (2019)). Stage: example code (examples/),
// a user of the public layers: compiler/Trace.h, the einsum and linalg extensions and the Runtime.
//
// The program (docs/ising.md walks it): T[u,l,d,r] = √(λ_u λ_l λ_d λ_r)/2 for even u+l+d+r (λ₀ = 2 cosh β,
// λ₁ = 2 sinh β); `steps` times: m = max|T| (reduce_max of abs), T /= m, ln Z/N += 2⁻ⁿ ln m; Ma = T merged
// (u,l)|(d,r), Mb = T permuted to (l,d,u,r) merged (l,d)|(u,r) (column-major merges: reshape keeps NumPy order="F");
// SVDs keeping the D' leading triplets (linalg::svd with keep = D' when D' < D²: the values of the full SVD, and
// derivative rules that see every discarded singular value but form no D² × D² temporaries); S1 = Ua √Sa, S3 = Va √Sa, S2 = Ub √Sb, S4 = Vb √Sb split to (D, D, D'); T = einsum("xwu,yxl,yzd,wzr->uldr",
// S2, S3, S4, S1); finally ln Z/N += 2⁻ᴺ ln Σ T[x,y,x,y].
//
// Two choices, both exact:
// - m is under stop_gradient. ln Z/N is the same for every choice of the normalisers (a TRG step is homogeneous of
//   degree 2 in T, so dividing by any m is undone by the 2⁻ⁿ ln m terms), hence its derivatives with m held fixed
//   are the true derivatives, and the program differentiates through fewer ops.
// - The data-dependent bond dimension D' = min(D², χ, #(Sa > 1e-15), #(Sb > 1e-15)) is split in two. The static part
//   min(D², χ) is the extent the program slices to (so the shapes are known when tracing and one program serves every
//   β); the data-dependent part is a mask: singular-value modes at or below 1e-15 in Sa or Sb are kept as columns of
//   exact zeros, √s replaced by √(s·k + 1 − k)·k with k = stop_gradient(mask). The values are those of the truncated
//   algorithm (the zero columns add exact zeros to every sum), and no derivative flows through a dropped mode (its
//   guarded root has a finite derivative times k = 0), so the derivatives are those of the truncated algorithm too.
#pragma once

#include "ir/Program.h"
#include "runtime/Runtime.h"

#include <span>
#include <vector>

namespace einstage::ising {

/// Singular values at or below this (of the normalised T, max|T| = 1) are dropped, as in the paper's code.
inline constexpr double kSingularThreshold = 1e-15;

/// The bond dimension of T before each step: D₀ = 2, D_{n+1} = min(D_n², χ) (steps + 1 entries).
std::vector<int64_t> bond_schedule(int chi, int steps);

/// The traced program @ising_trg(%beta: f64[]) -> (f64[]) computing ln Z per site. The registry must provide the
/// einsum and linalg families. chi >= 1, steps in 1..60 (checked: an error names the argument).
Program trace_ising_trg(const ExtensionRegistry* registry, int chi, int steps);

struct TrgValues {
  double lnz, energy, specific_heat;
};

/// The program differentiated once and prepared on a Runtime (which must have the einsum and linalg modules): one
/// run gives ln Z/N, u and c. The second derivative is forward-over-reverse, jvp(value_and_grad(f)); ad::grad of
/// ad::grad gives the same values (tests/ising/ checks both).
class IsingTrg {
 public:
  IsingTrg(const Runtime& runtime, int chi, int steps);
  /// beta > 0 and finite (checked).
  TrgValues evaluate(double beta) const;
  /// evaluate() at every β, results in the order of `betas`. The β values are independent, so they run concurrently:
  /// the Runtime's execution context splits them into one contiguous share per thread, and each evaluation's kernels
  /// then run inline on its thread. Every result is bitwise what evaluate(β) gives (the kernels' results do not
  /// depend on the thread count, and LAPACK runs at the thread count it always uses). Every β is checked first.
  std::vector<TrgValues> evaluate_all(std::span<const double> betas) const;
  const Program& program() const { return program_; }

 private:
  Program program_;
  Executable derivatives_;
  ThreadPool* pool_;  // the Runtime context's (nullptr: one thread); the Executable keeps that context alive
};

}  // namespace einstage::ising
