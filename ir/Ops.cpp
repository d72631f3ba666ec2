// Type rules of the standard ops, one block per op in the order of ir/Ops.h. Each rule checks its operands and
// attributes with messages that name the op (via TypeContext), the operand and the axis, and returns the result type.
#include "ir/Ops.h"

#include "ir/AttrText.h"
#include "ir/Extension.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace einstage {

Dim TypeContext::unify(const Dim& a, const Dim& b, std::string_view what) {
  if (a == b) return a;
  if (a.is_constant() && b.is_constant())
    error(ErrorKind::shape, "{}: extent {} does not match extent {}", what, a.to_string(), b.to_string());
  if (record_) record_->push_back({a, b, fmt::format("'{}' {}", op_name_, what)});
  return b.is_constant() ? b : a;
}

namespace {

// Axes must be in [0, rank) and distinct; `increasing` additionally requires strictly increasing order.
void check_axes(TypeContext& ctx, const Axes& axes, int rank, std::string_view attr_name, bool increasing) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0 || a >= rank)
      ctx.error(ErrorKind::invalid_argument, "{}[{}] = {} is out of range for operand rank {}; expected 0..{}",
                attr_name, i, a, rank, rank - 1);
    if (seen[static_cast<size_t>(a)])
      ctx.error(ErrorKind::invalid_argument, "{} = [{}] names axis {} twice", attr_name, fmt::join(axes, ", "), a);
    if (increasing && i > 0 && axes[i - 1] > a)
      ctx.error(ErrorKind::invalid_argument, "{} = [{}] must be strictly increasing", attr_name, fmt::join(axes, ", "));
    seen[static_cast<size_t>(a)] = true;
  }
}

bool contains(const Axes& axes, int64_t a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); }

// Elementwise binary: equal dtypes and ranks; extents unify (constants must match, symbols become constraints).
TensorType binary_type(Types in, TypeContext& ctx) {
  const TensorType &a = in[0], &b = in[1];
  if (a.dtype != b.dtype)
    ctx.error(ErrorKind::dtype, "operand 1 has type {} but operand 0 has {}; operands must have equal dtypes "
              "(insert a convert)", b.to_string(), a.to_string());
  if (a.rank() != b.rank())
    ctx.error(ErrorKind::shape, "operand 1 has type {} but operand 0 has {}; operands must have equal shapes "
              "(insert a broadcast_in_dim)", b.to_string(), a.to_string());
  TensorType r{a.dtype, {}};
  for (int i = 0; i < a.rank(); ++i)
    r.dims.push_back(ctx.unify(a.dims[i], b.dims[i], [&] {
      return fmt::format("operand 1 axis {} (operand 0 is {}, operand 1 is {})", i, a.to_string(), b.to_string());
    }));
  return r;
}

TensorType floating_unary(Types in, TypeContext& ctx) {
  if (!is_floating(in[0].dtype))
    ctx.error(ErrorKind::dtype, "operand 0 has type {}; expected a floating dtype (f32, f64, c64, c128): insert a "
              "convert", in[0].to_string());
  return in[0];
}

}  // namespace

