#include "extensions/einsum/exec/Executor.h"

#include "extensions/einsum/exec/ArenaLayout.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/api/Kernels.h"
#include "ir/Quote.h"
#include "ir/Scratch.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <new>
#include <optional>

namespace einstage::einsum {

namespace {

// The one call site of the pairwise kernel: the step's handle (StepKernel, extensions/api/Kernels.h) runs contract(),
// which picks the JIT GETT for floating types and the portable kernel otherwise, and swaps in a shape-specialised
// kernel once the step is hot, all on the context's JIT. Replace with contract_portable to run
// without the JIT.
void run_contraction(StepKernel& step, const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool,
                     uint64_t geometry) {
  step.run(p, context, pool, geometry);
}

std::vector<Label> first_occurrences(const std::vector<Label>& labels) {
  std::vector<Label> out;
  for (Label l : labels)
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  return out;
}


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
  uint64_t id = 0;             // unique in the process: a thread's problem still holding this step is reused as is
  ContractionProblem problem;  // pointers null; never written after prepare
};

}  // namespace

// A call's operands: a span of tensors (the public calls) or of pointers to them (run_leased: the tree walks pass
// their steps' operands without copying a Tensor).
struct OperandList {
  std::span<const Tensor> tensors;
  std::span<const Tensor* const> pointers;
  const Tensor& operator[](size_t i) const { return pointers.empty() ? tensors[i] : *pointers[i]; }
};

struct EinsumPlan::Impl {
  // What every call reads first, together at the start (a tree walk runs ~190 one-step plans per call, and each
  // member elsewhere in this object was another cache line): see `exec` below for the rest.
  bool zero_operand = false;     // see below
  bool any_convert = false;      // an operand's dtype differs from dtype (converted per call)
  bool repeated_output = false;  // an output label repeats: zero the output first, steps write the diagonal
  DType dtype = DType::f64;
  int64_t arena = 0, workspace = 0;
  std::vector<StepExec> exec;  // one per binary step: per-call facts fixed at prepare time, so execute() only does
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
  std::vector<Node> nodes;                      // tree ids: inputs 0..n-1, then one per step
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
  void run(OperandList operands, Tensor& out, ExecutionContext& context, ThreadPool* pool,
           bool accumulate = false, ScratchAllocator::Lease* lease = nullptr, std::byte* scratch = nullptr,
           bool stream_output = false) const;
};

// ---- prepare ----

