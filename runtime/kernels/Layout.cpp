#include "runtime/kernels/Layout.h"

#include "ir/Size.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Strided.h"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace einstage::kernels {
namespace {

// Sums of i64 run in uint64_t: wrap-around instead of undefined overflow, the same bits as two's complement.
template <typename T> using Acc = std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, T>;

constexpr int64_t kPiece = 256;  // elements per unit of parallel work along an innermost run

void check_same(const Tensor& src, const Tensor& dst, const char* op) {
  if (!src.defined() || !dst.defined()) fail(ErrorKind::invalid_argument, "{}: a tensor is undefined", op);
  if (src.dtype() != dst.dtype())
    fail(ErrorKind::dtype, "{}: source has dtype {} but destination has {}", op, name(src.dtype()), name(dst.dtype()));
  if (src.shape() != dst.shape())
    fail(ErrorKind::shape, "{}: source has shape {} but destination has {}", op, shape_to_string(src.shape()),
         shape_to_string(dst.shape()));
}

template <typename T>
void copy_typed(const Tensor& src, Tensor& dst, ThreadPool* pool) {
  auto nest = make_loop_nest<2>(dst.shape(), {&dst.strides(), &src.strides()});
  if (nest.total == 0) return;
  T* d = static_cast<T*>(dst.raw_data());
  const T* s = static_cast<const T*>(src.raw_data());
  // A transposed source is visited in tiles (Strided.h: parallel_runs).
  parallel_runs(pool, nest, kPiece * 16, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    T* dp = d + off[0];
    const T* sp = s + off[1];
    if (st[0] == 1 && st[1] == 1) std::copy(sp, sp + n, dp);
    else
      for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = sp[i * st[1]];
  });
}

template <typename T>
void reduce_typed(const Tensor& src, const std::vector<bool>& reduced, Tensor& dst, bool accumulate, ThreadPool* pool) {
  using A = Acc<T>;
  Shape kept_shape;
  Strides kept_src, kept_dst, red_ext, red_src;
  int kd = 0;
  for (int a = 0; a < src.rank(); ++a) {
    if (reduced[a]) {
      red_ext.push_back(src.shape()[a]);
      red_src.push_back(src.strides()[a]);
    } else {
      kept_shape.push_back(src.shape()[a]);
      kept_src.push_back(src.strides()[a]);
      kept_dst.push_back(dst.strides()[kd++]);
    }
  }
  const int64_t R = checked_product(red_ext, "reduce_sum: summed axes");
  auto nest = make_loop_nest<2>(kept_shape, {&kept_dst, &kept_src});
  if (nest.total == 0) return;
  T* d = static_cast<T*>(dst.raw_data());
  if (R == 0) {
    if (!accumulate) fill_zero(dst, pool);
    return;
  }
  const T* s = static_cast<const T*>(src.raw_data());
  const std::vector<int64_t> rtab = offset_table(red_ext, red_src);
  parallel_runs(pool, nest, kPiece, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    A tmp[kPiece];
    std::fill(tmp, tmp + n, A(0));
    for (int64_t r = 0; r < R; ++r) {
      const T* sp = s + off[1] + rtab[r];
      if (st[1] == 1)
        for (int64_t i = 0; i < n; ++i) tmp[i] += static_cast<A>(sp[i]);
      else
        for (int64_t i = 0; i < n; ++i) tmp[i] += static_cast<A>(sp[i * st[1]]);
    }
    T* dp = d + off[0];
    for (int64_t i = 0; i < n; ++i) {
      if (accumulate) dp[i * st[0]] = static_cast<T>(static_cast<A>(dp[i * st[0]]) + tmp[i]);
      else dp[i * st[0]] = static_cast<T>(tmp[i]);
    }
  });
}

int normalise_axis(int axis, int rank, const char* op) {
  if (axis < 0 || axis >= rank) fail(ErrorKind::invalid_argument, "{}: axis {} is out of range for rank {}", op, axis, rank);
  return axis;
}

// Which src axes `axes` names (distinct, in range), for the reductions.
std::vector<bool> reduced_axes(const Tensor& src, std::span<const int> axes, const char* op) {
  if (!src.defined()) fail(ErrorKind::invalid_argument, "{}: the tensor is undefined", op);
  std::vector<bool> reduced(static_cast<size_t>(src.rank()), false);
  for (int a : axes) {
    normalise_axis(a, src.rank(), op);
    if (reduced[a]) fail(ErrorKind::invalid_argument, "{}: axis {} is listed twice", op, a);
    reduced[a] = true;
  }
  return reduced;
}

