// The standard op set: one struct per op holding its attributes, its text name, arity and type rule (XLA's opcode
// table, JAX's lax.py rhythm). Semantic IR (compiler stage); depends on ir/Type.h, ir/Tensor.h, ir/ExtensionOp.h.
//
// Semantics, written once (docs/ir.md has the full reference with examples):
// - Column-major throughout: reshape keeps column-major element order (NumPy order="F").
// - Operands of elementwise binary ops have equal types (no implicit promotion or broadcasting: the tracer inserts
//   convert and broadcast_in_dim). Symbolic extents that must be equal are recorded as shape constraints and
//   checked when the program runs; constant extents that differ are an error at build time.
// - dot_general's result order is [lhs free, rhs free, batch] (batch on the right, the column-major convention).
// - Every standard op has exactly one result (extension ops may have several: ir/Extension.h, infer_types).
//
// `Op` is a std::variant of these structs plus ExtensionOp. OpKind is the variant index, so the runtime's kernel
// table and the AD rule tables of compiler/ are arrays indexed by OpKind (no string compares in hot loops). The
// EIN_STD_OPS X-macro is the single list that generates the variant, the OpKind enum and the name table; adding an
// op = one struct here + one type rule block in ir/Ops.cpp + one section in docs/ir.md (a test checks the docs).
#pragma once

#include "ir/Comparison.h"
#include "ir/ExtensionOp.h"
#include "ir/Tensor.h"
#include "ir/Type.h"

#include <fmt/core.h>

#include <concepts>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

namespace einstage {

/// One equality between symbolic extents that the type rule could not decide, with what it was about.
struct DimEquality {
  Dim lhs, rhs;
  std::string what;  // e.g. "'add' operand 1 axis 0"
};

/// What a type rule can do besides computing the result type: check extents and raise errors that name the op.
class TypeContext {
 public:
  /// The instruction is named "%<printed> in @<program>" in messages (its first result's printed name, as the
  /// printer numbers it); the name is formatted only when a message is made, since every instruction built or
  /// verified gets a context. `program` must outlive the context. `record` collects undecided equalities (nullptr:
  /// accept them silently, as the verifier does, since the program already carries its constraints).
  TypeContext(std::string_view op_name, size_t printed, std::string_view program, std::vector<DimEquality>* record)
      : op_name_(op_name), printed_(printed), program_(program), record_(record) {}

  /// Requires a == b. Equal dims pass; two constants that differ fail (naming the op and `what`); anything else is
  /// recorded as a constraint. Returns the more concrete of the two (the constant when there is one).
  Dim unify(const Dim& a, const Dim& b, std::string_view what);
  /// The same with the description made by `what()` only when a == b does not hold: type rules run for every
  /// instruction built or verified, and formatting a description for every pair of equal extents dominated them.
  template <std::invocable F> Dim unify(const Dim& a, const Dim& b, F&& what) {
    if (a == b) return a;
    return unify(a, b, std::string_view(std::forward<F>(what)()));
  }

  /// Throws einstage::Error with the message prefixed by "'<op>' at %<printed> in @<program>: ".
  template <typename... Args>
  [[noreturn]] void error(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(kind, fmt::format("'{}' at %{} in @{}: {}", op_name_, printed_, program_,
                                  fmt::format(format, std::forward<Args>(args)...)));
  }
  std::string_view op_name() const { return op_name_; }