void EinsumPlan::Impl::build(const BoundEinsum& bound, std::span<const TensorMeta> metas_in, const PlanSpec& spec,
                             const ContractionTree* given_tree) {
  subs = bound.subs;
  metas.assign(metas_in.begin(), metas_in.end());
  extents = bound.extents;
  output_shape = bound.output_shape;
  const int n = static_cast<int>(subs.inputs.size());
  if (n == 0) fail(ErrorKind::invalid_argument, "einsum: no operands; an einsum needs at least one operand");
  dtype = metas[0].dtype;
  for (const TensorMeta& m : metas) dtype = promote(dtype, m.dtype);
  for (int i = 0; i < n; ++i) nodes.push_back(Node{subs.inputs[i], metas[i].shape, i, -1});
  for (const TensorMeta& m : metas) zero_operand = zero_operand || element_count(m.shape) == 0;

  if (n == 1) {
    steps.push_back(make_unary_step(subs.inputs[0], metas[0].shape, subs.output, extents));
    build_exec();
    return;
  }
  const std::vector<Label> out_distinct = first_occurrences(subs.output);
  const bool explicit_order = spec.kind == PlanKind::path || spec.kind == PlanKind::tree;
  std::vector<std::vector<Label>> keep;
  if (!given_tree && n == 2 && !explicit_order && is_direct_dot_general(subs)) {
    shortcut = true;
    step_nodes.push_back({0, 1});
    keep.push_back(out_distinct);
  } else {
    tree = given_tree ? *given_tree : resolve(spec, subs, extents);
    const TreeCost cost = evaluate(subs, extents, tree);
    for (size_t k = 0; k < tree.steps().size(); ++k) {
      step_nodes.push_back(tree.steps()[k]);
      keep.push_back(k + 1 == tree.steps().size() ? out_distinct : cost.steps[k].result_labels);
    }
  }
  // Sizes of the scratch: every product and sum is checked, and an error names the einsum and the step.
  auto at_step = [&](size_t k, auto&& size) -> int64_t {
    try {
      return size();
    } catch (const Error& e) {
      fail(e.kind(), "einsum {}: step {}: {}", quote_for_message(einsum::to_string(subs)), k, e.what());
    }
  };
  FirstFit arena_fit;
  int64_t live = 0;
  for (size_t k = 0; k < step_nodes.size(); ++k) {
    const bool last = k + 1 == step_nodes.size();
    auto [a, b] = step_nodes[k];
    StepPlan s = make_binary_step(nodes[a].labels, nodes[a].shape, nodes[b].labels, nodes[b].shape, keep[k], extents,
                                  last ? &subs.output : nullptr);
    Node result{s.result, s.result_shape, -1, -1};
    lhs_ws.push_back(-1);
    rhs_ws.push_back(-1);
    if (zero_operand) {  // never run: no workspace, no arena
      nodes.push_back(std::move(result));
      steps.push_back(std::move(s));
      continue;
    }
    // Workspace for one-sided sums of this step: lhs first, then rhs.
    int64_t ws = 0;
    auto reserve_sum = [&](const StepOperand& op, int64_t& at) {
      if (op.summed.empty()) return;
      Shape red;
      for (Label l : op.reduced) red.push_back(extents.at(l));
      at = ws;
      ws = at_step(k, [&] {
        return checked_add(ws, checked_bytes(red, size_of(dtype), "the one-sided sum of shape"), "the workspace");
      });
    };
    reserve_sum(s.lhs, lhs_ws.back());
    reserve_sum(s.rhs, rhs_ws.back());
    workspace = std::max(workspace, ws);
    if (!last) {  // the result is allocated while both operands are live, then the operands are released
      const int64_t bytes =
          at_step(k, [&] { return checked_bytes(s.result_shape, size_of(dtype), "the result of shape"); });
      result.offset = at_step(k, [&] { return arena_fit.allocate(bytes, "the arena"); });
      live = at_step(k, [&] { return checked_add(live, bytes, "the live intermediates"); });
      if (bytes > largest_bytes) largest_step = static_cast<int>(k), largest_bytes = bytes;
      peak = std::max(peak, live);
    }
    for (int id : {a, b})
      if (nodes[id].offset >= 0) {  // sized when its step allocated it
        const int64_t bytes = checked_bytes(nodes[id].shape, size_of(dtype), "an intermediate of shape");
        arena_fit.release(nodes[id].offset, bytes);
        live -= bytes;
      }
    nodes.push_back(std::move(result));
    steps.push_back(std::move(s));
  }
  arena = arena_fit.end();
  (void)checked_add(arena, workspace, fmt::format("einsum {}: the scratch (arena + workspace bytes)",
                                                  quote_for_message(einsum::to_string(subs))));
  for (size_t k = 0; k < steps.size(); ++k) step_kernels.push_back(std::make_shared<StepKernel>());
  accumulate_kernel = std::make_shared<StepKernel>();
  build_exec();
}

namespace {

// A step operand's stride per distinct label, before the call's strides are known: a constant plus axes of a call
// tensor whose strides add up (a repeated label: the diagonal).
struct SymbolicStride {
  int64_t constant = 0;
  std::vector<std::pair<CallTensor, int>> axes;
};
using SymbolicView = std::map<Label, SymbolicStride>;

// Labels of `labels` with stride 0 on broadcast axes and the stored strides summed over repeats; `call` says whose
// strides (a call tensor) or gives the constant ones (an arena layout).
SymbolicView symbolic_view(const std::vector<Label>& labels, const std::vector<Label>& distinct,
                           const std::vector<bool>* broadcast, std::optional<CallTensor> call, const Strides& fixed) {
  SymbolicView v;
  for (size_t d = 0; d < distinct.size(); ++d) {
    SymbolicStride& s = v[distinct[d]];
    if (broadcast && (*broadcast)[d]) continue;
    for (size_t a = 0; a < labels.size(); ++a)
      if (labels[a] == distinct[d]) {
        if (call) s.axes.emplace_back(*call, static_cast<int>(a));
        else s.constant += fixed[a];
      }
  }
  return v;
}

}  // namespace

