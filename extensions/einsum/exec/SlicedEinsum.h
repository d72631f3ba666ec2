// SlicedEinsumPlan: an einsum under a memory limit, run as a sum of independent slices (planner/Slicing.h).
//
// Stage: einsum extension, runtime side. prepare() binds the subscripts to the shapes (bind_einsum), turns the limit
// in bytes into elements of the promoted dtype, asks plan_sliced() for the sliced labels and the per-slice tree (a
// budget counts work only, never the clock: PlanOptions::clock_guard off, so every process gets the same plan), and
// prepares one EinsumPlan (Executor.h) for the subscripts without the sliced labels along that tree. A slice is that
// plan run on views of the operands with the sliced labels fixed (no copy: a fixed axis is an offset), so it needs
// only the plan's arena, which the executor keeps per thread and reuses from slice to slice.
// Determinism: the slices are cut into a fixed number of chunks (chunk c = slices [c*S/C, (c+1)*S/C), C =
// num_chunks(), which depends on the plan only); a chunk's partial result is the sum of its slices in slice order,
// and the result is the sum of the chunks' partials in chunk order. Which thread or process computes a chunk never
// changes a bit, so the result is the same at any thread count and, reduced in chunk order, over any number of MPI
// ranks (tools/einstage's `--mpi`, docs/scale.md). Chunks run on the given pool's threads, each thread claiming the
// next chunk; when there are fewer chunks than threads the slices run one after another with the threads inside each
// slice's kernels instead. Partial results take C outputs of memory, so C is at most 64 and at most the number of
// outputs that fit the limit (at least 1).
// Depends on Executor.h, the planner and runtime kernels (elementwise add, the thread pool); not on the compiler.
#pragma once

#include "extensions/einsum/exec/Executor.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/planner/Slicing.h"

#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace einstage::einsum {

class SlicedEinsumPlan {
 public:
  /// Prepares "ij,jk->ik" (plain, nested or `...`) so that every intermediate of one slice fits `max_memory_bytes`
  /// bytes of the promoted dtype. options.plan chooses the tree (its max_memory is ignored: the argument rules). Errors
  /// as plan_sliced(), with the limit in bytes.
  static SlicedEinsumPlan prepare(std::string_view subscripts, std::span<const TensorMeta> metas,
                                  int64_t max_memory_bytes, const EinsumOptions& options = {});

  /// Integer-label Subscripts (Notation.h make_subscripts); what the traced op's executor uses.
  static SlicedEinsumPlan prepare(const Subscripts& subscripts, std::span<const TensorMeta> metas,
                                  int64_t max_memory_bytes, const EinsumOptions& options = {});

  /// Every slice, summed in the fixed order, on `pool` (nullptr: the calling thread) with the context's JIT. Operands
  /// must match the prepared dtypes and shapes (any strides); mixed dtypes are promoted once, not per slice.
  Tensor execute(std::span<const Tensor> operands, ExecutionContext& context, ThreadPool* pool) const;

  /// Chunks [first, last) only: their partial results, in chunk order (what an MPI rank computes).
  std::vector<Tensor> execute_chunks(std::span<const Tensor> operands, ExecutionContext& context, ThreadPool* pool,
                                     int64_t first, int64_t last) const;
  /// The sum of chunk partials in the given order (the first is updated in place and returned).
  static Tensor sum_in_order(std::span<Tensor> partials);

  const SlicedPlan& slicing() const;
  int64_t num_slices() const;
  int64_t num_chunks() const;
  /// Slices of chunk c: [first, last).
  std::pair<int64_t, int64_t> chunk_slices(int64_t chunk) const;
  /// The plan one slice runs.
  const EinsumPlan& slice_plan() const;
  DType dtype() const;
  const Shape& output_shape() const;

  /// "sliced: N slices over labels ..., C chunks" and the slice plan's dump.
  std::string to_string() const;

  struct Impl;

 private:
  static SlicedEinsumPlan build(const BoundEinsum& bound, std::span<const TensorMeta> metas, int64_t max_memory_bytes,
                                PlanSpec spec, bool allow_broadcast);
  std::shared_ptr<const Impl> impl_;
};

/// Chunks [first, last) of `num_chunks` split over `ranks` processes: rank r takes [r*C/R, (r+1)*C/R).
std::pair<int64_t, int64_t> rank_chunks(int64_t num_chunks, int rank, int ranks);

}  // namespace einstage::einsum
