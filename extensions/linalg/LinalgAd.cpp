// The tangents of svd, eigh, qr and inv_upper as standard ops (see LinalgAd.h for the formulas and conventions).
// Each expression makes at most one instruction-making operand: a call's arguments are evaluated in an order the
// compiler chooses, and that order is the program's instruction order (tests/linalg/golden/ad_rules.ir pins it).
#include "extensions/linalg/LinalgAd.h"

#include "extensions/linalg/LinalgOp.h"

#include <array>

namespace einstage::linalg {

namespace {

// Helpers over batched matrices [P, Q, B...] (batch axes 2.. on the right, as dot_general returns them).
struct Mat {
  Builder& b;

  Axes batch_axes(const Value& x) const {
    Axes axes;
    for (int64_t a = 2; a < x.type.rank(); ++a) axes.push_back(a);
    return axes;
  }
  /// x y, batched.
  Value mm(const Value& x, const Value& y) const { return b.dot_general(x, y, {1}, {0}, batch_axes(x), batch_axes(y)); }
  /// xᴴ.
  Value adj(const Value& x) const {
    Axes perm{1, 0};
    for (int64_t a = 2; a < x.type.rank(); ++a) perm.push_back(a);
    Value t = b.transpose(x, perm);
    return is_complex(x.type.dtype) ? b.conj(t) : t;
  }
  /// A real value in the dtype of `like` (complex when `like` is).
  Value as(const Value& real, const Value& like) const {
    return real.type.dtype == like.type.dtype ? real : b.convert(real, like.type.dtype);
  }
  /// The vector s [K, B...] as a [K, K, B...] matrix constant along axis `along` (0: s_j in column j; 1: s_i).
  Value spread(const Value& s, int64_t along) const {
    std::vector<Dim> shape{s.type.dims[0], s.type.dims[0]};
    shape.insert(shape.end(), s.type.dims.begin() + 1, s.type.dims.end());
    Axes dims{along == 0 ? 1 : 0};
    for (int64_t a = 1; a < s.type.rank(); ++a) dims.push_back(a + 1);
    return b.broadcast_in_dim(s, dims, shape);
  }
  /// x / (x² + eps), elementwise: the broadened (guarded) 1/x.
  Value broadened_inverse(const Value& x, double eps) const {
    const Value floor = b.full(x.type, eps);  // one emitting operand per expression (see the top of the file)
    return b.div(x, b.add(b.mul(x, x), floor));
  }
  /// The broadened 1/(v_j − v_i) over a vector v [K, B...], as [K, K, B...] with a diagonal that is zero by a mask
  /// rather than by 0 / eps: the derivative of x / (x² + eps) at x = 0 is 1/eps, and at second order reverse mode
  /// would send cotangents of size 1/eps into v_i and v_j that cancel only up to rounding.
  Value gap_inverse(const Value& v, double eps) const {
    const Value vj = spread(v, 1);
    const Value diff = b.sub(spread(v, 0), vj);
    const Value eye = b.embed_diag(b.full(v.type, 1.0), 0, 1);
    const Value off_diagonal = b.sub(b.full(diff.type, 1.0), eye);
    return b.mul(broadened_inverse(diff, eps), off_diagonal);
  }
  /// x diag(d): column j of x scaled by d_j (d [K, B...] real, x [P, K, B...]).
  Value scale_columns(const Value& x, const Value& d) const {
    std::vector<Dim> shape = x.type.dims;
    Axes dims{1};
    for (int64_t a = 1; a < d.type.rank(); ++a) dims.push_back(a + 1);
    return b.mul(x, as(b.broadcast_in_dim(d, dims, shape), x));
  }
  /// Re diag(x) of a square batch, in the real dtype.
  Value real_diag(const Value& x) const {
    Value d = b.extract_diag(x, 0, 1);
    return is_complex(d.type.dtype) ? b.real(d) : d;
  }
  Value half(const Value& x) const { return b.mul(x, b.full(x.type, 0.5)); }
  /// A [N, N, B...] mask like `like` (N constant): 1 where row < column (`upper`, diagonal included when `diagonal`)
  /// or row > column (lower), else 0.
  Value triangle(const Value& like, bool upper, bool diagonal, std::string_view op) const {
    const Dim& nd = like.type.dims[0];
    if (!nd.is_constant())
      fail(ErrorKind::unsupported, "the derivative of {} needs a constant matrix extent (got {}); give the matrix "
           "constant extents", op, like.type.to_string());
    const int64_t n = nd.constant();
    std::vector<double> mask(static_cast<size_t>(n * n), 0.0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i)
        if ((upper ? i < j : i > j) || (diagonal && i == j)) mask[static_cast<size_t>(j * n + i)] = 1.0;
    Value c = b.constant(Tensor::from_col_major<double>({n, n}, std::span<const double>(mask)));
    return b.broadcast_in_dim(as(c, like), {0, 1}, like.type.dims);
  }
  /// Columns [start, start + count) of a batched matrix x [P, Q, B...].
  Value columns(const Value& x, int64_t start, const Dim& count) const {
    std::vector<Dim> size = x.type.dims;
    size[1] = count;
    Axes from(size.size(), 0), stride(size.size(), 1);
    from[1] = start;
    return b.slice(x, from, size, stride);
  }
  /// x [P, K, B...] placed at columns [start, start + K) of zeros [P, Q, B...] (the shape of `like`).
  Value place_columns(const Value& x, int64_t start, const Value& like) const {
    Axes from(like.type.dims.size(), 0), stride(like.type.dims.size(), 1);
    from[1] = start;
    return b.pad(x, from, like.type.dims, stride);
  }
  /// The tangent of a square unitary q = [q_K, q_⊥] [P, P, B...] whose first K columns have the tangent dq_k
  /// [P, K, B...]: the completion q_⊥ is not determined by the matrix, so it takes the gauge q_⊥ᴴ dq_⊥ = 0, i.e.
  /// dq_⊥ = −q_K dq_Kᴴ q_⊥ (qᴴ dq stays anti-Hermitian: q_Kᴴ dq_⊥ = −(q_⊥ᴴ dq_K)ᴴ).
  Value complete_unitary(const Value& q, const Value& dq_k, int64_t k) const {
    const int64_t p = q.type.dims[0].constant();
    if (p == k) return dq_k;
    const Value q_k = columns(q, 0, Dim(k)), q_perp = columns(q, k, Dim(p - k));
    const Value dq_perp = b.neg(mm(q_k, mm(adj(dq_k), q_perp)));
    const Value perp = place_columns(dq_perp, k, q);
    return b.add(place_columns(dq_k, 0, q), perp);
  }
  /// gap_factors(s_I, s_J): H⁺ = (F + G)/2 and H⁻ = (F − G)/2 [I, J, B...] (LinalgOp.h), one op.
  std::array<Value, 2> gap_factors(const Value& si, const Value& sj, bool diagonal, double eps) const {
    const std::vector<Value> h = b.extension_results(
        std::make_shared<LinalgPayload>(LinalgKind::gap_factors, false, eps, 0, diagonal), {si, sj});
    return {h[0], h[1]};
  }
  /// inv_upper(r), the differentiable R⁻¹.
  Value inv_upper(const Value& r) const {
    return b.extension_results(std::make_shared<LinalgPayload>(LinalgKind::inv_upper), {r})[0];
  }
};

bool known_greater(const Dim& a, const Dim& bdim) {
  return !(a == bdim) && !(a.is_constant() && bdim.is_constant() && a.constant() <= bdim.constant());
}

// The constant extent of a matrix axis, or an error naming what needs it.
int64_t constant_extent(const Value& a, int axis, std::string_view what) {
  const Dim& d = a.type.dims[static_cast<size_t>(axis)];
  if (!d.is_constant())
    fail(ErrorKind::unsupported, "the derivative of {} needs constant matrix extents (got {}); give the matrix "
         "constant extents", what, a.type.to_string());
  return d.constant();
}

// One column block of the thin svd factors: U_J [M, J, B...], s_J [J, B...], Vh_J [J, N, B...].
struct Block {
  Value u, s, vh;
};
struct BlockTangents {
  Value du, ds, dvh;
};

// Whether block `i` has fewer columns than block `j` (both constant; a symbolic extent counts as not smaller).
bool smaller(const Block& i, const Block& j) {
  const Dim &di = i.s.type.dims[0], &dj = j.s.type.dims[0];
  return di.is_constant() && dj.is_constant() && di.constant() < dj.constant();
}

// Products with an adjoint written as one dot_general (no transpose op): xᴴ y and x yᴴ of batched matrices.
Value adj_mm(Builder& b, const Value& x, const Value& y) {
  const Mat m{b};
  return b.dot_general(is_complex(x.type.dtype) ? b.conj(x) : x, y, {0}, {0}, m.batch_axes(x), m.batch_axes(y));
}
Value mm_adj(Builder& b, const Value& x, const Value& y) {
  const Mat m{b};
  return b.dot_general(x, is_complex(y.type.dtype) ? b.conj(y) : y, {1}, {1}, m.batch_axes(x), m.batch_axes(y));
}

// diag(d) x: row i of x [J, N, B...] scaled by d_i (d [J, B...] real).
Value scale_rows(Builder& b, const Value& x, const Value& d) {
  const Mat m{b};
  Axes dims{0};
  for (int64_t a = 1; a < d.type.rank(); ++a) dims.push_back(a + 1);
  return b.mul(x, m.as(b.broadcast_in_dim(d, dims, x.type.dims), x));
}

// The tangents of column block `j` of the thin factors split into column blocks (LinalgOp.h's keep, or one block for
// the unsplit svd). The K × K matrices of the thin rule (LinalgAd.h) are formed one block pair (I, J) at a time:
// dP_IJ = U_Iᴴ dA V_J, dPᴴ_IJ = Vh_I dAᴴ U_J, F_IJ and G_IJ over s_I against s_J (the diagonal mask only in the
// pair (J, J)), and dU_J = Σ_I U_I X_IJ, dVh_J = Σ_I Y_IJᴴ Vh_I. Block J costs O(M N |J|) and sees every singular
// value, so it is exact whatever the other blocks hold. dPᴴ_IJ is the adjoint of dP_JI = U_Jᴴ dA V_I, so on the
// diagonal pair (J, J), and so with one block, it is dP_JJᴴ; off the diagonal it is formed from whichever of the two
// blocks is smaller: Vh_I (dAᴴ U_J) when |J| <= |I|, else (U_Jᴴ (dA V_I))ᴴ, whose products are block I's own dA V_I
// and dP_JI (CSE merges them). So the tangents of a large discarded block next to a small kept one (a truncated svd
// differentiated twice, as in TRG) need no [N, |J|] product dAᴴ U_J of their own.
BlockTangents svd_block_tangents(Builder& b, const LinalgPayload& p, std::span<const Block> blocks, size_t j,
                                 const Value& a, const Value& da) {
  Mat m{b};
  const Block& bj = blocks[j];
  const Value dav = mm_adj(b, da, bj.vh);                        // dA V_J   [M, J, B...]
  std::optional<Value> dahu;                                     // dAᴴ U_J  [N, J, B...], when a pair needs it
  const Value sinv = m.broadened_inverse(bj.s, p.eps());
  const Dim &rows = a.type.dims[0], &cols = a.type.dims[1];
  const bool tall = known_greater(rows, cols), wide = known_greater(cols, rows);
  std::optional<Value> du, dvh, ds, u_dp, dph_vh;
  auto sum = [&](std::optional<Value>& acc, const Value& x) { acc = acc ? b.add(*acc, x) : x; };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& bi = blocks[i];
    const Value dp = adj_mm(b, bi.u, dav);                       // dP_IJ   [I, J, B...]
    // dPᴴ_IJ = Vh_I dAᴴ U_J = dP_JIᴴ: on the diagonal pair the adjoint of dp, else from the smaller block.
    Value dph;
    if (i == j) {
      dph = m.adj(dp);
    } else if (smaller(bi, bj)) {
      dph = m.adj(adj_mm(b, bj.u, mm_adj(b, da, bi.vh)));
    } else {
      if (!dahu) dahu = adj_mm(b, da, bj.u);
      dph = b.dot_general(bi.vh, *dahu, {1}, {0}, m.batch_axes(bi.vh), m.batch_axes(*dahu));
    }
    // ½(F∘(dP + dPᴴ) ± G∘(dP − dPᴴ)) = H^±∘dP + H^∓∘dPᴴ, with F and G over s_J (columns) against s_I (rows).
    const auto [hp_real, hm_real] = m.gap_factors(bi.s, bj.s, i == j, p.eps());
    const Value hp = m.as(hp_real, dp), hm = m.as(hm_real, dp);
    // One product per statement: a call's arguments are evaluated in an unspecified order (gcc right to left, clang
    // left to right), which would make the program's instruction order depend on the compiler.
    const Value hm_dph = b.mul(hm, dph), hp_dp = b.mul(hp, dp);
    sum(du, m.mm(bi.u, b.add(hp_dp, hm_dph)));
    const Value hp_dph = b.mul(hp, dph), hm_dp = b.mul(hm, dp);
    sum(dvh, adj_mm(b, b.add(hm_dp, hp_dph), bi.vh));
    if (i == j) ds = m.real_diag(dp);
    if (tall) sum(u_dp, m.mm(bi.u, dp));
    if (wide) sum(dph_vh, adj_mm(b, dph, bi.vh));
  }
  if (tall)  // (I − U Uᴴ) dA V_J S_J⁻¹
    du = b.add(*du, m.scale_columns(b.sub(dav, *u_dp), sinv));
  if (wide)  // ((I − V Vᴴ) dAᴴ U_J S_J⁻¹)ᴴ = S_J⁻¹ (U_Jᴴ dA − dPᴴ_Jᴴ Vh)
    dvh = b.add(*dvh, scale_rows(b, b.sub(adj_mm(b, bj.u, da), *dph_vh), sinv));
  return {*du, *ds, *dvh};
}

std::vector<std::optional<Value>> svd_tangents(Builder& b, const Instruction& inst, const LinalgPayload& p,
                                               const Value& a, const Value& da) {
  Mat m{b};
  std::vector<Value> f = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {a});
  if (p.keep() > 0) {  // the six results of the split: the kept block and the rest
    const std::array<Block, 2> blocks{Block{f[0], f[1], f[2]}, Block{f[3], f[4], f[5]}};
    const BlockTangents dk = svd_block_tangents(b, p, blocks, 0, a, da);
    const BlockTangents dr = svd_block_tangents(b, p, blocks, 1, a, da);
    return {dk.du, dk.ds, dk.dvh, dr.du, dr.ds, dr.dvh};
  }
  if (!p.full()) {
    const std::array<Block, 1> thin{Block{f[0], f[1], f[2]}};
    const BlockTangents d = svd_block_tangents(b, p, thin, 0, a, da);
    return {d.du, d.ds, d.dvh};
  }
  // full = true: the thin rule on the first K columns of U and V, then the completions in the gauge of
  // complete_unitary (which keeps every function of the first K triplets, and of the projectors on the rest, exact).
  const int64_t k =
      std::min(constant_extent(a, 0, "svd with full = true"), constant_extent(a, 1, "svd with full = true"));
  const Value vh_full_adj = m.adj(f[2]);
  const Value vh_k = m.adj(m.columns(vh_full_adj, 0, Dim(k)));
  const std::array<Block, 1> thin{Block{m.columns(f[0], 0, Dim(k)), f[1], vh_k}};
  const BlockTangents d = svd_block_tangents(b, p, thin, 0, a, da);
  const Value du = m.complete_unitary(f[0], d.du, k);
  const Value dv = m.complete_unitary(vh_full_adj, m.adj(d.dvh), k);
  return {du, d.ds, m.adj(dv)};
}

