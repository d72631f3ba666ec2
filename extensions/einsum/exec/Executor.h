// EinsumPlan: an einsum prepared for given operand dtypes and shapes -- the tree, the StepPlans, the scratch arena
// layout -- and its execution on concrete tensors.
//
// Stage: einsum extension, runtime side. prepare() binds the subscripts to the shapes (bind_einsum: the one
// validation and broadcast rule), asks the planner for a tree (resolve), builds one StepPlan per step from the
// evaluator's kept labels, and lays the intermediates out in one arena (first fit, a dead intermediate's space is
// reused; the last step writes straight into the output). execute() then only runs kernels: diagonals and broadcast
// axes are strides (sum of the repeated axes' strides; 0 on a broadcast axis), one-sided sums are reduce_sum into a
// workspace, every product is one ContractionProblem, and the final transpose and output diagonals are folded into
// the output strides. Everything shape-dependent is fixed at prepare time (per step: the ContractionProblem with
// its extents and the strides of intermediates, plus which operand and output axes add their strides), so a call
// with operands of the prepared dtypes allocates nothing and copies no problem: it sets the pointers and the call's
// strides in the step's own problem (or, while another thread's call holds that step, in its thread's) and runs the
// kernels, with the arena in a per-thread buffer (kept up to 256 KiB; larger arenas are allocated per call). A plan
// is immutable but for those per-step problems and may run on several threads at once (each call has its own arena).
// The last step keeps a second kernel handle for calls that add into the output (accumulate_into). Mixed operand dtypes promote
// like NumPy (ir/DType.h promote(): f32+f64 -> f64, i64+f32 -> f64, real+complex -> complex of the wider
// precision); differing operands are converted once per call (a copy outside the arena). Depends on the notation, planner and StepPlan headers and on runtime kernels; not on the compiler.
// The header itself includes only the spec's types (planner/PlanKind.h), not the planners: it is part of
// <einstage/einstage.h>.
#pragma once

#include "extensions/einsum/notation/Grouped.h"
#include "extensions/einsum/exec/StepPlan.h"
#include "extensions/einsum/notation/Subscripts.h"
#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/PlanKind.h"
#include "ir/Scratch.h"
#include "ir/Tensor.h"

#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace einstage {
class ExecutionContext;
class ThreadPool;
}

namespace einstage::einsum {

/// What prepare() needs to know of an operand.
struct TensorMeta {
  DType dtype = DType::f64;
  Shape shape;
  static TensorMeta of(const Tensor& t) { return TensorMeta{t.dtype(), t.shape()}; }
  bool operator==(const TensorMeta&) const = default;
};

/// The shapes of `metas`, in order (what the planner reads of prepare()'s operands).
inline std::vector<Shape> shapes_of(std::span<const TensorMeta> metas) {
  std::vector<Shape> shapes;
  for (const TensorMeta& m : metas) shapes.push_back(m.shape);
  return shapes;
}

struct EinsumOptions {
  PlanSpec plan;                 // contraction order request (default: auto)
  bool allow_broadcast = false;  // length-1 broadcasting of named labels (docs/behaviour.md §1.5); `...` axes may
  /// The context one-shot einsum() runs on (runtime/Context.h: its JIT, specialiser and pool); nullptr:
  /// default_context().
  ExecutionContext* context = nullptr;
  /// Threads for one-shot einsum(): `pool` if set; else threads = 0 (the default) runs on the context's pool
  /// (default_context(): every CPU this process may use, or EINSTAGE_NUM_THREADS; runtime/Cpus.h); 1 runs on the
  /// calling thread; n > 1 starts a pool of n threads for the call (pass a pool or a context to avoid that). Results
  /// are bitwise the same at every count. prepare() ignores all three; pass them to execute().
  ThreadPool* pool = nullptr;
  int threads = 0;
};

class EinsumPlan {
 public:
  /// Prepares "ij,jk->ik" (plain, nested or `...` strings) for operands with these dtypes and shapes.
  static EinsumPlan prepare(std::string_view subscripts, std::span<const TensorMeta> metas,
                            const EinsumOptions& options = {});
  /// Prepares integer-label Subscripts (Notation.h make_subscripts).
  static EinsumPlan prepare(const Subscripts& subscripts, std::span<const TensorMeta> metas,
                            const EinsumOptions& options = {});
  /// Prepares a grouped-dialect string (Grouped.h); the order is planned on the grouped form.
  static EinsumPlan prepare_grouped(std::string_view subscripts, std::span<const TensorMeta> metas,
                                    std::span<const GroupLength> lengths = {}, const EinsumOptions& options = {});

