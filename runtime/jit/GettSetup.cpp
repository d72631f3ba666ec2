// The set-up of one GETT problem (runtime/jit/Gett.h, GettSetup.h): the fused offset tables, the mode, the tile, the
// blocking and the kernels, into a GettSetup that GettRun.cpp's loops run; and the default blocks. Which shapes take
// which mode is GettModes.cpp's.
#include "runtime/jit/GettSetup.h"

#include "ir/Error.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Tuning.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <utility>
#include <vector>

namespace einstage {

GettBlocking default_blocking(DType real_dtype, bool avx512) {
  // Blocking.h: the B sliver (NR x KC) in L1, the packed A block (MC x KC) in L2, the B panel (KC x NC) in L3, for
  // the model's tile of this vector width on this host's caches.
  return GemmTuning::model().blocking(real_dtype, avx512);
}

namespace gett_detail {

void order_elementwise(std::vector<Axis>& axes) {
  std::sort(axes.begin(), axes.end(), [](const Axis& x, const Axis& y) {
    return std::abs(x.stride_c) < std::abs(y.stride_c);  // stable enough: ties only reorder independent elements
  });
  // Merge neighbours that continue each other in all three tensors (a broadcast operand's zero strides included),
  // so the inner loop is as long as possible: e.g. 1 x N broadcasts whose n axes are dense in B and C.
  size_t merged = 0;
  for (size_t i = 1; i < axes.size(); ++i) {
    Axis& last = axes[merged];
    const Axis& ax = axes[i];
    if (ax.stride_a == last.stride_a * last.extent && ax.stride_b == last.stride_b * last.extent &&
        ax.stride_c == last.stride_c * last.extent)
      last.extent *= ax.extent;
    else
      axes[++merged] = ax;
  }
  if (!axes.empty()) axes.resize(merged + 1);
}

namespace {

// q = p with A and B exchanged (C^T = B^T A^T), reusing q's vectors.
void transpose_into(ContractionProblem& q, const ContractionProblem& p) {
  q = p;
  exchange_operands(q);
}

// Sets p up in `g` (ws.g, or ws.t for the transposed problem) and returns the mode: gett means "run g". `swapped`: p
// is the transpose of the caller's problem (the packed path's C^T = B^T A^T), whose k order it keeps.
template <typename T>
GettMode set_up_gett(GettSetup<T>& ws, Gett<T>& g, const ContractionProblem& p, KernelCache& cache,
                     const GettBlocking* blocking, ScratchAllocator& scratch, bool direct, bool swapped,
                     const GemmTuning& tuning) {
  using R = typename real_of<T>::type;
  g.reset();
  g.scratch = &scratch;
  const DType real = dtype_v<R>;
  fuse(g.m, p.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC, ws.fuse);
  fuse(g.n, p.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC, ws.fuse);
  // k in the order of B's strides; in a swapped problem (below) that is A's, so it sums in the original order.
  if (swapped) fuse(g.k, p.k, &Axis::stride_a, &Axis::stride_b, kNeedA | kNeedB, ws.fuse);
  else fuse(g.k, p.k, &Axis::stride_b, &Axis::stride_a, kNeedA | kNeedB, ws.fuse);
  g.accumulate = p.accumulate;
  if (!blocking && elementwise_shaped(g.m, g.n, g.k)) {
    // m and n axes become batch axes that one operand does not carry; extent-1 k axes add nothing.
    ws.axes.clear();
    for (const Axis& ax : p.batch)
      if (ax.extent != 1) ws.axes.push_back(ax);
    for (Axis ax : p.m)
      if (ax.extent != 1) ax.stride_b = 0, ws.axes.push_back(ax);
    for (Axis ax : p.n)
      if (ax.extent != 1) ax.stride_a = 0, ws.axes.push_back(ax);
    order_elementwise(ws.axes);
    return GettMode::elementwise;
  }
  if constexpr (!is_complex_v<T>) {
    // A batch axis with unit stride in all three tensors: run lane kernels along it (the GEMM packing would read
    // one element per cache line there). Complex stays on the 1m path.
    auto lane = lane_axis(p);
    if (lane != p.batch.end()) {
      ws.axes.assign(p.batch.begin(), p.batch.end());
      ws.axes.erase(ws.axes.begin() + (lane - p.batch.begin()));
      fuse(g.batch, ws.axes, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC, ws.fuse);
      MicroKernelSpec spec = default_lane_kernel(real, cache.host().has_avx512);
      g.lane_kernel = cache.lane_kernel(spec);  // may throw: before anything is written
      g.lane_extent = lane->extent;
      g.lanes = spec.lanes;
      g.mr = spec.mr;
      g.nr = spec.nr;
      // Per k step a tile reads (mr + nr) vectors: keep the A and B slivers together within L1.
      const int64_t vector_bytes = spec.lanes * static_cast<int64_t>(sizeof(R));
      GettBlocking lane_block =
          blocking ? *blocking : GettBlocking{256, lane_kc(host_cache_info(), vector_bytes, spec.mr, spec.nr), 4096};
      g.kc_e = std::max<int64_t>(1, lane_block.kc);
      g.mc_e = std::max<int64_t>(1, lane_block.mc / spec.mr) * spec.mr;
      g.nc = std::max<int64_t>(1, lane_block.nc / spec.nr) * spec.nr;
      g.cm_pad.assign(g.m.c.begin(), g.m.c.end());
      g.cm_pad.resize(g.m.c.size() + size_t(g.mr), 0);
      g.cn_pad.assign(g.n.c.begin(), g.n.c.end());
      g.cn_pad.resize(g.n.c.size() + size_t(g.nr), 0);
      return GettMode::gett;
    }
  }
  fuse(g.batch, p.batch, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC, ws.fuse);
  if constexpr (!is_complex_v<T>) {
    if (!blocking && direct && dots_shaped(g.m, g.n, g.k, g.batch)) {
      set_up_dots(ws.dots, g, dots_isa());
      return GettMode::dots;
    }
    if (!blocking && direct && !swapped && outer_shaped(g.m, g.n, g.k, g.batch, g.accumulate, sizeof(R))) {
      set_up_outer(ws.outer, g, dots_isa());
      return GettMode::outer;
    }
    if (!blocking && direct && axpy_shaped(g.m, g.n, g.k, g.batch)) {
      set_up_axpy(ws.axpy, g, dots_isa());
      return GettMode::axpy;
    }
    MicroKernelSpec tile;
    if (!blocking && direct && plan_direct(g, real, cache.host().has_avx512, tile, p.n, ws.fuse)) {
      g.direct = cache.direct_kernel(tile);  // may throw: before anything is written
      return GettMode::gett;
    }
    // Fewer than 8 columns but A's rows not contiguous (a k-major matrix times a vector: ji,j->i): C^T = B^T A^T has
    // fewer than 8 rows and reads the matrix through broadcasts along its contiguous k, on the direct path.
    if (!blocking && direct && g.n.size < 8 && g.m.size >= 8) {
      ContractionProblem& q = ws.q;
      transpose_into(q, p);
      Gett<T>& t = ws.t;
      t.reset();
      t.scratch = &scratch;
      fuse(t.m, q.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC, ws.fuse);
      fuse(t.n, q.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC, ws.fuse);
      // k in the original problem's order (by p's B strides, now q's A strides): the same summation order, so the
      // same bits as the packed path over one KC block.
      fuse(t.k, q.k, &Axis::stride_a, &Axis::stride_b, kNeedA | kNeedB, ws.fuse);
      t.batch = g.batch;
      std::swap(t.batch.a, t.batch.b);
      t.accumulate = q.accumulate;
      if (plan_direct(t, real, cache.host().has_avx512, tile, q.n, ws.fuse)) {
        t.direct = cache.direct_kernel(tile);  // may throw: before anything is written
        return GettMode::transposed;
      }
    }
  }
  if constexpr (!is_complex_v<T>) {
    // Too small to pack (GettLoops.h: tiny_run), with the packed path's bits: k within its one KC block. A caller
    // that forbids the no-pack paths gets the packed one.
    if (!blocking && direct && !swapped && g.m.size >= 1 && g.n.size >= 1 && g.k.size >= 1 && g.batch.size >= 1 &&
        double(g.m.size) * double(g.n.size) * double(g.k.size) <= kTinyMacs &&
        g.k.size <= default_blocking(real, cache.host().has_avx512).kc)
      return GettMode::tiny;
    // A k-major A (rows not contiguous in A: a row-major i,k) and a k-major B with fewer columns than A has rows:
    // C^T = B^T A^T packs the smaller operand as A. k keeps the original order (`swapped`), so the bits are the
    // unswapped problem's. Not when C's m axes are contiguous and its n axes are not: C^T's rows would not be
    // contiguous, and every tile would go through the tile buffer and be scattered element by element (Gett::tile).
    // Both operands are transposed in registers either way (GettPack.h), so the swap saves little: the
    // einsum-benchmark MPS's 19·P x 19 by 19 x 19 steps and the matrix chain's 400 x 400 by 400 x 21 ran 25% and
    // 10% faster unswapped. The transposed problem (m < n, not elementwise, no lane axis) takes neither transposed
    // branch again: its set-up is a GETT in ws.t.
    if (!blocking && !swapped && g.n.size < g.m.size && !unit_run(g.m.a, 0, g.m.size) &&
        unit_run(g.k.a, 0, g.k.size) && unit_run(g.k.b, 0, g.k.size) &&
        (unit_run(g.n.c, 0, g.n.size) || !unit_run(g.m.c, 0, g.m.size))) {
      transpose_into(ws.q, p);
      const GettMode inner = set_up_gett(ws, ws.t, ws.q, cache, blocking, scratch, direct, true, tuning);
      EIN_ASSERT(inner == GettMode::gett, "the swapped GETT set itself up as a GETT");
      return GettMode::transposed;
    }
    // C's contiguous axis is an n axis of B's, not an m axis (j,i->ij, an outer product written transposed): every
    // tile of C would be stored one element per cache line. C^T = B^T A^T stores columns of C^T contiguously; with k
    // within one KC block and in the original order (`swapped`), its bits are the packed path's (256^2 outer
    // product: 58 us -> 8 us).
    if (!blocking && !swapped && g.m.size >= 8 && g.n.size >= 8 && !unit_run(g.m.c, 0, g.m.size) &&
        unit_run(g.n.c, 0, g.n.size) && g.k.size <= default_blocking(real, cache.host().has_avx512).kc) {
      transpose_into(ws.q, p);
      if (set_up_gett(ws, ws.t, ws.q, cache, blocking, scratch, direct, true, tuning) == GettMode::gett)
        return GettMode::transposed;
    }
  }
  // A B not contiguous along k packs its slivers column by column (GettLoops.h: pack_b_sliver): columns neighbours in
  // B make each k step of a sliver one run of nr elements, where C's order read one element per cache line
  // (aebf,dfce->abcd at 32^6, docs/performance.md). Which tile holds a column never changes its bits.
  if (!unit_run(g.k.b, 0, g.k.size) && columns_by_b(g.n, p.n))
    fuse(g.n, p.n, &Axis::stride_b, &Axis::stride_c, kNeedB | kNeedC, ws.fuse);
  set_up_packed(g, cache, blocking, tuning);
  return GettMode::gett;
}

}  // namespace

// The packed path for g's fused tables: the tile with the least padded work (rows rounded up to MR, columns to NR),
// weighted by its throughput, among `tuning`'s candidates (the tile in force first), its kernel, the blocking
// (`tuning`'s unless explicit: KC the model's, MC and NC in force) and the tables the loops derive.
template <typename T>
void set_up_packed(Gett<T>& g, KernelCache& cache, const GettBlocking* blocking, const GemmTuning& tuning) {
  using R = typename real_of<T>::type;
  const DType real = dtype_v<R>;
  const double rows = double(g.m.size * Gett<T>::cf), cols = double(g.n.size);
  MicroKernelSpec spec;
  spec.mr = 0;
  double best = 0;
  for (const MicroKernelChoice& choice : tuning.candidates(real, cache.host().has_avx512)) {
    const MicroKernelSpec& s = choice.spec;
    double cost = std::ceil(rows / s.mr) * s.mr * std::ceil(cols / s.nr) * s.nr / choice.efficiency;
    if (spec.mr == 0 || cost < best) spec = s, best = cost;
  }
  g.kernel = cache.micro_kernel(spec);  // may throw: before anything is written
  GettBlocking block = blocking ? *blocking : tuning.blocking(real, cache.host().has_avx512);
  g.mr = spec.mr;
  g.nr = spec.nr;
  g.mrc = spec.mr / Gett<T>::cf;
  g.kc_e = std::max<int64_t>(1, block.kc / Gett<T>::cf);
  g.mc_e = std::max<int64_t>(1, block.mc / spec.mr) * g.mrc;
  g.nc = std::max<int64_t>(1, block.nc / spec.nr) * spec.nr;
  g.cn_real.assign(static_cast<size_t>(g.n.size + g.nr), 0);
  for (int64_t j = 0; j < g.n.size; ++j) g.cn_real[j] = g.n.c[j] * Gett<T>::cf;
  g.b_k_unit = unit_run(g.k.b, 0, g.k.size);
  g.a_k_unit = unit_run(g.k.a, 0, g.k.size);
  g.pack_isa = pack_isa();
  // A gathered but with a unit-stride k axis, and at most one MC block of rows: packed whole (GettLoops.h:
  // pack_a_whole) within the A block's budget of reals (the whole of A instead of one KC block of it).
  if constexpr (!is_complex_v<T>) {
    const int64_t slivers = (g.m.size + g.mrc - 1) / g.mrc;
    if (!g.a_k_unit && !unit_run(g.m.a, 0, g.m.size) && slivers * g.mrc <= g.mc_e &&
        slivers * g.mr * g.k.size <= g.mc_e * g.kc_e)
      (void)unit_k_axis(g.k.a, g.a_k_step, g.a_k_run);
  }
}

template <typename T>
void set_up(GettSetup<T>& ws, const ContractionProblem& p, KernelCache& cache, const GettBlocking* blocking,
            ScratchAllocator& scratch, bool direct, const GemmTuning& tuning) {
  ws.accumulate = p.accumulate;
  ws.mode = set_up_gett(ws, ws.g, p, cache, blocking, scratch, direct, false, tuning);
}

#define EINSTAGE_GETT_SETUP(T)                                                                                    \
  template void set_up_packed<T>(Gett<T>&, KernelCache&, const GettBlocking*, const GemmTuning&);                 \
  template void set_up<T>(GettSetup<T>&, const ContractionProblem&, KernelCache&, const GettBlocking*,            \
                          ScratchAllocator&, bool, const GemmTuning&);
EINSTAGE_GETT_SETUP(float)
EINSTAGE_GETT_SETUP(double)
EINSTAGE_GETT_SETUP(c64)
EINSTAGE_GETT_SETUP(c128)
#undef EINSTAGE_GETT_SETUP

}  // namespace gett_detail

using namespace gett_detail;

bool runs_tiny(const ContractionProblem& p, KernelCache& cache) {
  auto tiny = [&](auto zero) {
    using T = decltype(zero);
    GettSetup<T> ws;
    set_up(ws, p, cache, nullptr, ScratchAllocator::process_default(), true, GemmTuning::model());
    return ws.mode == GettMode::tiny;
  };
  if (p.dtype == DType::f32) return tiny(float{});
  if (p.dtype == DType::f64) return tiny(double{});
  return false;
}

}  // namespace einstage
