// Running the reverse walk of an einsum's planned tree prepared by TreeAdPrepare.cpp, and the tangent walk (see TreeAd.h).
#include "extensions/einsum/exec/TreeAdParts.h"

#include "extensions/api/Kernels.h"
#include "extensions/einsum/notation/Notation.h"
#include "ir/Quote.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

namespace einstage::einsum {

using namespace tree_ad;

namespace {

// A walk's arena and step scratch come from one lease of the context's scratch when they are this small (the slot
// keeps them for the next call, and keeps the walk's views); a larger arena is a block of the allocator's per call.
constexpr int64_t kLeasedWalkBytes = int64_t(1) << 20;

// The arena of `bytes`: the lease's buffer 0, or a block of `allocator` held by `block` for this call.
std::byte* walk_arena(ScratchAllocator& allocator, ScratchAllocator::Lease& lease, int64_t bytes,
                      std::shared_ptr<std::byte>& block, const char* what) {
  if (bytes <= kLeasedWalkBytes) return lease.buffer(0, static_cast<size_t>(std::max<int64_t>(bytes, 64)));
  block = allocator.allocate(static_cast<size_t>(bytes), what);
  return block.get();
}

// The steps' scratch of `bytes`: the lease's buffer 1, or nullptr (each step then takes a lease of its own).
std::byte* walk_step_scratch(ScratchAllocator::Lease& lease, int64_t bytes) {
  return bytes <= kLeasedWalkBytes ? lease.buffer(1, static_cast<size_t>(std::max<int64_t>(bytes, 64))) : nullptr;
}

// What a slot keeps for the vjp walk besides its buffers: views of one plan's arena tensors at one base address, so
// a call whose lease gives the same slot buffer again makes no tensor (no shape, stride or storage allocation).
struct WalkSlot {
  uint64_t plan = 0;
  const std::byte* base = nullptr;
  std::vector<Tensor> views;  // per arena tensor
};

}  // namespace

std::vector<Tensor> EinsumVjpPlan::execute(std::span<const Tensor> operands, const Tensor& cotangent,
                                           ExecutionContext& context) const {
  const Impl& im = *impl_;
  ThreadPool* pool = &context.pool();
  EIN_ASSERT(static_cast<int>(operands.size()) == im.n, "einsum vjp: {} operands for a plan of {}", operands.size(),
             im.n);
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  // The arena (intermediates) and the steps' own scratch, in one lease; the steps run under it (run_leased).
  ScratchAllocator& allocator = context.scratch();
  ScratchAllocator::Lease lease = allocator.lease();
  std::shared_ptr<std::byte> block;
  std::byte* const base = walk_arena(allocator, lease, im.arena_bytes, block, "the arena of an einsum vjp walk");
  std::byte* const step_scratch = walk_step_scratch(lease, im.step_scratch);
  WalkSlot& slot = lease.object<WalkSlot>();
  if (slot.plan != im.id || slot.base != base) {
    slot.views.clear();
    for (const ArenaTensor& t : im.arena_tensors) {
      const Shape& shape = (t.cotangent ? im.ct_shapes : im.shapes)[static_cast<size_t>(t.node)];
      slot.views.push_back(Tensor::view_of(im.dtype, shape, col_major_strides(shape), base + t.offset));
    }
    slot.plan = im.id;
    slot.base = base;
  }
  // A step's operands by pointer (x, y, then its ones), in one vector reused across the walk's steps: no Tensor is
  // copied per step.
  std::vector<const Tensor*> pointers;
  StepOperands ops;  // the same as tensors, for a step too large for the lease (execute_into)
  // `result`: out is an operand's cotangent, which the walk never reads again; a large one (chain7's 256 x 256 outer
  // products) then streams past the caches instead of evicting the operands the next steps reread.
  auto run = [&](const EinsumPlan& plan, const Tensor& x, const Tensor& y, std::span<const Tensor> ones, Tensor& out,
                 bool result = false) {
    if (step_scratch) {
      pointers.assign({&x, &y});
      for (const Tensor& one : ones) pointers.push_back(&one);
      plan.run_leased(pointers, out, context, lease, step_scratch, /*accumulate=*/false, result);
    } else {
      plan.execute_into(ops.of(x, y, ones), out, context, pool);
    }
  };
  // Per node, its value and its cotangent where the walk has them (operands, arena views, results, temporaries).
  std::vector<const Tensor*> values(nodes, nullptr), cts(nodes, nullptr);
  std::vector<Tensor> promoted(static_cast<size_t>(im.n));
  for (int i = 0; i < im.n; ++i) {
    const Tensor& x = operands[static_cast<size_t>(i)];
    const bool conj = is_complex(im.dtype) && im.complex_inputs[static_cast<size_t>(i)];
    if (x.dtype() == im.dtype && !conj) {
      values[static_cast<size_t>(i)] = &x;
      continue;
    }
    Tensor v = x.dtype() == im.dtype ? x : x.astype(im.dtype);
    // Conjugated operands make every forward intermediate the conjugate too: the reverse steps read them as they are.
    if (conj) v = kernels::unary(kernels::UnaryOp::conj, v, pool);
    promoted[static_cast<size_t>(i)] = std::move(v);
    values[static_cast<size_t>(i)] = &promoted[static_cast<size_t>(i)];
  }
  auto arena = [&](int buffer) -> Tensor& { return slot.views[static_cast<size_t>(buffer)]; };
  Tensor value;  // the root's, when asked for
  // Forward phase: the kept values, and what they are computed from (released once their parent exists).
  for (size_t t = 0; t < im.steps.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    if (!im.forward_phase[v]) continue;
    auto [a, b] = im.children[t];
    Tensor* out = &value;
    if (static_cast<int>(v) == im.root()) value = Tensor::empty(im.dtype, im.shapes[v], allocator);
    else out = &arena(im.value_buffer[v]);
    run(*im.steps[t], *values[static_cast<size_t>(a)], *values[static_cast<size_t>(b)], {}, *out);
    values[v] = out;
    for (int c : {a, b})
      if (c >= im.n && !im.keep[static_cast<size_t>(c)]) values[static_cast<size_t>(c)] = nullptr;
  }
  // A value that was not kept is recomputed from its subtree (kept values and operands) when a reverse step reads it.
  std::function<Tensor(int)> value_of = [&](int v) -> Tensor {
    if (values[static_cast<size_t>(v)]) return *values[static_cast<size_t>(v)];
    const size_t t = static_cast<size_t>(v - im.n);
    const Tensor pair[2] = {value_of(im.children[t].first), value_of(im.children[t].second)};
    return im.steps[t]->execute(pair, context);
  };
  const Tensor root_ct = cotangent.dtype() == im.dtype ? Tensor() : cotangent.astype(im.dtype);
  cts[static_cast<size_t>(im.root())] = root_ct.defined() ? &root_ct : &cotangent;
  std::vector<Tensor> grads(static_cast<size_t>(im.n));  // the slots' cotangents, in one block
  const std::shared_ptr<std::byte> results =
      allocator.allocate(static_cast<size_t>(im.result_bytes), "the cotangents of an einsum vjp walk");
  for (size_t i = 0; i < im.reverse.size(); ++i) {
    const ReverseStep& r = im.reverse[i];
    const Tensor* sibling = values[static_cast<size_t>(r.sibling)];
    Tensor recomputed;
    if (!sibling) {
      recomputed = value_of(r.sibling);
      sibling = &recomputed;
    }
    Tensor* out = nullptr;
    if (r.node < im.n) {
      grads[static_cast<size_t>(r.node)] =
          Tensor::in_block(im.dtype, im.ct_shapes[static_cast<size_t>(r.node)], results, im.result_offset[static_cast<size_t>(r.node)]);
      out = &grads[static_cast<size_t>(r.node)];
    } else {
      out = &arena(im.ct_buffer[static_cast<size_t>(r.node)]);
    }
    const auto [x, y] = r.order(*cts[static_cast<size_t>(r.parent)], *sibling);
    run(*r.plan, x, y, r.ones, *out, /*result=*/r.node < im.n);
    cts[static_cast<size_t>(r.node)] = out;
    if (im.last_use[static_cast<size_t>(r.parent)] == static_cast<int>(i)) cts[static_cast<size_t>(r.parent)] = nullptr;
  }
  // The value first when asked for (the walk's values are conjugated when complex), then each slot's cotangent in
  // its operand's dtype: the real part for a real operand of a complex walk.
  std::vector<Tensor> out;
  out.reserve(im.slots.size() + 1);
  if (im.with_value) {
    if (is_complex(im.dtype)) value = kernels::unary(kernels::UnaryOp::conj, value, pool);
    out.push_back(value.dtype() == im.value_dtype ? std::move(value) : value.astype(im.value_dtype));
  }
  for (int k : im.slots) {
    Tensor g = std::move(grads[static_cast<size_t>(k)]);
    const DType want = im.operand_dtypes[static_cast<size_t>(k)];
    if (is_complex(g.dtype()) && !is_complex(want)) g = kernels::real_part(g);
    out.push_back(g.dtype() == want ? std::move(g) : g.astype(want));
  }
  return out;
}

std::vector<WalkCall> EinsumVjpPlan::Impl::tangent_calls(const std::vector<bool>& tangents, bool cotangent_tangent,
                                                         bool with_cotangents) const {
  const int nodes = 2 * n - 1;
  const int forward_steps = static_cast<int>(children.size());
  std::vector<bool> dv(static_cast<size_t>(nodes), false), dct(static_cast<size_t>(nodes), false);
  for (int i = 0; i < n; ++i) dv[static_cast<size_t>(i)] = tangents[static_cast<size_t>(i)];
  std::vector<WalkCall> calls;
  auto make = [](int time, Ref out, const EinsumPlan& plan) {
    WalkCall c;
    c.time = time;
    c.out = out;
    c.plan = &plan;
    return c;
  };
  // Forward: every value below the root, and its tangent where a child has one.
  for (int t = 0; t + 1 < forward_steps; ++t) {
    const int v = n + t;
    const auto [a, b] = children[static_cast<size_t>(t)];
    WalkCall value = make(t, {Part::value, v}, *steps[static_cast<size_t>(t)]);
    value.in = {Ref{Part::value, a}, Ref{Part::value, b}};
    calls.push_back(value);
    const bool da = dv[static_cast<size_t>(a)], db = dv[static_cast<size_t>(b)];
    dv[static_cast<size_t>(v)] = da || db;
    if (!da && !db) continue;
    WalkCall c = make(t, {Part::tangent, v}, *steps[static_cast<size_t>(t)]);
    if (da && db) {
      c.terms = 2;
      if (stacked_steps[static_cast<size_t>(t)]) c.stacked = &*stacked_steps[static_cast<size_t>(t)];
      c.in = {Ref{Part::tangent, a}, Ref{Part::value, b}, Ref{Part::value, a}, Ref{Part::tangent, b}};
    } else if (da) {
      c.in = {Ref{Part::tangent, a}, Ref{Part::value, b}};
    } else {
      c.in = {Ref{Part::value, a}, Ref{Part::tangent, b}};
    }
    calls.push_back(c);
  }
  // Reverse: ct_child = P(ct_parent, V_sibling); its tangent P(dct_parent, V_sibling) + P(ct_parent, dV_sibling).
  dct[static_cast<size_t>(root())] = cotangent_tangent;
  for (size_t i = 0; i < reverse.size(); ++i) {
    const ReverseStep& r = reverse[i];
    const int time = forward_steps - 1 + static_cast<int>(i);
    auto ordered = [&](Ref ct, Ref value) {  // ReverseStep::order
      return r.layout.sibling_first ? std::pair{value, ct} : std::pair{ct, value};
    };
    if (r.node >= n || with_cotangents) {
      WalkCall c = make(time, {Part::cotangent, r.node}, *r.plan);
      const auto [x, y] = ordered({Part::cotangent, r.parent}, {Part::value, r.sibling});
      c.in = {x, y};
      c.ones = r.ones;
      calls.push_back(c);
    }
    const bool first = dct[static_cast<size_t>(r.parent)], second = dv[static_cast<size_t>(r.sibling)];
    dct[static_cast<size_t>(r.node)] = first || second;
    if (!first && !second) continue;
    WalkCall c = make(time, {Part::cotangent_tangent, r.node}, *r.plan);
    c.ones = r.ones;
    const auto [x0, y0] = ordered({Part::cotangent_tangent, r.parent}, {Part::value, r.sibling});
    const auto [x1, y1] = ordered({Part::cotangent, r.parent}, {Part::tangent, r.sibling});
    if (first && second) {
      c.terms = 2;
      if (r.stacked) c.stacked = &*r.stacked;
      c.in = {x0, y0, x1, y1};
    } else if (first) {
      c.in = {x0, y0};
    } else {
      c.in = {x1, y1};
    }
    calls.push_back(c);
  }
  // Only calls whose result is read: the slots' cotangents (when returned) and their tangents are the results, and a
  // call is kept when a kept call reads what it writes.
  auto index = [&](Ref r) { return static_cast<size_t>(r.part) * static_cast<size_t>(nodes) + static_cast<size_t>(r.node); };
  std::vector<bool> needed(4 * static_cast<size_t>(nodes), false);
  for (int k : slots) {
    if (with_cotangents) needed[index({Part::cotangent, k})] = true;
    needed[index({Part::cotangent_tangent, k})] = true;
  }
  std::vector<WalkCall> kept;
  for (size_t c = calls.size(); c-- > 0;) {
    if (!needed[index(calls[c].out)]) continue;
    for (int k = 0; k < 2 * calls[c].terms; ++k) needed[index(calls[c].in[static_cast<size_t>(k)])] = true;
    kept.push_back(calls[c]);
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

EinsumVjpPlan::TangentWork EinsumVjpPlan::tangent_work(const std::vector<bool>& tangents, bool cotangent_tangent,
                                                       bool with_cotangents) const {
  EIN_ASSERT(static_cast<int>(tangents.size()) == impl_->n, "einsum vjp tangent work: {} flags for a plan of {}",
             tangents.size(), impl_->n);
  TangentWork work;
  for (const WalkCall& c : impl_->tangent_calls(tangents, cotangent_tangent, with_cotangents)) {
    ContractionWork w = contraction_work(c.stacked ? *c.stacked : *c.plan);
    if (!c.stacked && c.terms == 2) w += w;
    switch (c.out.part) {
      case Part::value: work.values += w; break;
      case Part::tangent: work.tangents += w; break;
      case Part::cotangent: work.cotangents += w; break;
      case Part::cotangent_tangent: work.cotangent_tangents += w; break;
    }
  }
  return work;
}

ContractionWork EinsumVjpPlan::TangentWork::total() const {
  ContractionWork t = values;
  t += tangents;
  t += cotangents;
  t += cotangent_tangents;
  return t;
}

namespace {

// What a slot keeps for the tangent walk of one plan and one set of nonzero tangents: its calls, the arena their
// intermediates are laid out in (ArenaLayout.h, from the calls that write and read each), the results' offsets in
// their block, and views of the arena's tensors at one base address (rebuilt when the lease gives another buffer).
struct TangentSlot {
  uint64_t plan = 0;
  std::vector<bool> key;            // the operands' nonzero tangents, the cotangent's, with_cotangents
  std::vector<WalkCall> calls;
  std::vector<int> place;           // per ref (part * nodes + node): its arena tensor (-1: none)
  std::vector<int64_t> result_at;   // per ref: its byte offset in the results' block (-1: not a result)
  std::vector<std::array<int, 2>> stacks;  // per call: the arena tensors of its two stacked operands (-1: none)
  std::vector<Shape> shapes;        // per arena tensor
  std::vector<int64_t> offsets;     // per arena tensor
  int64_t bytes = 0, result_bytes = 0, scratch = 0;
  const std::byte* base = nullptr;
  std::vector<Tensor> views;        // per arena tensor
  std::vector<std::array<Tensor, 2>> halves;  // per arena tensor: a stack's two halves (undefined: not a stack)
};

void lay_out_tangent_walk(const EinsumVjpPlan::Impl& im, TangentSlot& slot, const std::vector<bool>& key) {
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  const size_t n = static_cast<size_t>(im.n);
  slot.key = key;
  slot.calls = im.tangent_calls(std::vector<bool>(key.begin(), key.begin() + im.n), key[n], key[n + 1]);
  auto index = [&](Ref r) { return static_cast<size_t>(r.part) * nodes + static_cast<size_t>(r.node); };
  auto shape_of = [&](Ref r) -> const Shape& {
    const bool value = r.part == Part::value || r.part == Part::tangent;
    return (value ? im.shapes : im.ct_shapes)[static_cast<size_t>(r.node)];
  };
  slot.place.assign(4 * nodes, -1);
  slot.result_at.assign(4 * nodes, -1);
  slot.stacks.assign(slot.calls.size(), {-1, -1});
  slot.shapes.clear();
  slot.result_bytes = 0;
  slot.scratch = 0;
  std::vector<ArenaBuffer> buffers;
  auto add = [&](Shape shape, int time) {
    const int64_t bytes = checked_bytes(shape, size_of(im.dtype), "an intermediate of the tangent walk");
    slot.shapes.push_back(std::move(shape));
    buffers.push_back(ArenaBuffer{bytes, time, time});
    return static_cast<int>(buffers.size()) - 1;
  };
  for (size_t c = 0; c < slot.calls.size(); ++c) {
    const WalkCall& call = slot.calls[c];
    for (int k = 0; k < 2 * call.terms; ++k)
      if (const int p = slot.place[index(call.in[static_cast<size_t>(k)])]; p >= 0)
        buffers[static_cast<size_t>(p)].last = std::max(buffers[static_cast<size_t>(p)].last, call.time);
    if (call.stacked)
      for (int k : {0, 1}) {
        Shape s = shape_of(call.in[static_cast<size_t>(k)]);
        s.push_back(2);
        slot.stacks[c][static_cast<size_t>(k)] = add(std::move(s), call.time);
      }
    if (call.out.node < im.n) {
      const int64_t bytes = checked_bytes(shape_of(call.out), size_of(im.dtype), "an operand's cotangent");
      slot.result_at[index(call.out)] = slot.result_bytes;
      slot.result_bytes = checked_add(slot.result_bytes, (bytes + 63) / 64 * 64, "the results of a tangent walk");
    } else {
      slot.place[index(call.out)] = add(shape_of(call.out), call.time);
    }
    for (const EinsumPlan* p : {call.plan, call.stacked})
      if (p) slot.scratch = std::max(slot.scratch, p->scratch_bytes());
  }
  const ArenaLayout layout = lay_out_arena(buffers, 64, "the arena of an einsum vjp tangent walk");
  slot.offsets = layout.offsets;
  slot.bytes = layout.bytes;
  slot.plan = im.id;
  slot.base = nullptr;
}

}  // namespace

std::vector<Tensor> EinsumVjpPlan::execute_tangent(std::span<const Tensor> operands, const Tensor& cotangent,
                                                   std::span<const Tensor> tangents, const Tensor& cotangent_tangent,
                                                   ExecutionContext& context, bool with_cotangents) const {
  const Impl& im = *impl_;
  ThreadPool* pool = &context.pool();
  EIN_ASSERT(static_cast<int>(operands.size()) == im.n && static_cast<int>(tangents.size()) == im.n,
             "einsum vjp tangent: {} operands and {} tangents for a plan of {}", operands.size(), tangents.size(), im.n);
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  auto index = [&](Ref r) { return static_cast<size_t>(r.part) * nodes + static_cast<size_t>(r.node); };
  ScratchAllocator& allocator = context.scratch();
  ScratchAllocator::Lease lease = allocator.lease();
  TangentSlot& slot = lease.object<TangentSlot>();
  std::vector<bool> key(static_cast<size_t>(im.n) + 2);
  for (size_t i = 0; i < static_cast<size_t>(im.n); ++i) key[i] = tangents[i].defined();
  key[static_cast<size_t>(im.n)] = cotangent_tangent.defined();
  key[static_cast<size_t>(im.n) + 1] = with_cotangents;
  if (slot.plan != im.id || slot.key != key) lay_out_tangent_walk(im, slot, key);
  // The arena and the steps' scratch from the lease when small (the slot keeps them, and its views, for the next
  // call), else blocks of the allocator for this call.
  std::shared_ptr<std::byte> block;
  std::byte* const base = walk_arena(allocator, lease, slot.bytes, block, "the arena of an einsum vjp tangent walk");
  std::byte* const step_scratch = walk_step_scratch(lease, slot.scratch);
  if (slot.base != base) {
    slot.views.clear();
    slot.halves.clear();
    for (size_t b = 0; b < slot.shapes.size(); ++b) {
      const Shape& shape = slot.shapes[b];
      std::byte* at = base + slot.offsets[b];
      slot.views.push_back(Tensor::view_of(im.dtype, shape, col_major_strides(shape), at));
      slot.halves.emplace_back();
    }
    for (const std::array<int, 2>& pair : slot.stacks)
      for (int b : pair) {
        if (b < 0) continue;
        Shape half = slot.shapes[static_cast<size_t>(b)];
        half.pop_back();
        const int64_t bytes = element_count(half) * static_cast<int64_t>(size_of(im.dtype));
        std::byte* at = base + slot.offsets[static_cast<size_t>(b)];
        const Strides strides = col_major_strides(half);
        slot.halves[static_cast<size_t>(b)] = {Tensor::view_of(im.dtype, half, strides, at),
                                               Tensor::view_of(im.dtype, half, strides, at + bytes)};
      }
    slot.base = base;
  }
  std::vector<const Tensor*> pointers;
  StepOperands ops;  // for a step whose scratch is too large for the lease (execute_into)
  auto run = [&](const EinsumPlan& plan, const Tensor& x, const Tensor& y, std::span<const Tensor> ones, Tensor& out,
                 bool accumulate) {
    if (step_scratch) {
      pointers.assign({&x, &y});
      for (const Tensor& one : ones) pointers.push_back(&one);
      plan.run_leased(pointers, out, context, lease, step_scratch, accumulate);
    } else if (accumulate) {
      plan.accumulate_into(ops.of(x, y, ones), out, context);
    } else {
      plan.execute_into(ops.of(x, y, ones), out, context, pool);
    }
  };
  // Per ref, the tensor the walk has for it: the operands and their tangents in the walk's dtype, the cotangent and
  // its tangent, then what each call writes.
  std::vector<const Tensor*> at(4 * nodes, nullptr);
  std::vector<Tensor> inputs(2 * static_cast<size_t>(im.n) + 2);
  auto walk_input = [&](const Tensor& x, size_t i) {
    Tensor v = promoted_to(x, im.dtype);
    return is_complex(im.dtype) && im.complex_inputs[i] ? kernels::unary(kernels::UnaryOp::conj, v, pool) : v;
  };
  for (size_t i = 0; i < static_cast<size_t>(im.n); ++i) {
    const bool plain = !(is_complex(im.dtype) && im.complex_inputs[i]);
    auto give_input = [&](const Tensor& x, Ref r, size_t k) {
      if (plain && x.dtype() == im.dtype) {
        at[index(r)] = &x;
        return;
      }
      inputs[k] = walk_input(x, i);
      at[index(r)] = &inputs[k];
    };
    give_input(operands[i], {Part::value, static_cast<int>(i)}, 2 * i);
    if (tangents[i].defined()) give_input(tangents[i], {Part::tangent, static_cast<int>(i)}, 2 * i + 1);
  }
  inputs[2 * static_cast<size_t>(im.n)] = promoted_to(cotangent, im.dtype);
  at[index({Part::cotangent, im.root()})] = &inputs[2 * static_cast<size_t>(im.n)];
  if (cotangent_tangent.defined()) {
    inputs[2 * static_cast<size_t>(im.n) + 1] = promoted_to(cotangent_tangent, im.dtype);
    at[index({Part::cotangent_tangent, im.root()})] = &inputs[2 * static_cast<size_t>(im.n) + 1];
  }
  // The slots' cotangents and their tangents: disjoint tensors of one block (one allocation per call).
  const std::shared_ptr<std::byte> results =
      allocator.allocate(static_cast<size_t>(std::max<int64_t>(slot.result_bytes, 64)),
                         "the results of an einsum vjp tangent walk");
  std::vector<Tensor> result(4 * nodes);
  for (size_t c = 0; c < slot.calls.size(); ++c) {
    const WalkCall& call = slot.calls[c];
    const size_t o = index(call.out);
    Tensor* out = nullptr;
    if (slot.result_at[o] >= 0) {
      const Ref r = call.out;
      result[o] = Tensor::in_block(im.dtype, im.ct_shapes[static_cast<size_t>(r.node)], results, slot.result_at[o]);
      out = &result[o];
    } else {
      out = &slot.views[static_cast<size_t>(slot.place[o])];
    }
    auto in = [&](size_t k) -> const Tensor& { return *at[index(call.in[k])]; };
    if (call.stacked) {
      for (size_t k : {size_t(0), size_t(1)}) {
        const size_t b = static_cast<size_t>(slot.stacks[c][k]);
        slot.halves[b][0].copy_from(in(k));
        slot.halves[b][1].copy_from(in(k + 2));
      }
      run(*call.stacked, slot.views[static_cast<size_t>(slot.stacks[c][0])],
          slot.views[static_cast<size_t>(slot.stacks[c][1])], call.ones, *out, false);
    } else {
      run(*call.plan, in(0), in(1), call.ones, *out, false);
      if (call.terms == 2) run(*call.plan, in(2), in(3), call.ones, *out, true);
    }
    at[o] = out;
  }
  // The slots' cotangents first when asked for (mode vjp_with_jvp), then their tangents; each in its operand's dtype
  // (the real part for a real operand of a complex walk), zeros where no nonzero tangent reaches it.
  std::vector<Tensor> out;
  out.reserve(2 * im.slots.size());
  auto give = [&](Ref r) {
    const DType want = im.operand_dtypes[static_cast<size_t>(r.node)];
    Tensor g = std::move(result[index(r)]);
    if (!g.defined()) {
      out.push_back(Tensor::zeros(want, im.shapes[static_cast<size_t>(r.node)]));
      return;
    }
    if (is_complex(g.dtype()) && !is_complex(want)) g = kernels::real_part(g);
    out.push_back(g.dtype() == want ? std::move(g) : g.astype(want));
  };
  if (with_cotangents)
    for (int k : im.slots) give({Part::cotangent, k});
  for (int k : im.slots) give({Part::cotangent_tangent, k});
  return out;
}

DType EinsumVjpPlan::dtype() const { return impl_->dtype; }
const std::vector<EinsumVjpPlan::ArenaTensor>& EinsumVjpPlan::arena_tensors() const { return impl_->arena_tensors; }
int64_t EinsumVjpPlan::arena_bytes() const { return impl_->arena_bytes; }
bool EinsumVjpPlan::with_value() const { return impl_->with_value; }
int64_t EinsumVjpPlan::kept_bytes() const { return impl_->kept; }
int EinsumVjpPlan::recomputed_count() const { return static_cast<int>(impl_->recomputed.size()); }

std::string EinsumVjpPlan::to_string() const {
  const Impl& im = *impl_;
  auto node = [&](int id) {
    return fmt::format("{} {}", id < im.n ? fmt::format("operand {}", id) : fmt::format("node {}", id),
                       quote_for_message(label_string(im.subs, im.labels[static_cast<size_t>(id)])));
  };
  std::string out = fmt::format("einsum {}vjp {} over operands [{}] dtype {}\n",
                                im.with_value ? "value (the forward phase runs to the root) and " : "",
                                quote_for_message(einsum::to_string(im.subs)), fmt::join(im.slots, ", "),
                                name(im.dtype));
  if (!im.forward.tree().steps().empty()) out += fmt::format("tree {}\n", im.forward.tree().to_string());
  std::vector<std::string> kept;
  for (size_t t = 0; t < im.steps.size(); ++t)
    if (im.keep[static_cast<size_t>(im.n) + t]) kept.push_back(node(im.n + static_cast<int>(t)));
  out += fmt::format("forward keeps {} ({}{}): {}\n", kept.size(), human_bytes(im.kept),
                     im.keep_limit < 0 ? std::string() : fmt::format(", limit {}", human_bytes(im.keep_limit)),
                     kept.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(kept, ", ")));
  if (!im.recomputed.empty()) {
    std::vector<std::string> names;
    for (int v : im.recomputed) names.push_back(node(v));
    out += fmt::format("recomputes {} when read (over the limit): {}\n", names.size(), fmt::join(names, ", "));
  }
  for (const ReverseStep& r : im.reverse) {
    // A cotangent laid out in another order than its node's value, and a step with the value as lhs, say so.
    std::vector<std::string> layout;
    if (!std::is_sorted(r.layout.perm.begin(), r.layout.perm.end()))
      layout.push_back(fmt::format("laid out {}", quote_for_message(label_string(
                                                      im.subs, im.ct_labels[static_cast<size_t>(r.node)]))));
    if (r.layout.sibling_first) layout.push_back("value first");
    out += fmt::format("reverse: ct {} = ct {} x {}{}{}{}\n", node(r.node), node(r.parent), node(r.sibling),
                       r.ones.empty() ? "" : fmt::format(" x {} ones", r.ones.size()),
                       r.stacked ? " (tangent terms stacked)" : "",
                       layout.empty() ? std::string() : fmt::format(" ({})", fmt::join(layout, ", ")));
  }
  return out;
}

// ---- jvp ----

struct EinsumJvpPlan::Impl {
  int n = 0;
  DType dtype = DType::f64;
  std::vector<int> slots;
  std::vector<int> tangent_of;  // per operand: its index among the tangents (-1: none)
  PlannedTree tree;             // pairs for every step, the root's included
  std::vector<std::optional<EinsumPlan>> stacked;  // per step: dA.B + A.dB as one contraction (stacked_terms_plan)
  std::vector<bool> has_tangent, needs_value;  // per node
};

EinsumJvpPlan EinsumJvpPlan::prepare(const Subscripts& subscripts, std::span<const TensorMeta> operands,
                                     std::vector<int> slots, const EinsumOptions& options) {
  auto im = std::make_shared<Impl>();
  im->n = static_cast<int>(operands.size());
  if (im->n < 2)
    fail(ErrorKind::invalid_argument, "einsum jvp {}: the tree walk needs two or more operands but the einsum has "
         "{}; differentiate a one-operand einsum as the einsum of its tangent", quote_for_message(einsum::to_string(subscripts)), im->n);
  im->dtype = operands[0].dtype;
  for (const TensorMeta& m : operands) im->dtype = promote(im->dtype, m.dtype);
  std::vector<TensorMeta> promoted;
  for (const TensorMeta& m : operands) promoted.push_back(TensorMeta{im->dtype, m.shape});
  im->tree = plan_tree(subscripts, promoted, options, true);
  for (size_t t = 0; t < im->tree.children.size(); ++t) {
    const TensorMeta pair[2] = {{im->dtype, im->tree.shapes[static_cast<size_t>(im->tree.children[t].first)]},
                                {im->dtype, im->tree.shapes[static_cast<size_t>(im->tree.children[t].second)]}};
    im->stacked.push_back(stacked_terms_plan(*im->tree.pairs[t], pair, options.allow_broadcast));
  }
  im->slots = std::move(slots);
  im->tangent_of.assign(static_cast<size_t>(im->n), -1);
  for (size_t i = 0; i < im->slots.size(); ++i) im->tangent_of[static_cast<size_t>(im->slots[i])] = static_cast<int>(i);
  const size_t nodes = static_cast<size_t>(2 * im->n - 1);
  const auto& children = im->tree.children;
  im->has_tangent.assign(nodes, false);
  im->needs_value.assign(nodes, false);
  for (int k : im->slots) im->has_tangent[static_cast<size_t>(k)] = true;
  for (size_t t = 0; t < children.size(); ++t)
    im->has_tangent[static_cast<size_t>(im->n) + t] = im->has_tangent[static_cast<size_t>(children[t].first)] ||
                                                      im->has_tangent[static_cast<size_t>(children[t].second)];
  // A step's tangent dA.B + A.dB reads the value of a child whose sibling has a tangent; a value is computed from
  // its children's values.
  for (size_t t = children.size(); t-- > 0;) {
    const size_t v = static_cast<size_t>(im->n) + t, a = static_cast<size_t>(children[t].first),
                 b = static_cast<size_t>(children[t].second);
    if (im->has_tangent[v]) {
      if (im->has_tangent[b]) im->needs_value[a] = true;
      if (im->has_tangent[a]) im->needs_value[b] = true;
    }
    if (im->needs_value[v]) im->needs_value[a] = im->needs_value[b] = true;
  }
  EinsumJvpPlan plan;
  plan.impl_ = std::move(im);
  return plan;
}

Tensor EinsumJvpPlan::execute(std::span<const Tensor> operands, std::span<const Tensor> tangents,
                              ExecutionContext& context) const {
  const Impl& im = *impl_;
  EIN_ASSERT(static_cast<int>(operands.size()) == im.n && tangents.size() == im.slots.size(),
             "einsum jvp: {} operands and {} tangents for a plan of {} and {}", operands.size(), tangents.size(), im.n,
             im.slots.size());
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  std::vector<Tensor> values(nodes), dvalues(nodes);
  for (int i = 0; i < im.n; ++i) {
    values[static_cast<size_t>(i)] = promoted_to(operands[static_cast<size_t>(i)], im.dtype);
    if (const int j = im.tangent_of[static_cast<size_t>(i)]; j >= 0)
      dvalues[static_cast<size_t>(i)] = promoted_to(tangents[static_cast<size_t>(j)], im.dtype);
  }
  StepOperands ops;
  // One pass up the tree: each node's value where read, and its tangent dA.B + A.dB by the step's own pair plan (a
  // child's value and tangent are read by its parent's step only, so both are released there).
  for (size_t t = 0; t < im.tree.children.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    const auto [a, b] = im.tree.children[t];
    const EinsumPlan& step = *im.tree.pairs[t];
    Tensor& va = values[static_cast<size_t>(a)];
    Tensor& vb = values[static_cast<size_t>(b)];
    if (im.needs_value[v]) values[v] = step.execute(ops.of(va, vb), context);
    if (im.has_tangent[v]) {
      Tensor& da = dvalues[static_cast<size_t>(a)];
      Tensor& db = dvalues[static_cast<size_t>(b)];
      if (da.defined() && db.defined()) dvalues[v] = two_terms(step, im.stacked[t], da, vb, va, db, {}, ops, context);
      else if (da.defined()) dvalues[v] = step.execute(ops.of(da, vb), context);
      else dvalues[v] = step.execute(ops.of(va, db), context);
    }
    va = vb = dvalues[static_cast<size_t>(a)] = dvalues[static_cast<size_t>(b)] = Tensor();
  }
  return dvalues.back();
}

std::string EinsumJvpPlan::to_string() const {
  const Impl& im = *impl_;
  std::string out = fmt::format("einsum jvp over operands [{}] dtype {}: tangents along the tree, dA.B + A.dB per "
                                "step\n", fmt::join(im.slots, ", "), name(im.dtype));
  if (!im.tree.forward.tree().steps().empty()) out += fmt::format("tree {}\n", im.tree.forward.tree().to_string());
  for (size_t t = 0; t < im.tree.children.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    const auto [a, b] = im.tree.children[t];
    std::vector<std::string> parts;
    if (im.needs_value[v]) parts.push_back("value");
    if (im.has_tangent[v])
      parts.push_back(fmt::format("tangent = {}", im.has_tangent[static_cast<size_t>(a)] && im.has_tangent[static_cast<size_t>(b)]
                                                       ? (im.stacked[t] ? "dA.B + A.dB (stacked)" : "dA.B + A.dB")
                                                       : im.has_tangent[static_cast<size_t>(a)] ? "dA.B" : "A.dB"));
    out += fmt::format("step {} = ({}, {}): {}\n", v, a, b, parts.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(parts, ", ")));
  }
  return out;
}

}  // namespace einstage::einsum
