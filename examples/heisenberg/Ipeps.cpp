#include "examples/heisenberg/Ipeps.h"

#include "compiler/ad/Ad.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/linalg/TraceLinalg.h"
#include "extensions/einsum/planner/Random.h"
#include "ir/Error.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace einstage::heisenberg {
namespace {

// The eight symmetries of the square on the virtual legs (u, l, d, r) = axes 1..4 of A: the four rotations (cyclic
// shifts) and the four reflections (reversals of the cycle), as permutations of A's axes. The set is a group, closed
// under inverses, so transposing by each or by its inverse gives the same average.
constexpr std::array<std::array<int, 5>, 8> kC4v = {{{0, 1, 2, 3, 4},
                                                     {0, 2, 3, 4, 1},
                                                     {0, 3, 4, 1, 2},
                                                     {0, 4, 1, 2, 3},
                                                     {0, 1, 4, 3, 2},
                                                     {0, 2, 1, 4, 3},
                                                     {0, 3, 2, 1, 4},
                                                     {0, 4, 3, 2, 1}}};

// Eigenvalues of the enlarged corner closer than this (relative) in modulus count as one multiplet.
constexpr double kMultipletGap = 1e-6;
// Eigenvalues of the enlarged corner below this fraction of the largest modulus are dropped.
constexpr double kSpectrumCutoff = 1e-8;

void check_sizes(int d, int chi) {
  if (d < 1) fail(ErrorKind::invalid_argument, "heisenberg-ipeps: D = {} must be at least 1", d);
  if (chi < 1) fail(ErrorKind::invalid_argument, "heisenberg-ipeps: chi = {} must be at least 1", chi);
}

void check_state(const Tensor& a, std::string_view what) {
  if (a.dtype() != DType::f64 || a.rank() != 5 || a.shape()[0] != 2 || a.shape()[1] < 1 ||
      !std::all_of(a.shape().begin() + 1, a.shape().end(), [&](int64_t e) { return e == a.shape()[1]; }))
    fail(ErrorKind::shape, "{}: the iPEPS tensor is {}{} but must be f64[2,D,D,D,D] (A[s,u,l,d,r], physical "
         "dimension 2, bond dimension D on all four virtual legs)", what, name(a.dtype()), shape_to_string(a.shape()));
}

// max |x - y| over two tensors of one shape (f64).
double max_abs_diff(const Tensor& x, const Tensor& y) {
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Entries in [1, 2) from a fixed stream (SplitMix64 of `seed`): a vector no symmetry of the environment is
// orthogonal to, for the sign gauges.
Tensor ones(int64_t n) { return Tensor::from_col_major<double>({n}, std::vector<double>(size_t(n), 1.0)); }

struct GaugeMatch {
  CtmEnvironment env;  // the step's output (run with gauge = ones) brought to the input's gauge
  Tensor gauge;        // the signs S [x]: the step run with gauge S gives env, bit for bit
  double change = 0;   // max |env − input| element-wise
};

// The signs S with which the step's output (C1, T1), run with gauge = ones, best maps back to its input (C0, T0):
// T1 ≈ S T0 S, S_k S_j0 = sign <T1[k,:,j0], T0[k,:,j0]> for the column j0 of T0 of largest norm; then S C1 S and
// S T1 S with T's overall sign by the step's own probe rule. Signs commute exactly with the step's arithmetic, so
// this is the step run with gauge = S, bit for bit.
GaugeMatch match_gauge(const CtmEnvironment& in, const std::vector<Tensor>& next, const std::vector<double>& t_probe,
                       int64_t x, int64_t d2) {
  const std::vector<double> c0 = in.c.to_col_major<double>(), t0 = in.t.to_col_major<double>();
  std::vector<double> c1 = next[0].to_col_major<double>(), t1 = next[1].to_col_major<double>();
  auto at = [&](int64_t i, int64_t m, int64_t j) { return size_t(i + x * (m + d2 * j)); };
  int64_t j0 = 0;
  double best = -1;
  for (int64_t j = 0; j < x; ++j) {
    double n = 0;
    for (int64_t i = 0; i < x; ++i)
      for (int64_t m = 0; m < d2; ++m) n += t0[at(i, m, j)] * t0[at(i, m, j)];
    if (n > best) {
      best = n;
      j0 = j;
    }
  }
  std::vector<double> g(static_cast<size_t>(x));
  for (int64_t k = 0; k < x; ++k) {
    double overlap = 0;
    for (int64_t m = 0; m < d2; ++m) overlap += t0[at(k, m, j0)] * t1[at(k, m, j0)];
    g[size_t(k)] = overlap < 0 ? -1.0 : 1.0;
  }
  double overlap = 0;
  for (int64_t j = 0; j < x; ++j)
    for (int64_t i = 0; i < x; ++i) {
      const double s = g[size_t(i)] * g[size_t(j)];
      c1[size_t(i + x * j)] *= s;
      for (int64_t m = 0; m < d2; ++m) {
        t1[at(i, m, j)] *= s;
        overlap += t_probe[at(i, m, j)] * t1[at(i, m, j)];
      }
    }
  if (overlap < 0)
    for (double& v : t1) v = -v;
  GaugeMatch out;
  for (size_t i = 0; i < c0.size(); ++i) out.change = std::max(out.change, std::abs(c1[i] - c0[i]));
  for (size_t i = 0; i < t0.size(); ++i) out.change = std::max(out.change, std::abs(t1[i] - t0[i]));
  out.env = {Tensor::from_col_major<double>({x, x}, c1), Tensor::from_col_major<double>({x, d2, x}, t1)};
  out.gauge = Tensor::from_col_major<double>({x}, g);
  return out;
}

Tensor generic_weights(Shape shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::vector<double> v(static_cast<size_t>(n));
  einsum::SplitMix64 rng(seed);  // the planner's generator (extensions/einsum/planner/Random.h)
  for (double& w : v) w = 1 + double(rng.next() >> 11) * 0x1.0p-53;
  return Tensor::from_col_major<double>(std::move(shape), v);
}

TracedTensor frobenius_normalised(const TracedTensor& x) {
  TracedTensor xx = x * x;
  return x / sqrt(sum(xx));
}

// The rest of the step from the kept eigenvectors U [k, χ] (zero columns for dropped ones) and their eigenvalues:
// the sign gauge, the new corner and edge, the spectrum.
Program finish_ctmrg_step(TraceContext& ctx, const TracedTensor& u, const TracedTensor& kept_w, const TracedTensor& m,
                          const TracedTensor& t, const TracedTensor& dl, const TracedTensor& gauge, int64_t x,
                          int64_t d2, int64_t k) {
  // Gauge: each column's sign chosen so that its overlap with a fixed generic vector is positive, so that the
  // environment converges element-wise. (Not the column's entry of largest modulus: eigenvectors odd under the
  // ket-bra swap of a leg have pairs of entries ±v, and rounding would pick either.)
  TracedTensor probe = ctx.constant(generic_weights({k}, 1));
  TracedTensor signs = stop_gradient(sign(einsum::einsum(ctx, "i,ic->c", {probe, u})) * gauge);
  TracedTensor p = u * broadcast_in_dim(signs, {1}, u.dims());
  TracedTensor c_new = einsum::einsum(ctx, "ik,ij,jl->kl", {p, m, p});
  c_new = frobenius_normalised((c_new + transpose(c_new, {1, 0})) * 0.5);
  TracedTensor p3 = reshape(p, {Dim(x), Dim(d2), Dim(x)});
  TracedTensor t_new = einsum::einsum(ctx, "xui,xly,uldr,ydj->irj", {p3, t, dl, p3});
  t_new = frobenius_normalised((t_new + transpose(t_new, {2, 1, 0})) * 0.5);
  // The step is homogeneous in T: its overall sign, too, is a gauge (it flips every step when the scale is
  // negative), fixed the same way.
  TracedTensor t_probe = ctx.constant(generic_weights({x, d2, x}, 2));
  t_new = t_new * stop_gradient(sign(einsum::einsum(ctx, "imj,imj->", {t_probe, t_new})));
  TracedTensor spectrum = kept_w / sqrt(sum(kept_w * kept_w));  // a convergence measure: no derivative
  return ctx.finish({c_new, t_new, spectrum});
}

}  // namespace

Tensor rotated_bond_hamiltonian() {
  // ⟨s1 s2|H|s1' s2'⟩ at column-major position s1 + 2 s2 + 4 s1' + 8 s2' (0 = up): diagonal −1/4, 1/4, 1/4, −1/4 for
  // |00⟩, |10⟩, |01⟩, |11⟩ (from −SᶻSᶻ), and −1/2 between |00⟩ and |11⟩ (−SˣSˣ + SʸSʸ = −(σ⁺σ⁺ + σ⁻σ⁻)/2).
  std::vector<double> h(16, 0.0);
  auto at = [&](int s1, int s2, int t1, int t2) -> double& { return h[size_t(s1 + 2 * s2 + 4 * t1 + 8 * t2)]; };
  at(0, 0, 0, 0) = -0.25;
  at(1, 0, 1, 0) = 0.25;
  at(0, 1, 0, 1) = 0.25;
  at(1, 1, 1, 1) = -0.25;
  at(0, 0, 1, 1) = -0.5;
  at(1, 1, 0, 0) = -0.5;
  return Tensor::from_col_major<double>({2, 2, 2, 2}, h);
}

Tensor c4v_symmetrize(const Tensor& a) {
  check_state(a, "c4v_symmetrize");
  const Shape& s = a.shape();
  const int64_t d = s[1];
  std::vector<double> in = a.to_col_major<double>(), out(in.size(), 0.0);
  const std::array<int64_t, 5> stride = {1, 2, 2 * d, 2 * d * d, 2 * d * d * d};
  std::array<int64_t, 5> idx{};
  for (int64_t n = 0; n < int64_t(in.size()); ++n) {
    int64_t rest = n;
    for (int k = 0; k < 5; ++k) {
      idx[k] = rest % s[k];
      rest /= s[k];
    }
    double acc = 0;
    for (const auto& g : kC4v) {  // out[i] += A[i ∘ g]: element i's axis k index read on axis g[k]
      int64_t off = 0;
      for (int k = 0; k < 5; ++k) off += idx[g[k]] * stride[k];
      acc += in[size_t(off)];
    }
    out[size_t(n)] = acc / 8;
  }
  return Tensor::from_col_major<double>(s, out);
}

TracedTensor c4v_symmetrize(const TracedTensor& a) {
  TracedTensor acc;
  for (const auto& g : kC4v) {
    TracedTensor t = transpose(a, Axes(g.begin(), g.end()));
    acc = acc.valid() ? acc + t : t;
  }
  return acc * 0.125;
}

TracedTensor double_layer(TraceContext& ctx, const TracedTensor& a) {
  const int64_t d = a.dims().at(1).constant(), d2 = d * d;
  TracedTensor aa = einsum::einsum(ctx, "sabcd,sefgh->aebfcgdh", {a, a});
  return reshape(aa, {Dim(d2), Dim(d2), Dim(d2), Dim(d2)});
}

Program trace_ctmrg_step(const ExtensionRegistry* registry, int d, int chi, StepKind kind) {
  check_sizes(d, chi);
  const bool forward = kind == StepKind::forward;
  const int64_t d2 = int64_t(d) * d, x = chi, k = x * d2;
  TraceContext ctx("ctmrg_step", registry);
  TracedTensor c = ctx.parameter("c", DType::f64, {x, x});
  TracedTensor t = ctx.parameter("t", DType::f64, {x, d2, x});
  TracedTensor a = ctx.parameter("a", DType::f64, {2, d, d, d, d});
  TracedTensor gauge = ctx.parameter("gauge", DType::f64, {x});
  TracedTensor dl = double_layer(ctx, a);
  // The enlarged corner, rows (p, d) and columns (q, r), symmetrised (it is symmetric for C4v-symmetric inputs up to
  // rounding; the projectors need it exactly).
  TracedTensor m4 = einsum::einsum(ctx, "xy,xlp,yuq,uldr->pdqr", {c, t, t, dl});
  TracedTensor m = reshape(m4, {Dim(k), Dim(k)});
  m = (m + transpose(m, {1, 0})) * 0.5;
  // Its eigenvectors for the χ eigenvalues of largest modulus, in ascending order of the eigenvalue (eigh's order;
  // not the modulus, since symmetric corners often have pairs ±λ whose order by modulus rounding decides). The
  // selection is piecewise constant in M, built from the moduli under stop_gradient, so no derivative flows
  // through it: rank_i = #{j: |w_j| > |w_i|} + #{j < i: |w_j| = |w_i|}, kept when rank_i < χ; the kept ones go to
  // column pos_i = #{kept j < i} of P = V Sel.
  // The forward step computes only the eigenvectors it can keep, those of the χ largest moduli (eigh with keep: the
  // full eigh's columns to rounding, at a ninth of its back-transformation for D = 3, χ = 54).
  linalg::EighFactors e = linalg::eigh(ctx, m, {.keep = forward ? x : 0});
  TracedTensor aw = stop_gradient(abs(e.w));
  TracedTensor wi = broadcast_in_dim(aw, {0}, {k, k}), wj = broadcast_in_dim(aw, {1}, {k, k});
  std::vector<double> lower(size_t(k * k), 0.0), column(size_t(k * x));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < i; ++j) lower[size_t(i + k * j)] = 1;  // [i, j] = [j < i]
  for (int64_t i = 0; i < k; ++i)
    for (int64_t c = 0; c < x; ++c) column[size_t(i + k * c)] = double(c);
  TracedTensor before = ctx.constant(Tensor::from_col_major<double>({k, k}, lower));
  TracedTensor ones = ctx.full(TensorType{DType::f64, {k, k}}, 1.0);
  TracedTensor zeros = ctx.full(TensorType{DType::f64, {k, k}}, 0.0);
  TracedTensor larger = select(Comparison::gt, wj, wi, ones, zeros);
  TracedTensor tied_before = select(Comparison::eq, wj, wi, before, zeros);
  TracedTensor rank = reduce_sum(larger + tied_before, {1});
  TracedTensor ones_k = ctx.full(TensorType{DType::f64, {k}}, 1.0);
  TracedTensor zeros_k = ctx.full(TensorType{DType::f64, {k}}, 0.0);
  const TracedTensor ranked = select(Comparison::lt, rank, ctx.full(TensorType{DType::f64, {k}}, double(x) - 0.5),
                                    ones_k, zeros_k);
  TracedTensor kept = ranked;
  // Whole multiplets: a kept eigenvalue whose modulus is within kMultipletGap (relative) of the largest discarded
  // one is dropped with it (its column of P is zero), so the truncation never cuts a (near-)degenerate multiplet,
  // whose split would be decided by rounding from step to step.
  if (x < k) {
    TracedTensor largest_dropped = max(aw * (1.0 - kept));
    TracedTensor bar = broadcast_in_dim(largest_dropped * (1.0 + kMultipletGap), {}, {k});
    kept = kept * select(Comparison::gt, aw, bar, ones_k, zeros_k);
  }
  // Eigenvalues below kSpectrumCutoff of the largest are rounding noise: their eigenvectors (and their order by
  // signed value) change from step to step, so they are dropped too.
  TracedTensor floor = broadcast_in_dim(max(aw) * kSpectrumCutoff, {}, {k});
  kept = kept * select(Comparison::gt, aw, floor, ones_k, zeros_k);
  // Sel[i, c] = 1 where flagged eigenvalue i is the c-th flagged one (flags 0/1 over the k eigenvalues).
  auto selection = [&](const TracedTensor& flags) {
    TracedTensor pos = einsum::einsum(ctx, "ij,j->i", {before, flags});
    // One statement per traced operand: a call's arguments are evaluated in an unspecified order (gcc right to
    // left, clang left to right), and the order of evaluation is the order of the program's instructions.
    TracedTensor zero_kx = ctx.full(TensorType{DType::f64, {k, x}}, 0.0);
    TracedTensor flags_kx = broadcast_in_dim(flags, {0}, {k, x});
    TracedTensor columns = ctx.constant(Tensor::from_col_major<double>({k, x}, column));
    TracedTensor pos_kx = broadcast_in_dim(pos, {0}, {k, x});
    return select(Comparison::eq, pos_kx, columns, flags_kx, zero_kx);
  };
  TracedTensor sel = selection(kept);
  if (forward) {
    // eigh's χ columns are the eigenvectors of the χ ranked eigenvalues in W's order (the same set: the largest
    // moduli, a tie at the cut taken from the lower end, where the rank takes the lower index, and both are one
    // multiplet that the rule above drops whole), so the kept columns are V Selᵥᵀ Sel.
    TracedTensor in_v = selection(ranked);
    TracedTensor v_to_p = einsum::einsum(ctx, "ic,id->cd", {in_v, sel});
    TracedTensor kept_w = einsum::einsum(ctx, "i,ic->c", {e.w, sel});
    return finish_ctmrg_step(ctx, einsum::einsum(ctx, "ic,cd->id", {e.v, v_to_p}), kept_w, m, t, dl, gauge, x, d2, k);
  }
  // The kept eigenvectors U = V Sel, and their derivative written out for the kept columns only: eigh's own rule
  // gives all k columns, dV = V (F ∘ (Vᵀ dM V)) with F_ji = 1/(w_i − w_j) broadened (LinalgAd.h), and the
  // transposed step paid for k³ products to keep χ of them. Since (F ∘ Y) Sel = (F Sel) ∘ (Y Sel),
  // dU = V (F_sel ∘ (Vᵀ dM U)), F_sel[j, c] = 1/(w_kept(c) − w_j) broadened as eigh's rule does, zero where j is
  // column c's own eigenvalue: products of k × k × χ. It enters as U = U_s + dU(M − stop_gradient(M)), V, w and U_s
  // under stop_gradient: the added term is exactly zero in value (the step's outputs keep their bits) and carries
  // the tangent. dM is symmetric (M is symmetrised above), so eigh's sym(dM) is dM itself.
  TracedTensor v_s = stop_gradient(e.v);
  TracedTensor w_s = stop_gradient(e.w);
  TracedTensor u_s = einsum::einsum(ctx, "ij,jc->ic", {v_s, sel});
  TracedTensor kept_w = einsum::einsum(ctx, "i,ic->c", {w_s, sel});
  TracedTensor kept_w_kx = broadcast_in_dim(kept_w, {1}, {k, x});
  TracedTensor w_kx = broadcast_in_dim(w_s, {0}, {k, x});
  TracedTensor gap = kept_w_kx - w_kx;
  TracedTensor own = ctx.full(TensorType{DType::f64, {k, x}}, 1.0) - sel;
  TracedTensor broadening = ctx.full(TensorType{DType::f64, {k, x}}, linalg::kDefaultEps);
  TracedTensor f_sel = gap / (gap * gap + broadening) * own;
  TracedTensor dm = m - stop_gradient(m);
  TracedTensor vt_dm_u = einsum::einsum(ctx, "ji,jl,lc->ic", {v_s, dm, u_s});
  TracedTensor u = u_s + einsum::einsum(ctx, "ij,jc->ic", {v_s, vt_dm_u * f_sel});
  return finish_ctmrg_step(ctx, u, kept_w, m, t, dl, gauge, x, d2, k);
}