void EinsumPlan::Impl::build_exec() {
  const int n = static_cast<int>(metas.size());
  needs_convert.assign(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) needs_convert[i] = metas[i].dtype != dtype;
  any_convert = std::find(needs_convert.begin(), needs_convert.end(), 1) != needs_convert.end();
  repeated_output = subs.output.size() != first_occurrences(subs.output).size();
  if (n == 1) return;
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepPlan& s = steps[k];
    auto [a, b] = step_nodes[k];
    StepExec e;
    auto side = [&](int id, const StepOperand& op, bool summed_first, CallTensor who, int& input) {
      const Node& node = nodes[static_cast<size_t>(id)];
      if (node.input >= 0) input = node.input;
      if (summed_first) {  // the product reads the workspace: op.reduced, column-major
        Shape red;
        for (Label l : op.reduced) red.push_back(extents.at(l));
        return symbolic_view(op.reduced, op.reduced, nullptr, std::nullopt, col_major_strides(red));
      }
      if (node.input >= 0) return symbolic_view(op.labels, op.distinct, &op.broadcast, who, {});
      return symbolic_view(op.labels, op.distinct, &op.broadcast, std::nullopt, col_major_strides(node.shape));
    };
    const SymbolicView lv = side(a, s.lhs, lhs_ws[k] >= 0, CallTensor::lhs, e.lhs_input);
    const SymbolicView rv = side(b, s.rhs, rhs_ws[k] >= 0, CallTensor::rhs, e.rhs_input);
    e.lhs_at = nodes[static_cast<size_t>(a)].offset;
    e.rhs_at = nodes[static_cast<size_t>(b)].offset;
    e.lhs_ws = lhs_ws[k];
    e.rhs_ws = rhs_ws[k];
    e.kernel = step_kernels[k].get();
    const SymbolicView dv = s.final ? symbolic_view(s.output, s.output_distinct, nullptr, CallTensor::out, {})
                                    : symbolic_view(s.result, s.result, nullptr, std::nullopt,
                                                    col_major_strides(s.result_shape));
    if (!s.final) e.dst_offset = nodes[static_cast<size_t>(n) + k].offset;
    e.problem.dtype = dtype;
    using Axis = ContractionProblem::Axis;
    const SymbolicView* views[3] = {&lv, &rv, &dv};
    const uint32_t fields[3] = {offsetof(Axis, stride_a), offsetof(Axis, stride_b), offsetof(Axis, stride_c)};
    int64_t Axis::*members[3] = {&Axis::stride_a, &Axis::stride_b, &Axis::stride_c};
    auto add_axes = [&](uint8_t group, std::vector<Axis>& axes, const std::vector<Label>& labels,
                        std::initializer_list<int> present) {
      for (Label l : labels) {
        Axis axis;
        axis.extent = extents.at(l);
        const int index = static_cast<int>(axes.size());
        for (int w : present) {
          const SymbolicStride& st = views[w]->at(l);
          axis.*members[w] = st.constant;
          EIN_ASSERT(st.axes.empty() || st.constant == 0, "einsum step {}: a stride of a call tensor with a constant part", k);
          for (size_t t = 0; t < st.axes.size(); ++t)
            e.terms.push_back(StrideTerm{group, st.axes[t].first, t == 0,
                                         static_cast<uint32_t>(index * sizeof(Axis) + fields[w]),
                                         st.axes[t].second});
        }
        axes.push_back(axis);
      }
    };
    add_axes(0, e.problem.m, s.lhs_free, {0, 2});
    add_axes(1, e.problem.n, s.rhs_free, {1, 2});
    add_axes(2, e.problem.k, s.contracted, {0, 1});
    add_axes(3, e.problem.batch, s.batch, {0, 1, 2});
    static std::atomic<uint64_t> next_id{1};
    e.id = next_id.fetch_add(1, std::memory_order_relaxed);
    e.live = e.problem;
    exec.push_back(std::move(e));
  }
}

// ---- execute ----

