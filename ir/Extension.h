// Extension families: the compiler-side semantics of extension ops and the registry that holds them. Semantic IR
// (compiler stage); depends on ir/Program.h.
//
// A family (e.g. `einstage.einsum.v1`) is registered by an explicit call, register_family(), from the module that
// provides it: the einsum module does exactly what a third-party module would (no static initialisers, which the
// linker may drop). The parser, the JSON reader, the Builder and the Verifier find a family's payload readers and
// type rule through the registry they are given. The lower / linearize / transpose slots may be empty: the passes
// that need them report the family and the missing rule.
//
// Ops with several results (a decomposition's factors) use the *_results slots: infer_types instead of infer_type,
// and lower_results / linearize_results / transpose_results, which take and return one entry per result. A family
// may fill both kinds: a single-result instruction uses the single-result slot when it is set and the *_results
// slot otherwise; an instruction with several results always uses the *_results slot.
//
// rewrite_derivative (optional) is the one place where a family improves the programs the public AD transformations
// hand to users (compiler/ad/Ad.h: jvp, vjp, grad, value_and_grad run every family's rewrite last, in the order of
// the family names); the einsum family merges instructions that walk the same planned tree into one walk there.
#pragma once

#include "ir/Hash.h"
#include "ir/Program.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace einstage {

class ExtensionRegistry;

/// Expands `inst` into other instructions on `b` given the new operands; symbolic dims are given values by
/// `bindings` (lowering may need concrete shapes). Returns the value that replaces inst's result, or a placeholder
/// (id -1) when the result has no standard-op form and only its users' lower rules receive it (compiler/Lower.h).
using LowerRule =
    std::function<Value(Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings& bindings)>;
/// Forward mode: the tangent of inst's result given the primal operands and their tangents (nullopt = symbolic
/// zero). Returns nullopt when the result tangent is zero.
using LinearizeRule = std::function<std::optional<Value>(Builder& b, const Instruction& inst,
                                                         std::span<const Value> primals,
                                                         std::span<const std::optional<Value>> tangents)>;
/// Reverse mode for an op linear in the operands marked `linear`: the cotangent of each operand (nullopt for the
/// non-linear ones and for symbolic zeros) given the result cotangent.
using TransposeRule = std::function<std::vector<std::optional<Value>>(
    Builder& b, const Instruction& inst, std::span<const Value> operands, std::span<const bool> linear,
    const Value& cotangent)>;

// The same rules for instructions with several results: one entry per result of `inst`.
/// Returns the values replacing inst's results (a placeholder with id -1 for a result without standard-op form).
using LowerResultsRule = std::function<std::vector<Value>(Builder& b, const Instruction& inst,
                                                          std::span<const Value> operands,
                                                          const DimBindings& bindings)>;
/// Returns the tangent of each result (nullopt = zero).
using LinearizeResultsRule = std::function<std::vector<std::optional<Value>>(
    Builder& b, const Instruction& inst, std::span<const Value> primals, std::span<const std::optional<Value>> tangents)>;
/// `cotangents` has one entry per result (nullopt = zero; at least one is a value); returns one per operand.
using TransposeResultsRule = std::function<std::vector<std::optional<Value>>(
    Builder& b, const Instruction& inst, std::span<const Value> operands, std::span<const bool> linear,
    std::span<const std::optional<Value>> cotangents)>;
/// Rewrites a whole program that a public AD transformation is about to return (never one inside linearize or
/// transpose, whose results are transformed further). It must keep the parameters, the outputs' types and values,
/// and return a verified program that the AD rules accept again (it may be differentiated once more).
using DerivativeRewrite = std::function<Program(const Program& program, const ExtensionRegistry* registry)>;

struct ExtensionSemantics {
  std::string family;  // "einstage.einsum.v1"
  std::string module;  // who registered it, for messages ("einstage.einsum")
  /// Required: reads what ExtensionPayload::to_text() printed (without braces) / to_json() wrote. Fail with
  /// ErrorKind::parse naming the attribute.
  std::function<std::unique_ptr<ExtensionPayload>(std::string_view attr_text)> parse_text;
  std::function<std::unique_ptr<ExtensionPayload>(std::string_view json_text)> parse_json;
  /// Required, one of the two: the result type (infer_type), or the result types of an op with several results
  /// (infer_types, at least one), checking the operands (use ctx.error / ctx.unify so messages name the op and
  /// undecided extents become shape constraints). With both set, infer_types is used.
  std::function<TensorType(const ExtensionPayload& payload, Types operands, TypeContext& ctx)> infer_type;
  std::function<std::vector<TensorType>(const ExtensionPayload& payload, Types operands, TypeContext& ctx)> infer_types;
  /// Optional extra checks the verifier runs beyond the type rule.
  std::function<void(const ExtensionPayload& payload, Types operands, TypeContext& ctx)> verify;
  LowerRule lower;
  LinearizeRule linearize;
  TransposeRule transpose;
  LowerResultsRule lower_results;
  LinearizeResultsRule linearize_results;
  TransposeResultsRule transpose_results;
  DerivativeRewrite rewrite_derivative;
};

class ExtensionRegistry {
 public:
  /// Fails (invalid_argument) on a malformed family name, a missing required slot, or a family registered twice
  /// (naming the family and both modules).
  void register_family(ExtensionSemantics semantics);
  /// For a module that fills its slots in stages (e.g. AD rules registered after the type rule).
  ExtensionSemantics* find_mutable(std::string_view family);
  const ExtensionSemantics* find(std::string_view family) const;
  /// Fails (not_found) naming the family and saying how to make it available.
  const ExtensionSemantics& get(std::string_view family) const;
  /// Registered family names, sorted.
  std::vector<std::string> families() const;

 private:
  std::map<std::string, ExtensionSemantics, std::less<>> families_;
};

/// The not_found error for a family no registry provides (shared by the builder, parser, JSON reader, verifier).
[[noreturn]] void fail_unknown_family(std::string_view family, std::string_view where);

/// True for `[a-z0-9_]+(.[a-z0-9_]+)*.v<digits>` with at least two segments, e.g. "einstage.einsum.v1".
bool is_family_name(std::string_view name);

// ---- helpers for payload authors (the same ones the standard-op printer and parser use) ----

/// `"..."` with \" \\ \n \t escaped.
std::string format_string_literal(std::string_view s);
/// Reads a whole `"..."` literal; nullopt if `text` is not exactly one.
std::optional<std::string> parse_string_literal(std::string_view text);
/// Splits attribute text `k1 = v1, k2 = v2` at top-level commas (outside quotes and brackets ([{<), trimming
/// spaces. Fails (parse) on an entry without ` = ` or a duplicate key.
std::vector<std::pair<std::string, std::string>> split_attribute_text(std::string_view text);
/// Shortest text that reads back to the same double/float (fmt "{}"), and its reader (accepts nan, inf, -inf).
std::string format_float(double v);
std::string format_float(float v);
std::optional<double> parse_double(std::string_view text);
std::optional<float> parse_float(std::string_view text);
/// hash_bytes (FNV-1a 64, stable across processes and platforms) comes with ir/Hash.h.

}  // namespace einstage