// ---- dot_general: output [lhs free, rhs free, batch] ----
TensorType DotGeneral::infer(const DotGeneral& op, Types in, TypeContext& ctx) {
  const TensorType &l = in[0], &r = in[1];
  if (l.dtype != r.dtype)
    ctx.error(ErrorKind::dtype, "operand 1 has type {} but operand 0 has {}; operands must have equal dtypes "
              "(insert a convert)", r.to_string(), l.to_string());
  check_axes(ctx, op.lhs_contracting, l.rank(), "lhs_contracting", false);
  check_axes(ctx, op.rhs_contracting, r.rank(), "rhs_contracting", false);
  check_axes(ctx, op.lhs_batch, l.rank(), "lhs_batch", false);
  check_axes(ctx, op.rhs_batch, r.rank(), "rhs_batch", false);
  if (op.lhs_contracting.size() != op.rhs_contracting.size())
    ctx.error(ErrorKind::invalid_argument, "lhs_contracting has {} axes but rhs_contracting has {}; they pair up",
              op.lhs_contracting.size(), op.rhs_contracting.size());
  if (op.lhs_batch.size() != op.rhs_batch.size())
    ctx.error(ErrorKind::invalid_argument, "lhs_batch has {} axes but rhs_batch has {}; they pair up",
              op.lhs_batch.size(), op.rhs_batch.size());
  for (int64_t a : op.lhs_batch)
    if (contains(op.lhs_contracting, a))
      ctx.error(ErrorKind::invalid_argument, "lhs axis {} is both a batch and a contracting axis", a);
  for (int64_t a : op.rhs_batch)
    if (contains(op.rhs_contracting, a))
      ctx.error(ErrorKind::invalid_argument, "rhs axis {} is both a batch and a contracting axis", a);
  for (size_t i = 0; i < op.lhs_contracting.size(); ++i) {
    int64_t la = op.lhs_contracting[i], ra = op.rhs_contracting[i];
    ctx.unify(l.dims[la], r.dims[ra],
              [&] { return fmt::format("contracting pair {}: lhs axis {} vs rhs axis {}", i, la, ra); });
  }
  std::vector<Dim> batch;
  for (size_t i = 0; i < op.lhs_batch.size(); ++i) {
    int64_t la = op.lhs_batch[i], ra = op.rhs_batch[i];
    batch.push_back(ctx.unify(l.dims[la], r.dims[ra],
                              [&] { return fmt::format("batch pair {}: lhs axis {} vs rhs axis {}", i, la, ra); }));
  }
  TensorType out{l.dtype, {}};
  for (int a = 0; a < l.rank(); ++a)
    if (!contains(op.lhs_contracting, a) && !contains(op.lhs_batch, a)) out.dims.push_back(l.dims[a]);
  for (int a = 0; a < r.rank(); ++a)
    if (!contains(op.rhs_contracting, a) && !contains(op.rhs_batch, a)) out.dims.push_back(r.dims[a]);
  out.dims.insert(out.dims.end(), batch.begin(), batch.end());
  return out;
}

// ---- transpose ----
TensorType Transpose::infer(const Transpose& op, Types in, TypeContext& ctx) {
  if (static_cast<int>(op.perm.size()) != in[0].rank())
    ctx.error(ErrorKind::invalid_argument, "perm = [{}] has {} entries but operand 0 ({}) has rank {}",
              fmt::join(op.perm, ", "), op.perm.size(), in[0].to_string(), in[0].rank());
  check_axes(ctx, op.perm, in[0].rank(), "perm", false);
  TensorType out{in[0].dtype, {}};
  for (int64_t a : op.perm) out.dims.push_back(in[0].dims[a]);
  return out;
}

// ---- reshape (column-major) ----
TensorType Reshape::infer(const Reshape& op, Types in, TypeContext& ctx) {
  Dim from = product(in[0].dims), to = product(op.shape);
  if (from != to) {
    if (from.is_constant() && to.is_constant())
      ctx.error(ErrorKind::shape, "cannot reshape {} ({} elements) to [{}] ({} elements)", in[0].to_string(),
                from.to_string(), fmt::join(op.shape, ","), to.to_string());
    ctx.unify(from, to, [&] {
      return fmt::format("element count of {} vs shape [{}]", in[0].to_string(), fmt::join(op.shape, ","));
    });
  }
  return TensorType{in[0].dtype, op.shape};
}

// ---- broadcast_in_dim ----
TensorType BroadcastInDim::infer(const BroadcastInDim& op, Types in, TypeContext& ctx) {
  const TensorType& x = in[0];
  if (static_cast<int>(op.dims.size()) != x.rank())
    ctx.error(ErrorKind::invalid_argument, "dims = [{}] has {} entries but operand 0 ({}) has rank {}",
              fmt::join(op.dims, ", "), op.dims.size(), x.to_string(), x.rank());
  check_axes(ctx, op.dims, static_cast<int>(op.shape.size()), "dims", true);
  for (int i = 0; i < x.rank(); ++i) {
    const Dim& target = op.shape[op.dims[i]];
    if (x.dims[i] == Dim(1)) continue;  // length-1 axes are repeated
    ctx.unify(x.dims[i], target, [&] {
      return fmt::format("operand axis {} ({}) vs shape[{}] ({}); it must match or be 1", i, x.dims[i].to_string(),
                         op.dims[i], target.to_string());
    });
  }
  return TensorType{x.dtype, op.shape};
}

namespace {
// The type of a reduction of `x` over `axes`: those axes removed, the others in order.
TensorType reduced_type(const TensorType& x, const Axes& axes) {
  TensorType out{x.dtype, {}};
  for (int a = 0; a < x.rank(); ++a)
    if (!contains(axes, a)) out.dims.push_back(x.dims[a]);
  return out;
}
}  // namespace

