// Derivatives of an N-ary einsum along its planned contraction tree, on concrete tensors: the runtime half of the
// `einstage.einsum_ad.v1` family (EinsumAdOp.h). Stage: einsum extension, runtime side; depends on Executor.h (the
// planner, StepPlans and the executor) and runtime kernels; not on the compiler.
//
// EinsumVjpPlan (mode vjp) plans the forward einsum exactly as EinsumPlan does (same subscripts, shapes and plan
// spec: the same tree), then walks it backwards: with every operand in the promoted dtype (and conjugated when it
// is complex, so the forward intermediates are conjugated too and no reverse step conjugates anything), it runs the
// forward steps keeping the intermediates the reverse pass reads, and gives each node on a path from the root to a
// requested operand its cotangent by one reverse pairwise contraction: the parent's cotangent times the sibling's
// value, producing the child's labels. That contraction is an ordinary two-operand einsum prepared as an
// EinsumPlan, so it runs on the same StepPlans, executor and JIT kernels as every forward step. The fix-ups of the
// per-operand rule (EinsumAd.h) become operands and labels of that einsum: a label summed inside the child (in
// neither the parent's cotangent nor the sibling) gets a ones vector of its extent, so the cotangent is broadcast
// along it; an axis on which the child broadcasts (stored extent 1, label larger) gets a fresh label with a length-1
// ones vector, so the label is summed into that axis; a label on which the others broadcast gets a ones vector of
// the child's extent; repeated labels of the child are a repeated output label (the executor writes the diagonal
// and zeros elsewhere). Each requested operand's cotangent is returned in its operand's dtype. An intermediate
// node's cotangent is only read by the walk, so it may be laid out in another axis order than the node's value, and
// a reverse step may take the value as its lhs: both chosen at prepare time by a stride cost model of the JIT's GETT
// (ReverseLayout.h); `--print-stages` shows the choice ("laid out", "value first").
//
// EinsumJvpPlan (mode jvp) propagates the tangents up the same tree in one pass: every node that has a tangent below
// it gets dV = dA.B + A.dB (a term only for a child with a tangent), each term its step's two-operand einsum run on
// the executor, and every value a term reads is computed once (the values of subtrees without tangents, and of a
// child whose sibling has one). So the tangent of all n operands costs about three forward passes, not n.
//
// Memory policy: the forward intermediates the reverse steps read are kept while they fit under a byte limit and
// recomputed from their subtrees otherwise (prepare's keep_limit_bytes; the module passes Config::ad_keep_bytes,
// ir/Config.h: EINSTAGE_AD_KEEP_BYTES, until an execution context carries it). `--print-stages` (to_string) says
// which nodes are kept and which recomputed.
//
// Memory of a call: prepare() places the forward values and the cotangents above the operands that execute() holds in
// one arena (ArenaLayout.h, from the walk steps that write and read each), and execute() takes it and the steps'
// scratch from one lease of the context's scratch allocator and runs every step into it (EinsumPlan::run_leased),
// so a step allocates no tensor and takes no lease of its own; only the results are tensors of their own, and the
// slots' cotangents are disjoint tensors in one block (one allocation per call; the block lives while any of them
// does). execute_tangent does the same with its own arena, laid out on its first call for a set of nonzero tangents
// (the lease's slot keeps it, with the views, for the next call): its values, tangents, cotangents and their
// tangents, and the stacked operands of a step whose two tangent terms are one contraction.
//
// Both plans are immutable after prepare() and may run on several threads at once; results are bitwise the same at
// every thread count (every contraction is a deterministic executor call).
#pragma once

#include "extensions/einsum/exec/Executor.h"
#include "runtime/Context.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace einstage::einsum {

/// The work of running prepared plans: calls (EinsumPlan runs), their pairwise steps (one kernel call each) and
/// multiply-adds, one per point of each step's joint index space (the planner's cost model, ContractionTree.h).
struct ContractionWork {
  int64_t calls = 0, steps = 0;
  double multiply_adds = 0;
  ContractionWork& operator+=(const ContractionWork& o) {
    calls += o.calls;
    steps += o.steps;
    multiply_adds += o.multiply_adds;
    return *this;
  }
};
/// One run of `plan`.
ContractionWork contraction_work(const EinsumPlan& plan);

class EinsumVjpPlan {
 public:
  /// Prepares the reverse pass of einsum(`subscripts`) over operands `operands` with output cotangent `cotangent`,
  /// computing the cotangents of the operands listed in `slots` (ascending). Needs two or more operands.
  /// `keep_limit_bytes` bounds the forward intermediates kept for the reverse steps (-1: no limit): values the
  /// reverse steps read are kept in step order while they fit, the others are recomputed from their subtrees when
  /// read (checkpointing); the results are bitwise the same at every limit. `with_value` (mode value_vjp): the
  /// forward phase runs up to the root, so execute() also returns the einsum's value, computed once and shared with
  /// the reverse pass instead of by a separate forward einsum that keeps nothing.
  static EinsumVjpPlan prepare(const Subscripts& subscripts, std::span<const TensorMeta> operands,
                               const TensorMeta& cotangent, std::vector<int> slots, const EinsumOptions& options,
                               int64_t keep_limit_bytes = -1, bool with_value = false);