std::vector<std::optional<Value>> eigh_tangents(Builder& b, const Instruction& inst, const LinalgPayload& p,
                                                const Value& a, const Value& da) {
  if (p.keep() > 0)
    fail(ErrorKind::invalid_argument, "eigh with keep = {}: operand 0 ({}) has a tangent, but only {} of its {} "
         "eigenvectors are computed and eigh's derivative needs all of them; differentiate the full eigh (leave keep "
         "out) or put the operand under stop_gradient", p.keep(), a.type.to_string(), p.keep(),
         a.type.dims[0].to_string());
  Mat m{b};
  std::vector<Value> f = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {a});
  const Value &w = f[0], &v = f[1];
  const Value sym = m.half(b.add(da, m.adj(da)));
  const Value sym_v = m.mm(sym, v);
  const Value dp = m.mm(m.adj(v), sym_v);
  const Value fm = m.as(m.gap_inverse(w, p.eps()), dp);
  return {m.real_diag(dp), m.mm(v, b.mul(fm, dp))};
}

// Thin qr, M >= N (K = N): with C = Qᴴ dA R⁻¹ and Ω = tril(C, −1) − tril(C, −1)ᴴ + i Im diag(C) (Qᴴ dQ, the
// gauge that keeps diag(R) real), dQ = Q (Ω − C) + dA R⁻¹ and dR = (C − Ω) R.
// Wide qr, M < N (K = M): A = [A₁ A₂] with A₁ square, Q R₁ = A₁ and R₂ = Qᴴ A₂. C and Ω are those of A₁'s qr
// (C = Qᴴ dA₁ R₁⁻¹); Q is square, so dQ = Q Ω, and dR = Qᴴ dA − Ω R (whose first M columns are (C − Ω) R₁).
std::vector<std::optional<Value>> qr_tangents(Builder& b, const Instruction& inst, const Value& a, const Value& da) {
  const Dim &rows = a.type.dims[0], &cols = a.type.dims[1];
  const bool wide = known_greater(cols, rows);
  Mat m{b};
  std::vector<Value> f = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {a});
  const Value &q = f[0], &r = f[1];
  const Value da_square = wide ? m.columns(da, 0, rows) : da;
  const Value dar = m.mm(da_square, m.inv_upper(wide ? m.columns(r, 0, rows) : r));
  const Value c = m.mm(m.adj(q), dar);
  const Value lower = b.mul(c, m.triangle(c, false, false, "qr"));
  Value omega = b.sub(lower, m.adj(lower));
  if (is_complex(c.type.dtype)) {
    const Value d = b.extract_diag(c, 0, 1);
    omega = b.add(omega, b.embed_diag(b.sub(d, b.convert(b.real(d), d.type.dtype)), 0, 1));
  }
  if (wide) {
    const Value dq = m.mm(q, omega);  // a braced list is evaluated in order; a call's arguments are not
    const Value omega_r = m.mm(omega, r);
    return {dq, b.sub(m.mm(m.adj(q), da), omega_r)};
  }
  return {b.add(m.mm(q, b.sub(omega, c)), dar), m.mm(b.sub(c, omega), r)};
}

