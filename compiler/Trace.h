// The tracing front end: TraceContext hands out TracedTensors, and every operation on them appends one instruction
// to the Program being built (JAX's tracer, without Python). Stage: compiler, front end. Depends on ir only; it never
// includes runtime/ or extensions/ headers.
//
//   TraceContext ctx("loss", &registry);
//   TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 3});
//   TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
//   TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});   // extensions/einsum/op/TraceEinsum.h
//   Program p = ctx.finish({sum(y * y)});
//
// Each call goes through ir's Builder, so the op's type rule runs immediately: constant extents that disagree fail
// at the call (the message names the instruction), equalities involving symbols become the program's shape
// constraints. Extension families add their own tracing calls as free functions over TraceContext (einsum's are in
// extensions/einsum/op/TraceEinsum.h), which keeps the compiler free of any family. Binary operators promote dtypes (ir's
// promote(), through convert) and broadcast as NumPy does: axes align from the right, a missing leading axis or a
// constant extent 1 stretches to the other operand's extent (reshape + broadcast_in_dim); other shape differences are
// errors naming both types. A TracedTensor is a handle (context + value); it must not outlive its context.
#pragma once

#include "ir/Extension.h"
#include "ir/Program.h"

#include <array>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace einstage {

class TraceContext;

class TracedTensor {
 public:
  TracedTensor() = default;
  TracedTensor(TraceContext* ctx, Value value) : ctx_(ctx), value_(std::move(value)) {}
  // Copy, move and destroy are defined (= default) in compiler/Trace.cpp: a traced function makes and drops many
  // TracedTensors, and each inline copy or destroy of its Value (a type with a vector of Dims) was code generated in
  // the caller's translation unit (the guide's TRG step: 22 % of its object code, docs/performance.md).
  TracedTensor(const TracedTensor& other);
  TracedTensor(TracedTensor&& other) noexcept;
  TracedTensor& operator=(const TracedTensor& other);
  TracedTensor& operator=(TracedTensor&& other) noexcept;
  ~TracedTensor();

  TraceContext& context() const;
  const Value& value() const { return value_; }
  const TensorType& type() const { return value_.type; }
  DType dtype() const { return value_.type.dtype; }
  const std::vector<Dim>& dims() const { return value_.type.dims; }
  int rank() const { return value_.type.rank(); }
  bool valid() const { return ctx_ != nullptr; }

 private:
  TraceContext* ctx_ = nullptr;
  Value value_;
};

class TraceContext {
 public:
  /// `registry` provides extension families (may be null when the trace uses none); it must outlive the context.
  explicit TraceContext(std::string program_name = "traced", const ExtensionRegistry* registry = nullptr);
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  /// A named input; dims are constants or symbols (`Dim::symbol("n")`), bound when the program runs.
  TracedTensor parameter(std::string_view name, DType dtype, std::vector<Dim> dims);
  TracedTensor parameter(std::string_view name, TensorType type);
  /// A literal tensor (copied into the program).
  TracedTensor constant(const Tensor& value);
  /// A tensor of `type` filled with `value` (scalar constant + broadcast_in_dim for a non-scalar shape).
  TracedTensor full(const TensorType& type, double value);

  /// Appends any op (standard or extension) on these operands; the building block of the helpers below and of
  /// extension families' tracing calls. emit / extension return the one result of a single-result op (an op with
  /// several fails naming it); emit_results / extension_results return every result, in the op's order.
  TracedTensor emit(Op op, std::span<const TracedTensor> operands);
  TracedTensor extension(std::shared_ptr<const ExtensionPayload> payload, std::span<const TracedTensor> operands);
  std::vector<TracedTensor> emit_results(Op op, std::span<const TracedTensor> operands);
  std::vector<TracedTensor> extension_results(std::shared_ptr<const ExtensionPayload> payload,
                                              std::span<const TracedTensor> operands);

  /// Records lhs == rhs for the whole program (constants that differ fail now).
  void require_equal(const Dim& lhs, const Dim& rhs, std::string what);

  /// Sets the outputs and returns the verified program; the context is empty afterwards.
  Program finish(std::span<const TracedTensor> outputs);
  Program finish(std::initializer_list<TracedTensor> outputs) {
    return finish(std::span<const TracedTensor>(outputs.begin(), outputs.size()));
  }

