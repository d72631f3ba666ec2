// The prepared einsum plan's data (EinsumPlan::Impl) and what it is made of, shared by the executor's files (private
// to extensions/einsum/exec/: ExecutorPrepare.cpp builds it, ExecutorRun.cpp runs it, Executor.cpp answers the public
// queries and dumps). Per binary step a StepExec: the ContractionProblem with every extent and every stride known at
// prepare time, plus the StrideTerms that add a call's operand and output strides, so a call only does pointer
// arithmetic and kernel calls. Stage: einsum extension, runtime side; depends on Executor.h and the kernel API.
#pragma once

#include "extensions/einsum/exec/Executor.h"
#include "extensions/api/Kernels.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace einstage::einsum {

namespace executor {

// Where a tree node's tensor lives during execute().
struct Node {
  std::vector<Label> labels;
  Shape shape;
  int input = -1;        // >= 0: operand index
  int64_t offset = -1;   // >= 0: byte offset in the arena
};

// Which tensor of a call a stride comes from.
enum class CallTensor : uint8_t { lhs, rhs, out };

// One stride of a step's ContractionProblem that depends on the call's tensors: the stride field at byte `at` of
// axis group `group` (0 m, 1 n, 2 k, 3 batch; `at` counts from the group's first Axis) gets the stride of axis `axis`
// of `tensor` added (a repeated label adds several axes: the diagonal). The first term of a field sets it to that
// stride (a field with terms has no constant part: its tensor is a call's, not an arena's or the workspace's), so a
// problem left from the same step's previous call on this thread needs no reset. 24 bytes: a step's terms share a
// cache line or two.
struct StrideTerm {
  uint8_t group = 0;
  CallTensor tensor = CallTensor::lhs;
  bool first = false;
  uint32_t at = 0;
  int32_t axis = 0;
  mutable int64_t last = INT64_MIN;  // the stride it added in the step's live problem (written under its `busy`)
};

// A flag that a moved StepExec does not carry (a std::atomic is neither copyable nor movable): plans are built
// before any call, so a step is never moved while it is taken.
struct TakenFlag {
  std::atomic<bool> taken{false};
  TakenFlag() = default;
  TakenFlag(TakenFlag&&) noexcept {}
  TakenFlag& operator=(TakenFlag&&) noexcept { return *this; }
};

// A binary step as execute() runs it: the problem with every extent and every stride known at prepare time
// (intermediates, workspaces, broadcast axes), plus the terms that add the operands' and the output's strides.
// `live` is the step's own copy of `problem` that one call at a time fills and runs in place (taken with `busy`),
// so a step costs no copy of its axes: in a tree walk every step is a plan of its own, and the one problem a
// thread's slot keeps had been copied from the plan on every step (four vectors). A call that finds the step
// taken by another thread fills its slot's problem as before.
// What a call reads comes first and in this one object (where the operands and the result are, the workspace
// offsets, the kernel handle), not in per-plan vectors indexed by step: a tree walk runs ~190 one-step plans per
// call, and each vector read was another cache line (EinsumPlan::Impl::run was ~11% of the 8x8 grid's gradient).
struct StepExec {
  mutable TakenFlag busy;
  int lhs_input = -1, rhs_input = -1;  // operand index of an input operand (-1: an intermediate in the arena)
  int64_t lhs_at = -1, rhs_at = -1;    // arena byte offset of an intermediate operand
  int64_t lhs_ws = -1, rhs_ws = -1;    // workspace byte offset of a one-sided sum (-1: none)
  int64_t dst_offset = -1;             // arena byte offset of the result (-1: the output tensor)
  StepKernel* kernel = nullptr;        // the step's handle (owned by Impl::step_kernels)
  mutable uint64_t live_version = 0;   // changes with live's strides (StepKernel::run's `geometry`); 0: none yet
  std::vector<StrideTerm> terms;
  mutable ContractionProblem live;     // written only by the call holding `busy`
  uint64_t id = 0;             // next_plan_identity(): a thread's problem still holding this step is reused as is
  ContractionProblem problem;  // pointers null; never written after prepare
};


// A call's operands: a span of tensors (the public calls) or of pointers to them (run_leased: the tree walks pass
// their steps' operands without copying a Tensor).
struct OperandList {
  std::span<const Tensor> tensors;
  std::span<const Tensor* const> pointers;
  const Tensor& operator[](size_t i) const { return pointers.empty() ? tensors[i] : *pointers[i]; }
};

}  // namespace executor

struct EinsumPlan::Impl {
  // What every call reads first, together at the start (a tree walk runs ~190 one-step plans per call, and each
  // member elsewhere in this object was another cache line): see `exec` below for the rest.
  bool zero_operand = false;     // see below
  bool any_convert = false;      // an operand's dtype differs from dtype (converted per call)
  bool repeated_output = false;  // an output label repeats: zero the output first, steps write the diagonal
  DType dtype = DType::f64;
  int64_t arena = 0, workspace = 0;
  std::vector<executor::StepExec> exec;  // one per binary step: per-call facts fixed at prepare time, so execute() only does
                               // pointer arithmetic and kernel calls
  // The last step's kernel when it adds into the output (accumulate_into, run_leased's accumulate): C += A.B is
  // another geometry for the JIT than C = A.B, and one handle alternating between the two (the tangent walk runs
  // a reverse step's plan both ways) set up its kernel anew on every call once it had seen four geometries.
  std::shared_ptr<StepKernel> accumulate_kernel;
  std::vector<TensorMeta> metas;
  std::vector<uint8_t> needs_convert;  // per operand: its dtype differs from dtype

  Subscripts subs;
  Shape output_shape;
  std::map<Label, int64_t> extents;
  bool shortcut = false;
  ContractionTree tree;
  std::vector<StepPlan> steps;
  std::vector<executor::Node> nodes;                      // tree ids: inputs 0..n-1, then one per step
  std::vector<std::pair<int, int>> step_nodes;  // (left id, right id) per binary step
  std::vector<int64_t> lhs_ws, rhs_ws;          // workspace byte offsets per step (-1: no one-sided sum)
  int64_t peak = 0;
  int largest_step = -1;      // the step whose result is the largest intermediate (-1: none in the arena)
  int64_t largest_bytes = 0;  // its bytes
  std::vector<std::shared_ptr<StepKernel>> step_kernels;  // one per step; counts calls, holds specialised kernels
  // zero_operand: an operand has no elements: every term of the sum has a factor from it, so the result is all
  // zeros. The steps are planned (lowering and to_string show them) but never run, and no scratch is sized or
  // allocated: the other extents may be huge (NumPy: np.empty((0, 2**59))).

  void build_exec();
  /// What the scratch holds, for the out-of-memory error: the einsum, the arena's largest step, the workspace.
  std::string scratch_what() const;

  void build(const BoundEinsum& bound, std::span<const TensorMeta> metas_in, const PlanSpec& spec,
             const ContractionTree* given_tree);
  /// `accumulate`: out += the einsum (the last step adds into out; nothing else writes it). `lease` and `scratch`
  /// (run_leased): the caller's lease and scratch bytes instead of a lease of this call's own; `stream_output`: the
  /// step that writes `out` sets ContractionProblem::stream_c.
  void run(executor::OperandList operands, Tensor& out, ExecutionContext& context, ThreadPool* pool,
           bool accumulate = false, ScratchAllocator::Lease* lease = nullptr, std::byte* scratch = nullptr,
           bool stream_output = false) const;
};

}  // namespace einstage::einsum
