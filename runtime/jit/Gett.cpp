#include "runtime/jit/Gett.h"

#include "runtime/jit/GettAxpy.h"
#include "runtime/jit/GettDots.h"
#include "runtime/jit/GettLoops.h"
#include "runtime/jit/GettOuter.h"
#include "runtime/kernels/HostIsa.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/Contract.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Tuning.h"
#include "runtime/kernels/BlockProduct.h"
#include "runtime/kernels/Strided.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <vector>

namespace einstage {

GettBlocking default_blocking(DType real_dtype, bool avx512) {
  // Blocking.h: the B sliver (NR x KC) in L1, the packed A block (MC x KC) in L2, the B panel (KC x NC) in L3, for
  // the default tile of this vector width on this host's caches.
  // KC is the model tile's whatever tile is in force (it orders the additions); MC and NC are the tuning's when it
  // serves this vector width (Tuning.h), else the model's. Made once per process: every contraction asks.
  static const std::array<GettBlocking, 4> table = [] {
    std::array<GettBlocking, 4> t;
    const KernelTuning& tuned = process_tuning().params;
    for (int i = 0; i < 4; ++i) {
      const DType real = i & 1 ? DType::f64 : DType::f32;
      const bool wide = (i & 2) != 0;
      const KernelTuning params = tuned.avx512 == wide ? tuned : model_tuning(wide, host_cache_info());
      t[i] = {params.of(real).mc, model_kc(real, wide, host_cache_info()), params.of(real).nc};
    }
    return t;
  }();
  EIN_ASSERT(real_dtype == DType::f32 || real_dtype == DType::f64, "GETT blocks are for real dtypes");
  return table[(real_dtype == DType::f64 ? 1 : 0) + (avx512 ? 2 : 0)];
}

namespace {

using namespace gett_detail;

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

// Problems up to this many multiply-adds per batch entry that no direct kernel reads run as scalar loops
// (GettLoops.h: tiny_run) instead of packed: packing both panels, padding to a tile and the pool calls cost more there.
constexpr double kTinyMacs = 256;

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

// micro_kernel_candidates / direct_kernel_candidates (they depend on the dtype and vector width only), made once:
// run_gett asks on every call. Never destroyed: a thread may still be setting up a contraction while another calls
// exit(), and a table freed by the exit handlers under it crashed that thread (tests/runtime test_context's exit test).
const std::vector<MicroKernelChoice>& cached_candidates(DType real, bool avx512, bool direct) {
  static const auto& table = *new std::array<std::vector<MicroKernelChoice>, 8>([] {
    std::array<std::vector<MicroKernelChoice>, 8> t;
    for (int i = 0; i < 8; ++i) {
      const DType dtype = (i & 1) ? DType::f64 : DType::f32;
      const bool wide = (i & 2) != 0;
      t[i] = (i & 4) ? direct_kernel_candidates(dtype, wide) : micro_kernel_candidates(dtype, wide);
    }
    return t;
  }());
  EIN_ASSERT(real == DType::f32 || real == DType::f64, "GETT tiles are f32 or f64");
  return table[(real == DType::f64 ? 1 : 0) + (avx512 ? 2 : 0) + (direct ? 4 : 0)];
}

// Picks the direct tile with the least padded work among those whose every row tile is contiguous in C and
// contiguous in A (or, for split-row tiles, in runs of one vector a fixed distance apart) and sets g up for it (tile,
// k geometry, C column offsets); false when the problem cannot run direct.
template <typename T>
bool plan_direct(Gett<T>& g, DType real, bool avx512, MicroKernelSpec& tile) {
  if (!use_direct(g.m, g.n, g.k, sizeof(typename Gett<T>::R))) return false;
  const MicroKernelSpec* best = nullptr;
  double best_cost = 0;
  VectorStrides best_strides;
  const std::vector<MicroKernelChoice>& candidates = cached_candidates(real, avx512, true);
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

bool elementwise_shaped(const Fused& m, const Fused& n, const Fused& k);
bool dots_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch);
bool outer_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch, bool accumulate, size_t elt);
bool axpy_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch);

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
  if (!plan_direct(g, dtype_v<T>, avx512, tile)) return false;
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