  const Program& program() const { return builder_.program(); }
  const ExtensionRegistry* registry() const { return builder_.registry(); }
  Builder& builder() { return builder_; }

 private:
  TracedTensor wrap(Value v) { return TracedTensor(this, std::move(v)); }
  std::vector<Value> values_of(const Op& op, std::span<const TracedTensor> operands);
  Builder builder_;
};

// ---- operations (each appends one instruction, or a few for promotion/broadcast) ----

TracedTensor operator+(const TracedTensor& a, const TracedTensor& b);
TracedTensor operator-(const TracedTensor& a, const TracedTensor& b);
TracedTensor operator*(const TracedTensor& a, const TracedTensor& b);
TracedTensor operator/(const TracedTensor& a, const TracedTensor& b);
TracedTensor operator+(const TracedTensor& a, double b);
TracedTensor operator-(const TracedTensor& a, double b);
TracedTensor operator*(const TracedTensor& a, double b);
TracedTensor operator/(const TracedTensor& a, double b);
TracedTensor operator+(double a, const TracedTensor& b);
TracedTensor operator-(double a, const TracedTensor& b);
TracedTensor operator*(double a, const TracedTensor& b);
TracedTensor operator/(double a, const TracedTensor& b);
TracedTensor operator-(const TracedTensor& x);

// neg, conj, real, imag, exp, log, sqrt, sin, cos, tanh, sinh, cosh, abs, sign, stop_gradient (x): one per op of
// EIN_STD_UNARY_OPS (ir/Ops.h); the binary ones are the operators above.
#define EIN_TRACE_UNARY_(Struct, name) TracedTensor name(const TracedTensor& x);
EIN_STD_UNARY_OPS(EIN_TRACE_UNARY_)
#undef EIN_TRACE_UNARY_
/// x[begin:end:step] along one axis, the others whole: the same arguments and rule as Tensor::slice (ir/Tensor.h,
/// slice_extent), e.g. slice(u, 1, 0, k) keeps u's first k columns. On a symbolic axis end is not bounded while
/// tracing.
TracedTensor slice(const TracedTensor& x, int axis, int64_t begin, int64_t end, int64_t step = 1);
/// The slice op's own form (ir/Ops.h Slice): size[i] elements of every axis i from start[i], stride[i] apart.
TracedTensor strided_slice(const TracedTensor& x, Axes start, std::vector<Dim> size, Axes stride);
TracedTensor pad(const TracedTensor& x, Axes start, std::vector<Dim> shape, Axes stride);
TracedTensor pow(const TracedTensor& x, double exponent);
TracedTensor convert(const TracedTensor& x, DType dtype);
/// (a <cmp> b) ? x : y elementwise (ir/Ops.h Select), e.g. select(Comparison::gt, v, zero, v, zero) for max(v, 0).
/// a and b are promoted to a common dtype, x and y to another; rank-0 operands are broadcast to the shape of the
/// first operand that has axes. The gradient goes to x where the comparison holds and to y elsewhere, none to a or b.
TracedTensor select(Comparison cmp, const TracedTensor& a, const TracedTensor& b, const TracedTensor& x,
                    const TracedTensor& y);

TracedTensor reshape(const TracedTensor& x, std::vector<Dim> shape);
TracedTensor transpose(const TracedTensor& x, Axes perm);
TracedTensor broadcast_in_dim(const TracedTensor& x, Axes dims, std::vector<Dim> shape);
TracedTensor reduce_sum(const TracedTensor& x, Axes axes);
/// The sum over every axis (a scalar).
TracedTensor sum(const TracedTensor& x);
/// The maximum over `axes` (real dtypes); its derivative is the tangent at the first maximum (ir/Ops.h ReduceMax).
TracedTensor reduce_max(const TracedTensor& x, Axes axes);
/// The maximum over every axis (a scalar).
TracedTensor max(const TracedTensor& x);
TracedTensor extract_diag(const TracedTensor& x, int64_t axis_a, int64_t axis_b);
TracedTensor embed_diag(const TracedTensor& x, int64_t axis_a, int64_t axis_b);
TracedTensor dot_general(const TracedTensor& lhs, const TracedTensor& rhs, Axes lhs_contracting,
                         Axes rhs_contracting, Axes lhs_batch = {}, Axes rhs_batch = {});