Program trace_energy(const ExtensionRegistry* registry, int d, int chi) {
  check_sizes(d, chi);
  const int64_t x = chi;
  TraceContext ctx("energy", registry);
  TracedTensor c = ctx.parameter("c", DType::f64, {x, x});
  TracedTensor t = ctx.parameter("t", DType::f64, {x, int64_t(d) * d, x});
  TracedTensor a = ctx.parameter("a", DType::f64, {2, d, d, d, d});
  TracedTensor t4 = reshape(t, {Dim(x), Dim(d), Dim(d), Dim(x)});  // (ket, bra) split, ket fastest
  // Corners a..j around the two sites; ket virtual legs k l m n o p q (u1 u2 l1 d1 d2 middle r2), bra the capitals;
  // physical s t (ket), S T (bra). Rows: C Tu Tu C / Tl A A Tr / C Td Td C.
  TracedTensor rho = einsum::einsum(
      ctx, "ab,bkKc,clLd,de,amMf,skmnp,SKMNP,tlpoq,TLPOQ,eqQg,fh,hnNi,ioOj,jg->stST",
      {c, t4, t4, c, t4, a, a, a, a, t4, c, t4, t4, c});
  TracedTensor h = ctx.constant(rotated_bond_hamiltonian());
  TracedTensor e = einsum::einsum(ctx, "stST,STst->", {rho, h});
  TracedTensor norm = einsum::einsum(ctx, "stst->", {rho});
  return ctx.finish({2.0 * e / norm});
}