  /// Runs the plan on operands matching the prepared dtypes and shapes (any strides); returns a fresh column-major
  /// tensor of output_shape() and dtype().
  /// Runs on `context`: its pool, its JIT and its specialiser.
  Tensor execute(std::span<const Tensor> operands, ExecutionContext& context) const;
  /// Runs on `pool` (nullptr: the calling thread) with default_context()'s JIT.
  Tensor execute(std::span<const Tensor> operands, ThreadPool* pool = nullptr) const;
  /// Same, writing into `out` (dtype() and output_shape(), any strides; must not overlap an operand).
  void execute_into(std::span<const Tensor> operands, Tensor& out, ExecutionContext& context,
                    ThreadPool* pool) const;
  void execute_into(std::span<const Tensor> operands, Tensor& out, ThreadPool* pool = nullptr) const;
  /// out += the einsum of `operands` (out as for execute_into), on `context`'s pool: the last step's kernel adds
  /// into out (C += A.B) instead of a separate result and an add pass. Same bits at every thread count.
  void accumulate_into(std::span<const Tensor> operands, Tensor& out, ExecutionContext& context) const;
  /// execute_into on `context`'s pool (accumulate_into when `accumulate`), the operands given by pointer, for a caller
  /// that runs many plans in a row under one lease of context.scratch() (the tree walks, TreeAd.h): `scratch`
  /// (64-byte aligned, at least
  /// scratch_bytes()) holds the intermediates and one-sided sums and `lease` the reused problem, so the call takes no
  /// lease of its own. The operands and `out` are not checked: the caller prepared the plan for exactly these
  /// dtypes and shapes. The same bits as execute_into. `stream_output`: the caller will not read `out` again soon, so
  /// the step that writes it may store past the caches (ContractionProblem::stream_c).
  void run_leased(std::span<const Tensor* const> operands, Tensor& out, ExecutionContext& context,
                  ScratchAllocator::Lease& lease, std::byte* scratch, bool accumulate = false,
                  bool stream_output = false) const;
  /// Bytes of scratch a call needs: the arena and the workspace (0 for one operand or a zero-size operand).
  int64_t scratch_bytes() const;

  DType dtype() const;                 // the promoted dtype of the result and of every step
  const Shape& output_shape() const;
  const Subscripts& subscripts() const;
  const std::map<Label, int64_t>& extents() const;
  /// True when the two-operand shortcut applies (docs/behaviour.md §4.1): no tree was planned, one dot_general.
  bool is_shortcut() const;
  /// The planned tree (empty for the shortcut and for one operand).
  const ContractionTree& tree() const;
  /// The steps in execution order (one unary step for a one-operand einsum).
  const std::vector<StepPlan>& steps() const;
  /// Peak bytes of intermediates live at once (elements x dtype size; inputs and output excluded; a step's result
  /// is live together with its operands). This is what the planner's evaluator predicts for the tree.
  int64_t peak_intermediate_bytes() const;
  /// Bytes of the intermediate arena as laid out by first fit (>= peak_intermediate_bytes(); larger only when the
  /// free space is fragmented).
  int64_t arena_bytes() const;
  /// Bytes for one-sided sums taken before a product (the largest total of one step), allocated beside the arena.
  int64_t workspace_bytes() const;
  /// Steps and arena offsets, for dumps.
  std::string to_string() const;
  /// Calls of this plan's steps that ran a shape-specialised kernel (StepKernel::specialised_calls, summed over the
  /// steps and over the last step's accumulating handle), for tests and benchmarks.
  int64_t specialised_calls() const;

  struct Impl;

 private:
  void check_call(std::span<const Tensor> operands, const Tensor& out) const;  // fails naming the mismatch
  std::shared_ptr<const Impl> impl_;
};

}  // namespace einstage::einsum
