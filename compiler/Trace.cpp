// TraceContext and the tracing operations: thin wrappers over ir's Builder plus dtype promotion and rank-0
// broadcasting for the binary operators.
#include "compiler/Trace.h"

#include "ir/Quote.h"
#include "ir/Tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace einstage {

TracedTensor::TracedTensor(const TracedTensor& other) = default;
TracedTensor::TracedTensor(TracedTensor&& other) noexcept = default;
TracedTensor& TracedTensor::operator=(const TracedTensor& other) = default;
TracedTensor& TracedTensor::operator=(TracedTensor&& other) noexcept = default;
TracedTensor::~TracedTensor() = default;

TraceContext& TracedTensor::context() const {
  if (!ctx_) fail(ErrorKind::invalid_argument, "use of an empty TracedTensor; take tensors from a TraceContext");
  return *ctx_;
}

TraceContext& context_of(std::span<const TracedTensor> operands, std::string_view what) {
  if (operands.empty())
    fail(ErrorKind::invalid_argument, "{}: no operands to take the trace context from; pass the TraceContext as the "
         "first argument", what);
  TraceContext& ctx = operands[0].context();
  for (size_t k = 1; k < operands.size(); ++k)
    if (&operands[k].context() != &ctx)
      fail(ErrorKind::invalid_argument, "{}: operand {} comes from another trace than operand 0 (@{} and @{}); "
           "trace every operand in one TraceContext", what, k, shown_arg(operands[k].context().program().name),
           shown_arg(ctx.program().name));
  return ctx;
}

namespace trace_detail {

void arity_error(std::string_view name, size_t params) {
  fail(ErrorKind::invalid_argument, "trace: @{} has {} parameter spec{} but the callable takes neither {} TracedTensor "
       "argument{} nor one std::span<const TracedTensor>; give one spec per argument (up to 8 arguments, or take a "
       "span)", shown_arg(name), params, params == 1 ? "" : "s", params, params == 1 ? "" : "s");
}

Program trace_program(std::string name, const std::vector<ParamSpec>& params, const ExtensionRegistry* registry,
                      void* callable, TraceBody body) {
  TraceContext ctx(name, registry);
  std::vector<TracedTensor> traced;
  for (const ParamSpec& p : params) traced.push_back(ctx.parameter(p.name, p.dtype, p.dims));
  const std::vector<TracedTensor> outputs = body(callable, traced, name);
  return ctx.finish(outputs);
}

}  // namespace trace_detail

TraceContext::TraceContext(std::string program_name, const ExtensionRegistry* registry)
    : builder_(std::move(program_name), registry) {}

TracedTensor TraceContext::parameter(std::string_view name, DType dtype, std::vector<Dim> dims) {
  return parameter(name, TensorType{dtype, std::move(dims)});
}

TracedTensor TraceContext::parameter(std::string_view name, TensorType type) {
  return wrap(builder_.parameter(name, std::move(type)));
}

TracedTensor TraceContext::constant(const Tensor& value) { return wrap(builder_.constant(value.contiguous())); }

TracedTensor TraceContext::full(const TensorType& type, double value) { return wrap(builder_.full(type, value)); }

std::vector<Value> TraceContext::values_of(const Op& op, std::span<const TracedTensor> operands) {
  std::vector<Value> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (&operands[i].context() != this)
      fail(ErrorKind::invalid_argument, "'{}' in @{}: operand {} belongs to another TraceContext; a program is traced "
           "in one context", op_name(op), builder_.program().name, i);
    values.push_back(operands[i].value());
  }
  return values;
}

TracedTensor TraceContext::emit(Op op, std::span<const TracedTensor> operands) {
  std::vector<Value> values = values_of(op, operands);
  return wrap(builder_.emit(std::move(op), std::move(values)));
}

std::vector<TracedTensor> TraceContext::emit_results(Op op, std::span<const TracedTensor> operands) {
  std::vector<Value> values = values_of(op, operands);
  std::vector<TracedTensor> out;
  for (Value& v : builder_.emit_results(std::move(op), std::move(values))) out.push_back(wrap(std::move(v)));
  return out;
}

TracedTensor TraceContext::extension(std::shared_ptr<const ExtensionPayload> payload,
                                     std::span<const TracedTensor> operands) {
  return emit(ExtensionOp{std::move(payload)}, operands);
}

std::vector<TracedTensor> TraceContext::extension_results(std::shared_ptr<const ExtensionPayload> payload,
                                                          std::span<const TracedTensor> operands) {
  return emit_results(ExtensionOp{std::move(payload)}, operands);
}

void TraceContext::require_equal(const Dim& lhs, const Dim& rhs, std::string what) {
  builder_.require_equal(lhs, rhs, std::move(what));
}

