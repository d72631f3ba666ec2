// ContractionTree and the one cost evaluator every planner, report and test uses.
//
// Planning stage. A tree is a list of pairwise steps (left, right) over ids: inputs are 0..n-1, step k's result is
// n+k. It is shape-independent and validated on construction. evaluate() walks the steps in order and computes, per
// step, the labels of both operands and of the result, the flops and the result size, plus the totals tc, sc, rw and
// the peak live memory of that order. The cost model (written once, here, and in docs/planning.md):
//   * an operand's labels are its distinct labels: an input term `iij` takes part in a step as {i, j} (the step reads
//     the diagonal), an intermediate carries only the labels it kept;
//   * a step's result keeps label l iff the output has l or another live operand (one not in this step) carries l;
//     every other label of the two operands is summed in this step. Hyperedges (a label on 3+ operands) are kept
//     until their last carrier is contracted;
//   * flops(step) = product of the extents of the distinct labels of left ∪ right (one multiply-add per point of the
//     joint index space; a label shared by both operands counts once);
//   * tc = log2(sum of step flops), sc = log2(largest step result), rw = log2(sum over steps of
//     |left|+|right|+|result|) with |.| the product of extents of the operand's distinct labels (OMEinsum's
//     definitions, docs/networks.md, Metrics); all three are 0 when there is no step or the sum is 0;
//   * peak_memory: elements live at once in this order: all inputs (as stored, repeated axes included) are live at
//     the start, a step's result is allocated while both operands are still live, then the operands are released;
//   * labels only in the output take part in no step (the executor broadcasts them after the last step).
// Depends on Network.h (and through it Subscripts.h, ir/Error.h) only.
#pragma once

#include "extensions/einsum/planner/Network.h"

#include <string>
#include <utility>
#include <vector>

namespace einstage::einsum {

using Step = std::pair<int, int>;

class ContractionTree {
 public:
  /// The tree of zero inputs (no steps).
  ContractionTree() = default;
  /// Validates: n >= 2 needs exactly n-1 steps, n <= 1 needs none; step k may use ids 0..n+k-1, each id at most
  /// once, never twice in one step. Errors (invalid_argument) name the step and the offending id.
  ContractionTree(int num_inputs, std::vector<Step> steps);

  /// (0,1), (n,2), (n+1,3), ...: contract the running result with the next input.
  static ContractionTree left_to_right(int num_inputs);
  /// opt_einsum / JAX positional path: each step names two positions of the current operand list (any order); both
  /// are removed and the result is appended at the end. Errors name the step and the position.
  static ContractionTree from_positional_path(int num_inputs, const std::vector<Step>& path);

  /// The same contraction as a positional path (each step lists the smaller position first).
  std::vector<Step> to_positional_path() const;

  int num_inputs() const { return num_inputs_; }
  const std::vector<Step>& steps() const { return steps_; }
  /// Id of the final result: -1 with no inputs, 0 with one input, 2n-2 otherwise.
  int root() const;

  /// "[(0,1),(3,2)]"; the empty tree prints "[]".
  std::string to_string() const { return steps_text(steps_); }
  static std::string steps_text(const std::vector<Step>& steps);

  bool operator==(const ContractionTree& other) const = default;

 private:
  int num_inputs_ = 0;
  std::vector<Step> steps_;
};

struct StepCost {
  int left = 0, right = 0, result = 0;  // ids
  std::vector<Label> left_labels;       // inputs: distinct labels in term order; results: see evaluate()
  std::vector<Label> right_labels;
  std::vector<Label> result_labels;     // left's kept labels in left's order, then right's new ones in right's order
  std::vector<Label> summed;            // labels summed in this step (left ∪ right minus result), in union order
  double flops = 0;                     // product of extents of left_labels ∪ right_labels
  double left_size = 0, right_size = 0, result_size = 0;
};

struct TreeCost {
  std::vector<StepCost> steps;
  double flops = 0;             // sum of step flops (multiply-adds)
  double tc = 0;                // log2(flops), 0 if flops == 0
  double max_intermediate = 0;  // largest step result, elements
  double sc = 0;                // log2(max_intermediate), 0 if none
  double rw = 0;                // log2 sum of |left|+|right|+|result|
  double write = 0;             // sum of result sizes (cotengra's `write`)
  double peak_memory = 0;       // elements, inputs included (see the header comment)
  double naive_flops = 0;       // one loop nest over every label: max(n-1, 1) * product of all extents
};

/// THE evaluator. The tree's input count must equal the network's. With per_step false, TreeCost::steps stays empty
/// (same totals, no per-step label lists: what optimisers comparing candidates on large networks need).
TreeCost evaluate(const Network& network, const ContractionTree& tree, bool per_step = true);
TreeCost evaluate(const Subscripts& subscripts, const Extents& extents, const ContractionTree& tree);
/// Work units (Deadline.h) of one evaluate(network, tree, false): what budgeted planners charge for it.
int64_t evaluate_units(const Network& network);

}  // namespace einstage::einsum