Program trace_unrolled_energy(const ExtensionRegistry* registry, int d, int chi, int steps) {
  check_sizes(d, chi);
  if (steps < 1) fail(ErrorKind::invalid_argument, "heisenberg-ipeps: steps = {} must be at least 1", steps);
  const Program step = trace_ctmrg_step(registry, d, chi), energy = trace_energy(registry, d, chi);
  Builder b("unrolled_energy", registry);
  std::vector<Value> params;
  for (const Parameter& p : step.params) params.push_back(b.parameter(p.name, p.value.type));
  Value c = params[0], t = params[1];
  for (int n = 0; n < steps; ++n) {
    std::vector<Value> out = ad::inline_program(b, step, std::vector<Value>{c, t, params[2], params[3]});
    c = out[0];
    t = out[1];
  }
  std::vector<Value> e = ad::inline_program(b, energy, std::vector<Value>{c, t, params[2]});
  return b.finish({e[0]});
}

CtmEnvironment initial_environment(const Tensor& a, int chi) {
  check_state(a, "heisenberg-ipeps");
  const int64_t d = a.shape()[1], d2 = d * d, x = chi;
  if (x < d2)
    fail(ErrorKind::invalid_argument, "heisenberg-ipeps: chi = {} is below D^2 = {} (D = {}); the environment must "
         "hold at least one double-layer bond: take chi >= D^2", chi, d2, d);
  // The double layer and the boundary vector b = vec(identity) on (ket, bra), ket fastest.
  Shape s4 = {d2, d2, d2, d2};
  Tensor dl = einsum::einsum("sabcd,sefgh->aebfcgdh", {a, a}).reshape(s4).contiguous();
  std::vector<double> bv(size_t(d2), 0.0);
  for (int64_t k = 0; k < d; ++k) bv[size_t(k + d * k)] = 1;
  Tensor b = Tensor::from_col_major<double>({d2}, bv);
  std::vector<double> c0 = einsum::einsum("u,l,uldr->dr", {b, b, dl}).to_col_major<double>();
  std::vector<double> t0 = einsum::einsum("l,uldr->urd", {b, dl}).to_col_major<double>();
  // Zero-padded to χ (the first steps fill the rest), normalised.
  std::vector<double> c(size_t(x * x), 0.0), t(size_t(x * d2 * x), 0.0);
  double nc = 0, nt = 0;
  for (int64_t i = 0; i < d2; ++i)
    for (int64_t j = 0; j < d2; ++j) {
      double v = c0[size_t(i + d2 * j)];
      c[size_t(i + x * j)] = v;
      nc += v * v;
      for (int64_t m = 0; m < d2; ++m) {
        double w = t0[size_t(i + d2 * (m + d2 * j))];
        t[size_t(i + x * (m + d2 * j))] = w;
        nt += w * w;
      }
    }
  if (!(nc > 0) || !(nt > 0) || !std::isfinite(nc + nt))
    fail(ErrorKind::invalid_argument, "heisenberg-ipeps: the iPEPS tensor gives a zero or non-finite boundary "
         "(|C| = {:.3g}, |T| = {:.3g}); check it for zeros or NaN", std::sqrt(nc), std::sqrt(nt));
  for (double& v : c) v /= std::sqrt(nc);
  for (double& v : t) v /= std::sqrt(nt);
  return {Tensor::from_col_major<double>({x, x}, c), Tensor::from_col_major<double>({x, d2, x}, t)};
}