Program TraceContext::finish(std::span<const TracedTensor> outputs) {
  std::vector<Value> values;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (&outputs[i].context() != this)
      fail(ErrorKind::invalid_argument, "@{}: output {} belongs to another TraceContext", builder_.program().name, i);
    values.push_back(outputs[i].value());
  }
  return builder_.finish(std::move(values));
}

namespace {

TracedTensor unary(const TracedTensor& x, Op op) {
  return x.context().emit(std::move(op), std::span<const TracedTensor>(&x, 1));
}

// Promotes both operands to a common dtype and broadcasts a rank-0 operand to the other's shape, then emits `op`.
bool is_one(const Dim& d) { return d.is_constant() && d.constant() == 1; }

// NumPy's broadcast shape of a and b: axes aligned from the right, an axis missing or of constant extent 1 takes the
// other's extent. nullopt when two extents differ and neither is 1 (the op's own type rule then names both types).
std::optional<std::vector<Dim>> broadcast_shape(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<Dim> out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim* da = i + a.size() >= r ? &a[i + a.size() - r] : nullptr;
    const Dim* db = i + b.size() >= r ? &b[i + b.size() - r] : nullptr;
    if (!da || (db && is_one(*da))) out[i] = *db;
    else if (!db || is_one(*db) || *da == *db) out[i] = *da;
    else return std::nullopt;
  }
  return out;
}

// x stretched to `shape` (a NumPy broadcast of its dims): its stretched extent-1 axes dropped by a reshape, the rest
// placed on the trailing axes they align with by broadcast_in_dim.
TracedTensor stretch(const TracedTensor& x, const std::vector<Dim>& shape) {
  const size_t offset = shape.size() - size_t(x.rank());
  std::vector<Dim> kept_dims;
  Axes kept_axes;
  for (size_t i = 0; i < size_t(x.rank()); ++i)
    if (!(is_one(x.dims()[i]) && !is_one(shape[offset + i]))) {
      kept_dims.push_back(x.dims()[i]);
      kept_axes.push_back(int64_t(offset + i));
    }
  TracedTensor squeezed = kept_dims.size() == size_t(x.rank()) ? x : reshape(x, kept_dims);
  return broadcast_in_dim(squeezed, kept_axes, shape);
}

TracedTensor binary(TracedTensor a, TracedTensor b, Op op) {
  TraceContext& ctx = a.context();
  if (&b.context() != &ctx)
    fail(ErrorKind::invalid_argument, "'{}': operands belong to different TraceContexts", op_name(op));
  DType t = promote(a.dtype(), b.dtype());
  if (a.dtype() != t) a = convert(a, t);
  if (b.dtype() != t) b = convert(b, t);
  if (a.rank() == 0 && b.rank() > 0) a = broadcast_in_dim(a, {}, b.dims());
  if (b.rank() == 0 && a.rank() > 0) b = broadcast_in_dim(b, {}, a.dims());
  if (a.dims() != b.dims())  // NumPy broadcasting: extent-1 and missing leading axes stretch
    if (auto shape = broadcast_shape(a.dims(), b.dims())) {
      if (a.dims() != *shape) a = stretch(a, *shape);
      if (b.dims() != *shape) b = stretch(b, *shape);
    }
  const TracedTensor operands[] = {a, b};
  return ctx.emit(std::move(op), operands);
}

TracedTensor scalar_like(const TracedTensor& x, double v) {
  return x.context().full(TensorType{x.dtype(), {}}, v);
}

}  // namespace

TracedTensor operator+(const TracedTensor& a, const TracedTensor& b) { return binary(a, b, Add{}); }
TracedTensor operator-(const TracedTensor& a, const TracedTensor& b) { return binary(a, b, Sub{}); }
TracedTensor operator*(const TracedTensor& a, const TracedTensor& b) { return binary(a, b, Mul{}); }
TracedTensor operator/(const TracedTensor& a, const TracedTensor& b) { return binary(a, b, Div{}); }
TracedTensor operator+(const TracedTensor& a, double b) { return a + scalar_like(a, b); }
TracedTensor operator-(const TracedTensor& a, double b) { return a - scalar_like(a, b); }
TracedTensor operator*(const TracedTensor& a, double b) { return a * scalar_like(a, b); }
TracedTensor operator/(const TracedTensor& a, double b) { return a / scalar_like(a, b); }
TracedTensor operator+(double a, const TracedTensor& b) { return scalar_like(b, a) + b; }
TracedTensor operator-(double a, const TracedTensor& b) { return scalar_like(b, a) - b; }
TracedTensor operator*(double a, const TracedTensor& b) { return scalar_like(b, a) * b; }
TracedTensor operator/(double a, const TracedTensor& b) { return scalar_like(b, a) / b; }
TracedTensor operator-(const TracedTensor& x) { return neg(x); }

