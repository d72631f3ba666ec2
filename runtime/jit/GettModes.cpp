// Which mode contract_jit runs a problem in (runtime/jit/Gett.h): the shape predicates of the elementwise, dots,
// outer and axpy modes, the direct path's choice of tile and k geometry, the shape-specialised schedule of a direct
// problem (direct_schedule) and the public runs_as_* questions. Set-up and loops are GettSetup.cpp's and GettRun.cpp's.
#include "runtime/jit/GettSetup.h"

#include "ir/Error.h"
#include "runtime/jit/Blocking.h"
#include "runtime/kernels/HostIsa.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

namespace einstage {
namespace gett_detail {

namespace {

// Direct (no-pack) mode for small problems: packing both panels costs about as much as the product when A fits in L1
// and the problem is a few hundred thousand multiply-adds (64^3, 8^6, 16x16). The packed path amortises packing over
// MC x NC blocks; the direct kernel re-reads A from L1 for every column sliver instead, which is free while A stays
// there.
bool use_direct(const Fused& m, const Fused& n, const Fused& k, size_t elt) {
  const double a_bytes = double(m.size) * double(k.size) * double(elt);
  // Fewer than 8 columns (matrix-vector shaped): one column sliver of an 8-column tile, or a few of a narrow tile,
  // reads A about once in place; packing would read it, write it and read it again, for at most 7 uses per element.
  if (n.size < 8) return true;
  // Fewer than 8 rows (the transposed shape, e.g. a vector times a matrix): one row tile reads B once in place.
  if (m.size < 8) return true;
  // A few k steps (an outer product is k = 1): nothing to amortise packing over, whatever m and n are.
  // Otherwise: A within L1 (Blocking.h: direct_a_limit) and little work per entry.
  const double macs = double(m.size) * double(n.size) * double(k.size);
  return a_bytes <= double(direct_a_limit(host_cache_info())) && (macs <= 96.0 * 96 * 96 || k.size <= 8);
}

// The two-level k geometry of a direct kernel (MicroKernel.h: DirectKernelFn) if the fused k offsets of A and B are
// p -> (p % inner) * s1 + (p / inner) * s2 for some inner dividing K (any one or two k axes, or nested ones).
bool k_levels(const Fused& k, int64_t& inner, int64_t geometry[6]) {
  const int64_t K = k.size;
  if (K <= 1) {
    inner = std::max<int64_t>(K, 1);
    geometry[0] = 1, geometry[1] = geometry[2] = geometry[3] = geometry[4] = 0;
    return true;
  }
  if (k.a[0] != 0 || k.b[0] != 0) return false;
  const int64_t sa = k.a[1], sb = k.b[1];
  int64_t n1 = 1;
  while (n1 < K && k.a[n1] == n1 * sa && k.b[n1] == n1 * sb) ++n1;
  if (K % n1 != 0) return false;
  const int64_t oa = n1 < K ? k.a[n1] : 0, ob = n1 < K ? k.b[n1] : 0;
  for (int64_t p = 0; p < K; ++p)
    if (k.a[p] != (p % n1) * sa + (p / n1) * oa || k.b[p] != (p % n1) * sb + (p / n1) * ob) return false;
  inner = n1;
  geometry[0] = K / n1, geometry[1] = sa, geometry[2] = sb, geometry[3] = oa, geometry[4] = ob;
  return true;
}

// The A and C distances between the row vectors of every mr-row tile when each tile's rows are contiguous, in A and
// in C, in runs of `lanes` rows that start a fixed distance apart (`lanes` where the tile is contiguous); {0, 0} when
// some tile is not like that.
struct VectorStrides {
  int64_t a = 0, c = 0;
};
VectorStrides row_vector_strides(const Fused& m, int64_t mr, int64_t lanes) {
  int64_t sa = 0, sc = 0;
  for (int64_t i0 = 0; i0 < m.size; i0 += mr) {
    const int64_t rows = std::min(mr, m.size - i0);
    for (int64_t v = 0; v * lanes < rows; ++v) {
      const int64_t r0 = i0 + v * lanes, run = std::min(lanes, rows - v * lanes);
      if (!unit_run(m.a, r0, run) || !unit_run(m.c, r0, run)) return {};
      if (v == 1 && sa == 0 && sc == 0) sa = m.a[r0] - m.a[i0], sc = m.c[r0] - m.c[i0];
      if (v >= 1 && (m.a[r0] - m.a[i0] != v * sa || m.c[r0] - m.c[i0] != v * sc)) return {};
    }
  }
  if (sa == 0 && sc == 0) return {lanes, lanes};  // one-vector tiles: any distance serves
  // A zero distance would make two vectors share rows (a broadcast m axis): the kernels would store them twice.
  if (sa == 0 || sc == 0) return {};
  return {sa, sc};
}

// The A distance between consecutive rows of every `lanes`-row tile when each tile's rows are contiguous in C and
// that far apart in A, the same distance throughout and not 1 (a k-major A); 0 otherwise.
int64_t kmajor_row_stride(const Fused& m, int64_t lanes) {
  int64_t stride = 0;
  for (int64_t i0 = 0; i0 < m.size; i0 += lanes) {
    const int64_t rows = std::min(lanes, m.size - i0);
    if (!unit_run(m.c, i0, rows)) return 0;
    if (rows > 1 && stride == 0) stride = m.a[i0 + 1] - m.a[i0];
    for (int64_t r = 1; r < rows; ++r)
      if (m.a[i0 + r] - m.a[i0] != r * stride) return 0;
  }
  return stride == 1 ? 0 : stride;
}

}  // namespace

// direct_kernel_candidates (they depend on the dtype and vector width only), made once: every set-up asks. Never
// destroyed: a thread may still be setting up a contraction while another calls exit(), and a table freed by the exit
// handlers under it crashed that thread (tests/runtime test_context's exit test).
const std::vector<MicroKernelChoice>& direct_candidates(DType real, bool avx512) {
  static const auto& table = *new std::array<std::vector<MicroKernelChoice>, 4>([] {
    std::array<std::vector<MicroKernelChoice>, 4> t;
    for (int i = 0; i < 4; ++i) t[i] = direct_kernel_candidates((i & 1) ? DType::f64 : DType::f32, (i & 2) != 0);
    return t;
  }());
  EIN_ASSERT(real == DType::f32 || real == DType::f64, "GETT tiles are f32 or f64");
  return table[(real == DType::f64 ? 1 : 0) + (avx512 ? 2 : 0)];
}

// Whether the direct path orders g's columns (fused from `n_axes` in C's order) by B's strides instead: when
// neighbouring columns are not neighbours in B but some n axis is contiguous in B, a k step's nr broadcasts then
// come from one cache line instead of nr, and a column sliver reads a few lines of B instead of a share of every line
// (aebf,dfce->abcd at 8^6, whose columns c, d are 64 apart in B in C's order: 6.0 -> 5.5 us a call). The packed path
// asks the same for a B not contiguous along k (GettSetup.cpp): its B slivers are then packed a run of nr columns per
// k step instead of an element per cache line (aebf,dfce->abcd at 32^6). Tiles are independent and each sums k in
// order, so the bits do not depend on the columns' order.
bool columns_by_b(const Fused& n, const std::vector<Axis>& n_axes) {
  if (n.size < 2 || n.b[1] - n.b[0] == 1) return false;
  return std::any_of(n_axes.begin(), n_axes.end(),
                     [](const Axis& ax) { return ax.extent > 1 && std::abs(ax.stride_b) == 1; });
}

// Picks the direct tile with the least padded work among those whose every row tile is contiguous in C and
// contiguous in A (or, for split-row tiles, in runs of one vector a fixed distance apart) and sets g up for it (tile,
// k geometry, column order and C column offsets); false when the problem cannot run direct. `n_axes` are the axes
// g.n was fused from, `scratch` fuse()'s temporaries.
template <typename T>
bool plan_direct(Gett<T>& g, DType real, bool avx512, MicroKernelSpec& tile, const std::vector<Axis>& n_axes,
                 FuseScratch& scratch) {
  if (!use_direct(g.m, g.n, g.k, sizeof(typename Gett<T>::R))) return false;
  const MicroKernelSpec* best = nullptr;
  double best_cost = 0;
  VectorStrides best_strides;
  const std::vector<MicroKernelChoice>& candidates = direct_candidates(real, avx512);
  // Tiles share a few row counts: scan the row tables once per distinct mr (this runs on every call), and not at all
  // when m is contiguous in A and C throughout (the common case).
  const bool all_unit = unit_run(g.m.a, 0, g.m.size) && unit_run(g.m.c, 0, g.m.size);
  std::pair<int64_t, VectorStrides> seen[8];  // (mr, vector distances in A and C)
  int n_seen = 0;
  // k-major tiles (MicroKernel.h: kmajor_a) need k contiguous in A in groups of lanes, at least 8 columns and A rows
  // not contiguous; their "vector stride" is the A distance between a tile's rows.
  const bool kmajor = !all_unit && g.n.size >= 8 && k_levels(g.k, g.k_inner, g.k_geometry) && g.k_geometry[1] == 1;
  for (const MicroKernelChoice& choice : candidates) {
    const MicroKernelSpec& s = choice.spec;
    if (s.nr > 32 || (s.kmajor_a && !(kmajor && g.k_inner % s.lanes == 0))) continue;
    VectorStrides vs{-1, -1};
    if (s.kmajor_a) vs = {kmajor_row_stride(g.m, s.lanes), s.lanes};
    else if (all_unit) vs = {s.lanes, s.lanes};
    for (int i = 0; vs.a < 0 && i < n_seen; ++i)
      if (seen[i].first == s.mr) vs = seen[i].second;
    if (vs.a < 0) {
      vs = row_vector_strides(g.m, s.mr, s.lanes);
      if (n_seen < 8) seen[n_seen++] = {s.mr, vs};
    }
    if (vs.a == 0) continue;
    // Each tile reads the distances it was made for; where a simpler one serves, it wins (fewer registers).
    if (vs.c != s.lanes && !s.split_c) continue;                      // only split_c kernels store at v * distance
    if (vs.c == s.lanes && s.split_c) continue;
    if (vs.a != s.lanes && !s.split_rows && !s.kmajor_a) continue;  // the contiguous kernel reads v * lanes
    if (vs.a == s.lanes && s.split_rows && !s.split_c) continue;    // the plain kernel serves
    double cost = std::ceil(double(g.m.size) / s.mr) * s.mr * std::ceil(double(g.n.size) / s.nr) * s.nr / choice.efficiency;
    // Under 8 columns a step is bound by reading A, once per column sliver: fewest slivers first, then least work.
    if (g.n.size < 8) cost += std::ceil(double(g.n.size) / s.nr) * 1e18;
    if (!best || cost < best_cost) best = &s, best_cost = cost, best_strides = vs;
  }
  if (!best || !k_levels(g.k, g.k_inner, g.k_geometry)) return false;
  g.k_geometry[5] = best_strides.a;
  g.k_geometry[6] = best_strides.c;
  tile = *best;
  g.mr = g.mrc = best->mr;
  g.nr = best->nr;
  if (columns_by_b(g.n, n_axes)) fuse(g.n, n_axes, &Axis::stride_b, &Axis::stride_c, kNeedB | kNeedC, scratch);
  g.cn_real.assign(static_cast<size_t>(g.n.size + g.nr), 0);
  for (int64_t j = 0; j < g.n.size; ++j) g.cn_real[j] = g.n.c[j];
  return true;
}

// A batch axis with unit stride in A, B and C (the lane-kernel case), or p.batch.end().
std::vector<Axis>::const_iterator lane_axis(const ContractionProblem& p) {
  return std::find_if(p.batch.begin(), p.batch.end(), [](const Axis& ax) {
    return ax.extent > 1 && ax.stride_a == 1 && ax.stride_b == 1 && ax.stride_c == 1;
  });
}

// A problem without a contracted axis (k = 1) whose GEMM per batch entry would be mostly padding or per-tile calls
// (fewer than 8 rows or columns, or under 64 x 64 outputs) is an elementwise product with broadcasting: ij,ij->ij,
// or a batch of small outer products (gm_queen5_5_3 has a 3 x 3 x 1 step with 4.8 million batch entries and
// 1 x 4.8e6 x 1 steps, which cost ~0.3 us per entry or per 8 columns as GEMMs).
bool elementwise_shaped(const Fused& m, const Fused& n, const Fused& k) {
  return k.size == 1 && (std::min(m.size, n.size) < 8 || m.size * n.size < 64 * 64);
}

// The vector width GettDots.h runs at on this CPU: 2 AVX-512, 1 AVX2 with FMA, 0 neither (no dots mode).
int dots_isa() {
  const kernels::HostIsa& isa = kernels::host_isa();
  return isa.avx512f ? 2 : isa.avx2 && isa.fma ? 1 : 0;
}

// A matrix-vector product whose matrix and vector are both contiguous along k (one row or one column, at least 8 of
// the other, k at least 16, no batch), on a CPU that runs GettDots.h: it runs as dot products (mode dots), neither
// on the direct or packed kernels nor specialised (schedule_direct), so a step keeps its bits across calls. So does
// a product of a few such vectors (2 to kMaxDotVectors rows or columns, at least 8 of the other, k at least 128):
// both operands k-major (C = Uᵀ X with X skinny, the svd rule's products), which the GEMM paths pack the slow way
// (a transpose of the large operand for a few uses of each element), while dot products read it once in place.
bool dots_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch) {
  const int64_t vectors = std::min(m.size, n.size), columns = std::max(m.size, n.size);
  const bool few = vectors == 1 ? k.size >= 16 : vectors <= kMaxDotVectors && k.size >= 128;
  return vectors >= 1 && columns >= 8 && few && batch.size == 1 && unit_run(k.a, 0, k.size) &&
         unit_run(k.b, 0, k.size) && dots_isa() != 0;
}

// A large outer product (GettOuter.h): no contracted axis, no batch, C overwritten, A's and C's rows contiguous, not
// elementwise-shaped (at least 8 rows and columns) and C at least L2 / kStreamDivisor bytes, on a CPU with AVX2 and
// FMA. It runs in mode outer (streaming stores when the problem's stream_c says so, ordinary ones otherwise), not
// specialised (schedule_direct), so a step keeps one path; the bits are the direct kernels' either way.
bool outer_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch, bool accumulate, size_t elt) {
  return k.size == 1 && batch.size == 1 && !accumulate && !elementwise_shaped(m, n, k) &&
         double(m.size) * double(n.size) * double(elt) >= double(host_cache_info().l2 / kStreamDivisor) &&
         unit_run(m.a, 0, m.size) && unit_run(m.c, 0, m.size) && dots_isa() != 0;
}