// A problem without a contracted axis (k = 1) whose GEMM per batch entry would be mostly padding or per-tile calls
// (fewer than 8 rows or columns, or under 64 x 64 outputs) is an elementwise product with broadcasting: ij,ij->ij,
// or a batch of small outer products (gm_queen5_5_3 has a 3 x 3 x 1 step with 4.8 million batch entries and
// 1 x 4.8e6 x 1 steps, which cost ~0.3 us per entry or per 8 columns as GEMMs).
bool elementwise_shaped(const Fused& m, const Fused& n, const Fused& k) {
  return k.size == 1 && (std::min(m.size, n.size) < 8 || m.size * n.size < 64 * 64);
}

// An elementwise product over `axes` (the batch axes, then the m axes with stride 0 in B and the n axes with stride 0
// in A, without extent-1 axes): loop over them directly, innermost the axis with the smallest C stride, instead of
// building offset tables with one entry per element and running a GEMM per entry. c = a * b (or c += a * b) per
// element: the GEMM kernels' value for k = 1 (fma(a, b, 0) is a * b rounded once). order_elementwise() sorts and
// merges the axes once per problem (set-up); elementwise() runs them.
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

// How a set-up problem runs: as an elementwise product over GettSetup::axes, on GettSetup::g, or as C^T = B^T A^T
// on GettSetup::t (the problem GettSetup::q, A and B exchanged), or as dot products along a contiguous k
// (GettSetup::dots, GettDots.h), or as scalar loops over g's tables (tiny, GettLoops.h: tiny_run), or as an outer
// product written by columns (GettSetup::outer, GettOuter.h; streaming stores for a problem's stream_c), or as a
// matrix times a vector by row blocks (GettSetup::axpy, GettAxpy.h).
enum class GettMode : uint8_t { elementwise, gett, transposed, dots, tiny, outer, axpy };

// Everything contract_jit decides about one problem before it touches data: the mode, the offset tables, the tile,
// the blocking and the kernels. run_gett makes one per call in its scratch slot (ir/Scratch.h: Lease::object: the
// tables and temporaries keep their capacity between calls, so setting up a step allocates nothing once they have
// grown); a GettPlan keeps one for as long as its step's problem stays the same, so the set-up is made once. run()
// reads nothing but the data pointers of the call, so one set-up serves concurrent calls.
template <typename T>
struct GettSetup {
  GettMode mode = GettMode::gett;
  bool accumulate = false;  // elementwise (the Getts keep their own)
  Gett<T> g, t;             // the problem's GETT and, for mode transposed, C^T's
  std::vector<Axis> axes;   // elementwise: the axes to loop over; lane mode: the batch axes but the lane axis
  FuseScratch fuse;
  ContractionProblem q;     // the transposed problem
  Dots<typename real_of<T>::type> dots;  // mode dots
  Outer<typename real_of<T>::type> outer;  // mode outer
  Axpy<typename real_of<T>::type> axpy;    // mode axpy

