// The tangents of svd, eigh, qr and inv_upper as standard ops (see LinalgAd.h for the formulas and conventions).
#include "extensions/linalg/LinalgAd.h"

#include "extensions/linalg/LinalgOp.h"

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
    return b.div(x, b.add(b.mul(x, x), b.full(x.type, eps)));
  }
  /// The broadened 1/(v_j − v_i) over a vector v [K, B...], as [K, K, B...] with a diagonal that is zero by a mask
  /// rather than by 0 / eps: the derivative of x / (x² + eps) at x = 0 is 1/eps, and at second order reverse mode
  /// would send cotangents of size 1/eps into v_i and v_j that cancel only up to rounding.
  Value gap_inverse(const Value& v, double eps) const {
    const Value diff = b.sub(spread(v, 0), spread(v, 1));
    const Value eye = b.embed_diag(b.full(v.type, 1.0), 0, 1);
    return b.mul(broadened_inverse(diff, eps), b.sub(b.full(diff.type, 1.0), eye));
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
  /// inv_upper(r), the differentiable R⁻¹.
  Value inv_upper(const Value& r) const {
    return b.extension_results(std::make_shared<LinalgPayload>(LinalgKind::inv_upper), {r})[0];
  }
};

bool known_greater(const Dim& a, const Dim& bdim) {
  return !(a == bdim) && !(a.is_constant() && bdim.is_constant() && a.constant() <= bdim.constant());
}

std::vector<std::optional<Value>> svd_tangents(Builder& b, const Instruction& inst, const LinalgPayload& p,
                                               const Value& a, const Value& da) {
  if (p.full())
    fail(ErrorKind::unsupported, "svd with full = true has no derivative rule (the columns past min(M, N) are not "
         "determined by the matrix); differentiate the thin svd (full = false) instead");
  Mat m{b};
  std::vector<Value> f = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {a});
  const Value &u = f[0], &s = f[1], &vh = f[2];
  const Value v = m.adj(vh);
  const Value dav = m.mm(da, v);        // dA V        [M, K, B...]
  const Value dp = m.mm(m.adj(u), dav);  // Uᴴ dA V    [K, K, B...]
  const Value dph = m.adj(dp);
  const Value sj = m.spread(s, 0), si = m.spread(s, 1);
  const Value fm = m.as(m.gap_inverse(s, p.eps()), dp);
  const Value gp = m.as(m.broadened_inverse(b.add(sj, si), p.eps()), dp);
  const Value sym = b.mul(fm, b.add(dp, dph));
  const Value skew = b.mul(gp, b.sub(dp, dph));
  Value du = m.mm(u, m.half(b.add(sym, skew)));
  Value dv = m.mm(v, m.half(b.sub(sym, skew)));
  const Value sinv = m.broadened_inverse(s, p.eps());
  const Dim &rows = a.type.dims[0], &cols = a.type.dims[1];
  if (known_greater(rows, cols))  // (I − U Uᴴ) dA V S⁻¹
    du = b.add(du, m.scale_columns(b.sub(dav, m.mm(u, dp)), sinv));
  if (known_greater(cols, rows))  // (I − V Vᴴ) dAᴴ U S⁻¹
    dv = b.add(dv, m.scale_columns(b.sub(m.mm(m.adj(da), u), m.mm(v, dph)), sinv));
  return {du, m.real_diag(dp), m.adj(dv)};
}

std::vector<std::optional<Value>> eigh_tangents(Builder& b, const Instruction& inst, const LinalgPayload& p,
                                                const Value& a, const Value& da) {
  Mat m{b};
  std::vector<Value> f = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {a});
  const Value &w = f[0], &v = f[1];
  const Value sym = m.half(b.add(da, m.adj(da)));
  const Value dp = m.mm(m.adj(v), m.mm(sym, v));
  const Value fm = m.as(m.gap_inverse(w, p.eps()), dp);
  return {m.real_diag(dp), m.mm(v, b.mul(fm, dp))};
}

// Thin qr, M >= N (K = N): with C = Qᴴ dA R⁻¹ and Ω = tril(C, −1) − tril(C, −1)ᴴ + i Im diag(C) (Qᴴ dQ, the
// gauge that keeps diag(R) real), dQ = Q (Ω − C) + dA R⁻¹ and dR = (C − Ω) R.
std::vector<std::optional<Value>> qr_tangents(Builder& b, const Instruction& inst, const Value& a, const Value& da) {
  const Dim &rows = a.type.dims[0], &cols = a.type.dims[1];
  if (known_greater(cols, rows))
    fail(ErrorKind::unsupported, "qr of a wide matrix ({}, M < N) has no derivative rule yet; differentiate the qr "
         "of a tall or square matrix (M >= N), e.g. of its conjugate transpose", a.type.to_string());
  Mat m{b};
  std::vector<Value> f = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {a});
  const Value &q = f[0], &r = f[1];
  const Value dar = m.mm(da, m.inv_upper(r));
  const Value c = m.mm(m.adj(q), dar);
  const Value lower = b.mul(c, m.triangle(c, false, false, "qr"));
  Value omega = b.sub(lower, m.adj(lower));
  if (is_complex(c.type.dtype)) {
    const Value d = b.extract_diag(c, 0, 1);
    omega = b.add(omega, b.embed_diag(b.sub(d, b.convert(b.real(d), d.type.dtype)), 0, 1));
  }
  return {b.add(m.mm(q, b.sub(omega, c)), dar), m.mm(b.sub(c, omega), r)};
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
  if (!tangents[0]) return std::vector<std::optional<Value>>(n);
  switch (p.kind()) {
    case LinalgKind::svd: return svd_tangents(b, inst, p, primals[0], *tangents[0]);
    case LinalgKind::eigh: return eigh_tangents(b, inst, p, primals[0], *tangents[0]);
    case LinalgKind::qr: return qr_tangents(b, inst, primals[0], *tangents[0]);
    case LinalgKind::inv_upper: return inv_upper_tangents(b, inst, primals[0], *tangents[0]);
  }
  EIN_ASSERT(false, "linalg: unknown op");
}

}  // namespace einstage::linalg