// A matrix times one vector whose matrix rows are contiguous (A's and C's m runs unit, one column, no batch: ij,j->i
// on column-major operands), at least 64 rows and 16 k steps, on a CPU that runs GettAxpy.h: it runs in mode axpy,
// not on the direct kernels nor specialised (schedule_direct), so a step keeps one path; the bits are the direct
// kernels' either way (one fma chain per row over k in the fused order).
bool axpy_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch) {
  return n.size == 1 && batch.size == 1 && m.size >= 64 && k.size >= 16 && unit_run(m.a, 0, m.size) &&
         unit_run(m.c, 0, m.size) && dots_isa() != 0;
}

namespace {

template <typename T>
bool schedule_direct(const ContractionProblem& p, bool avx512, DirectSchedule& out) {
  Gett<T> g;
  g.m = fuse(p.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC);
  g.n = fuse(p.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC);
  g.k = fuse(p.k, &Axis::stride_b, &Axis::stride_a, kNeedA | kNeedB);
  if (lane_axis(p) != p.batch.end() || g.m.size == 0 || g.n.size == 0 || g.k.size == 0 ||
      elementwise_shaped(g.m, g.n, g.k))
    return false;
  Fused batch = fuse(p.batch, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC);
  if (dots_shaped(g.m, g.n, g.k, batch)) return false;  // GettMode::dots runs it
  if (outer_shaped(g.m, g.n, g.k, batch, p.accumulate, sizeof(T))) return false;  // GettMode::outer runs it
  if (axpy_shaped(g.m, g.n, g.k, batch)) return false;  // GettMode::axpy runs it
  MicroKernelSpec tile;
  FuseScratch scratch;
  if (!plan_direct(g, dtype_v<T>, avx512, tile, p.n, scratch)) return false;
  // A specialised kernel inlines one call per tile: worth it for small steps, where per-call overhead is the cost.
  // An outer product takes the direct path at any m x n (k <= 8); 4096^2 would be ~87,000 inlined tiles (minutes of
  // codegen and gigabytes of IR for no gain), so large steps stay on the generic direct kernel.
  const int64_t tiles = (g.m.size + g.mr - 1) / g.mr * ((g.n.size + g.nr - 1) / g.nr);
  if (tiles > kMaxSpecialisedTiles) return false;
  SpecialisedKernelSpec& spec = out.kernel;
  spec.tile = tile;
  spec.k_inner = g.k_inner;
  std::copy(std::begin(g.k_geometry), std::end(g.k_geometry), spec.k_geometry);
  spec.accumulate = p.accumulate;
  spec.col_off = g.cn_real;
  spec.tiles.clear();
  for (int64_t j0 = 0; j0 < g.n.size; j0 += g.nr) {  // gemm_direct's order
    const int64_t cols = std::min(g.nr, g.n.size - j0);
    std::vector<int64_t> b_coff(static_cast<size_t>(g.nr));
    for (int64_t j = 0; j < g.nr; ++j) b_coff[j] = g.n.b[j0 + std::min(j, cols - 1)];
    for (int64_t i0 = 0; i0 < g.m.size; i0 += g.mr)
      spec.tiles.push_back({g.m.a[i0], g.m.c[i0], j0, std::min(g.mr, g.m.size - i0), cols, b_coff});
  }
  out.batch_a = batch.a, out.batch_b = batch.b, out.batch_c = batch.c;
  return true;
}

// p's four axis groups fused as set_up fuses them, for the mode predicates below.
struct FusedGroups {
  Fused m, n, k, batch;
  explicit FusedGroups(const ContractionProblem& p)
      : m(fuse(p.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC)),
        n(fuse(p.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC)),
        k(fuse(p.k, &Axis::stride_b, &Axis::stride_a, kNeedA | kNeedB)),
        batch(fuse(p.batch, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC)) {}
};

}  // namespace
}  // namespace gett_detail