  void run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const {
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
  size_t table_bytes() const {
    return g.table_bytes() + t.table_bytes() + axes.capacity() * sizeof(Axis) + dots.table_bytes() +
           outer.table_bytes() + axpy.table_bytes();
  }

  // Tables above this many bytes go back to malloc after a call: memory kept in a slot's object is outside the
  // allocator's byte limit, and a step that large is not dominated by its set-up (a 4.8-million-entry batch has 115 MB
  // of tables).
  static constexpr size_t kKeepBytes = size_t(1) << 18;
  void trim() {
    if (table_bytes() > kKeepBytes) g = Gett<T>(), t = Gett<T>(), axes = {}, dots = {}, outer = {}, axpy = {};
  }
};

// q = p with A and B exchanged (C^T = B^T A^T), reusing q's vectors.
void transpose_into(ContractionProblem& q, const ContractionProblem& p) {
  q = p;
  std::swap(q.a, q.b);
  std::swap(q.m, q.n);
  for (auto* group : {&q.m, &q.n, &q.k, &q.batch})
    for (Axis& ax : *group) std::swap(ax.stride_a, ax.stride_b);
}

template <typename T> void set_up_packed(Gett<T>& g, KernelCache& cache, const GettBlocking* blocking);

// Sets p up in `g` (ws.g, or ws.t for the transposed problem) and returns the mode: gett means "run g". `swapped`: p
// is the transpose of the caller's problem (the packed path's C^T = B^T A^T), whose k order it keeps.
template <typename T>
GettMode set_up_gett(GettSetup<T>& ws, Gett<T>& g, const ContractionProblem& p, KernelCache& cache,
                     const GettBlocking* blocking, ScratchAllocator& scratch, bool direct, bool swapped) {
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
    if (!blocking && direct && plan_direct(g, real, cache.host().has_avx512, tile)) {
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
      if (plan_direct(t, real, cache.host().has_avx512, tile)) {
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
    // A k-major A (rows not contiguous in A: a row-major i,k) is packed by a transpose, the packer's slow way (it
    // reads each row along k and writes each element to another cache line). When B is k-major too and has fewer
    // columns than A has rows, C^T = B^T A^T packs only the smaller operand that way and the larger one, now B with
    // contiguous k, on the packer's fast path: e.g. the einsum-benchmark matrix chain's 400 x 300 by 300 x 21 steps.
    // k keeps the original order (`swapped`), so the bits are the unswapped problem's. The transposed problem
    // (m < n, not elementwise, no lane axis) takes neither transposed branch again: its set-up is a GETT in ws.t.
    if (!blocking && !swapped && g.n.size < g.m.size && !unit_run(g.m.a, 0, g.m.size) &&
        unit_run(g.k.a, 0, g.k.size) && unit_run(g.k.b, 0, g.k.size)) {
      transpose_into(ws.q, p);
      const GettMode inner = set_up_gett(ws, ws.t, ws.q, cache, blocking, scratch, direct, true);
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
      if (set_up_gett(ws, ws.t, ws.q, cache, blocking, scratch, direct, true) == GettMode::gett)
        return GettMode::transposed;
    }
  }
  set_up_packed(g, cache, blocking);
  return GettMode::gett;
}

// The packed path for g's fused tables: the tile with the least padded work (rows rounded up to MR, columns to NR),
// weighted by its throughput, its kernel, the blocking and the tables the loops derive.
template <typename T> void set_up_packed(Gett<T>& g, KernelCache& cache, const GettBlocking* blocking) {
  using R = typename real_of<T>::type;
  const DType real = dtype_v<R>;
  const double rows = double(g.m.size * Gett<T>::cf), cols = double(g.n.size);
  MicroKernelSpec spec;
  spec.mr = 0;
  double best = 0;
  for (const MicroKernelChoice& choice : cached_candidates(real, cache.host().has_avx512, false)) {
    const MicroKernelSpec& s = choice.spec;
    double cost = std::ceil(rows / s.mr) * s.mr * std::ceil(cols / s.nr) * s.nr / choice.efficiency;
    if (spec.mr == 0 || cost < best) spec = s, best = cost;
  }
  g.kernel = cache.micro_kernel(spec);  // may throw: before anything is written
  GettBlocking block = blocking ? *blocking : default_blocking(real, cache.host().has_avx512);
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
}

template <typename T>
void set_up(GettSetup<T>& ws, const ContractionProblem& p, KernelCache& cache, const GettBlocking* blocking,
            ScratchAllocator& scratch, bool direct) {
  ws.accumulate = p.accumulate;
  ws.mode = set_up_gett(ws, ws.g, p, cache, blocking, scratch, direct, false);
}

template <typename T>
void run_gett(const ContractionProblem& p, ThreadPool* pool, KernelCache& cache, const GettBlocking* blocking,
              ScratchAllocator& scratch, bool direct) {
  ScratchAllocator::Lease lease = scratch.lease();
  GettSetup<T>& ws = lease.object<GettSetup<T>>();
  struct Trim {
    GettSetup<T>& ws;
    ~Trim() { ws.trim(); }
  } trim{ws};
  set_up(ws, p, cache, blocking, scratch, direct);
  ws.run(p.a, p.b, p.c, pool, p.stream_c);
}

}  // namespace

int gemm_row_chunks(int64_t M, int64_t tile_rows, int threads) {
  const int64_t tiles = (M + std::max<int64_t>(tile_rows, 1) - 1) / std::max<int64_t>(tile_rows, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, tiles / kMinRowTilesPerThread)));
}