// v replaces the running maximum m: larger, or the first nan (which then stays).
template <typename T> bool beats(T v, T m) {
  if constexpr (std::is_floating_point_v<T>) return v > m || (v != v && m == m);
  else return v > m;
}

// reduce_max (mask == false: dst has the kept axes) or first_max_mask (mask == true: dst has src's shape, zeros,
// and gets a 1 at each maximum). Work splits over kept elements; each slice is scanned in one fixed order.
template <typename T>
void max_typed(const Tensor& src, const std::vector<bool>& reduced, Tensor& dst, bool mask, ThreadPool* pool) {
  Shape kept_shape;
  Strides kept_src, kept_dst, red_ext, red_src, red_dst;
  int kd = 0;
  for (int a = 0; a < src.rank(); ++a) {
    if (reduced[a]) {
      red_ext.push_back(src.shape()[a]);
      red_src.push_back(src.strides()[a]);
      if (mask) red_dst.push_back(dst.strides()[a]);
    } else {
      kept_shape.push_back(src.shape()[a]);
      kept_src.push_back(src.strides()[a]);
      kept_dst.push_back(dst.strides()[mask ? a : kd++]);
    }
  }
  const int64_t R = checked_product(red_ext, "reduce_max: reduced axes");
  auto nest = make_loop_nest<2>(kept_shape, {&kept_dst, &kept_src});
  T* d = static_cast<T*>(dst.raw_data());
  const T* s = static_cast<const T*>(src.raw_data());
  const std::vector<int64_t> rtab = offset_table(red_ext, red_src);
  const std::vector<int64_t> mtab = mask ? offset_table(red_ext, red_dst) : std::vector<int64_t>{};
  constexpr T kLowest = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  parallel_runs(pool, nest, kPiece, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    T best[kPiece];
    int64_t at[kPiece];
    std::fill(best, best + n, kLowest);
    std::fill(at, at + n, int64_t(-1));
    for (int64_t r = 0; r < R; ++r) {
      const T* sp = s + off[1] + rtab[r];
      for (int64_t i = 0; i < n; ++i) {
        const T v = sp[i * st[1]];
        if (at[i] < 0 || beats(v, best[i])) {
          best[i] = v;
          at[i] = r;
        }
      }
    }
    T* dp = d + off[0];
    for (int64_t i = 0; i < n; ++i) {
      if (!mask) dp[i * st[0]] = best[i];
      else if (at[i] >= 0) dp[i * st[0] + mtab[at[i]]] = T(1);
    }
  });
}

template <bool kMask> Tensor max_reduction(const Tensor& src, std::span<const int> axes, ThreadPool* pool) {
  const char* op = kMask ? "first_max_mask" : "reduce_max";
  std::vector<bool> reduced = reduced_axes(src, axes, op);
  if (is_complex(src.dtype()))
    fail(ErrorKind::dtype, "{}: the tensor has dtype {}; expected a real dtype (f32, f64, i64)", op, name(src.dtype()));
  Shape shape;
  for (int a = 0; a < src.rank(); ++a)
    if (kMask || !reduced[a]) shape.push_back(src.shape()[a]);
  Tensor out = kMask ? Tensor::zeros(src.dtype(), shape) : Tensor::empty(src.dtype(), shape);
  dispatch_dtype(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) return;
    else max_typed<T>(src, reduced, out, kMask, pool);
  });
  return out;
}

}  // namespace

void copy(const Tensor& src, Tensor& dst, ThreadPool* pool) {
  check_same(src, dst, "copy");
  dispatch_dtype(dst.dtype(), [&](auto tag) { copy_typed<decltype(tag)>(src, dst, pool); });
}

Tensor permute_copy(const Tensor& src, std::span<const int> perm, ThreadPool* pool) {
  Tensor view = src.permute(perm);
  Tensor out = Tensor::empty(src.dtype(), view.shape());
  copy(view, out, pool);
  return out;
}

void fill_zero(Tensor& dst, ThreadPool* pool) {
  if (!dst.defined()) fail(ErrorKind::invalid_argument, "fill_zero: the tensor is undefined");
  auto nest = make_loop_nest<1>(dst.shape(), {&dst.strides()});
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst.raw_data());
    parallel_runs(pool, nest, kPiece * 16, [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
      for (int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] = T(0);
    });
  });
}