// H^± = (F ± G)/2 with F = f(D), G = f(P), f(x) = x / (x² + eps), D = s_J − s_I, P = s_J + s_I over the grid:
// dH^± = (f'(D) dD ± f'(P) dP)/2 with f'(x) = (eps − x²) / (x² + eps)², and dF's diagonal zero by the mask when
// `diagonal` (as F's: a 1/eps there would spoil the next order).
std::vector<std::optional<Value>> gap_factor_tangents(Builder& b, const LinalgPayload& p, const Value& si,
                                                      const Value& sj, const std::optional<Value>& dsi,
                                                      const std::optional<Value>& dsj) {
  if (!dsi && !dsj) return {std::nullopt, std::nullopt};
  Mat m{b};
  std::vector<Dim> grid{si.type.dims[0], sj.type.dims[0]};
  grid.insert(grid.end(), sj.type.dims.begin() + 1, sj.type.dims.end());
  Axes along_columns{1}, along_rows{0};
  for (int64_t x = 1; x < sj.type.rank(); ++x) along_columns.push_back(x + 1), along_rows.push_back(x + 1);
  auto columns = [&](const Value& v) { return b.broadcast_in_dim(v, along_columns, grid); };
  auto rows = [&](const Value& v) { return b.broadcast_in_dim(v, along_rows, grid); };
  const Value cj = columns(sj), ri = rows(si);
  const Value d = b.sub(cj, ri), s = b.add(cj, ri);
  const std::optional<Value> tj = dsj ? std::optional<Value>(columns(*dsj)) : std::nullopt;
  const std::optional<Value> ti = dsi ? std::optional<Value>(rows(*dsi)) : std::nullopt;
  const Value dd = tj && ti ? b.sub(*tj, *ti) : tj ? *tj : b.neg(*ti);
  const Value ds = tj && ti ? b.add(*tj, *ti) : tj ? *tj : *ti;
  auto slope = [&](const Value& x) {  // f'(x)
    const Value x2 = b.mul(x, x), den = b.add(x2, b.full(x.type, p.eps()));
    const Value den2 = b.mul(den, den);  // one statement each: argument order is unspecified (see above)
    const Value num = b.sub(b.full(x.type, p.eps()), x2);
    return b.div(num, den2);
  };
  Value df = b.mul(slope(d), dd);
  if (p.diagonal()) {
    const Value eye = b.embed_diag(b.full(si.type, 1.0), 0, 1);
    const Value ones = b.full(df.type, 1.0);
    df = b.mul(df, b.sub(ones, eye));
  }
  const Value dg = b.mul(slope(s), ds);
  return {m.half(b.add(df, dg)), m.half(b.sub(df, dg))};
}