namespace {
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

bool runs_tiny(const ContractionProblem& p, KernelCache& cache) {
  auto tiny = [&](auto zero) {
    using T = decltype(zero);
    GettSetup<T> ws;
    set_up(ws, p, cache, nullptr, ScratchAllocator::process_default(), true);
    return ws.mode == GettMode::tiny;
  };
  if (p.dtype == DType::f32) return tiny(float{});
  if (p.dtype == DType::f64) return tiny(double{});
  return false;
}

bool direct_schedule(const ContractionProblem& p, bool avx512, DirectSchedule& out) {
  switch (p.dtype) {
    case DType::f32: return schedule_direct<float>(p, avx512, out);
    case DType::f64: return schedule_direct<double>(p, avx512, out);
    default: return false;
  }
}

namespace {

bool same_axes(const std::vector<Axis>& x, const std::vector<Axis>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].extent != y[i].extent || x[i].stride_a != y[i].stride_a || x[i].stride_b != y[i].stride_b ||
        x[i].stride_c != y[i].stride_c)
      return false;
  return true;
}


// contract_jit without the block split: the set-up and run of p itself.
void run_unsplit(const ContractionProblem& p, ThreadPool* pool, KernelCache& kernels, const GettBlocking* blocking,
                 ScratchAllocator& buffers, bool direct);

// The blocks of a split p (kernels::block_product_in_place), each a packed GEMM reading A and B and writing C
// through the block's offset tables: the bits of the dense packed product when K fits one KC block (every C entry
// sums its nonzero terms in the dense k order, from zero, in one pass), one block after the other on `pool`.
template <typename T>
void run_blocks_in_place(const ContractionProblem& p, std::span<const kernels::BlockTables> blocks,
                         const std::function<void()>& zero_c, ThreadPool* pool, KernelCache& cache,
                         ScratchAllocator& scratch) {
  std::vector<Gett<T>> getts(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const kernels::BlockTables& x = blocks[i];
    Gett<T>& g = getts[i];
    g.scratch = &scratch;
    g.m = {static_cast<int64_t>(x.ma.size()), x.ma, {}, x.mc};
    g.n = {static_cast<int64_t>(x.nb.size()), {}, x.nb, x.nc};
    g.k = {static_cast<int64_t>(x.ka.size()), x.ka, x.kb, {}};
    g.batch = {1, {0}, {0}, {0}};
    set_up_packed(g, cache, nullptr);  // may throw: before anything is written
  }
  zero_c();
  for (const Gett<T>& g : getts) g.run(p.a, p.b, p.c, pool);
}

// contract_jit's and GettPlan::run's block split: true when p split (and ran).
bool split_in_place(const ContractionProblem& p, ThreadPool* pool, KernelCache& cache, ScratchAllocator& scratch) {
  return kernels::block_product_in_place(
      p, [&](std::span<const kernels::BlockTables> blocks, const std::function<void()>& zero_c) {
        switch (p.dtype) {
          case DType::f32: return run_blocks_in_place<float>(p, blocks, zero_c, pool, cache, scratch);
          case DType::f64: return run_blocks_in_place<double>(p, blocks, zero_c, pool, cache, scratch);
          case DType::c64: return run_blocks_in_place<c64>(p, blocks, zero_c, pool, cache, scratch);
          case DType::c128: return run_blocks_in_place<c128>(p, blocks, zero_c, pool, cache, scratch);
          case DType::i64: break;
        }
        EIN_ASSERT(false, "block products are f32, f64, c64 or c128");
      });
}

// Whether kernels::block_product_in_place may split p (it decides per call, on the operands' zeros): a product of
// at least kMinBlockProductMacs multiply-adds that overwrites C, without a batch axis. Blocks run as packed GEMMs
// through their offset tables (run_blocks_in_place), one after the other on the caller's pool.
bool may_split_blocks(const ContractionProblem& p) {
  if (p.accumulate || p.dtype == DType::i64) return false;
  double macs = 1;
  for (const auto* group : {&p.m, &p.n, &p.k})
    for (const Axis& ax : *group) macs *= double(ax.extent);
  for (const Axis& ax : p.batch)
    if (ax.extent != 1) return false;
  return macs >= kernels::kMinBlockProductMacs;
}

}  // namespace

bool same_geometry(const ContractionProblem& x, const ContractionProblem& y) {
  return x.dtype == y.dtype && x.accumulate == y.accumulate && same_axes(x.m, y.m) && same_axes(x.n, y.n) &&
         same_axes(x.k, y.k) && same_axes(x.batch, y.batch);
}

