#include "runtime/jit/Gett.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/kernels/Strided.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

namespace einstage {

GettBlocking default_blocking(DType real_dtype, bool avx512) {
  // Blocking.h: the B sliver (NR x KC) in L1, the packed A block (MC x KC) in L2, the B panel (KC x NC) in L3, for
  // the default tile of this vector width on this host's caches.
  const MicroKernelSpec tile = default_micro_kernel(real_dtype, avx512);
  return blocking_for(host_cache_info(), static_cast<int64_t>(size_of(real_dtype)), tile.mr, tile.nr);
}

namespace {

using Axis = ContractionProblem::Axis;

template <typename T> struct real_of { using type = T; };
template <typename R> struct real_of<std::complex<R>> { using type = R; };
template <typename T> inline constexpr bool is_complex_v = !std::is_same_v<typename real_of<T>::type, T>;

// One fused index space: offsets (elements) of each position in the tensors that carry the group.
struct Fused {
  int64_t size = 1;
  std::vector<int64_t> a, b, c;
};

// Builds the offset tables of a group (kernels::offset_table, the odometer): axes are ordered by `key` (ascending, ties by position),
// the first one varying fastest, so a unit-stride axis gives contiguous runs.
// Which tensors' tables a group needs (m: A and C, n: B and C, k: A and B, batch: all three).
enum Need : unsigned { kNeedA = 1, kNeedB = 2, kNeedC = 4 };

Fused fuse(const std::vector<Axis>& group, int64_t Axis::*key, int64_t Axis::*tie, unsigned need) {
  // Insertion sort on a few axes: no allocation beyond the tables (this runs on every call).
  std::vector<Axis> axes;
  axes.reserve(group.size());
  for (const Axis& ax : group)
    if (ax.extent != 1) axes.push_back(ax);
  auto before = [&](const Axis& x, const Axis& y) {
    auto kx = std::abs(x.*key), ky = std::abs(y.*key);
    if (kx != ky) return kx < ky;
    return std::abs(x.*tie) < std::abs(y.*tie);
  };
  for (size_t i = 1; i < axes.size(); ++i)
    for (size_t j = i; j > 0 && before(axes[j], axes[j - 1]); --j) std::swap(axes[j], axes[j - 1]);
  std::vector<int64_t> extent(axes.size()), stride(axes.size());
  Fused f;
  f.size = ContractionProblem::group_size(group, "contract: axis group");
  for (size_t i = 0; i < axes.size(); ++i) extent[i] = axes[i].extent;
  for (auto [bit, table, member] : {std::tuple{kNeedA, &f.a, &Axis::stride_a}, std::tuple{kNeedB, &f.b, &Axis::stride_b},
                                    std::tuple{kNeedC, &f.c, &Axis::stride_c}}) {
    if (!(need & bit)) continue;
    for (size_t i = 0; i < axes.size(); ++i) stride[i] = axes[i].*member;
    *table = kernels::offset_table(extent, stride);
  }
  return f;
}

bool unit_run(const std::vector<int64_t>& table, int64_t begin, int64_t count) {
  const int64_t* t = table.data() + begin;
  for (int64_t r = 1; r < count; ++r)
    if (t[r] != t[0] + r) return false;
  return true;
}

// The packing buffers of one gemm: A's block and B's panel, in a lease of the context's ScratchAllocator (ir/Scratch.h)
// that keeps them for the next call, so packing does not pay for fresh pages every contraction.
enum PackBuffer : int { kPackA = 0, kPackB = 1 };

template <typename T>
struct Gett {
  using R = typename real_of<T>::type;
  static constexpr int64_t cf = is_complex_v<T> ? 2 : 1;  // reals per element

  MicroKernelFn kernel = nullptr;
  DirectKernelFn direct = nullptr;  // small problems: no packing (MicroKernel.h)
  int64_t k_inner = 0;              // direct: inner k steps and the k geometry (DirectKernelFn)
  int64_t k_geometry[6] = {};
  int64_t mr, nr;     // micro-tile in reals (rows) / columns
  int64_t mrc;        // element rows per micro-tile
  int64_t kc_e, mc_e, nc;  // blocks in elements
  Fused m, n, k, batch;
  std::vector<int64_t> cn_real;  // cf * n.c, padded with nr zeros (the kernel reads nr column offsets)
  bool b_k_unit = false;         // B's k offsets are 0,1,2,... relative to the first
  bool a_k_unit = false;
  bool accumulate = false;
  ScratchAllocator* scratch = nullptr;  // where packing buffers come from

