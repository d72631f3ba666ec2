// EinsumPlan's calls (see Executor.h): the checks of a call's operands and output, and the run itself: operands
// promoted, one-sided sums into the workspace, and per binary step the prepared problem (the step's own, or the
// slot's while another call holds it) given the call's pointers and strides, its operands' roles chosen from the
// output's strides (StepOrientation.h), and run by the step's kernel handle.
#include "extensions/einsum/exec/ExecutorImpl.h"

#include "extensions/einsum/exec/CallScratch.h"
#include "extensions/einsum/exec/StepOrientation.h"
#include "extensions/einsum/notation/Notation.h"
#include "ir/Quote.h"
#include "ir/Scratch.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <optional>

namespace einstage::einsum {

using namespace executor;

namespace {

// The one call site of the pairwise kernel: the step's handle (StepKernel, extensions/api/Kernels.h) runs contract(),
// which picks the JIT GETT for floating types and the portable kernel otherwise, and swaps in a shape-specialised
// kernel once the step is hot, all on the context's JIT. Replace with contract_portable to run
// without the JIT.
void run_contraction(StepKernel& step, const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool,
                     uint64_t geometry) {
  step.run(p, context, pool, geometry);
}

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
    // two handles): one version number per set of strides tells the kernel handle it saw this geometry before. The
    // step counts its own versions (written under its `busy`): its handles serve this step only (e.kernel; the
    // plan's accumulate_kernel, the one step that writes the output), so a version need only be new for the step.
    if (in_place && (changed || e.live_version == 0)) ++e.live_version;
    // The operands' roles from the output's strides (StepOrientation.h), a function of the strides the version
    // stands for; exchanged back after the run, so the terms of the next call find the groups where they were.
    struct Oriented {
      ContractionProblem& p;
      bool exchanged;
      ~Oriented() {
        if (exchanged) exchange_operands(p);
      }
    } oriented{p, orient_for_output(p)};
    run_contraction(p.accumulate ? *accumulate_kernel : *e.kernel, p, context, pool,
                    in_place ? e.live_version : 0);
  }
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

}  // namespace einstage::einsum