  /// The slots' cotangents, one per slot in slot order, each in its operand's shape and dtype (the real part for a
  /// real operand of a complex einsum), after the einsum's value (in the walk's dtype) when prepared `with_value`.
  /// Runs on `context`'s JIT and threads (the same bits on every context).
  std::vector<Tensor> execute(std::span<const Tensor> operands, const Tensor& cotangent,
                              ExecutionContext& context = default_context()) const;

  /// The tangent of execute() in the directions `tangents` (one per operand, undefined: zero) and
  /// `cotangent_tangent` (undefined: zero), by one walk forward then backward along the same tree: every value below
  /// the root and its tangent are computed (all kept, whatever the limit), then each reverse step gives its child
  /// the cotangent P(ct, V) and its tangent P(dct, V) + P(ct, dV), P the step's reverse pairwise einsum (the second
  /// term added by the kernel into the first's tensor, or both terms one contraction with a stacked length-2 label where
  /// the output outgrows the operands; the same for dA.B + A.dB). A term whose tangent factor is zero is skipped and
  /// only what a result reads is computed. So a Hessian-vector product costs about three value-and-gradient walks: 9x
  /// the value's multiply-adds when every operand has a tangent (tangent_work). One result per slot, as execute(); `with_cotangents` (mode vjp_with_jvp):
  /// first the slots' cotangents, bitwise what execute() gives (the same plans on the same values), then the tangents.
  std::vector<Tensor> execute_tangent(std::span<const Tensor> operands, const Tensor& cotangent,
                                      std::span<const Tensor> tangents, const Tensor& cotangent_tangent,
                                      ExecutionContext& context = default_context(),
                                      bool with_cotangents = false) const;

  /// What execute_tangent runs, by part: the forward values, their tangents, the cotangents and their tangents (a
  /// tangent's two terms stacked into one contraction count as one call of their joint work).
  struct TangentWork {
    ContractionWork values, tangents, cotangents, cotangent_tangents;
    ContractionWork total() const;
  };
  /// For tangents of the operands flagged in `tangents` (one per operand) and of the cotangent when
  /// `cotangent_tangent`: the calls execute_tangent makes, from the same schedule.
  TangentWork tangent_work(const std::vector<bool>& tangents, bool cotangent_tangent, bool with_cotangents) const;

  /// The dtype the walk computes in (the operands' and the cotangent's promoted dtype).
  DType dtype() const;
  /// Whether execute() returns the value first (prepared `with_value`).
  bool with_value() const;
  /// Bytes of the forward intermediates the reverse pass keeps, and how many it recomputes instead.
  int64_t kept_bytes() const;
  int recomputed_count() const;
  /// The forward tree and the reverse steps, for `--print-stages`.
  std::string to_string() const;

  /// One tensor of execute()'s arena: the value (or the cotangent) of tree node `node` (operands 0..n-1, then one
  /// per step), its byte range, and the walk steps that write and read it (forward step t is t, reverse step i is
  /// T + i for T forward steps; a value kept for the reverse pass is read at the end, T + the reverse step count).
  struct ArenaTensor {
    int node = -1;
    bool cotangent = false;
    int64_t offset = 0, bytes = 0;
    int written = 0;
    std::vector<int> read_at;
  };
  /// execute()'s arena, laid out at prepare time (ArenaLayout.h), and its size. One call leases it from the
  /// context's scratch instead of allocating a tensor per step; the results are tensors of their own.
  const std::vector<ArenaTensor>& arena_tensors() const;
  int64_t arena_bytes() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

class EinsumJvpPlan {
 public:
  /// Prepares the tangent of einsum(`subscripts`) over operands `operands` in the directions of the operands
  /// listed in `slots` (ascending). Needs two or more operands.
  static EinsumJvpPlan prepare(const Subscripts& subscripts, std::span<const TensorMeta> operands,
                               std::vector<int> slots, const EinsumOptions& options);
  /// The sum over slots k of einsum(operands with k replaced by tangents[i]), slots[i] = k, in the operands'
  /// promoted dtype, computed in one pass up the tree.
  Tensor execute(std::span<const Tensor> operands, std::span<const Tensor> tangents,
                 ExecutionContext& context = default_context()) const;
  /// The tree and, per step, whether it computes the value, the tangent or both.
  std::string to_string() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace einstage::einsum
