// Matrix-vector products whose matrix is contiguous along the contracted axis: i,ij->j on a column-major matrix (each
// output the dot product of the vector with one contiguous column), and ji,j->i, its mirror with the vector as B.
// The direct and packed kernels vectorise along the output rows, so with one row (or one column, transposed) they
// pad every vector to MR and run at an eighth of their rate; here each output is a dot product along k instead:
// eight columns per pass, one vector accumulator each, fed by one load of the vector, then one horizontal sum per
// column. Every column is summed in the same order (lanes of the vector accumulator over k in steps of W, the lanes
// added first to last, then the tail of k in order), whether it runs in a group of eight or alone, so the bits do
// not depend on the number of columns or on threads (the pass is single-threaded: a 256 x 256 product is a few
// microseconds). Real dtypes only; complex stays on the 1m path. Included by Gett.cpp only.
#pragma once

#include "runtime/jit/GettLoops.h"

#include <cstdint>
#include <vector>

namespace einstage::gett_detail {

// G columns starting at `cols` (offsets into m, outputs at `out` into c); W lanes per vector.
template <typename R, int W, int G>
[[gnu::always_inline]] inline void dot_columns(const R* v, const R* m, const int64_t* cols, R* c, const int64_t* out,
                                               int64_t k, bool accumulate) {
  using V [[gnu::vector_size(W * sizeof(R))]] = R;
  V acc[G];
  for (int g = 0; g < G; ++g) acc[g] = V{};
  const int64_t kv = k / W * W;
  for (int64_t p = 0; p < kv; p += W) {
    V x;
    __builtin_memcpy(&x, v + p, sizeof(V));
    for (int g = 0; g < G; ++g) {
      V y;
      __builtin_memcpy(&y, m + cols[g] + p, sizeof(V));
      acc[g] += x * y;
    }
  }
  for (int g = 0; g < G; ++g) {
    R s = acc[g][0];
    for (int l = 1; l < W; ++l) s += acc[g][l];
    const R* col = m + cols[g];
    for (int64_t p = kv; p < k; ++p) s += v[p] * col[p];
    if (accumulate) c[out[g]] += s;
    else c[out[g]] = s;
  }
}

template <typename R, int W>
[[gnu::always_inline]] inline void dot_all(const R* v, const R* m, const int64_t* cols, R* c, const int64_t* out,
                                           int64_t count, int64_t k, bool accumulate) {
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) dot_columns<R, W, 8>(v, m, cols + j, c, out + j, k, accumulate);
  for (; j < count; ++j) dot_columns<R, W, 1>(v, m, cols + j, c, out + j, k, accumulate);
}

template <typename R>
[[gnu::target("avx512f")]] void dot_all_avx512(const R* v, const R* m, const int64_t* cols, R* c, const int64_t* out,
                                               int64_t count, int64_t k, bool accumulate) {
  dot_all<R, 64 / int(sizeof(R))>(v, m, cols, c, out, count, k, accumulate);
}

template <typename R>
[[gnu::target("avx2,fma")]] void dot_all_avx2(const R* v, const R* m, const int64_t* cols, R* c, const int64_t* out,
                                              int64_t count, int64_t k, bool accumulate) {
  dot_all<R, 32 / int(sizeof(R))>(v, m, cols, c, out, count, k, accumulate);
}

// The set-up of one such product: which operand is the vector, where its k run starts, and per output the offset of
// its matrix column's k run and of its element in C.
template <typename R>
struct Dots {
  bool vector_is_a = true;
  bool accumulate = false;
  int isa = 0;  // 2: AVX-512, 1: AVX2 + FMA, 0: neither (the caller does not set Dots up)
  int64_t k = 0, vec_offset = 0;
  std::vector<int64_t> cols, out;

  void run(const void* a, const void* b, void* c_data) const {
    const R* v = static_cast<const R*>(vector_is_a ? a : b) + vec_offset;
    const R* m = static_cast<const R*>(vector_is_a ? b : a);
    R* c = static_cast<R*>(c_data);
    const int64_t count = static_cast<int64_t>(cols.size());
    if (isa == 2) dot_all_avx512<R>(v, m, cols.data(), c, out.data(), count, k, accumulate);
    else dot_all_avx2<R>(v, m, cols.data(), c, out.data(), count, k, accumulate);
  }
  size_t table_bytes() const { return (cols.capacity() + out.capacity()) * sizeof(int64_t); }
};

}  // namespace einstage::gett_detail