struct GettPlan::Impl {
  ContractionProblem signature;  // the problem without its pointers
  bool direct = true;
  bool may_split = false;  // kernels::block_product may split it: test each call's operands for blocks
  KernelCache* cache = nullptr;
  ScratchAllocator* scratch = nullptr;
  virtual ~Impl() = default;
  virtual void run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const = 0;
  virtual size_t table_bytes() const = 0;
};

namespace {

template <typename T>
struct TypedGettPlan final : GettPlan::Impl {
  GettSetup<T> setup;
  void run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const override {
    setup.run(a, b, c, pool, stream_c);
  }
  size_t table_bytes() const override { return setup.table_bytes(); }
};

template <typename T>
std::unique_ptr<GettPlan::Impl> make_plan(const ContractionProblem& p, KernelCache& cache, ScratchAllocator& scratch,
                                          bool direct) {
  auto plan = std::make_unique<TypedGettPlan<T>>();
  set_up(plan->setup, p, cache, nullptr, scratch, direct);
  plan->setup.fuse = FuseScratch();  // temporaries of the set-up only
  plan->setup.q = ContractionProblem();
  return plan;
}

}  // namespace

GettPlan::GettPlan(const ContractionProblem& p, KernelCache& cache, ScratchAllocator& scratch, bool direct) {
  p.check("contract");
  switch (p.dtype) {
    case DType::f32: impl_ = make_plan<float>(p, cache, scratch, direct); break;
    case DType::f64: impl_ = make_plan<double>(p, cache, scratch, direct); break;
    case DType::c64: impl_ = make_plan<c64>(p, cache, scratch, direct); break;
    case DType::c128: impl_ = make_plan<c128>(p, cache, scratch, direct); break;
    case DType::i64:
      fail(ErrorKind::unsupported, "contract: the JIT has no i64 kernel; use contract() or contract_portable()");
  }
  impl_->signature = p;
  impl_->signature.a = impl_->signature.b = nullptr;
  impl_->signature.c = nullptr;
  impl_->direct = direct;
  impl_->may_split = may_split_blocks(p);
  impl_->cache = &cache;
  impl_->scratch = &scratch;
}

GettPlan::~GettPlan() = default;

bool GettPlan::matches(const ContractionProblem& p, bool direct) const {
  return direct == impl_->direct && same_geometry(p, impl_->signature);
}

void GettPlan::run(const ContractionProblem& p, ThreadPool* pool) const {
  if (p.a == nullptr || p.b == nullptr || p.c == nullptr) p.check("contract");  // as contract_jit would refuse it
  if (impl_->may_split && split_in_place(p, pool, *impl_->cache, *impl_->scratch)) return;
  impl_->run(p.a, p.b, p.c, pool, p.stream_c);
}

size_t GettPlan::table_bytes() const { return impl_->table_bytes(); }

void contract_jit(const ContractionProblem& p, ThreadPool* pool, KernelCache* cache, const GettBlocking* blocking,
                  ScratchAllocator* scratch, bool direct) {
  p.check("contract");
  KernelCache& kernels = cache ? *cache : KernelCache::process_default();
  ScratchAllocator& buffers = scratch ? *scratch : ScratchAllocator::process_default();
  // Explicit blocking asks for the GETT itself (tests, tuning): it is never split.
  if (!blocking && may_split_blocks(p) && split_in_place(p, pool, kernels, buffers)) return;
  run_unsplit(p, pool, kernels, blocking, buffers, direct);
}

namespace {

void run_unsplit(const ContractionProblem& p, ThreadPool* pool, KernelCache& kernels, const GettBlocking* blocking,
                 ScratchAllocator& buffers, bool direct) {
  switch (p.dtype) {
    case DType::f32: return run_gett<float>(p, pool, kernels, blocking, buffers, direct);
    case DType::f64: return run_gett<double>(p, pool, kernels, blocking, buffers, direct);
    case DType::c64: return run_gett<c64>(p, pool, kernels, blocking, buffers, direct);
    case DType::c128: return run_gett<c128>(p, pool, kernels, blocking, buffers, direct);
    case DType::i64: break;
  }
  fail(ErrorKind::unsupported, "contract: the JIT has no i64 kernel; use contract() or contract_portable()");
}

}  // namespace

}  // namespace einstage
