// Program, the unit of the semantic IR: named, typed parameters, SSA instructions in order, outputs, and the shape
// constraints to check when it runs. Builder is the only way code should add an instruction: it runs the op's type
// rule, so every instruction in a built program is well typed. Compiler stage; depends on ir/Ops.h only (plus the
// forward-declared ExtensionRegistry for extension ops).
//
// Values are SSA: each parameter and each instruction result has an id unique within its program. Ids are internal
// (passes may leave gaps); the printer renumbers instruction results densely (%0, %1, ...) and prints parameters by
// name (%x), so text forms do not churn. An instruction has one or more results (a decomposition returns several
// factors from one computation); dense numbering counts every result, so `%3, %4 = ...` is followed by `%5 = ...`.
#pragma once

#include "ir/Ops.h"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace einstage {

class ExtensionRegistry;

using ValueId = int32_t;

struct Value {
  ValueId id = -1;
  TensorType type;
  friend bool operator==(const Value&, const Value&) = default;
};

struct Instruction {
  Op op;
  std::vector<Value> operands;
  std::vector<Value> results;  // one or more, in the order of the op's type rule

  // The special members are the implicit ones, defined out of line (ir/Program.cpp): every translation unit that
  // holds a Program copies, moves or destroys instructions, and inline ones would instantiate the Op variant's
  // copy, move and destroy machinery over all its alternatives there (docs/performance.md, "Consumer compile time").
  Instruction();
  Instruction(Op op, std::vector<Value> operands, std::vector<Value> results);
  Instruction(const Instruction&);
  Instruction(Instruction&&) noexcept;
  Instruction& operator=(const Instruction&);
  Instruction& operator=(Instruction&&) noexcept;
  ~Instruction();

  /// The result of a single-result instruction (asserts there is exactly one); code that handles every op walks
  /// `results`.
  const Value& result() const;
};

struct Parameter {
  std::string name;  // an identifier, unique in the program
  Value value;
};

/// lhs == rhs must hold when the program runs with concrete shapes. A pass that deletes an instruction must keep
/// the constraints recorded at it (set `at` to -1 or to a surviving value): they still constrain the inputs, and the
/// verifier rejects an `at` that names no value. `at` is the result of the instruction whose
/// type rule needed it (-1 for a constraint on the program as a whole); `what` says what it is about, in the words
/// of the op or of the user's notation (e.g. "'einstage.einsum.v1' operand 1 axis 0 (label j)").
struct ShapeConstraint {
  Dim lhs, rhs;
  ValueId at = -1;
  std::string what;
  friend bool operator==(const ShapeConstraint&, const ShapeConstraint&) = default;
};

struct Program {
  std::string name;
  std::vector<Parameter> params;
  std::vector<Instruction> instructions;
  std::vector<Value> outputs;
  std::vector<ShapeConstraint> constraints;

  /// One more than the largest id in use (params and results): a fresh id for passes that edit in place.
  ValueId next_value_id() const;
};

/// The printed name of every value: "%x" for parameter x, "%k" for the k-th instruction result (dense over all
/// results of all instructions).
std::map<ValueId, std::string> value_names(const Program& program);
/// The printed name of instruction k's first result ("%k" when every earlier instruction has one result); messages
/// name an instruction by it ("'add' at %5 in @f").
std::string instruction_name(const Program& program, size_t k);

/// The result types of `op` on operands of these types: the standard op's type rule (one result), or the extension
/// family's infer_type / infer_types found in `registry` (an unknown family fails naming it). Builder, verifier and
/// parsers all use this.
std::vector<TensorType> infer_result_types(const Op& op, Types operands, TypeContext& ctx,
                                           const ExtensionRegistry* registry);

/// Binds the program's symbolic dims from the concrete shapes of its inputs (one per parameter, in order): checks
/// ranks and constant extents, gives each plain symbol (`n`) its extent, requires a symbol seen twice to agree, and
/// then checks product dims (`3*n`) against their inputs. Fails (ErrorKind::shape) naming the input, the parameter,
/// the axis and both extents. The runtime calls this, then check_constraints.
DimBindings bind_parameters(const Program& program, std::span<const Shape> input_shapes);
/// The concrete extents of `type` under `bindings`; fails (invalid_argument) naming an unbound symbol.
Shape evaluate_shape(const TensorType& type, const DimBindings& bindings);

/// The one rule for a program read back from text or JSON: the constraints the builder derived while re-emitting
/// its instructions always hold, and the listed ones can only add. Sets `program.constraints` to `listed` (in its
/// order, so parse(print(p)) prints identically) followed by each derived constraint the listed ones do not already
/// imply (by chains of equalities), so a saved program that drops or never had a derived constraint still checks it.
void merge_listed_constraints(Program& program, std::vector<ShapeConstraint> listed);

/// Evaluates every constraint under concrete bindings; fails (ErrorKind::shape) naming the first violated one, the
/// instruction and both extents. Unbound symbols fail too (ErrorKind::invalid_argument).
void check_constraints(const Program& program, const DimBindings& bindings);