  // Lane mode (real dtypes, a batch axis with unit stride in A, B and C): vectors run along that axis.
  LaneKernelFn lane_kernel = nullptr;
  int64_t lanes = 0, lane_extent = 0;
  std::vector<int64_t> cm_pad, cn_pad;  // m.c / n.c padded with a tile's worth of zeros

  // ---- packing ----

  // Packs element rows [i0, i0+rows) x k [p0, p0+kc) of A into a sliver of kc*cf columns of mr reals.
  void pack_a_sliver(R* dst, const T* a, int64_t i0, int64_t rows, int64_t p0, int64_t kc) const {
    const int64_t* am = m.a.data() + i0;
    const int64_t* ak = k.a.data() + p0;
    if constexpr (!is_complex_v<T>) {
      if (unit_run(m.a, i0, rows)) {
        for (int64_t p = 0; p < kc; ++p) {
          const T* src = a + am[0] + ak[p];
          R* d = dst + p * mr;
          for (int64_t r = 0; r < rows; ++r) d[r] = src[r];
          for (int64_t r = rows; r < mr; ++r) d[r] = 0;
        }
      } else if (a_k_unit) {  // k contiguous: read each row sequentially
        for (int64_t r = 0; r < rows; ++r) {
          const T* src = a + am[r] + ak[0];
          for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = src[p];
        }
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t r = rows; r < mr; ++r) dst[p * mr + r] = 0;
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          const T* col = a + ak[p];
          R* d = dst + p * mr;
          for (int64_t r = 0; r < rows; ++r) d[r] = col[am[r]];
          for (int64_t r = rows; r < mr; ++r) d[r] = 0;
        }
      }
    } else {
      // 1m: element a = x + iy becomes real column 2p = (x, y) per row and column 2p+1 = (-y, x).
      for (int64_t p = 0; p < kc; ++p) {
        const T* col = a + ak[p];
        R* d0 = dst + (2 * p) * mr;
        R* d1 = d0 + mr;
        for (int64_t r = 0; r < rows; ++r) {
          T v = col[am[r]];
          d0[2 * r] = v.real();
          d0[2 * r + 1] = v.imag();
          d1[2 * r] = -v.imag();
          d1[2 * r + 1] = v.real();
        }
        for (int64_t r = 2 * rows; r < mr; ++r) d0[r] = d1[r] = 0;
      }
    }
  }

