// The AD rules of the standard ops: one block per op, in the order of the EIN_STD_OPS table (ir/Ops.h), each with
// its linearize (JVP) rule and, when the op is linear in some operand, its transpose rule (JAX's lax.py rhythm:
// deflinear / defbilinear / elementwise derivative). The table at the end is indexed by OpKind. Conventions (zeros
// are symbolic, complex transposes are adjoints, rules emit only differentiable ops) are in Rules.h.
// A rule emits at most one instruction-making operand per expression: a call's arguments are evaluated in an order
// the compiler chooses, and the order of evaluation is the order of the program's instructions
// (tests/ad/golden/std_rules.ir holds every rule's printed program to it).
#include "compiler/ad/Rules.h"

#include <algorithm>
#include <complex>
#include <iterator>
#include <numeric>

namespace einstage::ad {

namespace {

using Primals = std::span<const Value>;
using Tangents = std::span<const Tangent>;
using Linear = std::span<const bool>;
using Cotangents = std::vector<Tangent>;

// ---- helpers shared by the blocks ----

Tangent add_tangents(Builder& b, const Tangent& x, const Tangent& y) {
  if (!x) return y;
  if (!y) return x;
  return b.add(*x, *y);
}

Value conj_if_complex(Builder& b, const Value& v) { return is_complex(v.type.dtype) ? b.conj(v) : v; }

// `v` as a value of type `target`: the real part when a complex cotangent meets a real operand (adjoint of the
// real -> complex embedding), a convert when precisions differ, a reshape when the dims differ only in how they are
// written (a symbol the program constrains to a constant).
Value cast_to(Builder& b, Value v, const TensorType& target) {
  if (is_complex(v.type.dtype) && !is_complex(target.dtype)) v = b.real(v);
  if (v.type.dtype != target.dtype) v = b.convert(v, target.dtype);
  if (v.type.dims != target.dims) v = b.reshape(v, target.dims);
  return v;
}

// A tensor of `type` filled with one (possibly complex) value.
Value full_complex(Builder& b, const TensorType& type, c128 value) {
  Tensor scalar = type.dtype == DType::c64 ? Tensor::scalar<c64>(c64(value)) : Tensor::scalar<c128>(value);
  Value s = b.constant(std::move(scalar));
  return type.rank() == 0 ? s : b.broadcast_in_dim(s, {}, type.dims);
}

// Axes of a rank-`rank` operand that are in neither list, ascending.
Axes other_axes(int rank, const Axes& a, const Axes& c) {
  Axes out;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(c.begin(), c.end(), i) == c.end()) out.push_back(i);
  return out;
}

// `x` has axis j standing for target axis src[j]; returns x transposed so that axis a is target axis a.
Value permute_to(Builder& b, const Value& x, const Axes& src) {
  Axes perm(src.size());
  for (size_t j = 0; j < src.size(); ++j) perm[static_cast<size_t>(src[j])] = static_cast<int64_t>(j);
  Axes identity(src.size());
  std::iota(identity.begin(), identity.end(), 0);
  return perm == identity ? x : b.transpose(x, perm);
}

Axes inverse_permutation(const Axes& perm) {
  Axes inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

[[noreturn]] void fail_not_linear(const Instruction& inst) {
  fail(ErrorKind::invalid_argument,
       "'{}' is not linear when operands 0 and 1 both depend on the linear inputs; transpose needs a program linear "
       "in them (this is a product of two linear values)", op_name(inst.op));
}

// ---- combinators (JAX's ad.deflinear2 / defbilinear / defjvp) ----

// A linear unary op: the tangent is the op applied to the operand's tangent.
Tangent linear_jvp(Builder& b, const Instruction& inst, Primals, Tangents t, const Value&) {
  if (!t[0]) return std::nullopt;
  return b.emit(inst.op, {*t[0]});
}

// A bilinear op (mul, dot_general): op(t0, x1) + op(x0, t1), zero terms skipped.
Tangent bilinear_jvp(Builder& b, const Instruction& inst, Primals x, Tangents t, const Value&) {
  Tangent out;
  if (t[0]) out = b.emit(inst.op, {*t[0], x[1]});
  if (t[1]) out = add_tangents(b, out, b.emit(inst.op, {x[0], *t[1]}));
  return out;
}

// An elementwise op with derivative d (a value of the result's type): t * d.
Tangent elementwise_jvp(Builder& b, const Tangent& t, const Value& derivative) {
  if (!t) return std::nullopt;
  return b.mul(*t, derivative);
}

Tangent zero_jvp(Builder&, const Instruction&, Primals, Tangents, const Value&) { return std::nullopt; }

template <typename OpStruct> constexpr StdAdRules kRulesOf{};  // no rule unless a block below defines one

}  // namespace

// ---- dot_general: bilinear; out = [lhs free, rhs free, batch] ----
namespace {
Cotangents dot_general_transpose(Builder& b, const Instruction& inst, Primals x, Linear linear, const Value& ct) {
  const auto& d = std::get<DotGeneral>(inst.op);
  if (linear[0] && linear[1]) fail_not_linear(inst);
  const TensorType &lt = x[0].type, &rt = x[1].type;
  Axes lfree = other_axes(lt.rank(), d.lhs_contracting, d.lhs_batch);
  Axes rfree = other_axes(rt.rank(), d.rhs_contracting, d.rhs_batch);
  const int64_t nl = static_cast<int64_t>(lfree.size()), nr = static_cast<int64_t>(rfree.size());
  Axes ct_l, ct_r, ct_b;
  for (int64_t i = 0; i < ct.type.rank(); ++i) (i < nl ? ct_l : i < nl + nr ? ct_r : ct_b).push_back(i);
  auto paired = [](const Axes& from, const Axes& to, int64_t axis) {
    return to[static_cast<size_t>(std::find(from.begin(), from.end(), axis) - from.begin())];
  };
  Cotangents out(2);
  if (linear[0]) {
    // Contract ct's rhs-free axes with rhs's free axes, batch with batch: [lhs free, rhs contracting (ascending),
    // batch], where rhs contracting axis ra stands for the lhs axis it was paired with.
    Value y = b.dot_general(ct, conj_if_complex(b, x[1]), ct_r, rfree, ct_b, d.rhs_batch);
    Axes src = lfree;
    Axes rc = d.rhs_contracting;
    std::sort(rc.begin(), rc.end());
    for (int64_t ra : rc) src.push_back(paired(d.rhs_contracting, d.lhs_contracting, ra));
    src.insert(src.end(), d.lhs_batch.begin(), d.lhs_batch.end());
    out[0] = cast_to(b, permute_to(b, y, src), lt);
  }
  if (linear[1]) {
    // Contract lhs's free axes with ct's lhs-free axes: [lhs contracting (ascending), rhs free, batch].
    Value y = b.dot_general(conj_if_complex(b, x[0]), ct, lfree, ct_l, d.lhs_batch, ct_b);
    Axes src;
    Axes lc = d.lhs_contracting;
    std::sort(lc.begin(), lc.end());
    for (int64_t la : lc) src.push_back(paired(d.lhs_contracting, d.rhs_contracting, la));
    src.insert(src.end(), rfree.begin(), rfree.end());
    src.insert(src.end(), d.rhs_batch.begin(), d.rhs_batch.end());
    out[1] = cast_to(b, permute_to(b, y, src), rt);
  }
  return out;
}
template <> constexpr StdAdRules kRulesOf<DotGeneral>{bilinear_jvp, dot_general_transpose};
}  // namespace

// ---- transpose: linear; transposes back with the inverse permutation ----
namespace {
Cotangents transpose_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  return {cast_to(b, b.transpose(ct, inverse_permutation(std::get<Transpose>(inst.op).perm)), x[0].type)};
}
template <> constexpr StdAdRules kRulesOf<Transpose>{linear_jvp, transpose_transpose};
}  // namespace