class Builder {
 public:
  /// `registry` provides the semantics of extension families; it may be null when no extension op is emitted, and
  /// must outlive the builder.
  explicit Builder(std::string program_name, const ExtensionRegistry* registry = nullptr);
  /// Continues an existing (verified) program: new parameters and instructions are appended after its own.
  explicit Builder(Program program, const ExtensionRegistry* registry = nullptr);

  Value parameter(std::string_view name, TensorType type);

  /// Appends `op` applied to `operands` after checking that each operand is a value of this program with the type
  /// it was defined with, and running the op's type rule. Symbolic extents the rule could not decide become
  /// ShapeConstraints at this instruction (recorded at its first result). On error nothing is appended.
  /// emit returns the single result and fails (invalid_argument) for an op with several; emit_results returns all.
  Value emit(Op op, std::vector<Value> operands);
  std::vector<Value> emit_results(Op op, std::vector<Value> operands);

  // Typed helpers, one per standard op (they call emit).
  Value dot_general(const Value& lhs, const Value& rhs, Axes lhs_contracting, Axes rhs_contracting,
                    Axes lhs_batch = {}, Axes rhs_batch = {});
  Value transpose(const Value& x, Axes perm);
  Value reshape(const Value& x, std::vector<Dim> shape);
  Value broadcast_in_dim(const Value& x, Axes dims, std::vector<Dim> shape);
  Value reduce_sum(const Value& x, Axes axes);
  /// The maximum over `axes` (real dtypes), and the mask of the element it takes (ir/Ops.h ReduceMax, FirstMaxMask).
  Value reduce_max(const Value& x, Axes axes);
  Value first_max_mask(const Value& x, Axes axes);
  Value extract_diag(const Value& x, int64_t axis_a, int64_t axis_b);
  Value embed_diag(const Value& x, int64_t axis_a, int64_t axis_b);
  // add, sub, mul, div (a, b) and neg, conj, real, imag, exp, log, sqrt, sin, cos, tanh, sinh, cosh, abs, sign,
  // stop_gradient (x): one helper per op of EIN_STD_BINARY_OPS / EIN_STD_UNARY_OPS (ir/Ops.h).
#define EIN_BUILDER_BINARY_(Struct, name) Value name(const Value& a, const Value& b);
  EIN_STD_BINARY_OPS(EIN_BUILDER_BINARY_)
#undef EIN_BUILDER_BINARY_
#define EIN_BUILDER_UNARY_(Struct, name) Value name(const Value& x);
  EIN_STD_UNARY_OPS(EIN_BUILDER_UNARY_)
#undef EIN_BUILDER_UNARY_
  /// (a <cmp> b) ? x : y elementwise (ir/Ops.h Select).
  Value select(Comparison cmp, const Value& a, const Value& b, const Value& x, const Value& y);
  /// Elements start[i] + k * stride[i], k < size[i], along every axis i (ir/Ops.h Slice).
  Value slice(const Value& x, Axes start, std::vector<Dim> size, Axes stride);
  /// Zeros of extents `shape` with x's elements at start[i] + k * stride[i] (the transpose of slice).
  Value pad(const Value& x, Axes start, std::vector<Dim> shape, Axes stride);
  Value pow(const Value& x, double exponent);
  Value convert(const Value& x, DType dtype);
  Value constant(Tensor value);
  /// A tensor of `type` filled with `value` (a scalar constant broadcast to the possibly symbolic shape).
  Value full(const TensorType& type, double value);
  Value extension(std::shared_ptr<const ExtensionPayload> payload, std::vector<Value> operands);
  std::vector<Value> extension_results(std::shared_ptr<const ExtensionPayload> payload, std::vector<Value> operands);

  /// Records lhs == rhs for the whole program (at = -1): a constant mismatch fails now, symbols are checked at run.
  void require_equal(const Dim& lhs, const Dim& rhs, std::string what);

  const Program& program() const { return program_; }
  const ExtensionRegistry* registry() const { return registry_; }
  /// Sets the outputs, verifies the program (ir/Verifier.h) and hands it over; the builder is empty afterwards.
  Program finish(std::vector<Value> outputs);

 private:
  // Where value id k is defined: instruction `inst`'s result `result`, or parameter -1 - inst when inst < 0.
  struct Def {
    static constexpr int32_t kUndefined = INT32_MIN;
    int32_t inst = kUndefined, result = 0;
  };
  const TensorType& defined_type(Def d) const;
  void check_operand(const Value& v, size_t index, std::string_view op) const;
  /// emit and emit_results; `single` refuses an op with several results before anything is appended.
  std::vector<Value> append(Op op, std::vector<Value> operands, bool single);

  Program program_;
  const ExtensionRegistry* registry_;
  ValueId next_id_ = 0;
  size_t printed_results_ = 0;  // instruction results so far: the printed name of the next one is %printed_results_
  std::vector<Def> defs_;  // indexed by id (kUndefined where an id is unused); types and names are looked up there
};

}  // namespace einstage