Ctmrg::Ctmrg(const Runtime& runtime, int d, int chi)
    : d_(d), chi_(chi), step_(trace_ctmrg_step(&runtime.registry(), d, chi)),
      forward_(trace_ctmrg_step(&runtime.registry(), d, chi, StepKind::forward)),
      energy_(trace_energy(&runtime.registry(), d, chi)), run_forward_(runtime.prepare(forward_)),
      run_energy_(runtime.prepare(energy_)) {}

CtmrgResult Ctmrg::converge(const Tensor& a, CtmEnvironment start, const CtmrgOptions& options,
                            const StepObserver& on_step) const {
  check_state(a, "heisenberg-ipeps");
  if (a.shape()[1] != d_)
    fail(ErrorKind::shape, "heisenberg-ipeps: the iPEPS tensor has bond dimension {} but this CTMRG was made for "
         "D = {}", a.shape()[1], d_);
  CtmrgResult r;
  r.env = std::move(start);
  r.gauge = ones(chi_);
  Tensor spectrum;
  bool converged = false;
  for (r.steps = 1; r.steps <= options.max_steps && !converged; ++r.steps) {
    std::vector<Tensor> out = run_forward_.run({r.env.c, r.env.t, a, r.gauge});
    r.spectrum_change = spectrum.defined() ? max_abs_diff(out[2], spectrum) : 1.0;
    if (!std::isfinite(r.spectrum_change) || !std::isfinite(max_abs_diff(out[1], r.env.t)))
      fail(ErrorKind::runtime, "heisenberg-ipeps: CTMRG step {} produced NaN or infinity (D = {}, chi = {}); check "
           "the tensor for NaN", r.steps, d_, chi_);
    if (on_step) on_step(r.env, r.gauge);
    r.env = {out[0], out[1]};
    spectrum = out[2];
    converged = r.spectrum_change <= options.tolerance;
  }
  --r.steps;
  if (!converged)
    fail(ErrorKind::runtime, "heisenberg-ipeps: CTMRG did not converge within {} steps (D = {}, chi = {}): the corner "
         "spectrum still changed by {:.3g} in the last step, tolerance {:.3g}; raise the step cap or chi, or loosen "
         "the tolerance", options.max_steps, d_, chi_, r.spectrum_change, options.tolerance);
  // The element-wise phase. The spectrum is stationary in the eigenvectors, so a spectrum change of ε leaves the
  // environment ~√ε from its fixed point. Each step now runs with gauge = ones and is brought back to the current
  // environment's gauge by the signs S that take it closest (match_gauge), until no element changes by more than
  // fixed_point_tolerance. The last S is the returned gauge: with it, the step has r.env as its fixed point to
  // within fixed_point_change. (An exactly degenerate multiplet would also need a rotation, which signs cannot give:
  // such an environment stops at the step cap with a large fixed_point_change, which the fixed-point adjoint refuses.)
  const int64_t x = chi_, d2 = int64_t(d_) * d_;
  const std::vector<double> t_probe = generic_weights({x, d2, x}, 2).to_col_major<double>();
  for (int phase_steps = 0;; ++phase_steps) {
    std::vector<Tensor> next = run_forward_.run({r.env.c, r.env.t, a, ones(x)});
    GaugeMatch m = match_gauge(r.env, next, t_probe, x, d2);
    r.gauge = std::move(m.gauge);
    r.fixed_point_change = m.change;
    if (!(r.fixed_point_change > options.fixed_point_tolerance) || r.steps >= options.max_steps ||
        phase_steps >= options.fixed_point_max_steps)
      break;
    if (on_step) on_step(r.env, r.gauge);
    r.env = std::move(m.env);
    ++r.steps;
  }
  return r;
}

Tensor add_f64(const Tensor& x, const Tensor& y) {
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return Tensor::from_col_major<double>(x.shape(), a);
}

double Ctmrg::energy(const CtmEnvironment& env, const Tensor& a) const {
  return run_energy_.run({env.c, env.t, a}).at(0).at<double>({});
}

}  // namespace einstage::heisenberg
