// The einsum extension family `einstage.einsum.v1`, compiler side: its payload (what one traced einsum instruction
// carries) and the type rule over possibly symbolic dims; register_einsum_semantics() (Semantics.h) puts them, the
// lowering and the AD rules into a registry. Stage: compiler (the runtime half of the family is Executor.h).
//
// The payload is {integer subscripts with the label names the user wrote, the shape-independent PlanSpec, the
// broadcast permission bit, an optional output-shape hint}. No contraction tree is stored: the runtime plans when it
// sees concrete shapes, and lower_einsum (Lowering.h) plans for the shapes it is given. Text form (attributes sorted
// by key; `output_shape` only when set):
//
//   %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = "ij,jk->ik"} : f64[n,4]
//
// `subscripts` is the plain string when printing it and parsing it back gives the same labels (the usual case);
// otherwise (integer labels, `...` axes, grouped-dialect axes) it is a JSON object
// {"ellipsis":[...],"inputs":[[...],...],"names":{"<label>":"<name>"},"output":[...]} that keeps every label exactly.
// The type rule is the one einsum shape rule (BindRule.h) instantiated over ir Dims: constant extents that disagree
// fail while tracing (naming the instruction, the label as written and both extents); equalities involving symbols
// become ShapeConstraints checked when the program runs. Depends on ir, the notation and the planner's PlanSpec; not
// on compiler/ or runtime/.
#pragma once

#include "extensions/einsum/notation/Subscripts.h"
#include "extensions/einsum/planner/PlanKind.h"
#include "extensions/api/Family.h"
#include "ir/Extension.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::einsum {

inline constexpr std::string_view kEinsumFamily = "einstage.einsum.v1";
inline constexpr std::string_view kEinsumModule = "einstage.einsum";

/// The attributes of one einsum instruction; the payload is FamilyPayload<EinsumAttrs> (extensions/api/Family.h).
class EinsumAttrs {
 public:
  static constexpr std::string_view kFamily = kEinsumFamily;

  EinsumAttrs(Subscripts subscripts, PlanSpec plan, bool broadcast,
              std::optional<std::vector<Dim>> output_shape = std::nullopt);

  const Subscripts& subscripts() const { return subscripts_; }
  const PlanSpec& plan() const { return plan_; }
  bool broadcast() const { return broadcast_; }
  const std::optional<std::vector<Dim>>& output_shape() const { return output_shape_; }
  /// The subscripts as people read them ("ij,jk->ik", `...` for ellipsis axes), for messages.
  std::string display() const;

  std::string to_text() const;
  std::string to_json() const;
  /// Names are part of equality: two payloads that print differently are different instructions.
  bool operator==(const EinsumAttrs& other) const;

  /// Readers of to_text() (without braces) and to_json(); errors are ErrorKind::parse naming the attribute.
  static EinsumAttrs parse_text(std::string_view attr_text);
  static EinsumAttrs parse_json(std::string_view json_text);

 private:
  Subscripts subscripts_;
  PlanSpec plan_;
  bool broadcast_ = false;
  std::optional<std::vector<Dim>> output_shape_;
};

using EinsumPayload = FamilyPayload<EinsumAttrs>;

/// The result type of an einsum instruction: dtype = the promotion of the operand dtypes (as concrete einsum);
/// dims from the shape rule, unified with the output-shape hint when there is one.
TensorType infer_einsum_type(const EinsumPayload& payload, Types operands, TypeContext& ctx);

}  // namespace einstage::einsum
