#include "extensions/einsum/exec/SlicedEinsum.h"

#include "extensions/einsum/notation/Notation.h"
#include "ir/Error.h"
#include "ir/Quote.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Elementwise.h"

#include <algorithm>
#include <atomic>

namespace einstage::einsum {

namespace {

// At most this many chunk partials exist at once (per process).
constexpr int64_t kMaxChunks = 64;

// One operand axis whose label is sliced.
struct FixedAxis {
  int axis = 0;
  int sliced = 0;          // index into SlicedPlan::sliced
  bool broadcast = false;  // extent 1 while the label's extent is larger: always index 0
};

}  // namespace

struct SlicedEinsumPlan::Impl {
  SlicedPlan slicing;
  EinsumPlan plan;  // one slice
  DType dtype = DType::f64;
  std::vector<std::vector<FixedAxis>> fixed;  // per operand
  std::vector<Shape> slice_shapes;            // per operand, the sliced axes removed
  std::vector<int64_t> strides;               // per sliced label: slice index stride (first label fastest)
  int64_t slices = 1, chunks = 1;

  // Views of the operands for slice s (same dtype as the plan's).
  std::vector<Tensor> views(std::span<const Tensor> ops, int64_t s) const {
    std::vector<Tensor> out;
    out.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Tensor& t = ops[i];
      if (fixed[i].empty()) {
        out.push_back(t);
        continue;
      }
      int64_t offset = 0;
      Strides strides;
      size_t next_fixed = 0;
      for (int a = 0; a < t.rank(); ++a) {
        if (next_fixed < fixed[i].size() && fixed[i][next_fixed].axis == a) {
          const FixedAxis& f = fixed[i][next_fixed++];
          const int64_t v = f.broadcast ? 0 : (s / this->strides[f.sliced]) % slicing.sliced_extents[f.sliced];
          offset += v * t.strides()[a];
        } else {
          strides.push_back(t.strides()[a]);
        }
      }
      auto* base = static_cast<std::byte*>(const_cast<void*>(t.raw_data())) +
                   offset * static_cast<int64_t>(size_of(t.dtype()));
      out.push_back(Tensor::view_of(t.dtype(), slice_shapes[i], std::move(strides), base));
    }
    return out;
  }

  // The sum of slices [first, last) in slice order; `pool` runs inside each slice's kernels.
  Tensor run_slices(std::span<const Tensor> ops, int64_t first, int64_t last, ExecutionContext& context,
                    ThreadPool* pool) const {
    Tensor acc = Tensor::empty(dtype, plan.output_shape(), context.scratch());
    Tensor tmp;
    for (int64_t s = first; s < last; ++s) {
      const std::vector<Tensor> v = views(ops, s);
      if (s == first) {
        plan.execute_into(v, acc, context, pool);
        continue;
      }
      if (!tmp.defined()) tmp = Tensor::empty(dtype, plan.output_shape(), context.scratch());
      plan.execute_into(v, tmp, context, pool);
      kernels::binary(kernels::BinaryOp::add, acc, tmp, acc, pool);
    }
    return acc;
  }

  std::pair<int64_t, int64_t> chunk_slices(int64_t c) const { return {c * slices / chunks, (c + 1) * slices / chunks}; }

  // Operands in the plan's dtype (converted once, not per slice).
  std::vector<Tensor> promoted(std::span<const Tensor> operands) const {
    std::vector<Tensor> ops;
    for (const Tensor& t : operands) ops.push_back(t.dtype() == dtype ? t : t.astype(dtype));
    return ops;
  }
};