void reduce_sum(const Tensor& src, std::span<const int> axes, Tensor& dst, bool accumulate, ThreadPool* pool) {
  if (!src.defined() || !dst.defined()) fail(ErrorKind::invalid_argument, "reduce_sum: a tensor is undefined");
  if (src.dtype() != dst.dtype())
    fail(ErrorKind::dtype, "reduce_sum: source has dtype {} but destination has {}", name(src.dtype()), name(dst.dtype()));
  std::vector<bool> reduced = reduced_axes(src, axes, "reduce_sum");
  Shape want;
  for (int a = 0; a < src.rank(); ++a)
    if (!reduced[a]) want.push_back(src.shape()[a]);
  if (want != dst.shape())
    fail(ErrorKind::shape, "reduce_sum: destination has shape {} but reducing {} gives {}", shape_to_string(dst.shape()),
         shape_to_string(src.shape()), shape_to_string(want));
  dispatch_dtype(src.dtype(), [&](auto tag) { reduce_typed<decltype(tag)>(src, reduced, dst, accumulate, pool); });
}

Tensor reduce_max(const Tensor& src, std::span<const int> axes, ThreadPool* pool) {
  return max_reduction<false>(src, axes, pool);
}

Tensor first_max_mask(const Tensor& src, std::span<const int> axes, ThreadPool* pool) {
  return max_reduction<true>(src, axes, pool);
}

Tensor reduce_sum(const Tensor& src, std::span<const int> axes, ThreadPool* pool) {
  Shape shape;
  for (int a = 0; a < src.rank(); ++a)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) shape.push_back(src.shape()[a]);
  Tensor out = Tensor::empty(src.dtype(), shape);
  reduce_sum(src, axes, out, false, pool);
  return out;
}

Shape diag_shape(const Shape& src, int axis_a, int axis_b) {
  const int rank = static_cast<int>(src.size());
  normalise_axis(axis_a, rank, "extract_diag");
  normalise_axis(axis_b, rank, "extract_diag");
  if (axis_a == axis_b) fail(ErrorKind::invalid_argument, "extract_diag: the two axes must differ (both are {})", axis_a);
  if (src[axis_a] != src[axis_b])
    fail(ErrorKind::shape, "extract_diag: axes {} and {} have extents {} and {}; a diagonal needs equal extents", axis_a,
         axis_b, src[axis_a], src[axis_b]);
  Shape out;
  for (int a = 0; a < rank; ++a)
    if (a != axis_b) out.push_back(src[a]);
  return out;
}

Strides diag_strides(const Shape& shape, const Strides& strides, int axis_a, int axis_b) {
  diag_shape(shape, axis_a, axis_b);
  Strides out;
  for (int a = 0; a < static_cast<int>(shape.size()); ++a)
    if (a != axis_b) out.push_back(a == axis_a ? strides[a] + strides[axis_b] : strides[a]);
  return out;
}

void extract_diag(const Tensor& src, int axis_a, int axis_b, Tensor& dst, ThreadPool* pool) {
  if (!src.defined()) fail(ErrorKind::invalid_argument, "extract_diag: the tensor is undefined");
  Tensor view = Tensor::view_of(src.dtype(), diag_shape(src.shape(), axis_a, axis_b),
                                diag_strides(src.shape(), src.strides(), axis_a, axis_b),
                                const_cast<void*>(src.raw_data()));
  copy(view, dst, pool);
}

Tensor extract_diag(const Tensor& src, int axis_a, int axis_b, ThreadPool* pool) {
  Tensor out = Tensor::empty(src.dtype(), diag_shape(src.shape(), axis_a, axis_b));
  extract_diag(src, axis_a, axis_b, out, pool);
  return out;
}

void embed_diag(const Tensor& src, int axis_a, int axis_b, Tensor& dst, ThreadPool* pool) {
  if (!src.defined() || !dst.defined()) fail(ErrorKind::invalid_argument, "embed_diag: a tensor is undefined");
  if (dst.rank() != src.rank() + 1)
    fail(ErrorKind::shape, "embed_diag: destination has rank {} but the source has rank {} (expected {})", dst.rank(),
         src.rank(), src.rank() + 1);
  Shape diag = diag_shape(dst.shape(), axis_a, axis_b);
  if (diag != src.shape())
    fail(ErrorKind::shape, "embed_diag: the diagonal of destination {} over axes {} and {} has shape {}, not the source's {}",
         shape_to_string(dst.shape()), axis_a, axis_b, shape_to_string(diag), shape_to_string(src.shape()));
  fill_zero(dst, pool);
  Tensor view = Tensor::view_of(dst.dtype(), diag, diag_strides(dst.shape(), dst.strides(), axis_a, axis_b), dst.raw_data());
  copy(src, view, pool);
}

}  // namespace einstage::kernels