 private:
  std::string_view op_name_;
  size_t printed_;
  std::string_view program_;
  std::vector<DimEquality>* record_;
};

using Types = std::span<const TensorType>;

/// Attribute reflection: each op lists its attributes as (name, member pointer), sorted by name; the printer,
/// parser and JSON walk this list, so an attribute is declared once. attrs() is a template over Self, the op itself
/// (`template <class Self = Transpose> static constexpr auto attrs()`, called as Transpose::attrs()), so its fields
/// are instantiated only where the list is walked (ir/AttrText.cpp, ir/Json.cpp), not in every translation unit
/// that includes this header: written with the op's own name, the list was instantiated there, 8 % of the compile
/// of a consumer of <einstage/einstage.h> (docs/performance.md, consumer compile time).
template <typename S, typename T> struct AttrField {
  std::string_view name;
  T S::*member;
};
template <typename S, typename T> constexpr AttrField<S, T> attr(std::string_view name, T S::*member) {
  return {name, member};
}
using Axes = std::vector<int64_t>;

// ---- contraction and layout ----

/// %2 = dot_general(%0, %1) {lhs_batch = [], lhs_contracting = [1], rhs_batch = [], rhs_contracting = [0]} : f64[2,4]
struct DotGeneral {
  static constexpr std::string_view kName = "dot_general";
  static constexpr int kArity = 2;
  Axes lhs_batch, lhs_contracting, rhs_batch, rhs_contracting;
  template <class Self = DotGeneral> static constexpr auto attrs() {
    return std::tuple{attr("lhs_batch", &Self::lhs_batch), attr("lhs_contracting", &Self::lhs_contracting),
                      attr("rhs_batch", &Self::rhs_batch), attr("rhs_contracting", &Self::rhs_contracting)};
  }
  static TensorType infer(const DotGeneral& op, Types in, TypeContext& ctx);
  friend bool operator==(const DotGeneral&, const DotGeneral&) = default;
};

/// Result axis i is operand axis perm[i] (as Tensor::permute).
struct Transpose {
  static constexpr std::string_view kName = "transpose";
  static constexpr int kArity = 1;
  Axes perm;
  template <class Self = Transpose> static constexpr auto attrs() { return std::tuple{attr("perm", &Self::perm)}; }
  static TensorType infer(const Transpose& op, Types in, TypeContext& ctx);
  friend bool operator==(const Transpose&, const Transpose&) = default;
};

/// Same elements in column-major order with a new shape; element counts must agree.
struct Reshape {
  static constexpr std::string_view kName = "reshape";
  static constexpr int kArity = 1;
  std::vector<Dim> shape;
  template <class Self = Reshape> static constexpr auto attrs() { return std::tuple{attr("shape", &Self::shape)}; }
  static TensorType infer(const Reshape& op, Types in, TypeContext& ctx);
  friend bool operator==(const Reshape&, const Reshape&) = default;
};

/// Operand axis i becomes result axis dims[i] (dims strictly increasing); its extent equals shape[dims[i]] or is 1
/// (then it is repeated). The other result axes are new and repeat the operand.
struct BroadcastInDim {
  static constexpr std::string_view kName = "broadcast_in_dim";
  static constexpr int kArity = 1;
  Axes dims;
  std::vector<Dim> shape;
  template <class Self = BroadcastInDim> static constexpr auto attrs() {
    return std::tuple{attr("dims", &Self::dims), attr("shape", &Self::shape)};
  }
  static TensorType infer(const BroadcastInDim& op, Types in, TypeContext& ctx);
  friend bool operator==(const BroadcastInDim&, const BroadcastInDim&) = default;
};

/// Sums over `axes` (strictly increasing), which are removed from the result.
struct ReduceSum {
  static constexpr std::string_view kName = "reduce_sum";
  static constexpr int kArity = 1;
  Axes axes;
  template <class Self = ReduceSum> static constexpr auto attrs() { return std::tuple{attr("axes", &Self::axes)}; }
  static TensorType infer(const ReduceSum& op, Types in, TypeContext& ctx);
  friend bool operator==(const ReduceSum&, const ReduceSum&) = default;
};

/// The maximum over `axes` (strictly increasing), which are removed from the result; real dtypes (f32, f64, i64).
/// nan when a reduced slice holds a nan; an empty reduced extent gives -inf (the lowest i64).
struct ReduceMax {
  static constexpr std::string_view kName = "reduce_max";
  static constexpr int kArity = 1;
  Axes axes;
  template <class Self = ReduceMax> static constexpr auto attrs() { return std::tuple{attr("axes", &Self::axes)}; }
  static TensorType infer(const ReduceMax& op, Types in, TypeContext& ctx);
  friend bool operator==(const ReduceMax&, const ReduceMax&) = default;
};

/// The operand's type, 1 at the element reduce_max(x) {axes} takes from every reduced slice and 0 elsewhere: the
/// first maximum in column-major order over `axes` (the lowest-numbered axis fastest), or the first nan. Real dtypes.
/// reduce_max's derivative is the tangent there; this op's own derivative is zero (piecewise constant).
struct FirstMaxMask {
  static constexpr std::string_view kName = "first_max_mask";
  static constexpr int kArity = 1;
  Axes axes;
  template <class Self = FirstMaxMask> static constexpr auto attrs() { return std::tuple{attr("axes", &Self::axes)}; }
  static TensorType infer(const FirstMaxMask& op, Types in, TypeContext& ctx);
  friend bool operator==(const FirstMaxMask&, const FirstMaxMask&) = default;
};

/// The diagonal over operand axes axis_a and axis_b (distinct, equal extents): the result is the operand with
/// axis_b removed, and out[.., i (at axis_a), ..] = in[.., i (at axis_a), .., i (at axis_b), ..].
struct ExtractDiag {
  static constexpr std::string_view kName = "extract_diag";
  static constexpr int kArity = 1;
  int64_t axis_a = 0, axis_b = 1;
  template <class Self = ExtractDiag> static constexpr auto attrs() {
    return std::tuple{attr("axis_a", &Self::axis_a), attr("axis_b", &Self::axis_b)};
  }
  static TensorType infer(const ExtractDiag& op, Types in, TypeContext& ctx);
  friend bool operator==(const ExtractDiag&, const ExtractDiag&) = default;
};

/// The adjoint of extract_diag with the same attributes, numbered in the RESULT: the result has rank r+1 and is the
/// operand with a new axis inserted at position axis_b, of the extent of result axis axis_a;
/// out[idx] = in[idx without axis_b] where idx[axis_a] == idx[axis_b], else 0.
struct EmbedDiag {
  static constexpr std::string_view kName = "embed_diag";
  static constexpr int kArity = 1;
  int64_t axis_a = 0, axis_b = 1;
  template <class Self = EmbedDiag> static constexpr auto attrs() {
    return std::tuple{attr("axis_a", &Self::axis_a), attr("axis_b", &Self::axis_b)};
  }
  static TensorType infer(const EmbedDiag& op, Types in, TypeContext& ctx);
  friend bool operator==(const EmbedDiag&, const EmbedDiag&) = default;
};

/// Every axis i keeps size[i] elements: start[i], start[i] + stride[i], ... (start >= 0, stride >= 1; the last one
/// must lie inside the operand, checked when the extents are constants, else when the program runs).
struct Slice {
  static constexpr std::string_view kName = "slice";
  static constexpr int kArity = 1;
  std::vector<Dim> size;
  Axes start, stride;
  template <class Self = Slice> static constexpr auto attrs() {
    return std::tuple{attr("size", &Self::size), attr("start", &Self::start), attr("stride", &Self::stride)};
  }
  static TensorType infer(const Slice& op, Types in, TypeContext& ctx);
  friend bool operator==(const Slice&, const Slice&) = default;
};

/// The transpose of slice: zeros of extents `shape` with operand element k of axis i at start[i] + k * stride[i].
struct Pad {
  static constexpr std::string_view kName = "pad";
  static constexpr int kArity = 1;
  std::vector<Dim> shape;
  Axes start, stride;
  template <class Self = Pad> static constexpr auto attrs() {
    return std::tuple{attr("shape", &Self::shape), attr("start", &Self::start), attr("stride", &Self::stride)};
  }
  static TensorType infer(const Pad& op, Types in, TypeContext& ctx);
  friend bool operator==(const Pad&, const Pad&) = default;
};

// ---- elementwise ----

#define EIN_ELEMENTWISE_OP(Struct, text, arity)                                      \
  struct Struct {                                                                    \
    static constexpr std::string_view kName = text;                                  \
    static constexpr int kArity = arity;                                             \
    static constexpr auto attrs() { return std::tuple{}; }                           \
    static TensorType infer(const Struct& op, Types in, TypeContext& ctx);           \
    friend bool operator==(const Struct&, const Struct&) = default;                  \
  };
EIN_ELEMENTWISE_OP(Add, "add", 2)    // equal types; any dtype
EIN_ELEMENTWISE_OP(Sub, "sub", 2)    // equal types; any dtype
EIN_ELEMENTWISE_OP(Mul, "mul", 2)    // equal types; any dtype
EIN_ELEMENTWISE_OP(Div, "div", 2)    // equal types; any dtype (i64 truncates toward zero)
EIN_ELEMENTWISE_OP(Neg, "neg", 1)    // any dtype
EIN_ELEMENTWISE_OP(Conj, "conj", 1)  // complex conjugate; identity on real dtypes
EIN_ELEMENTWISE_OP(Real, "real", 1)  // c64 -> f32, c128 -> f64; identity on real dtypes
EIN_ELEMENTWISE_OP(Imag, "imag", 1)  // c64 -> f32, c128 -> f64; zeros of the same type on real dtypes
EIN_ELEMENTWISE_OP(Exp, "exp", 1)    // floating dtypes
EIN_ELEMENTWISE_OP(Log, "log", 1)    // floating dtypes (principal branch for complex)
EIN_ELEMENTWISE_OP(Sqrt, "sqrt", 1)  // floating dtypes (principal branch for complex)
EIN_ELEMENTWISE_OP(Sin, "sin", 1)    // floating dtypes
EIN_ELEMENTWISE_OP(Cos, "cos", 1)    // floating dtypes
EIN_ELEMENTWISE_OP(Tanh, "tanh", 1)  // floating dtypes
EIN_ELEMENTWISE_OP(Sinh, "sinh", 1)  // floating dtypes
EIN_ELEMENTWISE_OP(Cosh, "cosh", 1)  // floating dtypes
EIN_ELEMENTWISE_OP(Abs, "abs", 1)    // any dtype; c64 -> f32, c128 -> f64 (the modulus)
EIN_ELEMENTWISE_OP(Sign, "sign", 1)  // any dtype; -1, 0 or 1 (nan stays nan); x/|x| for complex, 0 at 0
EIN_ELEMENTWISE_OP(StopGradient, "stop_gradient", 1)  // any dtype; the identity whose derivative is zero
#undef EIN_ELEMENTWISE_OP

/// select(a, b, x, y) {cmp}: out = (a <cmp> b) ? x : y elementwise (NumPy's where(a < b, x, y), XLA's compare +
/// select in one op). a and b have equal dtypes, x and y equal dtypes (the result's), and all four equal shapes; the
/// compared and the selected dtypes may differ (compare reals, select complex numbers). Ordered comparisons (lt, le,
/// gt, ge) need real a and b; eq and ne take any dtype. nan compares false except under ne (ir/Comparison.h).
/// Linear in x and y for fixed a and b; no derivative flows to a or b (the predicate is piecewise constant).
struct Select {
  static constexpr std::string_view kName = "select";
  static constexpr int kArity = 4;
  Comparison cmp = Comparison::lt;
  template <class Self = Select> static constexpr auto attrs() { return std::tuple{attr("cmp", &Self::cmp)}; }
  static TensorType infer(const Select& op, Types in, TypeContext& ctx);
  friend bool operator==(const Select&, const Select&) = default;
};

/// x^exponent elementwise for a constant finite real exponent (std::pow; principal branch for complex).
struct Pow {
  static constexpr std::string_view kName = "pow";
  static constexpr int kArity = 1;
  double exponent = 1;
  template <class Self = Pow> static constexpr auto attrs() { return std::tuple{attr("exponent", &Self::exponent)}; }
  static TensorType infer(const Pow& op, Types in, TypeContext& ctx);
  friend bool operator==(const Pow&, const Pow&) = default;
};

/// Element type conversion (as Tensor::astype): complex to real is refused; use real/imag.
struct Convert {
  static constexpr std::string_view kName = "convert";
  static constexpr int kArity = 1;
  DType dtype = DType::f64;
  template <class Self = Convert> static constexpr auto attrs() { return std::tuple{attr("dtype", &Self::dtype)}; }
  static TensorType infer(const Convert& op, Types in, TypeContext& ctx);
  friend bool operator==(const Convert&, const Convert&) = default;
};

/// A literal tensor (constant dims). Zeros of a symbolic shape are a scalar constant + broadcast_in_dim.
struct Constant {
  static constexpr std::string_view kName = "constant";
  static constexpr int kArity = 0;
  Tensor value;
  template <class Self = Constant> static constexpr auto attrs() { return std::tuple{attr("value", &Self::value)}; }
  static TensorType infer(const Constant& op, Types in, TypeContext& ctx);
  friend bool operator==(const Constant& a, const Constant& b) { return bitwise_equal(a.value, b.value); }
};

// ---- the table ----

/// (Struct, enum name). Order = variant index = OpKind value; append new ops anywhere, nothing persists indices.
/// Two runs of it are lists of their own, because their Builder and tracing helpers are generated from them
/// (ir/Program.h, compiler/Trace.h): the binary elementwise ops without attributes, helper name(a, b), and the unary
/// ones without attributes, helper name(x). Every other op has a hand-written helper with its attributes.
#define EIN_STD_BINARY_OPS(X) X(Add, add) X(Sub, sub) X(Mul, mul) X(Div, div)
#define EIN_STD_UNARY_OPS(X)                                                                                  \
  X(Neg, neg) X(Conj, conj) X(Real, real) X(Imag, imag) X(Exp, exp) X(Log, log) X(Sqrt, sqrt) X(Sin, sin)     \
  X(Cos, cos) X(Tanh, tanh) X(Sinh, sinh) X(Cosh, cosh) X(Abs, abs) X(Sign, sign) X(StopGradient, stop_gradient)
#define EIN_STD_OPS(X)                                                                                        \
  X(DotGeneral, dot_general) X(Transpose, transpose) X(Reshape, reshape) X(BroadcastInDim, broadcast_in_dim)  \
  X(ReduceSum, reduce_sum) X(ReduceMax, reduce_max) X(FirstMaxMask, first_max_mask)                           \
  X(ExtractDiag, extract_diag) X(EmbedDiag, embed_diag) X(Slice, slice) X(Pad, pad) EIN_STD_BINARY_OPS(X)     \
  X(Select, select) EIN_STD_UNARY_OPS(X) X(Pow, pow) X(Convert, convert) X(Constant, constant)

#define EIN_OP_TYPE_(Struct, e) Struct,
using Op = std::variant<EIN_STD_OPS(EIN_OP_TYPE_) ExtensionOp>;
#undef EIN_OP_TYPE_

#define EIN_OP_ENUM_(Struct, e) e,
/// The variant index of an Op; `extension` for every extension family.
enum class OpKind : uint8_t { EIN_STD_OPS(EIN_OP_ENUM_) extension };
#undef EIN_OP_ENUM_

inline constexpr size_t kStdOpCount = std::variant_size_v<Op> - 1;
inline constexpr size_t kOpKindCount = std::variant_size_v<Op>;

inline OpKind kind(const Op& op) { return static_cast<OpKind>(op.index()); }
/// The op's text name: "dot_general", or the family for an extension op ("einstage.einsum.v1").
std::string_view op_name(const Op& op);
/// "dot_general" for OpKind::dot_general, "extension" for OpKind::extension.
std::string_view op_kind_name(OpKind kind);
/// The standard op with this text name.
std::optional<OpKind> std_op_from_name(std::string_view name);
/// Number of operands a standard op takes (asserts kind != extension: families decide their own arity).
int std_op_arity(OpKind kind);
/// A default-constructed op of this kind (attributes empty), e.g. for parsers that fill attributes in.
Op make_std_op(OpKind kind);
/// Stable across processes: FNV-1a over the printed form (extension payloads: their own hash()).
uint64_t hash_op(const Op& op);

/// Runs the standard op's type rule on operand types, after checking the operand count.
TensorType infer_std_op(const Op& op, Types operands, TypeContext& ctx);

}  // namespace einstage