namespace {

// An operand during a step: base pointer and, per label of `labels`, extent and stride.
struct Operand {
  void* data = nullptr;
  std::vector<Label> labels;
  Shape extents;
  Strides strides;
};

// The step operand's distinct labels with their strides: a repeated label's stride is the sum of its axes' strides
// (the diagonal), a broadcast axis has stride 0 and the label's full extent.
Operand distinct_view(const StepOperand& op, void* data, const Strides& stored_strides,
                      const std::map<Label, int64_t>& extents) {
  Operand v;
  v.data = data;
  v.labels = op.distinct;
  for (size_t d = 0; d < op.distinct.size(); ++d) {
    int64_t stride = 0;
    for (size_t a = 0; a < op.labels.size(); ++a)
      if (op.labels[a] == op.distinct[d]) stride += stored_strides[a];
    v.extents.push_back(extents.at(op.distinct[d]));
    v.strides.push_back(op.broadcast[d] ? 0 : stride);
  }
  return v;
}

// Sums the one-sided labels into `ws` (column-major over op.reduced); returns the reduced operand.
Operand sum_first(const StepOperand& op, const Operand& v, DType dtype, void* ws, ThreadPool* pool) {
  Tensor src = Tensor::view_of(dtype, v.extents, v.strides, v.data);
  Operand r;
  r.data = ws;
  r.labels = op.reduced;
  std::vector<int> axes;
  for (size_t d = 0; d < v.labels.size(); ++d) {
    if (std::find(op.summed.begin(), op.summed.end(), v.labels[d]) != op.summed.end()) axes.push_back(static_cast<int>(d));
    else r.extents.push_back(v.extents[d]);
  }
  r.strides = col_major_strides(r.extents);
  Tensor dst = Tensor::view_of(dtype, r.extents, r.strides, ws);
  kernels::reduce_sum(src, axes, dst, false, pool);
  return r;
}

// Per output-distinct label, the output tensor's stride (sum over the axes that carry it: the diagonal).
Strides output_label_strides(const StepPlan& s, const Tensor& out) {
  Strides st;
  for (Label l : s.output_distinct) {
    int64_t sum = 0;
    for (size_t a = 0; a < s.output.size(); ++a)
      if (s.output[a] == l) sum += out.strides()[a];
    st.push_back(sum);
  }
  return st;
}

}  // namespace

namespace {

// State reused across calls, so a call allocates nothing: the ContractionProblem being filled and the scratch (arena
// + workspace) bytes, in a lease of the context's ScratchAllocator (ir/Scratch.h), whose slot keeps them for the next
// call within the allocator's limit. A plan stays immutable; each call running it holds a slot of its own (a call
// nested in another, e.g. from a task a waiting thread picks up, takes another slot). Scratch larger than
// kKeepScratchBytes (up to kReusedScratchBytes) is allocated per call as large-block storage from the same allocator
// (2 MiB-aligned with a huge-page hint; freed blocks are kept for a later call of the same size), not kept in the
// slot: fresh pages from the system cost a page clear on first touch, which was a third of a call of the
// einsum-benchmark's str_nw_mera_open_26 (hundreds of MB of intermediates).
struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using ScratchBytes = std::unique_ptr<std::byte[], AlignedFree>;

// `what` says what the scratch holds, for the out-of-memory error.
using ScratchWhat = std::function<std::string()>;

ScratchBytes allocate_scratch(int64_t bytes, const ScratchWhat& what) {
  void* p = ::operator new[](static_cast<size_t>(bytes), std::align_val_t(64), std::nothrow);
  if (!p) fail_out_of_memory(bytes, what());
  return ScratchBytes(static_cast<std::byte*>(p));
}

constexpr int64_t kKeepScratchBytes = int64_t(256) << 10;
// Scratch up to this size goes through the allocator's large blocks, which it can hand back warm on the next call.
// Larger scratch would hardly be kept, and fresh huge-page-hinted blocks of a GB or more cost more than plain ones
// when memory is fragmented (gm_queen5_5_3, 1.3 GB of scratch: 2.4 s -> 4.9 s beside the benchmark's peer
// processes), so it is a plain allocation.
constexpr int64_t kReusedScratchBytes = int64_t(512) << 20;

// What a slot keeps for the executor besides its bytes.
struct ExecutorSlot {
  ContractionProblem problem;
  uint64_t problem_of = 0;  // StepExec::id whose problem `problem` holds (0: none)
};

class CallScratch {
 public:
  // Allocates `scratch_bytes`; a failure is the out-of-memory error naming what the scratch holds.
  CallScratch(ScratchAllocator& allocator, int64_t scratch_bytes, const ScratchWhat& what)
      : lease_(allocator.lease()), state_(&lease_.object<ExecutorSlot>()) {
    if (scratch_bytes <= 0) {
      base_ = empty_;  // zero-size intermediates still need a non-null address
    } else if (scratch_bytes > kKeepScratchBytes && scratch_bytes <= kReusedScratchBytes) {
      try {
        large_ = allocator.allocate(static_cast<size_t>(scratch_bytes));
      } catch (const Error&) {
        fail_out_of_memory(scratch_bytes, what());
      }
      base_ = large_.get();
    } else if (scratch_bytes > kKeepScratchBytes) {
      huge_ = allocate_scratch(scratch_bytes, what);
      base_ = huge_.get();
    } else {
      try {
        base_ = lease_.buffer(0, static_cast<size_t>(scratch_bytes));
      } catch (const Error&) {
        fail_out_of_memory(scratch_bytes, what());
      }
    }
  }
  CallScratch(const CallScratch&) = delete;
  CallScratch& operator=(const CallScratch&) = delete;