// ---- reshape: linear; reshapes back ----
namespace {
Cotangents reshape_transpose(Builder& b, const Instruction&, Primals x, Linear, const Value& ct) {
  return {b.reshape(ct, x[0].type.dims)};
}
template <> constexpr StdAdRules kRulesOf<Reshape>{linear_jvp, reshape_transpose};
}  // namespace

// ---- broadcast_in_dim: linear; sums the new axes and the axes where the operand had extent 1 ----
namespace {
Cotangents broadcast_in_dim_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  const auto& op = std::get<BroadcastInDim>(inst.op);
  const TensorType& t = x[0].type;
  // An operand axis broadcasts when its extent is the constant 1 and the target's is not (a symbolic target that
  // turns out to be 1 makes the sum a no-op, so the static decision is always right).
  std::vector<bool> summed(op.shape.size(), true);
  for (size_t i = 0; i < op.dims.size(); ++i) {
    const Dim& target = op.shape[static_cast<size_t>(op.dims[i])];
    summed[static_cast<size_t>(op.dims[i])] = t.dims[i] == Dim(1) && target != Dim(1);
  }
  Axes axes;
  for (size_t a = 0; a < summed.size(); ++a)
    if (summed[a]) axes.push_back(static_cast<int64_t>(a));
  Value y = axes.empty() ? ct : b.reduce_sum(ct, axes);
  return {cast_to(b, y, t)};  // the summed length-1 axes come back through cast_to's reshape
}
template <> constexpr StdAdRules kRulesOf<BroadcastInDim>{linear_jvp, broadcast_in_dim_transpose};
}  // namespace

