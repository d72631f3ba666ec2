// The AD rules of `einstage.linalg.v1`: one linearize_results rule that writes the tangents of the factors as
// standard ops (dot_general with batch axes, elementwise arithmetic, conj / real, extract_diag) of the primal factors
// and the operand's tangent. Stage: compiler side of the linalg extension; depends on ir (Builder,
// ExtensionSemantics) and LinalgOp.h, not on compiler/ or runtime/.
//
// Why no transpose rule: the tangents are linear combinations of standard ops, and reverse mode transposes those
// with their own rules; the decomposition itself is never linear in a tangent. Because the rule is plain IR, it is
// differentiable again: grad of grad through svd differentiates these ops and the svd they read (issue 17).
// The primal factors are read by emitting the same decomposition again; CSE merges it with the original.
//
// Conventions (docs/ad.md, "Linear algebra"): with dP = Uᴴ dA V, D_ij = s_j − s_i, P_ij = s_j + s_i,
//   F = D / (D² + ε)  (the Lorentzian-broadened 1/(s_j − s_i), zero on the diagonal),
//   G = P / (P² + ε)  (the broadened 1/(s_j + s_i); its diagonal is the guarded 1/(2 s_i)),
//   dS = Re diag(dP),  Uᴴ dU = ½(F∘(dP + dPᴴ) + G∘(dP − dPᴴ)),  Vᴴ dV = ½(F∘(dP + dPᴴ) − G∘(dP − dPᴴ)),
// computed as Uᴴ dU = H⁺∘dP + H⁻∘dPᴴ and Vᴴ dV = H⁻∘dP + H⁺∘dPᴴ with H± = (F ± G)/2 from the family's op
// gap_factors (one pass; its own rule: dH± = (f'(D) dD ± f'(P) dP)/2, f(x) = x / (x² + ε)),
// plus the projector terms (I − U Uᴴ) dA V S⁻¹ for U when M > N and (I − V Vᴴ) dAᴴ U S⁻¹ for V when N > M (S⁻¹ the
// guarded s / (s² + ε)). The diagonal of the G term is the complex gauge term, split evenly between U and V.
// eigh: dP = Vᴴ sym(dA) V with sym(dA) = (dA + dAᴴ)/2, dW = Re diag(dP), Vᴴ dV = F∘dP (F over the eigenvalues).
// The diagonal of every F is zero by a mask, not by 0 / eps (whose derivative, 1/eps, would spoil second order).
// qr (M >= N): C = Qᴴ dA R⁻¹, Ω = tril(C, −1) − tril(C, −1)ᴴ + i Im diag(C), dQ = Q (Ω − C) + dA R⁻¹,
// dR = (C − Ω) R, with R⁻¹ the family's own differentiable inv_upper op (dX = −X triu(dR) X). The triangle masks
// need a constant K. Wide qr (M < N): the rule of the square qr of the first M columns, dQ = Q Ω, dR = Qᴴ dA − Ω R.
// svd with keep = k (six results): the same rule one column block J at a time (dP_IJ = U_Iᴴ dA V_J, dPᴴ_IJ =
// Vh_I dAᴴ U_J = dP_JIᴴ, formed from the smaller of the two blocks, F_IJ and G_IJ per pair of blocks), so the kept
// block costs O(M N k) and is still exact: the tangents are those of the thin svd followed by a slice. The unsplit
// thin rule is the one-block case.
// svd with full = true: the thin rule for the first K columns, and the completions U_⊥, V_⊥ (not determined by A)
// in the gauge U_⊥ᴴ dU_⊥ = 0, dU_⊥ = −U_K dU_Kᴴ U_⊥; it needs constant M and N.
#pragma once

#include "ir/Extension.h"

#include <optional>
#include <span>
#include <vector>

namespace einstage::linalg {

/// The family's LinearizeResultsRule (registered by register_linalg_semantics).
std::vector<std::optional<Value>> linearize_linalg(Builder& b, const Instruction& inst, std::span<const Value> primals,
                                                   std::span<const std::optional<Value>> tangents);

}  // namespace einstage::linalg