// ---- reduce_sum ----
TensorType ReduceSum::infer(const ReduceSum& op, Types in, TypeContext& ctx) {
  check_axes(ctx, op.axes, in[0].rank(), "axes", true);
  return reduced_type(in[0], op.axes);
}

namespace {
// reduce_max and first_max_mask: strictly increasing axes of a real operand (maxima of complex numbers are undefined).
void check_max_operand(TypeContext& ctx, const Axes& axes, const TensorType& x) {
  check_axes(ctx, axes, x.rank(), "axes", true);
  if (is_complex(x.dtype))
    ctx.error(ErrorKind::dtype, "operand 0 has type {}; expected a real dtype (f32, f64, i64): complex numbers have no "
              "maximum (take abs or real first)", x.to_string());
}
}  // namespace

// ---- reduce_max ----
TensorType ReduceMax::infer(const ReduceMax& op, Types in, TypeContext& ctx) {
  check_max_operand(ctx, op.axes, in[0]);
  return reduced_type(in[0], op.axes);
}

// ---- first_max_mask: the operand's type ----
TensorType FirstMaxMask::infer(const FirstMaxMask& op, Types in, TypeContext& ctx) {
  check_max_operand(ctx, op.axes, in[0]);
  return in[0];
}

namespace {
void check_diag_axes(TypeContext& ctx, int64_t a, int64_t b, int rank, const char* which) {
  if (a < 0 || a >= rank || b < 0 || b >= rank)
    ctx.error(ErrorKind::invalid_argument, "axis_a = {}, axis_b = {} out of range for {} rank {}; expected 0..{}", a,
              b, which, rank, rank - 1);
  if (a == b) ctx.error(ErrorKind::invalid_argument, "axis_a and axis_b are both {}; they must differ", a);
}
}  // namespace

// ---- extract_diag: drops axis_b, keeps the diagonal at axis_a ----
TensorType ExtractDiag::infer(const ExtractDiag& op, Types in, TypeContext& ctx) {
  check_diag_axes(ctx, op.axis_a, op.axis_b, in[0].rank(), "operand");
  TensorType out = in[0];
  out.dims[op.axis_a] = ctx.unify(in[0].dims[op.axis_a], in[0].dims[op.axis_b],
                                  [&] {
                                    return fmt::format("diagonal axes {} and {} of {}", op.axis_a, op.axis_b,
                                                       in[0].to_string());
                                  });
  out.dims.erase(out.dims.begin() + op.axis_b);
  return out;
}

// ---- embed_diag: inserts result axis axis_b, equal in extent to result axis axis_a ----
TensorType EmbedDiag::infer(const EmbedDiag& op, Types in, TypeContext& ctx) {
  check_diag_axes(ctx, op.axis_a, op.axis_b, in[0].rank() + 1, "result");
  int64_t a_in = op.axis_a < op.axis_b ? op.axis_a : op.axis_a - 1;  // axis_a numbered in the operand
  TensorType out = in[0];
  out.dims.insert(out.dims.begin() + op.axis_b, in[0].dims[a_in]);
  return out;
}

namespace {
// start and stride of slice and pad: one entry per axis, start >= 0, stride >= 1, and `listed` (slice's size, pad's
// shape) one entry per axis too. Along every axis whose extents are constants, the last of the elements slice takes
// (pad places), start + (n - 1) * stride, must lie inside the larger side: slice's operand, pad's result.
void check_strided_window(TypeContext& ctx, const Axes& start, const Axes& stride, const TensorType& operand,
                          const std::vector<Dim>& listed, bool is_slice) {
  const size_t rank = static_cast<size_t>(operand.rank());
  const char* listed_name = is_slice ? "size" : "shape";
  for (auto [name, n] : {std::pair{"start", start.size()}, std::pair{"stride", stride.size()},
                         std::pair{listed_name, listed.size()}})
    if (n != rank)
      ctx.error(ErrorKind::invalid_argument, "{} has {} entries but operand 0 ({}) has rank {}; give one per axis",
                name, n, operand.to_string(), rank);
  const std::vector<Dim>& inner = is_slice ? listed : operand.dims;
  const std::vector<Dim>& outer = is_slice ? operand.dims : listed;
  for (size_t i = 0; i < rank; ++i) {
    if (stride[i] < 1) ctx.error(ErrorKind::invalid_argument, "stride[{}] = {} must be at least 1", i, stride[i]);
    if (start[i] < 0) ctx.error(ErrorKind::invalid_argument, "start[{}] = {} is negative", i, start[i]);
    if (!inner[i].is_constant() || !outer[i].is_constant() || inner[i].constant() == 0) continue;
    const int64_t last = start[i] + (inner[i].constant() - 1) * stride[i];
    if (last >= outer[i].constant())
      ctx.error(ErrorKind::shape, "axis {}: start {} + ({} elements - 1) * stride {} = {} is past the extent {}; {}", i,
                start[i], inner[i].constant(), stride[i], last, outer[i].constant(),
                is_slice ? "lower start, size or stride" : "lower start or stride, or enlarge shape");
  }
}
}  // namespace