// X = R⁻¹ of the upper triangle: dX = −X triu(dR) X.
std::vector<std::optional<Value>> inv_upper_tangents(Builder& b, const Instruction& inst, const Value& r,
                                                     const Value& dr) {
  Mat m{b};
  const Value x = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {r})[0];
  const Value upper = b.mul(dr, m.triangle(dr, true, true, "inv_upper"));
  return {b.neg(m.mm(x, m.mm(upper, x)))};
}

}  // namespace

std::vector<std::optional<Value>> linearize_linalg(Builder& b, const Instruction& inst, std::span<const Value> primals,
                                                   std::span<const std::optional<Value>> tangents) {
  const auto& p = static_cast<const LinalgPayload&>(*std::get<ExtensionOp>(inst.op).payload);
  const size_t n = inst.results.size();
  if (p.kind() == LinalgKind::gap_factors)
    return gap_factor_tangents(b, p, primals[0], primals[1], tangents[0], tangents[1]);
  if (!tangents[0]) return std::vector<std::optional<Value>>(n);
  switch (p.kind()) {
    case LinalgKind::svd: return svd_tangents(b, inst, p, primals[0], *tangents[0]);
    case LinalgKind::eigh: return eigh_tangents(b, inst, p, primals[0], *tangents[0]);
    case LinalgKind::qr: return qr_tangents(b, inst, primals[0], *tangents[0]);
    case LinalgKind::inv_upper: return inv_upper_tangents(b, inst, primals[0], *tangents[0]);
    case LinalgKind::gap_factors: break;  // above
  }
  EIN_ASSERT(false, "linalg: unknown op");
}

}  // namespace einstage::linalg