using namespace gett_detail;

bool runs_as_dots(const ContractionProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64) return false;
  const FusedGroups f(p);
  return !elementwise_shaped(f.m, f.n, f.k) && lane_axis(p) == p.batch.end() && dots_shaped(f.m, f.n, f.k, f.batch);
}

bool runs_as_axpy(const ContractionProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64) return false;
  const FusedGroups f(p);
  return !elementwise_shaped(f.m, f.n, f.k) && lane_axis(p) == p.batch.end() && !dots_shaped(f.m, f.n, f.k, f.batch) &&
         axpy_shaped(f.m, f.n, f.k, f.batch);
}

bool runs_as_streamed_outer(const ContractionProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64) return false;
  const FusedGroups f(p);
  return lane_axis(p) == p.batch.end() && outer_shaped(f.m, f.n, f.k, f.batch, p.accumulate, size_of(p.dtype));
}

bool direct_schedule(const ContractionProblem& p, bool avx512, DirectSchedule& out) {
  switch (p.dtype) {
    case DType::f32: return schedule_direct<float>(p, avx512, out);
    case DType::f64: return schedule_direct<double>(p, avx512, out);
    default: return false;
  }
}

namespace gett_detail {
template bool plan_direct<float>(Gett<float>&, DType, bool, MicroKernelSpec&, const std::vector<Axis>&, FuseScratch&);
template bool plan_direct<double>(Gett<double>&, DType, bool, MicroKernelSpec&, const std::vector<Axis>&,
                                  FuseScratch&);
}  // namespace gett_detail

}  // namespace einstage