  ExecutorSlot& slot() { return *state_; }
  std::byte* base() { return base_; }
  static std::byte* empty_base() { return empty_; }

 private:
  ScratchAllocator::Lease lease_;
  ExecutorSlot* state_ = nullptr;
  std::shared_ptr<std::byte> large_;  // scratch above kKeepScratchBytes, for this call only
  ScratchBytes huge_;                 // scratch above kReusedScratchBytes
  std::byte* base_ = nullptr;
  alignas(64) static inline std::byte empty_[64];
};


}  // namespace

void EinsumPlan::Impl::run(OperandList operands, Tensor& out, ExecutionContext& context,
                           ThreadPool* pool, bool accumulate, ScratchAllocator::Lease* lease,
                           std::byte* scratch_bytes, bool stream_output) const {
  if (zero_operand) {  // a sum over no terms (or an empty output): zeros, no kernel, no scratch
    if (!accumulate) kernels::fill_zero(out, pool);
    return;
  }
  const int n = static_cast<int>(metas.size());
  // Promote operands whose dtype differs (NumPy rules); the copies live for this call.
  std::vector<Tensor> converted;
  if (any_convert) {
    converted.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      if (needs_convert[i]) converted[i] = operands[i].astype(dtype);
  }
  const bool convert = any_convert;
  auto input = [&](int i) -> const Tensor& { return convert && needs_convert[i] ? converted[i] : operands[i]; };
  // Off-diagonal zeros; the steps write the diagonal (accumulating: out's off-diagonal entries stay as they are).
  if (repeated_output && !accumulate) kernels::fill_zero(out, pool);

  if (n == 1) {
    const StepPlan& s = steps[0];
    const Tensor& t = input(0);
    Operand v = distinct_view(s.lhs, const_cast<void*>(t.raw_data()), t.strides(), extents);
    Tensor src = Tensor::view_of(dtype, v.extents, v.strides, v.data);
    // The destination seen in the result's label order (the kept labels in operand order): the transpose and the
    // output diagonals are its strides.
    Strides ost = output_label_strides(s, out);
    Shape dshape;
    Strides dstrides;
    for (Label l : s.result) {
      size_t i = static_cast<size_t>(std::find(s.output_distinct.begin(), s.output_distinct.end(), l) - s.output_distinct.begin());
      dshape.push_back(extents.at(l));
      dstrides.push_back(ost[i]);
    }
    Tensor dst = Tensor::view_of(dtype, dshape, dstrides, out.raw_data());
    std::vector<int> axes;
    for (size_t d = 0; d < v.labels.size(); ++d)
      if (std::find(s.lhs.summed.begin(), s.lhs.summed.end(), v.labels[d]) != s.lhs.summed.end())
        axes.push_back(static_cast<int>(d));
    kernels::reduce_sum(src, axes, dst, accumulate, pool);
    return;
  }

  // Checked before allocating: a plan whose scratch exceeds the machine's memory fails here, naming its largest step.
  // A plan without scratch (one step and no one-sided sum: every step of a tree walk) takes a lease only when a
  // step is held by another call and needs the slot's problem.
  std::optional<CallScratch> own;
  if (!lease) {
    if (!fits_in_memory(arena + workspace)) fail_out_of_memory(arena + workspace, scratch_what());
    if (arena + workspace > 0) own.emplace(context.scratch(), arena + workspace, [this] { return scratch_what(); });
  }
  // Looked up only when a step is held by another call (the slot's objects are a list searched by type).
  auto the_slot = [&]() -> ExecutorSlot& {
    if (lease) return lease->object<ExecutorSlot>();
    if (!own) own.emplace(context.scratch(), 0, [this] { return scratch_what(); });
    return own->slot();
  };
  std::byte* arena_base = lease ? scratch_bytes : own ? own->base() : CallScratch::empty_base();
  std::byte* ws_base = arena_base + arena;

  void* const out_data = out.raw_data();
  for (size_t k = 0; k < exec.size(); ++k) {
    const StepExec& e = exec[k];
    const Tensor* lhs = e.lhs_input >= 0 ? &input(e.lhs_input) : nullptr;
    const Tensor* rhs = e.rhs_input >= 0 ? &input(e.rhs_input) : nullptr;
    void* a = lhs ? const_cast<void*>(lhs->raw_data()) : arena_base + e.lhs_at;
    void* b = rhs ? const_cast<void*>(rhs->raw_data()) : arena_base + e.rhs_at;
    // One-sided sums into the workspace (views built per call: these steps do a reduction pass anyway).
    auto sum_side = [&](const StepOperand& op, const Tensor* t, int id, void* data, int64_t ws_offset) -> void* {
      const Strides stored = t ? t->strides() : col_major_strides(nodes[static_cast<size_t>(id)].shape);
      Operand v = distinct_view(op, data, stored, extents);
      sum_first(op, v, dtype, ws_base + ws_offset, pool);
      return ws_base + ws_offset;
    };
    if (e.lhs_ws >= 0) a = sum_side(steps[k].lhs, lhs, step_nodes[k].first, a, e.lhs_ws);
    if (e.rhs_ws >= 0) b = sum_side(steps[k].rhs, rhs, step_nodes[k].second, b, e.rhs_ws);

    // The step's own problem when no other call holds it, else the slot's (copied from the step's once per run
    // of other steps in between).
    const bool in_place = !e.busy.taken.exchange(true, std::memory_order_acquire);
    struct Release {
      std::atomic<bool>* flag;
      ~Release() {
        if (flag) flag->store(false, std::memory_order_release);
      }
    } release{in_place ? &e.busy.taken : nullptr};
    ExecutorSlot* slot = in_place ? nullptr : &the_slot();
    ContractionProblem& p = in_place ? e.live : slot->problem;
    if (slot && slot->problem_of != e.id) {  // else the problem is this step's from the slot's previous call
      p = e.problem;                        // reuses the slot's vectors: no allocation once they have grown
      slot->problem_of = e.id;
    }
    p.a = a;
    p.b = b;
    p.c = e.dst_offset >= 0 ? static_cast<void*>(arena_base + e.dst_offset) : out_data;
    p.accumulate = accumulate && e.dst_offset < 0;  // set on every step: the problem is reused
    p.stream_c = stream_output && e.dst_offset < 0;
    std::byte* const groups[4] = {reinterpret_cast<std::byte*>(p.m.data()), reinterpret_cast<std::byte*>(p.n.data()),
                                  reinterpret_cast<std::byte*>(p.k.data()),
                                  reinterpret_cast<std::byte*>(p.batch.data())};
    const int64_t* const strides[3] = {lhs ? lhs->strides().data() : nullptr, rhs ? rhs->strides().data() : nullptr,
                                       out.strides().data()};
    bool changed = false;  // a stride of the live problem differs from its previous call's
    for (const StrideTerm& t : e.terms) {
      int64_t& stride = *reinterpret_cast<int64_t*>(groups[t.group] + t.at);
      const int64_t add = strides[static_cast<int>(t.tensor)][t.axis];
      stride = (t.first ? 0 : stride) + add;
      if (in_place && t.last != add) changed = true, t.last = add;
    }
    // The live problem's geometry is a function of its terms' strides and `accumulate` (whose two values run on
    // two handles): one version number per set of strides tells the kernel handle it saw this geometry before.
    static std::atomic<uint64_t> next_version{1};
    if (in_place && (changed || e.live_version == 0))
      e.live_version = next_version.fetch_add(1, std::memory_order_relaxed);
    run_contraction(p.accumulate ? *accumulate_kernel : *e.kernel, p, context, pool,
                    in_place ? e.live_version : 0);
  }
}

