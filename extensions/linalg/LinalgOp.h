// The linear-algebra extension family `einstage.linalg.v1`, compiler side: its payload (which decomposition, and its
// options), the type rule and register_linalg_semantics(), the explicit registration call a module entry point or a
// test makes. Stage: compiler (the runtime half is Lapack.h, the module descriptor Module.h).
//
// One instruction computes every factor of one decomposition; matrices are the first two axes and any further axes
// are batch axes on the right ([M, N, B...], column-major, so each matrix is contiguous). K = min(M, N):
//
//   %1, %2, %3 = einstage.linalg.v1(%0) {eps = 1e-12, full = false, op = svd} : f64[4,3], f64[3], f64[3,3]
//   %4, %5 = einstage.linalg.v1(%0) {op = qr} : f64[4,3], f64[3,3]
//   %6, %7 = einstage.linalg.v1(%a) {eps = 1e-12, op = eigh} : f64[3], f64[3,3]
//   %8 = einstage.linalg.v1(%r) {op = inv_upper} : f64[3,3]
//   %9, %10 = einstage.linalg.v1(%si, %sj) {diagonal = false, eps = 1e-12, op = gap_factors} : f64[4,3], f64[4,3]
//
// - svd: A = U diag(S) Vh with U [M, K, B...], S [K, B...] (real, descending), Vh [K, N, B...]; `full = true` gives
//   U [M, M, B...] and Vh [N, N, B...]. `keep = k` (1 <= k < K, constant M and N, not with full) splits the thin
//   factors into six results, the k kept triplets and the K − k others: U_k [M, k], S_k [k], Vh_k [k, N], then
//   U_r [M, K − k], S_r [K − k], Vh_r [K − k, N] (batch axes appended). The values are those of the thin svd; the
//   point is the AD rule, which writes the tangents of each block with O(M N k) work for the kept one, so a program
//   that reads only the kept triplets (a truncated SVD, as in TRG) differentiates without any K × K temporaries,
//   while the derivatives stay exact (they see every discarded singular value):
//     %1, %2, %3, %4, %5, %6 = einstage.linalg.v1(%0) {eps = 1e-12, full = false, keep = 2, op = svd} : ...
// - qr: A = Q R with Q [M, K, B...] (orthonormal columns) and R [K, N, B...] (upper triangular).
// - eigh: A = V diag(W) Vᴴ for Hermitian A [N, N, B...] (only the lower triangle is read): W [N, B...] real,
//   ascending, V [N, N, B...]. `keep = k` (1 <= k <= N, constant N) computes only the eigenvectors of the k
//   eigenvalues of largest modulus, V [N, k, B...]: W's first a and last b entries (a + b = k, taken from both ends
//   of W, the larger modulus first and the lower end on a tie), in W's order; W is still all N eigenvalues. The
//   values are those of the full eigh (W bit for bit, its columns 0..a-1 and N-b..N-1 to rounding), at a fraction
//   of the back-transformation
//   (Lapack.h); it has no derivative (a truncated CTMRG's forward steps use it, their differentiated step the full
//   eigh):
//     %6, %7 = einstage.linalg.v1(%a) {eps = 1e-12, keep = 2, op = eigh} : f64[3], f64[3,2]
// - inv_upper: the inverse of the upper triangle of a square R [N, N, B...] (one result, upper triangular; the
//   strict lower triangle is not read). qr's AD rule needs R⁻¹ as a differentiable op.
// - gap_factors: the two elementwise factors of svd's AD rule (LinalgAd.h) for singular values s_I [I, B...] and
//   s_J [J, B...] (real), in one pass: H⁺ = (F + G)/2 and H⁻ = (F − G)/2, [I, J, B...], with F_ij the broadened
//   1/(s_J,j − s_I,i) and G_ij the broadened 1/(s_J,j + s_I,i); `diagonal = true` (I = J, the same values) makes F's
//   diagonal zero. svd's rule needs them as a differentiable op; as standard ops they were eleven passes over
//   [I, J] matrices (two broadcasts, nine arithmetic ops) where the Ising TRG's are 240 x 240.
// `eps` (svd, eigh and gap_factors) is the Lorentzian broadening of the AD rules (LinalgAd.h), default 1e-12. Dtypes: f32, f64,
// c64, c128. K needs M and N known: constant extents, or the same symbol for both. Depends on ir only.
#pragma once

#include "extensions/api/Family.h"
#include "ir/Extension.h"

#include <memory>
#include <string>
#include <string_view>

namespace einstage::linalg {

inline constexpr std::string_view kLinalgFamily = "einstage.linalg.v1";
inline constexpr std::string_view kLinalgModule = "einstage.linalg";
inline constexpr double kDefaultEps = 1e-12;

enum class LinalgKind : uint8_t { svd, qr, eigh, inv_upper, gap_factors };
std::string_view name(LinalgKind kind);

/// The attributes of one linalg instruction; the payload is FamilyPayload<LinalgAttrs> (extensions/api/Family.h).
class LinalgAttrs {
 public:
  static constexpr std::string_view kFamily = kLinalgFamily;

  explicit LinalgAttrs(LinalgKind kind, bool full = false, double eps = kDefaultEps, int64_t keep = 0,
                       bool diagonal = false);

  LinalgKind kind() const { return kind_; }
  bool full() const { return full_; }
  double eps() const { return eps_; }
  /// svd: the number of kept triplets of the split form (six results), or 0 (three results); eigh: the number of
  /// eigenvectors computed (those of the eigenvalues of largest modulus), or 0 (all).
  int64_t keep() const { return keep_; }
  /// gap_factors only: whether the operands are the same values (F's diagonal zero).
  bool diagonal() const { return diagonal_; }

  std::string to_text() const;
  std::string to_json() const;
  bool operator==(const LinalgAttrs& other) const;

  /// Readers of to_text() (without braces) and to_json(); errors are ErrorKind::parse naming the attribute.
  static LinalgAttrs parse_text(std::string_view attr_text);
  static LinalgAttrs parse_json(std::string_view json_text);

 private:
  LinalgKind kind_;
  bool full_;
  double eps_;
  int64_t keep_;
  bool diagonal_;
};

using LinalgPayload = FamilyPayload<LinalgAttrs>;

/// The result types (svd: U, S, Vh; qr: Q, R; eigh: W, V; inv_upper: R⁻¹; gap_factors: H⁺, H⁻), checking the
/// operands.
std::vector<TensorType> infer_linalg_types(const LinalgPayload& payload, Types operands, TypeContext& ctx);

/// Registers `einstage.linalg.v1` (readers, type rule, AD rules) in `registry`. Explicit, never from a static
/// initialiser; fails if the family is already registered.
void register_linalg_semantics(ExtensionRegistry& registry);

}  // namespace einstage::linalg