/// The one context the operands share, for tracing calls that take no context argument (einsum::einsum(subscripts,
/// operands), linalg::svd(a), ...). `what` names the call in errors: no operands, an empty TracedTensor, or operands
/// from two contexts.
TraceContext& context_of(std::span<const TracedTensor> operands, std::string_view what);

// ---- tracing a C++ callable (JAX's jax.jit tracing, without Python) ----
//
//   Program f = trace("loss", {{"x", DType::f64, {Dim::symbol("n"), 3}}, {"w", DType::f64, {3, 4}}},
//                     [](TracedTensor x, TracedTensor w) { return sum(einsum::einsum("ij,jk->ik", {x, w})); },
//                     &registry);
//
// One parameter per spec, in order, passed to the callable: as that many TracedTensor arguments (up to 8), or as one
// std::span<const TracedTensor>. The callable returns the outputs: one TracedTensor, a std::vector of them, or a
// std::tuple / std::pair / std::array of them. The tensors are valid only during the call. <einstage/einstage.h> adds
// an overload without the registry that uses a registry with einsum and linalg (default_registry()).

struct ParamSpec {
  std::string name;
  DType dtype = DType::f64;
  std::vector<Dim> dims;
};

namespace trace_detail {

inline std::vector<TracedTensor> outputs_of(TracedTensor t) { return {std::move(t)}; }
inline std::vector<TracedTensor> outputs_of(std::vector<TracedTensor> ts) { return ts; }
template <class... T> std::vector<TracedTensor> outputs_of(const std::tuple<T...>& ts) {
  return std::apply([](const auto&... t) { return std::vector<TracedTensor>{TracedTensor(t)...}; }, ts);
}
template <class A, class B> std::vector<TracedTensor> outputs_of(const std::pair<A, B>& ts) {
  return {TracedTensor(ts.first), TracedTensor(ts.second)};
}
template <size_t N> std::vector<TracedTensor> outputs_of(const std::array<TracedTensor, N>& ts) {
  return {ts.begin(), ts.end()};
}

template <class F, size_t... I> constexpr bool takes_n(std::index_sequence<I...>) {
  return std::is_invocable_v<F&, decltype((void)I, std::declval<const TracedTensor&>())...>;
}

[[noreturn]] void arity_error(std::string_view name, size_t params);

// Calls f with the parameters as separate arguments when it takes params.size() of them (N counts up to 8).
template <size_t N, class F> std::vector<TracedTensor> call_spread(F& f, std::span<const TracedTensor> params,
                                                                   std::string_view name) {
  if constexpr (N > 8) {
    arity_error(name, params.size());
  } else {
    if constexpr (takes_n<F>(std::make_index_sequence<N>{})) {
      if (params.size() == N)
        return [&]<size_t... I>(std::index_sequence<I...>) { return outputs_of(f(params[I]...)); }(
            std::make_index_sequence<N>{});
    }
    return call_spread<N + 1>(f, params, name);
  }
}

// trace() without the template: makes the context and the parameters, calls body(callable, parameters, name) for
// the outputs and finishes the program. The context lives in compiler/Trace.cpp, so a caller's translation unit
// neither builds nor destroys a Builder.
using TraceBody = std::vector<TracedTensor> (*)(void* callable, std::span<const TracedTensor> params,
                                                std::string_view name);
Program trace_program(std::string name, const std::vector<ParamSpec>& params, const ExtensionRegistry* registry,
                      void* callable, TraceBody body);

}  // namespace trace_detail

template <class F>
Program trace(std::string name, const std::vector<ParamSpec>& params, F&& f, const ExtensionRegistry* registry) {
  using Callable = std::remove_reference_t<F>;
  trace_detail::TraceBody body = [](void* callable, std::span<const TracedTensor> traced, std::string_view name) {
    Callable& fn = *static_cast<Callable*>(callable);
    if constexpr (std::is_invocable_v<Callable&, std::span<const TracedTensor>>)
      return trace_detail::outputs_of(fn(traced));
    else
      return trace_detail::call_spread<0>(fn, traced, name);
  };
  return trace_detail::trace_program(std::move(name), params, registry,
                                     const_cast<void*>(static_cast<const void*>(std::addressof(f))), body);
}

}  // namespace einstage