SlicedEinsumPlan SlicedEinsumPlan::prepare(std::string_view text, std::span<const TensorMeta> metas,
                                           int64_t max_memory_bytes, const EinsumOptions& options) {
  const Notation notation = parse_notation(text, metas.size());
  const BoundEinsum bound = bind_einsum(notation, shapes_of(metas), options.allow_broadcast);
  PlanSpec spec = options.plan;
  if (notation.nested && notation.num_inputs() >= 2) {
    if (spec.kind != PlanKind::automatic)
      fail(ErrorKind::invalid_argument,
           "einsum: {} fixes the contraction order with parentheses, and plan {} was passed too; use one of them",
           quote_for_message(notation.text), spec.to_string());
    spec = PlanSpec::tree_plan(notation.order);
  }
  return build(bound, metas, max_memory_bytes, spec, options.allow_broadcast);
}

SlicedEinsumPlan SlicedEinsumPlan::prepare(const Subscripts& subscripts, std::span<const TensorMeta> metas,
                                           int64_t max_memory_bytes, const EinsumOptions& options) {
  const BoundEinsum bound = bind_einsum(subscripts, shapes_of(metas), options.allow_broadcast);
  return build(bound, metas, max_memory_bytes, options.plan, options.allow_broadcast);
}

SlicedEinsumPlan SlicedEinsumPlan::build(const BoundEinsum& bound, std::span<const TensorMeta> metas,
                                         int64_t max_memory_bytes, PlanSpec spec, bool allow_broadcast) {
  auto impl = std::make_shared<Impl>();
  impl->dtype = metas.empty() ? DType::f64 : metas[0].dtype;
  for (const TensorMeta& m : metas) impl->dtype = promote(impl->dtype, m.dtype);
  spec.max_memory = 0;
  const int element = static_cast<int>(size_of(impl->dtype));
  if (max_memory_bytes < element)
    fail(ErrorKind::invalid_argument, "einsum: a memory limit of {} is smaller than one {} element ({} bytes); give "
         "at least {}B", format_memory_size(max_memory_bytes), name(impl->dtype), element, element);
  const SliceLimit limit{static_cast<double>(max_memory_bytes / element), element};
  // Work-only budget: every process that prepares this plan (the ranks of an MPI job) must get the same slices and
  // tree, which the clock guard would make depend on how busy each one was.
  PlanOptions work_only;
  work_only.clock_guard = false;
  impl->slicing = plan_sliced(spec, bound.subs, bound.extents, limit, work_only);
  const SlicedPlan& sp = impl->slicing;

  // The slice's subscripts and operand shapes: the sliced labels removed.
  Subscripts sub = bound.subs;
  std::vector<TensorMeta> slice_metas;
  impl->fixed.resize(metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    std::vector<Label> term;
    Shape shape;
    for (size_t a = 0; a < bound.subs.inputs[i].size(); ++a) {
      const Label l = bound.subs.inputs[i][a];
      auto it = std::find(sp.sliced.begin(), sp.sliced.end(), l);
      if (it == sp.sliced.end()) {
        term.push_back(l);
        shape.push_back(metas[i].shape[a]);
      } else {
        const bool broadcast = metas[i].shape[a] == 1 && bound.extents.at(l) != 1;
        impl->fixed[i].push_back({static_cast<int>(a), static_cast<int>(it - sp.sliced.begin()), broadcast});
      }
    }
    sub.inputs[i] = std::move(term);
    impl->slice_shapes.push_back(shape);
    slice_metas.push_back({impl->dtype, std::move(shape)});
  }
  EinsumOptions slice_options;
  slice_options.allow_broadcast = allow_broadcast;
  if (metas.size() >= 2) slice_options.plan = PlanSpec::tree_plan(sp.tree.steps());
  impl->plan = EinsumPlan::prepare(sub, slice_metas, slice_options);

  if (sp.num_slices > 4.0e18)
    fail(ErrorKind::invalid_argument, "einsum: the memory limit {} needs {:.3g} slices, more than one process can "
         "count; raise the limit", format_memory_size(max_memory_bytes), sp.num_slices);
  int64_t stride = 1;
  for (int64_t e : sp.sliced_extents) {
    impl->strides.push_back(stride);
    stride *= e;
  }
  impl->slices = stride;
  double out_elements = 1;
  for (int64_t e : impl->plan.output_shape()) out_elements *= static_cast<double>(e);
  const double fit = out_elements > 0 ? std::floor(limit.max_elements / out_elements) : double(kMaxChunks);
  impl->chunks = std::max<int64_t>(1, std::min<int64_t>({kMaxChunks, impl->slices, static_cast<int64_t>(
                                                             std::min(fit, double(kMaxChunks)))}));
  SlicedEinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

std::vector<Tensor> SlicedEinsumPlan::execute_chunks(std::span<const Tensor> operands, ExecutionContext& context,
                                                     ThreadPool* pool, int64_t first, int64_t last) const {
  const Impl& im = *impl_;
  if (first < 0 || last > im.chunks || first > last)
    fail(ErrorKind::invalid_argument, "sliced einsum: chunks [{}, {}) are not within the plan's {} chunks", first,
         last, im.chunks);
  const std::vector<Tensor> ops = im.promoted(operands);
  std::vector<Tensor> partials(static_cast<size_t>(last - first));
  if (!pool || last - first < pool->size()) {
    // Inline, or too few chunks to keep every thread busy: the threads work inside each slice instead.
    for (int64_t c = first; c < last; ++c) {
      auto [a, b] = im.chunk_slices(c);
      partials[static_cast<size_t>(c - first)] = im.run_slices(ops, a, b, context, pool);
    }
    return partials;
  }
  std::atomic<int64_t> next{first};
  pool->parallel_for(pool->size(), [&](int64_t, int64_t) {
    for (int64_t c = next++; c < last; c = next++) {
      auto [a, b] = im.chunk_slices(c);
      partials[static_cast<size_t>(c - first)] = im.run_slices(ops, a, b, context, nullptr);
    }
  });
  return partials;
}

Tensor SlicedEinsumPlan::sum_in_order(std::span<Tensor> partials) {
  EIN_ASSERT(!partials.empty(), "sum_in_order of no partials");
  Tensor& acc = partials[0];
  for (size_t c = 1; c < partials.size(); ++c) kernels::binary(kernels::BinaryOp::add, acc, partials[c], acc);
  return acc;
}

Tensor SlicedEinsumPlan::execute(std::span<const Tensor> operands, ExecutionContext& context, ThreadPool* pool) const {
  std::vector<Tensor> partials = execute_chunks(operands, context, pool, 0, impl_->chunks);
  return sum_in_order(partials);
}

std::string SlicedEinsumPlan::to_string() const {
  const Impl& im = *impl_;
  std::string labels;
  for (size_t k = 0; k < im.slicing.sliced.size(); ++k)
    labels += fmt::format("{}{}({})", k ? " " : "", label_name(im.plan.subscripts(), im.slicing.sliced[k]),
                          im.slicing.sliced_extents[k]);
  return fmt::format("sliced: {} slices over labels {}, {} chunks, overhead {:.3f}x\n", im.slices,
                     labels.empty() ? "none" : labels, im.chunks, im.slicing.overhead) +
         im.plan.to_string();
}

const SlicedPlan& SlicedEinsumPlan::slicing() const { return impl_->slicing; }
int64_t SlicedEinsumPlan::num_slices() const { return impl_->slices; }
int64_t SlicedEinsumPlan::num_chunks() const { return impl_->chunks; }
std::pair<int64_t, int64_t> SlicedEinsumPlan::chunk_slices(int64_t chunk) const { return impl_->chunk_slices(chunk); }
const EinsumPlan& SlicedEinsumPlan::slice_plan() const { return impl_->plan; }
DType SlicedEinsumPlan::dtype() const { return impl_->dtype; }
const Shape& SlicedEinsumPlan::output_shape() const { return impl_->plan.output_shape(); }

std::pair<int64_t, int64_t> rank_chunks(int64_t num_chunks, int rank, int ranks) {
  return {num_chunks * rank / ranks, num_chunks * (rank + 1) / ranks};
}

}  // namespace einstage::einsum