  // Packs k [p0, p0+kc) x columns [j0, j0+cols) of B into a sliver of kc*cf rows of nr reals.
  void pack_b_sliver(R* dst, const T* b, int64_t j0, int64_t cols, int64_t p0, int64_t kc) const {
    const int64_t* bn = n.b.data() + j0;
    const int64_t* bk = k.b.data() + p0;
    if constexpr (!is_complex_v<T>) {
      if (b_k_unit) {  // k contiguous (e.g. a column-major B[k, n]): read 4 columns side by side, write rows
        int64_t j = 0;
        for (; j + 4 <= cols; j += 4) {
          const T* s0 = b + bn[j] + bk[0];
          const T* s1 = b + bn[j + 1] + bk[0];
          const T* s2 = b + bn[j + 2] + bk[0];
          const T* s3 = b + bn[j + 3] + bk[0];
          R* d = dst + j;
          for (int64_t p = 0; p < kc; ++p, d += nr) {
            d[0] = s0[p];
            d[1] = s1[p];
            d[2] = s2[p];
            d[3] = s3[p];
          }
        }
        for (; j < cols; ++j) {
          const T* src = b + bn[j] + bk[0];
          for (int64_t p = 0; p < kc; ++p) dst[p * nr + j] = src[p];
        }
      } else if (unit_run(n.b, j0, cols)) {
        for (int64_t p = 0; p < kc; ++p) {
          const T* src = b + bk[p] + bn[0];
          for (int64_t j = 0; j < cols; ++j) dst[p * nr + j] = src[j];
        }
      } else {
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < cols; ++j) dst[p * nr + j] = b[bk[p] + bn[j]];
      }
      if (cols < nr)
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = cols; j < nr; ++j) dst[p * nr + j] = 0;
    } else {
      // 1m: element b = x + iy becomes real row 2p = x and row 2p+1 = y.
      for (int64_t p = 0; p < kc; ++p) {
        R* d0 = dst + (2 * p) * nr;
        R* d1 = d0 + nr;
        for (int64_t j = 0; j < cols; ++j) {
          T v = b[bk[p] + bn[j]];
          d0[j] = v.real();
          d1[j] = v.imag();
        }
        for (int64_t j = cols; j < nr; ++j) d0[j] = d1[j] = 0;
      }
    }
  }

  // ---- the tile ----

  void tile(const R* ap, const R* bp, int64_t kc_real, T* c, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
            int64_t beta) const {
    if (unit_run(m.c, i0, rows)) {
      R* base = reinterpret_cast<R*>(c + m.c[i0]);
      call_jit(kernel, kc_real, ap, bp, base, cn_real.data() + j0, rows * cf, cols, beta);
      return;
    }
    // C's rows are not contiguous here: compute into a tile buffer (beta 0) and scatter through the offset tables.
    alignas(64) R buffer[64 * 16];
    int64_t offsets[32];
    EIN_ASSERT(mr * nr <= 64 * 16 && nr <= 32, "micro-tile larger than the scatter buffer");
    for (int64_t j = 0; j < nr; ++j) offsets[j] = j * mr;
    call_jit(kernel, kc_real, ap, bp, buffer, offsets, rows * cf, cols, int64_t(0));
    for (int64_t j = 0; j < cols; ++j) {
      const T* src = reinterpret_cast<const T*>(buffer + j * mr);
      T* col = c + n.c[j0 + j];
      const int64_t* cm = m.c.data() + i0;
      if (beta)
        for (int64_t r = 0; r < rows; ++r) col[cm[r]] += src[r];
      else
        for (int64_t r = 0; r < rows; ++r) col[cm[r]] = src[r];
    }
  }

  // ---- one batch entry ----

  void gemm(const T* a, const T* b, T* c, ThreadPool* pool, ScratchAllocator::Lease& lease) const {
    const int64_t M = m.size, N = n.size, K = k.size;
    const int64_t nc_max = std::min(nc, (N + nr - 1) / nr * nr);
    const int64_t kc_max = std::min(kc_e, K);
    const int64_t row_tiles = (M + mrc - 1) / mrc;
    const int row_chunks = gemm_row_chunks(M, mrc, pool ? pool->size() : 1);
    const int64_t chunk_tiles = (row_tiles + row_chunks - 1) / row_chunks;
    // The row chunks' A buffers, for the whole call: chunk 0 uses `lease` (which holds the B panel), the others
    // their own, so a call's scratch traffic does not depend on how its KC steps were timed.
    const int chunks = row_chunks > 1 ? pool->chunk_count(row_tiles, chunk_tiles) : 1;
    std::vector<std::optional<ScratchAllocator::Lease>> own(static_cast<size_t>(chunks));
    std::vector<R*> apack(static_cast<size_t>(chunks));
    const int64_t mc_max = std::min(mc_e, row_tiles * mrc);
    for (int ch = 0; ch < chunks; ++ch) {
      if (ch > 0) own[ch].emplace(scratch->lease());
      ScratchAllocator::Lease& l = ch == 0 ? lease : *own[ch];
      apack[ch] = reinterpret_cast<R*>(l.buffer(kPackA, sizeof(R) * size_t(mc_max / mrc * mr * kc_max * cf)));
    }
    R* bpack = reinterpret_cast<R*>(lease.buffer(kPackB, sizeof(R) * size_t(nc_max * kc_max * cf)));
    for (int64_t jc = 0; jc < N; jc += nc) {
      const int64_t ncur = std::min(nc, N - jc);
      const int64_t nslivers = (ncur + nr - 1) / nr;
      for (int64_t pc = 0; pc < K; pc += kc_e) {
        const int64_t kc = std::min(kc_e, K - pc);
        const int64_t kc_real = kc * cf;
        const int64_t beta = (pc > 0 || accumulate) ? 1 : 0;
        parallel_for(pool, nslivers, [&](int64_t s0, int64_t s1) {
          for (int64_t s = s0; s < s1; ++s) {
            int64_t j0 = jc + s * nr;
            pack_b_sliver(bpack + s * nr * kc_real, b, j0, std::min(nr, N - j0), pc, kc);
          }
        });
        if (row_chunks > 1) {
          // Each thread takes a range of whole row tiles, packs its own A blocks (in its core's L2) and runs them
          // against every column of the shared B panel: two pool barriers per KC step, not two per MC block.
          pool->parallel_for(row_tiles, [&](int64_t t0, int64_t t1) {
            int ch = 0;  // this chunk's number: chunk ch starts at ch * row_tiles / chunks (ThreadPool.h)
            while (ch + 1 < chunks && (ch + 1) * row_tiles / chunks <= t0) ++ch;
            rows_block(a, bpack, c, apack[ch], t0 * mrc, std::min(M, t1 * mrc), jc, nslivers, pc, kc, beta, nullptr);
          }, chunk_tiles);
        } else {
          rows_block(a, bpack, c, apack[0], 0, M, jc, nslivers, pc, kc, beta, pool);
        }
      }
    }
  }

  // Rows [r0, r1) (r0 a multiple of mrc) of one KC step against the packed B panel of columns [jc, jc + nslivers*nr),
  // in MC blocks of equal size (so a thread's last block is not a sliver): pack A into `apack` (MC x KC), then the
  // tiles. With a pool, each block's packing and its column slivers are split between threads (the small-M fallback
  // of gemm_row_chunks).
  void rows_block(const T* a, const R* bpanel, T* c, R* apack, int64_t r0, int64_t r1,
                  int64_t jc, int64_t nslivers, int64_t pc, int64_t kc, int64_t beta, ThreadPool* pool) const {
    const int64_t N = n.size, kc_real = kc * cf;
    const int64_t blocks = (r1 - r0 + mc_e - 1) / mc_e;
    const int64_t mc_cur = ((r1 - r0 + blocks - 1) / blocks + mrc - 1) / mrc * mrc;
    for (int64_t ic = r0; ic < r1; ic += mc_cur) {
      const int64_t mcur = std::min(mc_cur, r1 - ic);
      const int64_t mslivers = (mcur + mrc - 1) / mrc;
      parallel_for(pool, mslivers, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          int64_t i0 = ic + s * mrc;
          pack_a_sliver(apack + s * mr * kc_real, a, i0, std::min(mrc, r1 - i0), pc, kc);
        }
      });
      // Tiles are independent: split the columns (B slivers) between threads; each tile's k order is fixed.
      parallel_for(pool, nslivers, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          int64_t j0 = jc + s * nr;
          int64_t cols = std::min(nr, N - j0);
          for (int64_t t = 0; t < mslivers; ++t) {
            int64_t i0 = ic + t * mrc;
            tile(apack + t * mr * kc_real, bpanel + s * nr * kc_real, kc_real, c, i0, std::min(mrc, r1 - i0), j0, cols,
                 beta);
          }
        }
      });
    }
  }

  // ---- direct mode (small real problems): no packing, the kernel reads A and B through the offset tables ----

  void gemm_direct(const T* a, const T* b, T* c, ThreadPool* pool) const {
    const int64_t M = m.size, N = n.size;
    const int64_t nslivers = (N + nr - 1) / nr, mslivers = (M + mr - 1) / mr;
    const int64_t beta = accumulate ? 1 : 0;
    // Tiles are independent and each sums k in order, so any split gives the same bits. Work items run column
    // sliver by column sliver (tile order s * mslivers + t), so a matrix-vector step (one sliver) splits too.
    parallel_for(pool, nslivers * mslivers, [&](int64_t w0, int64_t w1) {
      int64_t b_coff[32];
      int64_t sliver = -1;
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t s = w / mslivers, t = w % mslivers;
        const int64_t j0 = s * nr, cols = std::min(nr, N - j0);
        if (s != sliver) {
          for (int64_t j = 0; j < nr; ++j) b_coff[j] = n.b[j0 + std::min(j, cols - 1)];
          sliver = s;
        }
        const int64_t i0 = t * mr;
        call_jit(direct, k_inner, a + m.a[i0], b, c + m.c[i0], cn_real.data() + j0, std::min(mr, M - i0), cols, beta,
                 k_geometry, b_coff);
      }
    });
  }

  // One batch entry; `lease` holds the packing buffers (unused on the direct path, which packs nothing).
  void entry(const T* a, const T* b, T* c, ThreadPool* pool, std::optional<ScratchAllocator::Lease>& lease) const {
    if constexpr (!is_complex_v<T>) {
      if (direct) return gemm_direct(a, b, c, pool);
    }
    if (!lease) lease.emplace(scratch->lease());
    gemm(a, b, c, pool, *lease);
  }

  // ---- lane mode: one block of `lanes` consecutive entries of the lane axis ----

  void lane_gemm(const T* a, const T* b, T* c, int64_t lane_rem, ScratchAllocator::Lease& lease) const {
    const int64_t M = m.size, N = n.size, K = k.size, V = lanes;
    const int64_t nc_max = std::min(nc, (N + nr - 1) / nr * nr);
    const int64_t mc_max = std::min(mc_e, (M + mr - 1) / mr * mr);
    const int64_t kc_max = std::min(kc_e, K);
    R* bpack = reinterpret_cast<R*>(lease.buffer(kPackB, sizeof(R) * size_t(nc_max * kc_max * V)));
    R* apack = reinterpret_cast<R*>(lease.buffer(kPackA, sizeof(R) * size_t(mc_max * kc_max * V)));
    // One vector's worth per (k, row): a fixed-size copy for the usual full block (a memcpy call per 64 bytes
    // would cost more than the copy).
    auto copy_lanes = [&](R* dst, const T* src) {
      if constexpr (is_complex_v<T>) {
        EIN_ASSERT(false, "lane kernels are real");  // complex problems never take the lane path
      } else if (lane_rem == V && V * sizeof(R) == 64) {
        std::memcpy(dst, src, 64);  // a fixed-size copy: vector moves, where the element loop stayed scalar
      } else {
        for (int64_t l = 0; l < lane_rem; ++l) dst[l] = src[l];
        for (int64_t l = lane_rem; l < V; ++l) dst[l] = 0;
      }
    };
    for (int64_t jc = 0; jc < N; jc += nc) {
      const int64_t ncur = std::min(nc, N - jc);
      for (int64_t pc = 0; pc < K; pc += kc_e) {
        const int64_t kc = std::min(kc_e, K - pc);
        const int64_t beta = (pc > 0 || accumulate) ? 1 : 0;
        for (int64_t s = 0; s * nr < ncur; ++s) {
          const int64_t j0 = jc + s * nr, cols = std::min(nr, N - j0);
          R* dst = bpack + s * nr * kc * V;
          for (int64_t p = 0; p < kc; ++p)
            for (int64_t j = 0; j < nr; ++j, dst += V) {
              if (j < cols) copy_lanes(dst, b + k.b[pc + p] + n.b[j0 + j]);
              else std::memset(dst, 0, sizeof(R) * size_t(V));
            }
        }
        for (int64_t ic = 0; ic < M; ic += mc_e) {
          const int64_t mcur = std::min(mc_e, M - ic);
          for (int64_t t = 0; t * mr < mcur; ++t) {
            const int64_t i0 = ic + t * mr, rows = std::min(mr, M - i0);
            R* dst = apack + t * mr * kc * V;
            for (int64_t p = 0; p < kc; ++p)
              for (int64_t i = 0; i < mr; ++i, dst += V) {
                if (i < rows) copy_lanes(dst, a + k.a[pc + p] + m.a[i0 + i]);
                else std::memset(dst, 0, sizeof(R) * size_t(V));
              }
          }
          for (int64_t s = 0; s * nr < ncur; ++s) {
            const int64_t j0 = jc + s * nr, cols = std::min(nr, N - j0);
            for (int64_t t = 0; t * mr < mcur; ++t) {
              const int64_t i0 = ic + t * mr, rows = std::min(mr, M - i0);
              call_jit(lane_kernel, kc, apack + t * mr * kc * V, bpack + s * nr * kc * V, c, cm_pad.data() + i0,
                       cn_pad.data() + j0, lane_rem, rows, cols, beta);
            }
          }
        }
      }
    }
  }

  void run_lanes(const T* a, const T* b, T* c, ThreadPool* pool) const {
    const int64_t blocks = (lane_extent + lanes - 1) / lanes;
    // Lane blocks and batch entries are independent: split them between threads.
    parallel_for(pool, batch.size * blocks, [&](int64_t w0, int64_t w1) {
      ScratchAllocator::Lease lease = scratch->lease();  // one per chunk: chunks run at the same time
      for (int64_t w = w0; w < w1; ++w) {
        int64_t bt = w / blocks, l0 = (w % blocks) * lanes;
        lane_gemm(a + batch.a[bt] + l0, b + batch.b[bt] + l0, c + batch.c[bt] + l0, std::min(lanes, lane_extent - l0),
                  lease);
      }
    });
  }

  void zero_fill(T* c, ThreadPool* pool) const {
    parallel_for(pool, batch.size, [&](int64_t b0, int64_t b1) {
      for (int64_t bt = b0; bt < b1; ++bt)
        for (int64_t j = 0; j < n.size; ++j)
          for (int64_t i = 0; i < m.size; ++i)
            for (int64_t l = 0; l < std::max<int64_t>(lane_extent, 1); ++l) c[batch.c[bt] + n.c[j] + m.c[i] + l] = T(0);
    });
  }

  void run(const ContractionProblem& p, ThreadPool* pool) const {
    const T* a = static_cast<const T*>(p.a);
    const T* b = static_cast<const T*>(p.b);
    T* c = static_cast<T*>(p.c);
    if (m.size == 0 || n.size == 0 || batch.size == 0 || (lane_kernel && lane_extent == 0)) return;
    if (k.size == 0) {
      if (!accumulate) zero_fill(c, pool);
      return;
    }
    const bool threaded = pool && pool->size() > 1;
    const double work = double(m.size) * double(n.size) * double(k.size);
    if (!threaded || work * std::max<int64_t>(lane_extent, 1) < kMinThreadedMacs) pool = nullptr;
    if (lane_kernel) return run_lanes(a, b, c, pool);
    if (pool && batch.size >= pool->size()) {
      // Enough batch entries: each thread runs whole entries with its own packing buffers.
      parallel_for(pool, batch.size, [&](int64_t b0, int64_t b1) {
        std::optional<ScratchAllocator::Lease> lease;  // one per chunk: chunks run at the same time
        for (int64_t bt = b0; bt < b1; ++bt) entry(a + batch.a[bt], b + batch.b[bt], c + batch.c[bt], nullptr, lease);
      });
      return;
    }
    std::optional<ScratchAllocator::Lease> lease;
    for (int64_t bt = 0; bt < batch.size; ++bt) entry(a + batch.a[bt], b + batch.b[bt], c + batch.c[bt], pool, lease);
  }
};

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

