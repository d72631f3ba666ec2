// Layout kernels over strided Tensors: copy / permute, fill with zeros, reduce_sum over axes, extract and embed a
// diagonal. Stage: runtime. Depends on ir/Tensor.h and runtime/ThreadPool.h only.
//
// These are the standard-op kernels around the pairwise contraction (which is runtime/kernels/Contraction.h). Every
// kernel writes into a caller-provided destination (so the einsum executor can point it at its scratch arena), takes
// an optional ThreadPool (nullptr = the calling thread), and gives the same bits at any thread count: work is split
// over output elements only, and each output element's sum runs in one fixed order. Diagonals are strided views
// (stride_a + stride_b), so extract_diag/embed_diag are copies through such a view.
#pragma once

#include "ir/Tensor.h"

#include <span>

namespace einstage {
class ThreadPool;
}

namespace einstage::kernels {

/// dst = src elementwise (same dtype and shape, any strides on both sides; dst must not overlap itself or src).
/// Copies whose innermost axes differ (transposes) go through 32 x 32 tiles so both sides stay in cache.
void copy(const Tensor& src, Tensor& dst, ThreadPool* pool = nullptr);

/// A fresh column-major tensor whose axis i is src's axis perm[i] (NumPy transpose + copy).
Tensor permute_copy(const Tensor& src, std::span<const int> perm, ThreadPool* pool = nullptr);

/// dst = 0 everywhere.
void fill_zero(Tensor& dst, ThreadPool* pool = nullptr);

/// dst (+)= the sum of src over `axes` (distinct, in any order). dst's shape is src's shape with those axes removed
/// (the others keep their order). Each output element is summed over the reduced axes' column-major linear index
/// (the lowest-numbered reduced axis fastest), from 0 upwards, starting from zero; with accumulate the sum is then
/// added to dst. Reducing over no axes is a copy; an empty reduced extent gives zeros.
void reduce_sum(const Tensor& src, std::span<const int> axes, Tensor& dst, bool accumulate = false,
                ThreadPool* pool = nullptr);
/// Same, into a fresh column-major tensor.
Tensor reduce_sum(const Tensor& src, std::span<const int> axes, ThreadPool* pool = nullptr);

/// The maximum of src over `axes` (distinct, any order) into a fresh column-major tensor of src's shape without
/// those axes; real dtypes (f32, f64, i64). A slice holding a nan gives nan; an empty reduced extent gives -inf (the
/// lowest i64). Each maximum is the first in the reduced axes' column-major order (as reduce_sum's summation order).
Tensor reduce_max(const Tensor& src, std::span<const int> axes, ThreadPool* pool = nullptr);
/// A fresh column-major tensor of src's shape and dtype: 1 at the element reduce_max takes for each output element
/// (the first maximum, or the first nan), 0 elsewhere.
Tensor first_max_mask(const Tensor& src, std::span<const int> axes, ThreadPool* pool = nullptr);

/// The shape of extract_diag(src, a, b): src's shape without axis_b. Fails if the two extents differ.
Shape diag_shape(const Shape& src, int axis_a, int axis_b);
/// The element strides of the diagonal view: src's strides without axis_b, with axis_a's stride + axis_b's stride.
Strides diag_strides(const Shape& shape, const Strides& strides, int axis_a, int axis_b);

/// dst = the diagonal of src over axes axis_a and axis_b (src[..i..i..] at axis_a's position). dst has
/// diag_shape(src.shape(), axis_a, axis_b).
void extract_diag(const Tensor& src, int axis_a, int axis_b, Tensor& dst, ThreadPool* pool = nullptr);
Tensor extract_diag(const Tensor& src, int axis_a, int axis_b, ThreadPool* pool = nullptr);

/// The inverse of extract_diag: dst (rank src.rank() + 1) = 0 off the diagonal of its axes axis_a and axis_b, and
/// dst[..i..i..] = src[..i..] on it. Removing dst's axis_b gives src's shape; dst's axis_a and axis_b have the same
/// extent.
void embed_diag(const Tensor& src, int axis_a, int axis_b, Tensor& dst, ThreadPool* pool = nullptr);

}  // namespace einstage::kernels