// ---- reduce_sum: linear; broadcasts back over the summed axes ----
namespace {
Cotangents reduce_sum_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  const auto& op = std::get<ReduceSum>(inst.op);
  Axes kept = other_axes(x[0].type.rank(), op.axes, {});
  return {b.broadcast_in_dim(ct, kept, x[0].type.dims)};
}
template <> constexpr StdAdRules kRulesOf<ReduceSum>{linear_jvp, reduce_sum_transpose};
}  // namespace

// ---- reduce_max: the tangent at the first maximum, reduce_sum(first_max_mask(x) * dx) (a subgradient at ties).
// Not linear, so no transpose rule: its tangent is mul and reduce_sum, which have theirs. ----
namespace {
Tangent reduce_max_jvp(Builder& b, const Instruction& inst, Primals x, Tangents t, const Value&) {
  if (!t[0]) return std::nullopt;
  const Axes& axes = std::get<ReduceMax>(inst.op).axes;
  Value picked = b.mul(*t[0], b.first_max_mask(x[0], axes));
  return axes.empty() ? picked : b.reduce_sum(picked, axes);
}
template <> constexpr StdAdRules kRulesOf<ReduceMax>{reduce_max_jvp, nullptr};
}  // namespace

// ---- first_max_mask: piecewise constant, a zero tangent ----
namespace {
template <> constexpr StdAdRules kRulesOf<FirstMaxMask>{zero_jvp, nullptr};
}  // namespace

// ---- extract_diag: linear; its adjoint is embed_diag with the same attributes ----
namespace {
Cotangents extract_diag_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  const auto& op = std::get<ExtractDiag>(inst.op);
  return {cast_to(b, b.embed_diag(ct, op.axis_a, op.axis_b), x[0].type)};
}
template <> constexpr StdAdRules kRulesOf<ExtractDiag>{linear_jvp, extract_diag_transpose};
}  // namespace

// ---- embed_diag: linear; its adjoint is extract_diag with the same attributes ----
namespace {
Cotangents embed_diag_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  const auto& op = std::get<EmbedDiag>(inst.op);
  return {cast_to(b, b.extract_diag(ct, op.axis_a, op.axis_b), x[0].type)};
}
template <> constexpr StdAdRules kRulesOf<EmbedDiag>{linear_jvp, embed_diag_transpose};
}  // namespace

// ---- slice: linear; its adjoint is pad into the operand's extents ----
namespace {
Cotangents slice_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  const auto& op = std::get<Slice>(inst.op);
  return {b.pad(ct, op.start, x[0].type.dims, op.stride)};
}
template <> constexpr StdAdRules kRulesOf<Slice>{linear_jvp, slice_transpose};
}  // namespace

// ---- pad: linear; its adjoint is the slice that takes the operand's elements back ----
namespace {
Cotangents pad_transpose(Builder& b, const Instruction& inst, Primals x, Linear, const Value& ct) {
  const auto& op = std::get<Pad>(inst.op);
  return {b.slice(ct, op.start, x[0].type.dims, op.stride)};
}
template <> constexpr StdAdRules kRulesOf<Pad>{linear_jvp, pad_transpose};
}  // namespace