std::string EinsumPlan::Impl::scratch_what() const {
  std::string largest = largest_step < 0 ? std::string("no intermediate")
                                         : fmt::format("the largest intermediate is step {}'s result {} of {}",
                                                       largest_step, shape_to_string(nodes[metas.size() +
                                                       static_cast<size_t>(largest_step)].shape),
                                                       human_bytes(largest_bytes));
  return fmt::format("the scratch of einsum {} (an arena of {} for the intermediates, where {}, and a workspace "
                     "of {})", quote_for_message(einsum::to_string(subs)), human_bytes(arena), largest,
                     human_bytes(workspace));
}

// ---- public API ----

EinsumPlan EinsumPlan::prepare(std::string_view text, std::span<const TensorMeta> metas, const EinsumOptions& options) {
  const Notation notation = parse_notation(text, metas.size());
  const std::vector<Shape> shapes = shapes_of(metas);
  const BoundEinsum bound = bind_einsum(notation, shapes, options.allow_broadcast);
  auto impl = std::make_shared<Impl>();
  if (notation.nested && notation.num_inputs() >= 2) {
    if (options.plan.kind != PlanKind::automatic)
      fail(ErrorKind::invalid_argument,
           "einsum: {} fixes the contraction order with parentheses, and plan {} was passed too; use one of them",
           quote_for_message(notation.text), options.plan.to_string());
    ContractionTree tree(static_cast<int>(notation.num_inputs()), notation.order);
    impl->build(bound, metas, options.plan, &tree);
  } else {
    impl->build(bound, metas, options.plan, nullptr);
  }
  EinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

EinsumPlan EinsumPlan::prepare(const Subscripts& subscripts, std::span<const TensorMeta> metas,
                               const EinsumOptions& options) {
  const std::vector<Shape> shapes = shapes_of(metas);
  const BoundEinsum bound = bind_einsum(subscripts, shapes, options.allow_broadcast);
  auto impl = std::make_shared<Impl>();
  impl->build(bound, metas, options.plan, nullptr);
  EinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

EinsumPlan EinsumPlan::prepare_grouped(std::string_view text, std::span<const TensorMeta> metas,
                                       std::span<const GroupLength> lengths, const EinsumOptions& options) {
  const std::vector<Shape> shapes = shapes_of(metas);
  std::vector<int64_t> ranks;
  for (const Shape& s : shapes) ranks.push_back(static_cast<int64_t>(s.size()));
  const auto expansion = expand_grouped(text, ranks, lengths);
  const BoundEinsum bound = bind_einsum(expansion->expanded, shapes, options.allow_broadcast);
  auto impl = std::make_shared<Impl>();
  if (bound.subs.inputs.size() >= 2) {
    // The order is planned on the grouped form (one symbol per group) and applied to the expansion.
    ContractionTree tree = resolve_grouped(options.plan, expansion->notation->symbolic, expansion->symbol_labels,
                                           expansion->expanded, bound.extents);
    impl->build(bound, metas, options.plan, &tree);
  } else {
    impl->build(bound, metas, options.plan, nullptr);
  }
  EinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

void EinsumPlan::execute_into(std::span<const Tensor> operands, Tensor& out, ThreadPool* pool) const {
  execute_into(operands, out, default_context(), pool);
}

void EinsumPlan::execute_into(std::span<const Tensor> operands, Tensor& out, ExecutionContext& context,
                              ThreadPool* pool) const {
  check_call(operands, out);
  impl_->run(OperandList{operands, {}}, out, context, pool);
}

void EinsumPlan::accumulate_into(std::span<const Tensor> operands, Tensor& out, ExecutionContext& context) const {
  check_call(operands, out);
  impl_->run(OperandList{operands, {}}, out, context, &context.pool(), true);
}

void EinsumPlan::run_leased(std::span<const Tensor* const> operands, Tensor& out, ExecutionContext& context,
                            ScratchAllocator::Lease& lease, std::byte* scratch, bool accumulate,
                            bool stream_output) const {
  impl_->run(OperandList{{}, operands}, out, context, &context.pool(), accumulate, &lease, scratch, stream_output);
}

int64_t EinsumPlan::scratch_bytes() const {
  const Impl& im = *impl_;
  return im.zero_operand || im.metas.size() == 1 ? 0 : im.arena + im.workspace;
}

void EinsumPlan::check_call(std::span<const Tensor> operands, const Tensor& out) const {
  EIN_ASSERT(impl_, "execute on an empty EinsumPlan");
  const Impl& im = *impl_;
  if (operands.size() != im.metas.size())
    fail(ErrorKind::invalid_argument, "einsum: the plan for {} takes {} operand(s) but {} were given",
         quote_for_message(einsum::to_string(im.subs)), im.metas.size(), operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i];
    if (!t.defined()) fail(ErrorKind::invalid_argument, "einsum: operand {} is undefined", i);
    if (t.dtype() != im.metas[i].dtype || t.shape() != im.metas[i].shape)
      fail(ErrorKind::shape, "einsum: operand {} is {}{} but the plan was prepared for {}{}; prepare a plan for these operands",
           i, name(t.dtype()), shape_to_string(t.shape()), name(im.metas[i].dtype), shape_to_string(im.metas[i].shape));
  }
  if (!out.defined()) fail(ErrorKind::invalid_argument, "einsum: the output tensor is undefined");
  if (out.dtype() != im.dtype || out.shape() != im.output_shape)
    fail(ErrorKind::shape, "einsum: the output tensor is {}{} but the result is {}{}", name(out.dtype()),
         shape_to_string(out.shape()), name(im.dtype), shape_to_string(im.output_shape));
}

Tensor EinsumPlan::execute(std::span<const Tensor> operands, ThreadPool* pool) const {
  EIN_ASSERT(impl_, "execute on an empty EinsumPlan");
  Tensor out = Tensor::empty(impl_->dtype, impl_->output_shape);
  execute_into(operands, out, default_context(), pool);
  return out;
}

Tensor EinsumPlan::execute(std::span<const Tensor> operands, ExecutionContext& context) const {
  EIN_ASSERT(impl_, "execute on an empty EinsumPlan");
  Tensor out = Tensor::empty(impl_->dtype, impl_->output_shape, context.scratch());
  execute_into(operands, out, context, &context.pool());
  return out;
}

DType EinsumPlan::dtype() const { return impl_->dtype; }
const Shape& EinsumPlan::output_shape() const { return impl_->output_shape; }
const Subscripts& EinsumPlan::subscripts() const { return impl_->subs; }
const std::map<Label, int64_t>& EinsumPlan::extents() const { return impl_->extents; }
bool EinsumPlan::is_shortcut() const { return impl_->shortcut; }
const ContractionTree& EinsumPlan::tree() const { return impl_->tree; }
const std::vector<StepPlan>& EinsumPlan::steps() const { return impl_->steps; }
int64_t EinsumPlan::peak_intermediate_bytes() const { return impl_->peak; }
int64_t EinsumPlan::arena_bytes() const { return impl_->arena; }
int64_t EinsumPlan::workspace_bytes() const { return impl_->workspace; }

int64_t EinsumPlan::specialised_calls() const {
  int64_t calls = impl_->accumulate_kernel ? impl_->accumulate_kernel->specialised_calls() : 0;
  for (const auto& k : impl_->step_kernels) calls += k->specialised_calls();
  return calls;
}

std::string EinsumPlan::to_string() const {
  const Impl& im = *impl_;
  std::string out = fmt::format("einsum {} dtype {} output {}{}\n", einsum::to_string(im.subs), name(im.dtype),
                                shape_to_string(im.output_shape), im.shortcut ? " (shortcut: one dot_general)" : "");
  if (!im.tree.steps().empty()) out += fmt::format("tree {}\n", im.tree.to_string());
  out += fmt::format("arena {} bytes (peak live {}), workspace {} bytes\n", im.arena, im.peak, im.workspace);
  const int n = static_cast<int>(im.metas.size());
  for (size_t k = 0; k < im.steps.size(); ++k) {
    out += im.steps[k].to_string(im.subs);
    if (im.steps[k].binary && !im.steps[k].final)
      out += fmt::format("  -> arena offset {}\n", im.nodes[static_cast<size_t>(n) + k].offset);
  }
  return out;
}

}  // namespace einstage::einsum