// ---- slice: static start, size and stride per axis ----
TensorType Slice::infer(const Slice& op, Types in, TypeContext& ctx) {
  check_strided_window(ctx, op.start, op.stride, in[0], op.size, true);
  return TensorType{in[0].dtype, op.size};
}

// ---- pad: the transpose of slice ----
TensorType Pad::infer(const Pad& op, Types in, TypeContext& ctx) {
  check_strided_window(ctx, op.start, op.stride, in[0], op.shape, false);
  return TensorType{in[0].dtype, op.shape};
}

// ---- elementwise ----
TensorType Add::infer(const Add&, Types in, TypeContext& ctx) { return binary_type(in, ctx); }
TensorType Sub::infer(const Sub&, Types in, TypeContext& ctx) { return binary_type(in, ctx); }
TensorType Mul::infer(const Mul&, Types in, TypeContext& ctx) { return binary_type(in, ctx); }
TensorType Div::infer(const Div&, Types in, TypeContext& ctx) { return binary_type(in, ctx); }
TensorType Neg::infer(const Neg&, Types in, TypeContext&) { return in[0]; }
TensorType Conj::infer(const Conj&, Types in, TypeContext&) { return in[0]; }
TensorType Real::infer(const Real&, Types in, TypeContext&) { return {real_part_type(in[0].dtype), in[0].dims}; }
TensorType Imag::infer(const Imag&, Types in, TypeContext&) { return {real_part_type(in[0].dtype), in[0].dims}; }
TensorType Exp::infer(const Exp&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Log::infer(const Log&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Sqrt::infer(const Sqrt&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Sin::infer(const Sin&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Cos::infer(const Cos&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Tanh::infer(const Tanh&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Sinh::infer(const Sinh&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Cosh::infer(const Cosh&, Types in, TypeContext& ctx) { return floating_unary(in, ctx); }
TensorType Abs::infer(const Abs&, Types in, TypeContext&) { return {real_part_type(in[0].dtype), in[0].dims}; }
TensorType Sign::infer(const Sign&, Types in, TypeContext&) { return in[0]; }
TensorType StopGradient::infer(const StopGradient&, Types in, TypeContext&) { return in[0]; }

// ---- select: a and b compared, x and y selected; one shape for all four ----
TensorType Select::infer(const Select& op, Types in, TypeContext& ctx) {
  const TensorType &a = in[0], &b = in[1], &x = in[2], &y = in[3];
  if (a.dtype != b.dtype)
    ctx.error(ErrorKind::dtype, "operand 1 (b) has type {} but operand 0 (a) has {}; the compared operands must have "
              "equal dtypes (insert a convert)", b.to_string(), a.to_string());
  if (x.dtype != y.dtype)
    ctx.error(ErrorKind::dtype, "operand 3 (y) has type {} but operand 2 (x) has {}; the selected operands must have "
              "equal dtypes (insert a convert)", y.to_string(), x.to_string());
  if (is_ordered(op.cmp) && is_complex(a.dtype))
    ctx.error(ErrorKind::dtype, "cmp = {} needs real compared operands but operand 0 (a) has type {}: complex numbers "
              "have no order (compare their abs or real parts, or use eq or ne)", name(op.cmp), a.to_string());
  constexpr const char* kNames[] = {"a", "b", "x", "y"};
  TensorType out{x.dtype, a.dims};
  for (size_t k = 1; k < 4; ++k) {
    const TensorType& t = in[k];
    if (t.rank() != a.rank())
      ctx.error(ErrorKind::shape, "operand {} ({}) has type {} but operand 0 (a) has {}; all four operands must have "
                "equal shapes (insert a broadcast_in_dim)", k, kNames[k], t.to_string(), a.to_string());
    for (int i = 0; i < a.rank(); ++i)
      out.dims[i] = ctx.unify(out.dims[i], t.dims[i], [&] {
        return fmt::format("operand {} ({}) axis {} (operand 0 is {}, operand {} is {})", k, kNames[k], i,
                           a.to_string(), k, t.to_string());
      });
  }
  return out;
}

// ---- pow by a constant ----
TensorType Pow::infer(const Pow& op, Types in, TypeContext& ctx) {
  if (!std::isfinite(op.exponent))
    ctx.error(ErrorKind::invalid_argument, "exponent = {} is not finite; expected a finite real number",
              format_float(op.exponent));
  return floating_unary(in, ctx);
}

// ---- convert ----
TensorType Convert::infer(const Convert& op, Types in, TypeContext& ctx) {
  if (is_complex(in[0].dtype) && !is_complex(op.dtype))
    ctx.error(ErrorKind::dtype, "cannot convert {} to {}: complex to real would drop the imaginary part; use real or "
              "imag", in[0].to_string(), name(op.dtype));
  return TensorType{op.dtype, in[0].dims};
}

// ---- constant ----
TensorType Constant::infer(const Constant& op, Types, TypeContext& ctx) {
  if (!op.value.defined()) ctx.error(ErrorKind::invalid_argument, "value is an undefined tensor");
  TensorType t{op.value.dtype(), {}};
  for (int64_t e : op.value.shape()) t.dims.push_back(Dim(e));
  return t;
}

// ---- the table ----

namespace {
constexpr std::string_view kKindNames[] = {
#define EIN_NAME_(Struct, e) Struct::kName,
    EIN_STD_OPS(EIN_NAME_)
#undef EIN_NAME_
    "extension"};
constexpr int kArities[] = {
#define EIN_ARITY_(Struct, e) Struct::kArity,
    EIN_STD_OPS(EIN_ARITY_)
#undef EIN_ARITY_
};
#define EIN_CHECK_(Struct, e)                                                                          \
  static_assert(std::is_same_v<std::variant_alternative_t<static_cast<size_t>(OpKind::e), Op>, Struct>); \
  static_assert(Struct::kName == #e);
EIN_STD_OPS(EIN_CHECK_)
#undef EIN_CHECK_
static_assert(std::size(kKindNames) == kOpKindCount);
}  // namespace

std::string_view op_kind_name(OpKind kind) { return kKindNames[static_cast<size_t>(kind)]; }

std::string_view op_name(const Op& op) {
  if (const auto* ext = std::get_if<ExtensionOp>(&op)) return ext->family();
  return op_kind_name(kind(op));
}

std::optional<OpKind> std_op_from_name(std::string_view name) {
  for (size_t i = 0; i < kStdOpCount; ++i)
    if (kKindNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

int std_op_arity(OpKind kind) {
  EIN_ASSERT(kind != OpKind::extension, "extension ops have no fixed arity");
  return kArities[static_cast<size_t>(kind)];
}

namespace {
template <size_t... I> Op make_op_impl(size_t index, std::index_sequence<I...>) {
  Op result;
  ((index == I ? (result = std::variant_alternative_t<I, Op>{}, 0) : 0), ...);
  return result;
}
}  // namespace

Op make_std_op(OpKind kind) {
  EIN_ASSERT(kind != OpKind::extension, "make_std_op(extension)");
  return make_op_impl(static_cast<size_t>(kind), std::make_index_sequence<kStdOpCount>{});
}

uint64_t hash_op(const Op& op) {
  if (const auto* ext = std::get_if<ExtensionOp>(&op)) return hash_bytes(ext->family(), ext->payload->hash());
  return hash_bytes(format_op_attributes(op), hash_bytes(op_name(op)));
}

TensorType infer_std_op(const Op& op, Types operands, TypeContext& ctx) {
  return std::visit(
      [&](const auto& o) -> TensorType {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, ExtensionOp>) {
          EIN_ASSERT(false, "infer_std_op called on an extension op");
          return {};
        } else {
          if (static_cast<int>(operands.size()) != T::kArity)
            ctx.error(ErrorKind::invalid_argument, "takes {} operand{} but {} were given", T::kArity,
                      T::kArity == 1 ? "" : "s", operands.size());
          return T::infer(o, operands, ctx);
        }
      },
      op);
}

}  // namespace einstage
