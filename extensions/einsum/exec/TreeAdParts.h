// Internal to extensions/einsum: the pieces TreeAdPrepare.cpp (preparing the reverse walk: the tree, the reverse steps and
// their layouts, the arena) and TreeAdWalk.cpp (running it, and the tangent walk) share: EinsumVjpPlan's Impl, one
// reverse step, the planned tree as nodes, and the helpers both walks call per step. Not installed; nothing outside
// those two files includes it. Depends on TreeAd.h, ReverseLayout.h and ArenaLayout.h.
#pragma once

#include "extensions/einsum/exec/ArenaLayout.h"
#include "extensions/einsum/exec/ReverseLayout.h"
#include "extensions/einsum/exec/TreeAd.h"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace einstage::einsum::tree_ad {

// One reverse contraction: the cotangent of tree node `node` from its parent's cotangent and its sibling's value.
// `layout` (ReverseLayout.h) says which operand comes first and, for an intermediate node, the axis order its
// cotangent is written in (the node's own order for an operand).
struct ReverseStep {
  int node = -1, parent = -1, sibling = -1;
  ReverseLayout layout;
  std::vector<Tensor> ones;  // the extra ones operands, in the einsum's operand order after the sibling
  std::optional<EinsumPlan> plan;
  std::optional<EinsumPlan> stacked;  // the tangent P(dct, V) + P(ct, dV) as one contraction (stacked_terms_plan)
  // The pair (x, y) in the plan's operand order: (cotangent, value) or (value, cotangent).
  std::pair<const Tensor&, const Tensor&> order(const Tensor& ct, const Tensor& value) const {
    if (layout.sibling_first) return {value, ct};
    return {ct, value};
  }
};

/// The labels as their names ("ij").
std::string label_string(const Subscripts& s, const std::vector<Label>& labels);

// The forward's planned tree as nodes (operands, then one per step; the last is the root) with their labels and
// shapes, and each step as a two-operand einsum of its children: `pairs[t]` gives step t's result (the root's with
// the output labels when `with_root`, else the root has no pair). A step's result may keep extent 1 where both
// children broadcast (the forward einsum materialises the label's full extent there); the reverse steps treat that
// as broadcasting. Both plans read the tree through this one function.
struct PlannedTree {
  EinsumPlan forward;
  std::vector<std::pair<int, int>> children;  // per step: (left, right) node ids
  std::vector<std::vector<Label>> labels;     // per node: labels as stored
  std::vector<Shape> shapes;                  // per node
  std::vector<std::optional<EinsumPlan>> pairs;
};

PlannedTree plan_tree(const Subscripts& s, std::span<const TensorMeta> promoted, const EinsumOptions& options,
                      bool with_root);

// Operands in the walk's dtype.
inline Tensor promoted_to(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : x.astype(dtype); }

// A step's operands (x, y, then its ones) in one vector reused across a walk's steps: assigning a Tensor into a
// slot reuses that slot's shape and stride storage, so a step allocates nothing here (a vector and two shapes per
// step before; perf had the walk's allocations at several percent of the 8x8 grid's gradient). A slot keeps its
// tensor until the next step overwrites it.
class StepOperands {
 public:
  std::span<const Tensor> of(const Tensor& x, const Tensor& y, std::span<const Tensor> ones = {}) {
    const size_t count = 2 + ones.size();
    if (ops_.size() < count) ops_.resize(count);
    ops_[0] = x;
    ops_[1] = y;
    std::copy(ones.begin(), ones.end(), ops_.begin() + 2);
    return std::span<const Tensor>(ops_.data(), count);
  }

 private:
  std::vector<Tensor> ops_;
};

// A tangent's two terms P(x0, y0) + P(x1, y1) (dA.B + A.dB, or P(dct, V) + P(ct, dV)) as one contraction: a label
// of extent 2 is appended to P's first two operands and contracted, P2([x0, x1], [y0, y1]). It writes the output once
// instead of writing it and then reading it back to add into it, and costs copying the four operands into the two
// stacks, so it is prepared only when the output has more elements than the four operands together (an outer
// product's, say; a matrix-vector step's two passes read the large operand once each either way). `metas`: P's
// operands.
std::optional<EinsumPlan> stacked_terms_plan(const EinsumPlan& p, std::span<const TensorMeta> metas,
                                             bool allow_broadcast);

// x0.y0 + x1.y1 by `plan` (ones: its operands after the first two): by `stacked` in one contraction when prepared,
// else the second term added by the kernel into the first's tensor.
Tensor two_terms(const EinsumPlan& plan, const std::optional<EinsumPlan>& stacked, const Tensor& x0,
                 const Tensor& y0, const Tensor& x1, const Tensor& y1, std::span<const Tensor> ones,
                 StepOperands& ops, ExecutionContext& context);

