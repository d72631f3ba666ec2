// Onsager's exact solution of the square-lattice Ising model (J = 1, k_B = 1, zero field, the infinite lattice):
// ln Z per site, the energy per site u and the specific heat per site c as functions of the inverse temperature β.
// Stage: example code (examples/); depends on nothing but the C++ standard library. The TRG example compares its
// traced, twice-differentiated results against these (examples/ising/Trg.h, docs/ising.md).
//
// With k = 2 sinh 2β / cosh² 2β and its complement k' = |1 − sinh² 2β| / cosh² 2β (= √(1 − k²), written so that it
// loses no digits near the critical point):
//   ln Z / N = ln(2 cosh 2β) + (1/π) ∫₀^{π/2} ln[(1 + √(cos²θ + k'² sin²θ)) / 2] dθ       (tanh-sinh quadrature)
//   u = −coth 2β [1 + (2/π)(2 tanh² 2β − 1) K₁]
//   c = (4/π) (β coth 2β)² {K₁ − E₁ − (1 − tanh² 2β)[π/2 + (2 tanh² 2β − 1) K₁]}
// with K₁ = K(k), E₁ = E(k) the complete elliptic integrals of the first and second kind by the arithmetic-geometric
// mean. At the critical point βc = ln(1 + √2) / 2, u = −√2 and c diverges logarithmically (+inf where k' rounds
// to 0).
#pragma once

namespace einstage::ising {

/// ln(1 + √2) / 2 = 0.44068679350977151...
double critical_beta();

/// The complete elliptic integrals K(k) and E(k) of modulus k, given its complement k' = √(1 − k²) ∈ [0, 1]
/// (K = π / (2 AGM(1, k')), E from the same AGM sequence). K is +inf at k' = 0.
struct EllipticKE {
  double k, e;
};
EllipticKE elliptic_ke(double k_complement);

/// Onsager's ln Z per site, energy per site and specific heat per site at inverse temperature beta > 0.
struct OnsagerValues {
  double lnz, energy, specific_heat;
};
OnsagerValues onsager(double beta);

}  // namespace einstage::ising
