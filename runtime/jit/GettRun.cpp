// The loops that run a set-up GETT problem (runtime/jit/GettSetup.h): the elementwise loop and GettSetup::run's
// dispatch to the packed, direct and lane loops (GettLoops.h), the dot products (GettDots.h), the outer products
// (GettOuter.h), the row-block matrix-vector products (GettAxpy.h) and the scalar loops of tiny problems, instantiated
// for f32, f64, c64 and c128 here and nowhere else; and the block split of a product whose zeros split it.
#include "runtime/jit/GettSetup.h"

#include "ir/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/BlockProduct.h"

#include <complex>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

namespace einstage::gett_detail {

namespace {

// An elementwise product over `axes` (the batch axes, then the m axes with stride 0 in B and the n axes with stride 0
// in A, without extent-1 axes): loop over them directly, innermost the axis with the smallest C stride, instead of
// building offset tables with one entry per element and running a GEMM per entry. c = a * b (or c += a * b) per
// element: the GEMM kernels' value for k = 1 (fma(a, b, 0) is a * b rounded once). order_elementwise() sorts and
// merges the axes once per problem (set-up); elementwise() runs them.
template <typename T>
void elementwise(const std::vector<Axis>& axes, const void* a_data, const void* b_data, void* c_data,
                 bool accumulate) {
  const T* a = static_cast<const T*>(a_data);
  const T* b = static_cast<const T*>(b_data);
  T* c = static_cast<T*>(c_data);
  for (const Axis& ax : axes)
    if (ax.extent == 0) return;
  const int64_t inner = axes.empty() ? 1 : axes[0].extent;
  const int64_t sa = axes.empty() ? 0 : axes[0].stride_a, sb = axes.empty() ? 0 : axes[0].stride_b,
                sc = axes.empty() ? 0 : axes[0].stride_c;
  // The odometer's digits: on the stack for the usual few (merged) axes, so a call allocates nothing.
  int64_t digits[16] = {};
  std::vector<int64_t> more;
  if (axes.size() > std::size(digits)) more.assign(axes.size(), 0);
  int64_t* index = more.empty() ? digits : more.data();
  for (;;) {
    if (sa == 1 && sb == 1 && sc == 1) {  // contiguous: a loop the compiler vectorises
      if (accumulate)
        for (int64_t i = 0; i < inner; ++i) c[i] += a[i] * b[i];
      else
        for (int64_t i = 0; i < inner; ++i) c[i] = a[i] * b[i];
    } else if (sc == 1 && (sa == 0 || sb == 0) && (sa | sb) == 1) {  // one side broadcast: a scaled copy
      const T s = sa == 0 ? a[0] : b[0];
      const T* v = sa == 0 ? b : a;
      if (accumulate)
        for (int64_t i = 0; i < inner; ++i) c[i] += sa == 0 ? s * v[i] : v[i] * s;
      else
        for (int64_t i = 0; i < inner; ++i) c[i] = sa == 0 ? s * v[i] : v[i] * s;
    } else if (accumulate) {
      for (int64_t i = 0; i < inner; ++i) c[i * sc] += a[i * sa] * b[i * sb];
    } else {
      for (int64_t i = 0; i < inner; ++i) c[i * sc] = a[i * sa] * b[i * sb];
    }
    size_t d = 1;
    for (; d < axes.size(); ++d) {
      a += axes[d].stride_a, b += axes[d].stride_b, c += axes[d].stride_c;
      if (++index[d] < axes[d].extent) break;
      a -= axes[d].stride_a * axes[d].extent, b -= axes[d].stride_b * axes[d].extent, c -= axes[d].stride_c * axes[d].extent;
      index[d] = 0;
    }
    if (d >= axes.size()) return;
  }
}

// The blocks of a split p (kernels::block_product_in_place), each a packed GEMM reading A and B and writing C
// through the block's offset tables: the bits of the dense packed product when K fits one KC block (every C entry
// sums its nonzero terms in the dense k order, from zero, in one pass), one block after the other on `pool`.
template <typename T>
void run_blocks_in_place(const ContractionProblem& p, std::span<const kernels::BlockTables> blocks,
                         const std::function<void()>& zero_c, ThreadPool* pool, KernelCache& cache,
                         ScratchAllocator& scratch, const GemmTuning& tuning) {
  std::vector<Gett<T>> getts(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const kernels::BlockTables& x = blocks[i];
    Gett<T>& g = getts[i];
    g.scratch = &scratch;
    g.m = {static_cast<int64_t>(x.ma.size()), x.ma, {}, x.mc};
    g.n = {static_cast<int64_t>(x.nb.size()), {}, x.nb, x.nc};
    g.k = {static_cast<int64_t>(x.ka.size()), x.ka, x.kb, {}};
    g.batch = {1, {0}, {0}, {0}};
    set_up_packed(g, cache, nullptr, tuning);  // may throw: before anything is written
  }
  zero_c();
  for (const Gett<T>& g : getts) g.run(p.a, p.b, p.c, pool);
}

}  // namespace

template <typename T>
void GettSetup<T>::run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const {
  switch (mode) {
    case GettMode::elementwise: return elementwise<T>(axes, a, b, c, accumulate);
    case GettMode::gett: return g.run(a, b, c, pool);
    case GettMode::transposed: return t.run(b, a, c, pool);
    case GettMode::dots: return dots.run(a, b, c, pool);
    case GettMode::outer: return outer.run(a, b, c, pool, stream_c);
    case GettMode::axpy: return axpy.run(a, b, c, pool);
    case GettMode::tiny:
      if constexpr (!is_complex_v<T>) tiny_run<T>(g.m, g.n, g.k, g.batch, g.accumulate, a, b, c);
      return;
  }
}

template struct GettSetup<float>;
template struct GettSetup<double>;
template struct GettSetup<c64>;
template struct GettSetup<c128>;

// contract_jit's and GettPlan::run's block split: true when p split (and ran).
bool split_in_place(const ContractionProblem& p, ThreadPool* pool, KernelCache& cache, ScratchAllocator& scratch,
                    const GemmTuning& tuning) {
  return kernels::block_product_in_place(
      p, [&](std::span<const kernels::BlockTables> blocks, const std::function<void()>& zero_c) {
        dispatch_dtype(p.dtype, [&]<typename T>(T) {
          EIN_ASSERT((!std::is_same_v<T, int64_t>), "block products are f32, f64, c64 or c128");
          if constexpr (!std::is_same_v<T, int64_t>)
            run_blocks_in_place<T>(p, blocks, zero_c, pool, cache, scratch, tuning);
        });
      });
}

}  // namespace einstage::gett_detail