// The A distance between the row vectors of every mr-row tile when each tile's rows are contiguous in C and, in A,
// contiguous in runs of `lanes` rows that start a fixed distance apart (`lanes` when the tile is contiguous in A);
// 0 when some tile is not like that.
int64_t row_vector_stride(const Fused& m, int64_t mr, int64_t lanes) {
  int64_t stride = 0;
  for (int64_t i0 = 0; i0 < m.size; i0 += mr) {
    const int64_t rows = std::min(mr, m.size - i0);
    if (!unit_run(m.c, i0, rows)) return 0;
    for (int64_t v = 0; v * lanes < rows; ++v) {
      const int64_t r0 = i0 + v * lanes;
      if (!unit_run(m.a, r0, std::min(lanes, rows - v * lanes))) return 0;
      if (v == 1 && stride == 0) stride = m.a[r0] - m.a[i0];
      if (v >= 1 && m.a[r0] - m.a[i0] != v * stride) return 0;
    }
  }
  return stride == 0 ? lanes : stride;  // one-vector tiles: any stride serves
}

// Picks the direct tile with the least padded work among those whose every row tile is contiguous in C and
// contiguous in A (or, for split-row tiles, in runs of one vector a fixed distance apart) and sets g up for it (tile,
// k geometry, C column offsets); false when the problem cannot run direct.
template <typename T>
bool plan_direct(Gett<T>& g, DType real, bool avx512, MicroKernelSpec& tile) {
  if (!use_direct(g.m, g.n, g.k, sizeof(typename Gett<T>::R))) return false;
  const MicroKernelSpec* best = nullptr;
  double best_cost = 0;
  int64_t best_vec_stride = 0;
  std::vector<MicroKernelChoice> candidates = direct_kernel_candidates(real, avx512);
  // Tiles share a few row counts: scan the row tables once per distinct mr (this runs on every call), and not at all
  // when m is contiguous in A and C throughout (the common case).
  const bool all_unit = unit_run(g.m.a, 0, g.m.size) && unit_run(g.m.c, 0, g.m.size);
  std::pair<int64_t, int64_t> seen[8];  // (mr, vector stride)
  int n_seen = 0;
  for (const MicroKernelChoice& choice : candidates) {
    const MicroKernelSpec& s = choice.spec;
    if (s.nr > 32) continue;
    int64_t vec_stride = all_unit ? s.lanes : -1;
    for (int i = 0; vec_stride < 0 && i < n_seen; ++i)
      if (seen[i].first == s.mr) vec_stride = seen[i].second;
    if (vec_stride < 0) {
      vec_stride = row_vector_stride(g.m, s.mr, s.lanes);
      if (n_seen < 8) seen[n_seen++] = {s.mr, vec_stride};
    }
    if (vec_stride == 0) continue;
    if (vec_stride != s.lanes && !s.split_rows) continue;  // the contiguous kernel reads vector v at v * lanes
    if (vec_stride == s.lanes && s.split_rows) continue;   // the plain kernel serves (one register less)
    double cost = std::ceil(double(g.m.size) / s.mr) * s.mr * std::ceil(double(g.n.size) / s.nr) * s.nr / choice.efficiency;
    // Under 8 columns a step is bound by reading A, once per column sliver: fewest slivers first, then least work.
    if (g.n.size < 8) cost += std::ceil(double(g.n.size) / s.nr) * 1e18;
    if (!best || cost < best_cost) best = &s, best_cost = cost, best_vec_stride = vec_stride;
  }
  if (!best || !k_levels(g.k, g.k_inner, g.k_geometry)) return false;
  g.k_geometry[5] = best_vec_stride;
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

template <typename T>
bool schedule_direct(const ContractionProblem& p, bool avx512, DirectSchedule& out) {
  Gett<T> g;
  g.m = fuse(p.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC);
  g.n = fuse(p.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC);
  g.k = fuse(p.k, &Axis::stride_b, &Axis::stride_a, kNeedA | kNeedB);
  if (lane_axis(p) != p.batch.end() || g.m.size == 0 || g.n.size == 0 || g.k.size == 0 ||
      elementwise_shaped(g.m, g.n, g.k))
    return false;
  MicroKernelSpec tile;
  if (!plan_direct(g, dtype_v<T>, avx512, tile)) return false;
  // A specialised kernel inlines one call per tile: worth it for small steps, where per-call overhead is the cost.
  // An outer product takes the direct path at any m x n (k <= 8); 4096^2 would be ~87,000 inlined tiles (minutes of
  // codegen and gigabytes of IR for no gain), so large steps stay on the generic direct kernel.
  const int64_t tiles = (g.m.size + g.mr - 1) / g.mr * ((g.n.size + g.nr - 1) / g.nr);
  if (tiles > kMaxSpecialisedTiles) return false;
  Fused batch = fuse(p.batch, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC);
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

// An elementwise product over the batch axes (m axes carry stride 0 in B, n axes stride 0 in A): loop over them
// directly, innermost the axis with the smallest C stride, instead of building offset tables with one entry per
// element and running a GEMM per entry. c = a * b (or c += a * b) per element: the GEMM kernels' value for k = 1
// (fma(a, b, 0) is a * b rounded once).
template <typename T>
void elementwise(const ContractionProblem& p, const int64_t a_off, const int64_t b_off, const int64_t c_off) {
  std::vector<Axis> axes;
  for (const Axis& ax : p.batch)
    if (ax.extent != 1) axes.push_back(ax);
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
  const T* a = static_cast<const T*>(p.a) + a_off;
  const T* b = static_cast<const T*>(p.b) + b_off;
  T* c = static_cast<T*>(p.c) + c_off;
  for (const Axis& ax : axes)
    if (ax.extent == 0) return;
  const int64_t inner = axes.empty() ? 1 : axes[0].extent;
  const int64_t sa = axes.empty() ? 0 : axes[0].stride_a, sb = axes.empty() ? 0 : axes[0].stride_b,
                sc = axes.empty() ? 0 : axes[0].stride_c;
  std::vector<int64_t> index(axes.size(), 0);
  for (;;) {
    if (sa == 1 && sb == 1 && sc == 1) {  // contiguous: a loop the compiler vectorises
      if (p.accumulate)
        for (int64_t i = 0; i < inner; ++i) c[i] += a[i] * b[i];
      else
        for (int64_t i = 0; i < inner; ++i) c[i] = a[i] * b[i];
    } else if (sc == 1 && (sa == 0 || sb == 0) && (sa | sb) == 1) {  // one side broadcast: a scaled copy
      const T s = sa == 0 ? a[0] : b[0];
      const T* v = sa == 0 ? b : a;
      if (p.accumulate)
        for (int64_t i = 0; i < inner; ++i) c[i] += sa == 0 ? s * v[i] : v[i] * s;
      else
        for (int64_t i = 0; i < inner; ++i) c[i] = sa == 0 ? s * v[i] : v[i] * s;
    } else if (p.accumulate) {
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

template <typename T>
void run_gett(const ContractionProblem& p, ThreadPool* pool, KernelCache& cache, const GettBlocking* blocking,
              ScratchAllocator& scratch, bool direct) {
  using R = typename real_of<T>::type;
  Gett<T> g;
  g.scratch = &scratch;
  const DType real = dtype_v<R>;
  g.m = fuse(p.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC);
  g.n = fuse(p.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC);
  g.k = fuse(p.k, &Axis::stride_b, &Axis::stride_a, kNeedA | kNeedB);
  g.accumulate = p.accumulate;
  if (!blocking && elementwise_shaped(g.m, g.n, g.k)) {
    // m and n axes become batch axes that one operand does not carry; extent-1 k axes add nothing.
    ContractionProblem q = p;
    for (Axis ax : p.m) ax.stride_b = 0, q.batch.push_back(ax);
    for (Axis ax : p.n) ax.stride_a = 0, q.batch.push_back(ax);
    return elementwise<T>(q, 0, 0, 0);
  }
  if constexpr (!is_complex_v<T>) {
    // A batch axis with unit stride in all three tensors: run lane kernels along it (the GEMM packing would read
    // one element per cache line there). Complex stays on the 1m path.
    auto lane = lane_axis(p);
    if (lane != p.batch.end()) {
      std::vector<Axis> rest = p.batch;
      rest.erase(rest.begin() + (lane - p.batch.begin()));
      g.batch = fuse(rest, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC);
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
      g.cm_pad = g.m.c;
      g.cm_pad.resize(g.m.c.size() + size_t(g.mr), 0);
      g.cn_pad = g.n.c;
      g.cn_pad.resize(g.n.c.size() + size_t(g.nr), 0);
      return g.run(p, pool);
    }
  }
  g.batch = fuse(p.batch, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedB | kNeedC);
  if constexpr (!is_complex_v<T>) {
    MicroKernelSpec tile;
    if (!blocking && direct && plan_direct(g, real, cache.host().has_avx512, tile)) {
      g.direct = cache.direct_kernel(tile);  // may throw: before anything is written
      return g.run(p, pool);
    }
    // Fewer than 8 columns but A's rows not contiguous (a k-major matrix times a vector: ji,j->i): C^T = B^T A^T has
    // fewer than 8 rows and reads the matrix through broadcasts along its contiguous k, on the direct path.
    if (!blocking && direct && g.n.size < 8 && g.m.size >= 8) {
      ContractionProblem q = p;
      std::swap(q.a, q.b);
      std::swap(q.m, q.n);
      for (auto* group : {&q.m, &q.n, &q.k, &q.batch})
        for (Axis& ax : *group) std::swap(ax.stride_a, ax.stride_b);
      Gett<T> t;
      t.scratch = &scratch;
      t.m = fuse(q.m, &Axis::stride_c, &Axis::stride_a, kNeedA | kNeedC);
      t.n = fuse(q.n, &Axis::stride_c, &Axis::stride_b, kNeedB | kNeedC);
      // k in the original problem's order (by p's B strides, now q's A strides): the same summation order, so the
      // same bits as the packed path over one KC block.
      t.k = fuse(q.k, &Axis::stride_a, &Axis::stride_b, kNeedA | kNeedB);
      t.batch = g.batch;
      std::swap(t.batch.a, t.batch.b);
      t.accumulate = q.accumulate;
      if (plan_direct(t, real, cache.host().has_avx512, tile)) {
        t.direct = cache.direct_kernel(tile);  // may throw: before anything is written
        return t.run(q, pool);
      }
    }
  }
  // The tile with the least padded work (rows rounded up to MR, columns to NR), weighted by its throughput.
  const double rows = double(g.m.size * Gett<T>::cf), cols = double(g.n.size);
  MicroKernelSpec spec;
  spec.mr = 0;
  double best = 0;
  for (const MicroKernelChoice& choice : micro_kernel_candidates(real, cache.host().has_avx512)) {
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
  g.cn_real.resize(static_cast<size_t>(g.n.size + g.nr), 0);
  for (int64_t j = 0; j < g.n.size; ++j) g.cn_real[j] = g.n.c[j] * Gett<T>::cf;
  g.b_k_unit = unit_run(g.k.b, 0, g.k.size);
  g.a_k_unit = unit_run(g.k.a, 0, g.k.size);
  g.run(p, pool);
}

}  // namespace

int gemm_row_chunks(int64_t M, int64_t tile_rows, int threads) {
  const int64_t tiles = (M + std::max<int64_t>(tile_rows, 1) - 1) / std::max<int64_t>(tile_rows, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, tiles / kMinRowTilesPerThread)));
}

bool direct_schedule(const ContractionProblem& p, bool avx512, DirectSchedule& out) {
  switch (p.dtype) {
    case DType::f32: return schedule_direct<float>(p, avx512, out);
    case DType::f64: return schedule_direct<double>(p, avx512, out);
    default: return false;
  }
}

void contract_jit(const ContractionProblem& p, ThreadPool* pool, KernelCache* cache, const GettBlocking* blocking,
                  ScratchAllocator* scratch, bool direct) {
  p.check("contract");
  KernelCache& kernels = cache ? *cache : KernelCache::process_default();
  ScratchAllocator& buffers = scratch ? *scratch : ScratchAllocator::process_default();
  switch (p.dtype) {
    case DType::f32: return run_gett<float>(p, pool, kernels, blocking, buffers, direct);
    case DType::f64: return run_gett<double>(p, pool, kernels, blocking, buffers, direct);
    case DType::c64: return run_gett<c64>(p, pool, kernels, blocking, buffers, direct);
    case DType::c128: return run_gett<c128>(p, pool, kernels, blocking, buffers, direct);
    case DType::i64: break;
  }
  fail(ErrorKind::unsupported, "contract: the JIT has no i64 kernel; use contract() or contract_portable()");
}

}  // namespace einstage