// ---- add: linear in both operands ----
namespace {
Tangent add_jvp(Builder& b, const Instruction&, Primals, Tangents t, const Value&) {
  return add_tangents(b, t[0], t[1]);
}
Cotangents add_transpose(Builder&, const Instruction&, Primals, Linear linear, const Value& ct) {
  return {linear[0] ? Tangent(ct) : std::nullopt, linear[1] ? Tangent(ct) : std::nullopt};
}
template <> constexpr StdAdRules kRulesOf<Add>{add_jvp, add_transpose};
}  // namespace

// ---- sub: linear in both operands ----
namespace {
Tangent sub_jvp(Builder& b, const Instruction&, Primals, Tangents t, const Value&) {
  if (t[0] && t[1]) return b.sub(*t[0], *t[1]);
  if (t[0]) return t[0];
  return b.neg(*t[1]);
}
Cotangents sub_transpose(Builder& b, const Instruction&, Primals, Linear linear, const Value& ct) {
  return {linear[0] ? Tangent(ct) : std::nullopt, linear[1] ? Tangent(b.neg(ct)) : std::nullopt};
}
template <> constexpr StdAdRules kRulesOf<Sub>{sub_jvp, sub_transpose};
}  // namespace

// ---- mul: bilinear; the transpose multiplies by the other factor's conjugate ----
namespace {
Cotangents mul_transpose(Builder& b, const Instruction& inst, Primals x, Linear linear, const Value& ct) {
  if (linear[0] && linear[1]) fail_not_linear(inst);
  Cotangents out(2);
  if (linear[0]) out[0] = b.mul(ct, conj_if_complex(b, x[1]));
  if (linear[1]) out[1] = b.mul(conj_if_complex(b, x[0]), ct);
  return out;
}
template <> constexpr StdAdRules kRulesOf<Mul>{bilinear_jvp, mul_transpose};
}  // namespace

// ---- div: d(x/y) = dx/y - dy*out/y; linear in the numerator only ----
namespace {
Tangent div_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value& out) {
  Tangent num = t[0];
  if (t[1]) {
    Value dy = b.mul(*t[1], out);
    num = num ? b.sub(*num, dy) : b.neg(dy);
  }
  return b.div(*num, x[1]);
}
Cotangents div_transpose(Builder& b, const Instruction& inst, Primals x, Linear linear, const Value& ct) {
  if (linear[1])
    fail(ErrorKind::invalid_argument, "'{}' is not linear in its divisor (operand 1); transpose needs a program "
         "linear in its linear inputs", op_name(inst.op));
  return {b.div(ct, conj_if_complex(b, x[1])), std::nullopt};
}
template <> constexpr StdAdRules kRulesOf<Div>{div_jvp, div_transpose};
}  // namespace

// ---- select: linear in x and y for fixed a and b (the predicate is piecewise constant: no tangent for a or b).
// The tangent selects the tangents with the same predicate; a zero branch is materialised, as JAX's select_n does
// (the other branch needs a value where the predicate picks it). The transpose routes the cotangent to x where the
// predicate holds and to y where it does not. ----
namespace {
Tangent select_jvp(Builder& b, const Instruction& inst, Primals x, Tangents t, const Value& out) {
  if (!t[2] && !t[3]) return std::nullopt;
  const Comparison cmp = std::get<Select>(inst.op).cmp;
  // One emitted operand per statement (see the note at the top): the last argument first, as before.
  const Value on_false = t[3] ? *t[3] : b.full(out.type, 0.0);
  const Value on_true = t[2] ? *t[2] : b.full(out.type, 0.0);
  return b.select(cmp, x[0], x[1], on_true, on_false);
}
Cotangents select_transpose(Builder& b, const Instruction& inst, Primals x, Linear linear, const Value& ct) {
  if (linear[0] || linear[1])
    fail(ErrorKind::invalid_argument, "'{}' is not linear in its compared operands (0 and 1); transpose needs a "
         "program whose comparisons do not depend on its linear inputs", op_name(inst.op));
  const Comparison cmp = std::get<Select>(inst.op).cmp;
  Cotangents out(4);
  if (linear[2]) out[2] = b.select(cmp, x[0], x[1], ct, b.full(ct.type, 0.0));
  if (linear[3]) out[3] = b.select(cmp, x[0], x[1], b.full(ct.type, 0.0), ct);
  return out;
}
template <> constexpr StdAdRules kRulesOf<Select>{select_jvp, select_transpose};
}  // namespace