#define EIN_TRACE_UNARY_(Struct, name) \
  TracedTensor name(const TracedTensor& x) { return unary(x, Struct{}); }
EIN_STD_UNARY_OPS(EIN_TRACE_UNARY_)
#undef EIN_TRACE_UNARY_
TracedTensor strided_slice(const TracedTensor& x, Axes start, std::vector<Dim> size, Axes stride) {
  return unary(x, Slice{std::move(size), std::move(start), std::move(stride)});
}
TracedTensor slice(const TracedTensor& x, int axis, int64_t begin, int64_t end, int64_t step) {
  if (axis < 0 || axis >= x.rank())
    fail(ErrorKind::invalid_argument, "slice: axis {} is out of range for {} of rank {}; give an axis in [0, {})", axis,
         x.type().to_string(), x.rank(), x.rank());
  const Dim& n = x.dims()[static_cast<size_t>(axis)];
  const int64_t size = slice_extent(axis, n.is_constant() ? n.constant() : -1, begin, end, step);
  Axes start(static_cast<size_t>(x.rank()), 0), stride(static_cast<size_t>(x.rank()), 1);
  std::vector<Dim> sizes = x.dims();
  start[static_cast<size_t>(axis)] = begin;
  stride[static_cast<size_t>(axis)] = step;
  sizes[static_cast<size_t>(axis)] = Dim(size);
  return strided_slice(x, std::move(start), std::move(sizes), std::move(stride));
}
TracedTensor pad(const TracedTensor& x, Axes start, std::vector<Dim> shape, Axes stride) {
  return unary(x, Pad{std::move(shape), std::move(start), std::move(stride)});
}
TracedTensor pow(const TracedTensor& x, double exponent) { return unary(x, Pow{exponent}); }
TracedTensor convert(const TracedTensor& x, DType dtype) { return unary(x, Convert{dtype}); }
TracedTensor select(Comparison cmp, const TracedTensor& a, const TracedTensor& b, const TracedTensor& x,
                    const TracedTensor& y) {
  TraceContext& ctx = a.context();
  TracedTensor ops[] = {a, b, x, y};
  for (const TracedTensor& t : ops)
    if (&t.context() != &ctx)
      fail(ErrorKind::invalid_argument, "'select': operands belong to different TraceContexts");
  for (size_t pair : {size_t{0}, size_t{2}}) {
    DType t = promote(ops[pair].dtype(), ops[pair + 1].dtype());
    for (size_t k = pair; k < pair + 2; ++k)
      if (ops[k].dtype() != t) ops[k] = convert(ops[k], t);
  }
  for (const TracedTensor& shaped : ops)
    if (shaped.rank() > 0) {
      std::vector<Dim> dims = shaped.dims();
      for (TracedTensor& t : ops)
        if (t.rank() == 0) t = broadcast_in_dim(t, {}, dims);
      break;
    }
  return ctx.emit(Select{cmp}, ops);
}

TracedTensor reshape(const TracedTensor& x, std::vector<Dim> shape) { return unary(x, Reshape{std::move(shape)}); }
TracedTensor transpose(const TracedTensor& x, Axes perm) { return unary(x, Transpose{std::move(perm)}); }
TracedTensor broadcast_in_dim(const TracedTensor& x, Axes dims, std::vector<Dim> shape) {
  return unary(x, BroadcastInDim{std::move(dims), std::move(shape)});
}
TracedTensor reduce_sum(const TracedTensor& x, Axes axes) { return unary(x, ReduceSum{std::move(axes)}); }
namespace {
Axes all_axes(const TracedTensor& x) {
  Axes all;
  for (int i = 0; i < x.rank(); ++i) all.push_back(i);
  return all;
}
}  // namespace
TracedTensor sum(const TracedTensor& x) { return reduce_sum(x, all_axes(x)); }
TracedTensor reduce_max(const TracedTensor& x, Axes axes) { return unary(x, ReduceMax{std::move(axes)}); }
TracedTensor max(const TracedTensor& x) { return reduce_max(x, all_axes(x)); }
TracedTensor extract_diag(const TracedTensor& x, int64_t a, int64_t b) { return unary(x, ExtractDiag{a, b}); }
TracedTensor embed_diag(const TracedTensor& x, int64_t a, int64_t b) { return unary(x, EmbedDiag{a, b}); }
TracedTensor dot_general(const TracedTensor& lhs, const TracedTensor& rhs, Axes lhs_contracting,
                         Axes rhs_contracting, Axes lhs_batch, Axes rhs_batch) {
  const TracedTensor operands[] = {lhs, rhs};
  return lhs.context().emit(DotGeneral{std::move(lhs_batch), std::move(lhs_contracting), std::move(rhs_batch),
                                       std::move(rhs_contracting)},
                            operands);
}

}  // namespace einstage