// The tangent walk (EinsumVjpPlan::execute_tangent) as a list of contraction calls, fixed by which tangents are
// nonzero: forward step t (below the root) writes its value and its tangent dA.B + A.dB, reverse step i its node's
// cotangent P(ct, V) (an intermediate node's always, an operand's when the cotangents are returned) and the tangent
// P(dct, V) + P(ct, dV). A term runs only when its tangent factor is nonzero, so a tangent with no nonzero term is not
// computed (zero). Running the walk, laying out its arena and counting its work all read this one list.
enum class Part { value, tangent, cotangent, cotangent_tangent };
struct Ref {
  Part part = Part::value;
  int node = -1;
};
struct WalkCall {
  int time = 0;                       // the walk step: forward step t, then T - 1 + reverse step i
  Ref out;
  const EinsumPlan* plan = nullptr;   // one term x0.y0 (and the second term added into it when `terms` is 2)
  const EinsumPlan* stacked = nullptr;  // both terms as one contraction over a stacked length-2 label (two terms only)
  int terms = 1;
  std::array<Ref, 4> in;              // x0, y0, x1, y1 in the plan's operand order
  std::span<const Tensor> ones;       // the plan's operands after the first two
};

}  // namespace einstage::einsum::tree_ad

namespace einstage::einsum {

struct EinsumVjpPlan::Impl {
  Subscripts subs;
  int n = 0;
  DType dtype = DType::f64;
  std::vector<int> slots;
  std::vector<DType> operand_dtypes;           // per operand: the dtype of its cotangent
  EinsumPlan forward;                          // the planned tree (the same the forward einsum gets)
  std::vector<std::pair<int, int>> children;   // per step: (left, right) node ids
  std::vector<std::vector<Label>> labels;      // per node: labels as stored
  std::vector<Shape> shapes;                   // per node
  std::vector<std::vector<Label>> ct_labels;   // per node: its cotangent's labels as stored (ReverseLayout.h)
  std::vector<Shape> ct_shapes;                // per node: its cotangent's shape
  std::vector<bool> complex_inputs;            // per operand: conjugated before the walk
  std::vector<std::optional<EinsumPlan>> steps;  // per step: the forward step, when its value is ever needed
  std::vector<std::optional<EinsumPlan>> stacked_steps;  // per step below the root: dA.B + A.dB as one contraction
  std::vector<tree_ad::ReverseStep> reverse;            // in execution order (parents before children)
  std::vector<int> last_use;                   // per node: index of the last reverse step reading its cotangent
  int64_t keep_limit = -1;                     // bytes of intermediates the forward may keep (-1: no limit)
  std::vector<bool> keep;                      // per node: kept by the forward phase
  std::vector<bool> forward_phase;             // per node: computed by the forward phase (kept, or feeds a kept one)
  std::vector<int> recomputed;                 // nodes the reverse steps read that are recomputed when read
  int64_t kept = 0;
  bool with_value = false;                     // the forward phase also computes the root: the einsum's value
  DType value_dtype = DType::f64;              // the einsum's (the operands' promoted dtype)
  // execute()'s arena (ArenaLayout.h): the values of the forward phase below the root and the cotangents of the
  // nodes above the operands, placed once here from the steps that write and read them, so a call allocates one
  // block (or none: a lease's buffer) instead of a tensor per step.
  std::vector<ArenaTensor> arena_tensors;      // as arena_tensors() reports them
  std::vector<int> value_buffer, ct_buffer;    // per node: its index in arena_tensors (-1: not in the arena)
  int64_t arena_bytes = 0;
  // The slots' cotangents: disjoint column-major tensors of one block per call (Tensor::in_block), so a call makes one
  // allocation for its results instead of one per operand.
  std::vector<int64_t> result_offset;          // per operand: byte offset of its cotangent in the block (-1: no slot)
  int64_t result_bytes = 0;
  int64_t step_scratch = 0;                    // the largest scratch_bytes() of the plans execute() runs leased
  uint64_t id = 0;                             // next_plan_identity(): a slot's views of this plan's arena

  int root() const { return 2 * n - 2; }
  void build(const Subscripts& s, std::span<const TensorMeta> metas, const TensorMeta& ct, const EinsumOptions& o);
  void lay_out();
  tree_ad::ReverseStep reverse_step(int node, int parent, int sibling, const ReverseLayout& layout,
                           const EinsumOptions& options) const;
  tree_ad::ReverseStep laid_out_step(int node, int parent, int sibling, const std::vector<bool>& wanted,
                            const EinsumOptions& options) const;
  double step_penalty(int node, int sibling, LaidOutTerm ct, const ReverseLayout& layout) const;
  double best_step_penalty(int node, int sibling, LaidOutTerm ct) const;
  /// The tangent walk's calls for nonzero tangents of the operands flagged in `tangents` (and of the cotangent when
  /// `cotangent_tangent`), in execution order.
  std::vector<tree_ad::WalkCall> tangent_calls(const std::vector<bool>& tangents, bool cotangent_tangent,
                                               bool with_cotangents) const;
};

}  // namespace einstage::einsum