// ---- neg: linear ----
namespace {
Cotangents neg_transpose(Builder& b, const Instruction&, Primals, Linear, const Value& ct) { return {b.neg(ct)}; }
template <> constexpr StdAdRules kRulesOf<Neg>{linear_jvp, neg_transpose};
}  // namespace

// ---- conj: R-linear; its adjoint is conj ----
namespace {
Cotangents conj_transpose(Builder& b, const Instruction&, Primals, Linear, const Value& ct) { return {b.conj(ct)}; }
template <> constexpr StdAdRules kRulesOf<Conj>{linear_jvp, conj_transpose};
}  // namespace

// ---- real: R-linear; the adjoint of Re is the embedding c -> c + 0i ----
namespace {
Cotangents real_transpose(Builder& b, const Instruction&, Primals x, Linear, const Value& ct) {
  return {is_complex(x[0].type.dtype) ? b.convert(ct, x[0].type.dtype) : ct};
}
template <> constexpr StdAdRules kRulesOf<Real>{linear_jvp, real_transpose};
}  // namespace

// ---- imag: R-linear; the adjoint of Im is c -> i*c; zero on real operands ----
namespace {
Tangent imag_jvp(Builder& b, const Instruction& inst, Primals x, Tangents t, const Value& out) {
  if (!is_complex(x[0].type.dtype)) return std::nullopt;  // imag of a real tensor is the constant 0
  return linear_jvp(b, inst, x, t, out);
}
Cotangents imag_transpose(Builder& b, const Instruction&, Primals x, Linear, const Value& ct) {
  const TensorType& t = x[0].type;
  if (!is_complex(t.dtype)) return {std::nullopt};
  const Value i = full_complex(b, t, c128(0, 1));
  return {b.mul(b.convert(ct, t.dtype), i)};
}
template <> constexpr StdAdRules kRulesOf<Imag>{imag_jvp, imag_transpose};
}  // namespace

// ---- exp: d exp(x) = exp(x) dx ----
namespace {
Tangent exp_jvp(Builder& b, const Instruction&, Primals, Tangents t, const Value& out) {
  return elementwise_jvp(b, t[0], out);
}
template <> constexpr StdAdRules kRulesOf<Exp>{exp_jvp, nullptr};
}  // namespace

// ---- log: d log(x) = dx / x ----
namespace {
Tangent log_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value&) {
  if (!t[0]) return std::nullopt;
  return b.div(*t[0], x[0]);
}
template <> constexpr StdAdRules kRulesOf<Log>{log_jvp, nullptr};
}  // namespace

// ---- sqrt: d sqrt(x) = dx / (2 sqrt(x)) ----
namespace {
Tangent sqrt_jvp(Builder& b, const Instruction&, Primals, Tangents t, const Value& out) {
  if (!t[0]) return std::nullopt;
  return b.div(*t[0], b.add(out, out));
}
template <> constexpr StdAdRules kRulesOf<Sqrt>{sqrt_jvp, nullptr};
}  // namespace

// ---- sin, cos, sinh, cosh, tanh: holomorphic, so d f(x) = f'(x) dx for complex x too ----
namespace {
Tangent sin_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value&) {
  return elementwise_jvp(b, t[0], b.cos(x[0]));
}
Tangent cos_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value&) {
  return elementwise_jvp(b, t[0], b.neg(b.sin(x[0])));
}
Tangent tanh_jvp(Builder& b, const Instruction&, Primals, Tangents t, const Value& out) {  // 1 - tanh(x)^2
  const Value square = b.mul(out, out);
  return elementwise_jvp(b, t[0], b.sub(b.full(out.type, 1.0), square));
}
Tangent sinh_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value&) {
  return elementwise_jvp(b, t[0], b.cosh(x[0]));
}
Tangent cosh_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value&) {
  return elementwise_jvp(b, t[0], b.sinh(x[0]));
}
template <> constexpr StdAdRules kRulesOf<Sin>{sin_jvp, nullptr};
template <> constexpr StdAdRules kRulesOf<Cos>{cos_jvp, nullptr};
template <> constexpr StdAdRules kRulesOf<Tanh>{tanh_jvp, nullptr};
template <> constexpr StdAdRules kRulesOf<Sinh>{sinh_jvp, nullptr};
template <> constexpr StdAdRules kRulesOf<Cosh>{cosh_jvp, nullptr};
}  // namespace

