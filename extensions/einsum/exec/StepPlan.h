// StepPlan: one einsum step made concrete for given label extents -- THE implementation of the pairwise rules
// (docs/behaviour.md §4.2-4.3, §4.6-4.8), read by the executor (Executor.h), the lowering to standard ops and the JIT.
//
// Stage: einsum extension, after planning (it knows label extents, not strides or data). A step is binary (two
// operands of a contraction tree step) or unary (the whole einsum of one operand). For each operand, in this order:
//   1. diagonals: a label repeated within the operand is reduced to one axis (ExtractDiag; the executor folds it into
//      a stride sum, no copy);
//   2. broadcasting: an axis of extent 1 whose label is larger (permitted by bind_einsum) becomes that extent
//      (BroadcastInDim; the executor gives it stride 0, no copy);
//   3. one-sided sums: labels on this side only that the step does not keep are summed first (ReduceSum).
// Then the labels are classified batch (both sides, kept) / contracted (both sides, not kept) / lhs free / rhs free;
// contracted labels present -> dot_general, none -> outer product (broadcast both sides and multiply). The result's
// label order is dot_general's [lhs free..., rhs free..., batch...]; intermediates stay in that order. The final step
// then transposes to the requested output order and embeds diagonals for repeated output labels.
// `actions` lists all of this as primitive standard-op actions with their attributes, so the lowering emits one op
// per action without re-deriving any rule. Which labels a step keeps comes from the planner's evaluator
// (ContractionTree.h: StepCost::result_labels), which owns that rule. Depends on Subscripts.h and ir only.
#pragma once

#include "extensions/einsum/notation/Subscripts.h"
#include "ir/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace einstage::einsum {

/// Which tensor an action applies to: the left operand, the right operand, or the step's result.
enum class StepSide : uint8_t { lhs, rhs, result };

/// Diagonal of axes axis_a and axis_b (equal extents); axis_b disappears, axis_a keeps its position.
struct ExtractDiagAction {
  StepSide side;
  int axis_a, axis_b;
};
/// Operand axis i becomes result axis dims[i]; axes of extent 1 stretch to the target extent (XLA semantics).
struct BroadcastInDimAction {
  StepSide side;
  std::vector<int> dims;
  Shape shape;
};
/// Sum over these axes (ascending); the others keep their order.
struct ReduceSumAction {
  StepSide side;
  std::vector<int> axes;
};
/// dot_general(lhs, rhs): output [lhs free, rhs free, batch], free axes in operand order, batch in lhs_batch order.
struct DotGeneralAction {
  std::vector<int> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
};
/// Elementwise product of the two broadcast operands (the outer-product form; both were BroadcastInDim'ed).
struct MulAction {};
/// Result axis i = input axis perm[i].
struct TransposeAction {
  StepSide side;
  std::vector<int> perm;
};
/// Inverse of ExtractDiag: a new axis at axis_b, on the diagonal with axis_a (off-diagonal zeros).
struct EmbedDiagAction {
  StepSide side;
  int axis_a, axis_b;
};

using StepAction = std::variant<ExtractDiagAction, BroadcastInDimAction, ReduceSumAction, DotGeneralAction, MulAction,
                                TransposeAction, EmbedDiagAction>;

/// One operand of a step, and what happens to it before the product.
struct StepOperand {
  std::vector<Label> labels;         // the operand's axes as stored (an input's term, repeats included)
  Shape shape;                       // the stored extents (1 on a broadcast axis)
  std::vector<Label> distinct;       // after the diagonals: distinct labels in first-appearance order
  std::vector<bool> broadcast;       // per distinct label: stored extent 1 while the label's extent is larger
  std::vector<Label> summed;         // labels summed first (this side only, not kept), in `distinct` order
  std::vector<Label> reduced;        // `distinct` without `summed`: the labels that enter the product
  bool has_diagonal() const { return distinct.size() != labels.size(); }
};

struct StepPlan {
  bool binary = true;  // false: the whole einsum of one operand (no product)
  bool final = false;  // the last step: its result is the einsum's output
  StepOperand lhs, rhs;  // rhs is empty when !binary

  // Classification (labels; batch and contracted in lhs's `reduced` order, free labels in their operand's order).
  std::vector<Label> batch, contracted, lhs_free, rhs_free;
  bool outer_product = false;  // binary and no contracted label

  // dot_general attributes over the axes of lhs.reduced / rhs.reduced.
  std::vector<int> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
  /// The step's result labels: [lhs free, rhs free, batch] for a binary step; lhs.reduced for a unary one.
  std::vector<Label> result;
  /// Extents of `result`.
  Shape result_shape;

  // Final step only.
  std::vector<Label> output;            // the requested output labels (repeats allowed)
  std::vector<Label> output_distinct;   // output labels, first occurrences only, in output order
  std::vector<int> output_perm;         // output_distinct[i] = result[output_perm[i]] (identity -> no transpose)
  std::vector<EmbedDiagAction> output_diagonals;  // applied in order to reach `output` from `output_distinct`

  /// Every action in execution order (lowering emits one standard op per action).
  std::vector<StepAction> actions;

  bool needs_transpose() const;
  /// Multi-line description for plan dumps and error reports.
  std::string to_string(const Subscripts& names) const;
};

/// Makes a binary step. `lhs` / `rhs` are the operands' labels as stored with their stored shapes; `keep` is the set
/// of labels the step's result keeps (the evaluator's StepCost::result_labels, or the output's labels for the
/// final step); `extents` gives every label's extent. `output` is non-null for the final step (then `keep` must be
/// exactly its labels).
StepPlan make_binary_step(const std::vector<Label>& lhs, const Shape& lhs_shape, const std::vector<Label>& rhs,
                          const Shape& rhs_shape, const std::vector<Label>& keep, const std::map<Label, int64_t>& extents,
                          const std::vector<Label>* output);

/// Makes the unary step of a one-operand einsum (diagonals, sums, transpose, output diagonals).
StepPlan make_unary_step(const std::vector<Label>& operand, const Shape& shape, const std::vector<Label>& output,
                         const std::map<Label, int64_t>& extents);

/// True when a two-operand einsum is exactly one dot_general in operand order with the output in dot_general order
/// (docs/behaviour.md §4.1): no repeated labels in any term, no one-sided sums, and output == [lhs free, rhs free,
/// batch] with free and batch labels in lhs order (rhs free in rhs order). Broadcast axes are allowed (stride 0).
bool is_direct_dot_general(const Subscripts& subscripts);

}  // namespace einstage::einsum