// ---- abs: d|x| = sign(x) dx on reals, Re(conj(sign z) dz) on complex; sign(0) = 0 picks the zero subgradient ----
namespace {
Tangent abs_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value&) {
  if (!t[0]) return std::nullopt;
  Value s = b.sign(x[0]);
  if (!is_complex(x[0].type.dtype)) return b.mul(*t[0], s);
  return b.real(b.mul(b.conj(s), *t[0]));
}
template <> constexpr StdAdRules kRulesOf<Abs>{abs_jvp, nullptr};
}  // namespace

// ---- sign: piecewise constant on reals (zero tangent); on complex d(z/|z|) = (dz - s Re(conj(s) dz)) / |z| ----
namespace {
Tangent sign_jvp(Builder& b, const Instruction&, Primals x, Tangents t, const Value& s) {
  if (!t[0] || !is_complex(x[0].type.dtype)) return std::nullopt;
  const DType dtype = x[0].type.dtype;
  Value radial = b.convert(b.real(b.mul(b.conj(s), *t[0])), dtype);
  const Value modulus = b.convert(b.abs(x[0]), dtype);
  return b.div(b.sub(*t[0], b.mul(s, radial)), modulus);
}
template <> constexpr StdAdRules kRulesOf<Sign>{sign_jvp, nullptr};
}  // namespace

// ---- stop_gradient: the identity on values, a zero tangent ----
namespace {
template <> constexpr StdAdRules kRulesOf<StopGradient>{zero_jvp, nullptr};
}  // namespace

// ---- pow by a constant p: d x^p = p x^(p-1) dx ----
namespace {
Tangent pow_jvp(Builder& b, const Instruction& inst, Primals x, Tangents t, const Value&) {
  const double p = std::get<Pow>(inst.op).exponent;
  if (!t[0] || p == 0) return std::nullopt;
  if (p == 1) return t[0];
  const Value power = p == 2 ? x[0] : b.pow(x[0], p - 1);
  return elementwise_jvp(b, t[0], b.mul(b.full(x[0].type, p), power));
}
template <> constexpr StdAdRules kRulesOf<Pow>{pow_jvp, nullptr};
}  // namespace

// ---- convert: linear between floating dtypes; nothing flows through integers ----
namespace {
Tangent convert_jvp(Builder& b, const Instruction& inst, Primals x, Tangents t, const Value& out) {
  if (!is_floating(x[0].type.dtype) || !is_floating(std::get<Convert>(inst.op).dtype)) return std::nullopt;
  return linear_jvp(b, inst, x, t, out);
}
Cotangents convert_transpose(Builder& b, const Instruction&, Primals x, Linear, const Value& ct) {
  if (!is_floating(x[0].type.dtype)) return {std::nullopt};
  return {cast_to(b, ct, x[0].type)};
}
template <> constexpr StdAdRules kRulesOf<Convert>{convert_jvp, convert_transpose};
}  // namespace

// ---- constant: no operands, zero tangent ----
namespace {
template <> constexpr StdAdRules kRulesOf<Constant>{zero_jvp, nullptr};
}  // namespace

// ---- the table, indexed by OpKind ----
namespace {
constexpr StdAdRules kTable[] = {
#define EIN_AD_RULES_(Struct, e) kRulesOf<Struct>,
    EIN_STD_OPS(EIN_AD_RULES_)
#undef EIN_AD_RULES_
};
static_assert(std::size(kTable) == kStdOpCount, "one AD rule entry per standard op");
}  // namespace

const StdAdRules& std_ad_rules(OpKind kind) {
  EIN_ASSERT(kind != OpKind::extension, "std_ad_rules(extension): extension rules live in ExtensionSemantics");
  return kTable[static_cast<size_t>(kind)];
}

}  // namespace einstage::ad
