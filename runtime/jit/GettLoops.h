// The loops of one GETT (runtime/jit/Gett.h) for one dtype: the fused m/n/k/batch offset tables, packing of A blocks
// and B panels straight from strides (1m for complex), the BLIS macro-kernel over NC x KC x MC blocks, the direct
// (no-pack) and lane-kernel loops, and how threads split them. Internal to runtime/jit/Gett*.cpp (GettSetup.cpp chooses the
// mode, the micro-tile and the blocking and then fills a Gett<T>; GettRun.cpp runs it); nothing else includes it but
// tests/jit/test_gett.cpp, for RowClaims and BlockShare. Threads split a large packed GEMM by row tiles, each packing
// its own A blocks against one shared B panel per KC step (RowClaims); a thread out of row tiles helps with the column
// slivers of the blocks still running (BlockShare), so neither waits long at the step's end.
#pragma once

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/GettPack.h"
#include "runtime/jit/Jit.h"
#include "runtime/kernels/HostIsa.h"
#include "runtime/kernels/Strided.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

namespace einstage::gett_detail {

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

// The temporaries of fuse(), kept by the caller between calls (run_gett's scratch slot) so that fusing allocates
// nothing once they have grown: run_gett runs per step, and on small steps its set-up cost as much as the arithmetic.
struct FuseScratch {
  std::vector<Axis> axes;
  std::vector<int64_t> extent, stride;
};

inline void fuse(Fused& f, const std::vector<Axis>& group, int64_t Axis::*key, int64_t Axis::*tie, unsigned need,
                 FuseScratch& s) {
  std::vector<Axis>& axes = s.axes;
  axes.clear();
  for (const Axis& ax : group)
    if (ax.extent != 1) axes.push_back(ax);
  auto before = [&](const Axis& x, const Axis& y) {
    auto kx = std::abs(x.*key), ky = std::abs(y.*key);
    if (kx != ky) return kx < ky;
    return std::abs(x.*tie) < std::abs(y.*tie);
  };
  // Insertion sort on a few axes.
  for (size_t i = 1; i < axes.size(); ++i)
    for (size_t j = i; j > 0 && before(axes[j], axes[j - 1]); --j) std::swap(axes[j], axes[j - 1]);
  s.extent.resize(axes.size());
  s.stride.resize(axes.size());
  f.size = ContractionProblem::group_size(group, "contract: axis group");
  for (size_t i = 0; i < axes.size(); ++i) s.extent[i] = axes[i].extent;
  for (auto [bit, table, member] : {std::tuple{kNeedA, &f.a, &Axis::stride_a}, std::tuple{kNeedB, &f.b, &Axis::stride_b},
                                    std::tuple{kNeedC, &f.c, &Axis::stride_c}}) {
    if (!(need & bit)) {
      table->clear();
      continue;
    }
    for (size_t i = 0; i < axes.size(); ++i) s.stride[i] = axes[i].*member;
    kernels::offset_table(s.extent, s.stride, *table);
  }
}

inline Fused fuse(const std::vector<Axis>& group, int64_t Axis::*key, int64_t Axis::*tie, unsigned need) {
  Fused f;
  FuseScratch s;
  fuse(f, group, key, tie, need, s);
  return f;
}

// Whether rows [0, count) at `offsets` are a few runs contiguous in the source: at least 4 rows a run on average.
inline bool rows_in_runs(const int64_t* offsets, int64_t count) {
  int64_t runs = 1;
  for (int64_t r = 1; r < count; ++r) runs += offsets[r] != offsets[r - 1] + 1;
  return runs * 4 <= count;
}

inline bool unit_run(const std::vector<int64_t>& table, int64_t begin, int64_t count) {
  const int64_t* t = table.data() + begin;
  for (int64_t r = 1; r < count; ++r)
    if (t[r] != t[0] + r) return false;
  return true;
}

// Most rows (columns) of a micro-tile the transposing packers take (GettPack.h): MR and NR are at most 32 reals.
inline constexpr int64_t kMaxPackedRows = 64;

// The packing buffers of one gemm: A's block and B's panel, in a lease of the context's ScratchAllocator (ir/Scratch.h)
// that keeps them for the next call, so packing does not pay for fresh pages every contraction.
enum PackBuffer : int { kPackA = 0, kPackB = 1 };

// Mode tiny (Gett.cpp: set_up_gett): a problem of a few hundred multiply-adds that no direct kernel reads (the bond-2
// steps of a grid network have several k axes) runs as scalar loops over its offset tables instead of packing both
// panels into a tile's padding. Each output sums its k in the packed kernel's order (the k table), from zero, by
// fused multiply-adds, then is stored or added to C: what the micro-kernel does per lane (MicroKernel.cpp: k_steps,
// store), so the bits are the packed path's (k within one KC block). C[i, j] (+)= the sum over k:
template <typename T>
[[gnu::always_inline]] inline void tiny_product(const Fused& m, const Fused& n, const Fused& k, bool accumulate,
                                                const T* a, const T* b, T* c) {
  const int64_t M = m.size, N = n.size, K = k.size;
  const int64_t* ka = k.a.data();
  const int64_t* kb = k.b.data();
  for (int64_t j = 0; j < N; ++j) {
    const T* bj = b + n.b[j];
    T* cj = c + n.c[j];
    for (int64_t i = 0; i < M; ++i) {
      const T* ai = a + m.a[i];
      T acc = 0;
      for (int64_t p = 0; p < K; ++p) acc = std::fma(ai[ka[p]], bj[kb[p]], acc);
      T& out = cj[m.c[i]];
      out = accumulate ? out + acc : acc;
    }
  }
}
// With the FMA instruction inline, and through libm's fma (the same bits, slower) on a CPU without it.
inline bool host_has_fma() { return kernels::host_isa().fma; }
template <typename T>
[[gnu::target("fma")]] void tiny_product_fma(const Fused& m, const Fused& n, const Fused& k, bool accumulate,
                                             const T* a, const T* b, T* c) {
  tiny_product<T>(m, n, k, accumulate, a, b, c);
}
template <typename T>
void tiny_product_generic(const Fused& m, const Fused& n, const Fused& k, bool accumulate, const T* a, const T* b,
                          T* c) {
  tiny_product<T>(m, n, k, accumulate, a, b, c);
}
// Every batch entry of a tiny problem (real T; every extent at least 1).
template <typename T>
void tiny_run(const Fused& m, const Fused& n, const Fused& k, const Fused& batch, bool accumulate, const void* a_data,
              const void* b_data, void* c_data) {
  const T* a = static_cast<const T*>(a_data);
  const T* b = static_cast<const T*>(b_data);
  T* c = static_cast<T*>(c_data);
  const bool fma = host_has_fma();
  for (int64_t bt = 0; bt < batch.size; ++bt) {
    if (fma) tiny_product_fma<T>(m, n, k, accumulate, a + batch.a[bt], b + batch.b[bt], c + batch.c[bt]);
    else tiny_product_generic<T>(m, n, k, accumulate, a + batch.a[bt], b + batch.b[bt], c + batch.c[bt]);
  }
}

// The row tiles of one KC step of a packed GEMM shared out between its row chunks (Gett::gemm). Each chunk starts on
// its own range (chunk ch: tiles [ch * tiles / chunks, (ch + 1) * tiles / chunks), the pool's cut) and takes MC
// blocks of equal size from its front, as a static split would; a chunk whose range is done takes from the back of
// the range with the most tiles left: half of them, at most one block. So a slower core or a descheduled thread does
// not leave the other waiting at the end of the step: on the Zen 5 guest the two vCPUs ran 10-15% apart under load,
// and with the static split the faster thread waited 8-18 ms of a 2048^2 call (docs/performance.md, 2026-12-06).
// Which thread computes a tile never changes its bits: each tile sums k in one fixed order.
class RowClaims {
 public:
  RowClaims(int64_t tiles, int chunks, int64_t block_tiles)
      : tiles_(tiles), block_tiles_(std::max<int64_t>(1, block_tiles)), ranges_(size_t(std::max(chunks, 1))) {}
  // Every range back to its start (a new KC step).
  void reset() {
    const int64_t chunks = int64_t(ranges_.size());
    for (int64_t ch = 0; ch < chunks; ++ch) {
      Range& r = ranges_[size_t(ch)];
      r.lo = ch * tiles_ / chunks, r.hi = (ch + 1) * tiles_ / chunks;
      const int64_t blocks = (r.hi - r.lo + block_tiles_ - 1) / block_tiles_;
      r.block = blocks > 0 ? (r.hi - r.lo + blocks - 1) / blocks : 1;
    }
  }
  // The next tiles [t0, t1) for chunk ch; false when no range has any left.
  bool next(int ch, int64_t& t0, int64_t& t1) {
    std::lock_guard lock(mutex_);
    Range& own = ranges_[size_t(ch)];
    if (own.lo < own.hi) {
      t0 = own.lo, t1 = own.lo = std::min(own.hi, own.lo + own.block);
      return true;
    }
    Range* most = nullptr;
    for (Range& r : ranges_)
      if (r.hi - r.lo > (most ? most->hi - most->lo : 0)) most = &r;
    if (!most) return false;
    t1 = most->hi, t0 = most->hi -= std::min(most->block, (most->hi - most->lo + 1) / 2);
    return true;
  }

 private:
  struct Range {
    int64_t lo = 0, hi = 0, block = 1;
  };
  int64_t tiles_, block_tiles_;
  std::vector<Range> ranges_;
  std::mutex mutex_;
};

// The A blocks in flight in one KC step of a packed GEMM's row chunks (Gett::gemm), so that a chunk with no row tiles
// left to claim helps with the column slivers of the blocks still running instead of waiting at the step's end:
// RowClaims' last claims are whole MC blocks (a 2048^2 KC step's block is ~2.6 ms here), and whenever the two vCPUs
// ran unevenly one thread waited for most of one (docs/performance.md, 2026-12-06 10:40). A chunk publishes each
// block once it has packed it (into its own A buffer) and takes the block's column slivers from a shared counter, a
// few at a time; a helper takes them from the same counter and reads the owner's packed A. Blocks are published only
// while RowClaims has tiles left and helped only once it has none, so no A buffer is packed again while a helper
// reads it (the next KC step starts after the pool's barrier). Which thread computes a tile never changes its bits.
class BlockShare {
 public:
  static constexpr int kMaxChunks = 16;  // more chunks: not shared (Gett::chunk_rows runs its own blocks only)
  static constexpr int64_t kGrain = 2;   // column slivers per take
  // Every slot empty and no chunk running: a new KC step of `chunks` chunks whose blocks have `slivers` slivers.
  void reset(int chunks, int64_t slivers) {
    chunks_ = std::min(chunks, kMaxChunks);
    slivers_ = slivers;
    for (int ch = 0; ch < chunks_; ++ch) {
      slots_[size_t(ch)].word.store(uint64_t(slivers), std::memory_order_relaxed);  // block 0, no sliver left
      slots_[size_t(ch)].running.store(false, std::memory_order_relaxed);
    }
  }
  // Whether chunk ch has a slot (the first kMaxChunks chunks share their blocks; any others run theirs alone).
  bool has_slot(int ch) const { return ch < chunks_; }
  // Chunk ch may publish blocks (true) or has published its last one and taken all its slivers (false).
  void running(int ch, bool yes) { slots_[size_t(ch)].running.store(yes, std::memory_order_release); }
  // Chunk ch's next block, rows [r0, r1), packed in its A buffer: all its slivers to take.
  void publish(int ch, int64_t r0, int64_t r1) {
    Slot& slot = slots_[size_t(ch)];
    slot.r0.store(r0, std::memory_order_relaxed);
    slot.r1.store(r1, std::memory_order_relaxed);
    const uint64_t block = (slot.word.load(std::memory_order_relaxed) >> 32) + 1;
    slot.word.store(block << 32, std::memory_order_release);
  }
  // Slivers [s0, s1) of chunk ch's current block, rows [r0, r1); false when it has none left.
  bool take(int ch, int64_t& s0, int64_t& s1, int64_t& r0, int64_t& r1) {
    Slot& slot = slots_[size_t(ch)];
    uint64_t word = slot.word.load(std::memory_order_acquire);
    for (;;) {
      const int64_t next = int64_t(word & 0xFFFFFFFFu);
      if (next >= slivers_) return false;
      // The rows stay the block's while slivers are left: the owner publishes again only after taking the last one.
      r0 = slot.r0.load(std::memory_order_relaxed);
      r1 = slot.r1.load(std::memory_order_relaxed);
      const int64_t count = std::min(kGrain, slivers_ - next);
      if (slot.word.compare_exchange_weak(word, word + uint64_t(count), std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
        s0 = next, s1 = next + count;
        return true;
      }
    }
  }
  enum Help { kTook, kWait, kDone };
  // For chunk ch, done with its own blocks: slivers of another chunk's block (its `owner`), kTook; else kWait while
  // some other chunk still runs and may publish one, kDone when none will.
  Help try_help(int ch, int& owner, int64_t& s0, int64_t& s1, int64_t& r0, int64_t& r1) {
    bool pending = false;
    for (int o = 0; o < chunks_; ++o) {
      if (o == ch) continue;
      const bool runs = slots_[size_t(o)].running.load(std::memory_order_acquire);  // before its slot is read
      if (take(o, s0, s1, r0, r1)) return owner = o, kTook;
      pending = pending || runs;
    }
    return pending ? kWait : kDone;
  }
  // try_help until it takes (true) or is done (false), polling in between (a chunk that has claimed rows is packing
  // their A block and publishes it next).
  bool help(int ch, int& owner, int64_t& s0, int64_t& s1, int64_t& r0, int64_t& r1) {
    for (int round = 1;; ++round) {
      const Help h = try_help(ch, owner, s0, s1, r0, r1);
      if (h != kWait) return h == kTook;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (round % 64 == 0) std::this_thread::yield();
    }
  }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> word{0};  // block number << 32 | next sliver to take
    std::atomic<int64_t> r0{0}, r1{0};
    std::atomic<bool> running{false};
  };
  std::array<Slot, kMaxChunks> slots_;
  int chunks_ = 0;
  int64_t slivers_ = 0;
};

template <typename T>
struct Gett {
  using R = typename real_of<T>::type;
  static constexpr int64_t cf = is_complex_v<T> ? 2 : 1;  // reals per element

  MicroKernelFn kernel = nullptr;
  DirectKernelFn direct = nullptr;  // small problems: no packing (MicroKernel.h)
  int64_t k_inner = 0;              // direct: inner k steps and the k geometry (DirectKernelFn)
  int64_t k_geometry[kKGeometry] = {};
  int64_t mr = 0, nr = 0;  // micro-tile in reals (rows) / columns
  int64_t mrc = 0;         // element rows per micro-tile
  int64_t kc_e = 0, mc_e = 0, nc = 0;  // blocks in elements
  Fused m, n, k, batch;
  std::vector<int64_t> cn_real;  // cf * n.c, padded with nr zeros (the kernel reads nr column offsets)
  bool b_k_unit = false;         // B's k offsets are 0,1,2,... relative to the first
  bool a_k_unit = false;
  // A gathered (neither its rows nor its k contiguous) but with a unit-stride k axis (unit_k_axis: `a_k_run` long,
  // `a_k_step` k steps apart), small enough to pack whole: gemm packs all of A once, for every k, through that axis
  // (pack_a_whole) instead of per KC block one element at a time. 0: not.
  int64_t a_k_step = 0, a_k_run = 0;
  int pack_isa = 0;              // the transposing packers' body (GettPack.h)
  bool accumulate = false;
  ScratchAllocator* scratch = nullptr;  // where packing buffers come from

  // Lane mode (real dtypes, a batch axis with unit stride in A, B and C): vectors run along that axis.
  LaneKernelFn lane_kernel = nullptr;
  int64_t lanes = 0, lane_extent = 0;
  std::vector<int64_t> cm_pad, cn_pad;  // m.c / n.c padded with a tile's worth of zeros

  // Every member back to its default except the tables, which keep their capacity: run_gett reuses one Gett per
  // scratch slot (ir/Scratch.h: Lease::object), so a call allocates no tables once they have grown. A new vector
  // member belongs in this list.
  void reset() {
    Gett fresh;
    fresh.m = std::move(m), fresh.n = std::move(n), fresh.k = std::move(k), fresh.batch = std::move(batch);
    fresh.cn_real = std::move(cn_real), fresh.cm_pad = std::move(cm_pad), fresh.cn_pad = std::move(cn_pad);
    *this = std::move(fresh);
  }
  // Bytes the tables hold (their capacity).
  size_t table_bytes() const {
    size_t count = cn_real.capacity() + cm_pad.capacity() + cn_pad.capacity();
    for (const Fused* f : {&m, &n, &k, &batch}) count += f->a.capacity() + f->b.capacity() + f->c.capacity();
    return count * sizeof(int64_t);
  }

  // ---- packing ----

  // Packs element rows [i0, i0+rows) x k [p0, p0+kc) of A into a sliver of kc*cf columns of mr reals.
  void pack_a_sliver(R* dst, const T* a, int64_t i0, int64_t rows, int64_t p0, int64_t kc) const {
    const int64_t* am = m.a.data() + i0;
    const int64_t* ak = k.a.data() + p0;
    if constexpr (!is_complex_v<T>) {
      // Padding rows first, in one pass: per k step it was a memset call for a few elements.
      if (rows < mr) std::memset(dst, 0, sizeof(R) * size_t(kc * mr));
      if (unit_run(m.a, i0, rows)) {
        pack_runs<R>(dst, mr, a + am[0], ak, rows, kc);
      } else if (!a_k_unit && rows_in_runs(am, rows)) {
        // A few runs contiguous in A (a tile across the end of a short m axis: aebf,dfce->abcd at 32^6, tiles of 24
        // rows over runs of 32): each run copied at its place in the sliver, not element by element.
        for (int64_t r = 0, e = 0; r < rows; r = e) {
          for (e = r + 1; e < rows && am[e] == am[e - 1] + 1;) ++e;
          pack_runs<R>(dst + r, mr, a + am[r], ak, e - r, kc);
        }
      } else if (a_k_unit) {  // k contiguous: blocks of rows by k steps transposed in registers (GettPack.h)
        const T* src[kMaxPackedRows];
        EIN_ASSERT(rows <= kMaxPackedRows, "micro-tile taller than the packer's row table");
        for (int64_t r = 0; r < rows; ++r) src[r] = a + am[r] + ak[0];
        pack_transposed<R>(pack_isa, dst, mr, src, rows, kc);
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          const T* col = a + ak[p];
          R* d = dst + p * mr;
          for (int64_t r = 0; r < rows; ++r) d[r] = col[am[r]];
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

  // Packs slivers [s0, s1) of the A block whose first row is ic (rows end at r1) into `apack` (the block's buffer):
  // a real A whose rows there are one contiguous run column by column across the slivers (GettPack.h: pack_columns),
  // any other sliver by sliver.
  void pack_a_block(R* apack, const T* a, int64_t ic, int64_t r1, int64_t s0, int64_t s1, int64_t p0,
                    int64_t kc) const {
    const int64_t kc_real = kc * cf, i0 = ic + s0 * mrc, rows = std::min(r1, ic + s1 * mrc) - i0;
    if constexpr (!is_complex_v<T>) {
      if (s1 - s0 > 1 && unit_run(m.a, i0, rows)) {
        R* first = apack + s0 * mr * kc_real;
        if (rows % mr != 0) std::memset(first + rows / mr * mr * kc, 0, sizeof(R) * size_t(kc * mr));  // padding
        pack_columns<R>(first, mr * kc, mr, a + m.a[i0], k.a.data() + p0, rows, kc);
        return;
      }
    }
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t r = ic + s * mrc;
      if constexpr (!is_complex_v<T>) {
        // A k-major A: the next sliver's rows (runs along k) while this one is transposed (GettPack.h:
        // prefetch_run; the MPS instance's 1900 x 19 site tensors, read once, packed 20% faster).
        if (a_k_unit && r + mrc < r1)
          for (int64_t i = r + mrc; i < std::min(r1, r + 2 * mrc); ++i) prefetch_run(a + m.a[i] + k.a[p0], kc);
      }
      pack_a_sliver(apack + s * mr * kc_real, a, r, std::min(mrc, r1 - r), p0, kc);
    }
  }

  // Packs all of A (a_k_run > 0) once: sliver t's k step p at dst + t * mr * K + p * mr, so a KC block's sliver
  // starts at dst + t * mr * K + pc * mr with the layout pack_a_sliver gives it (the same elements at the same places,
  // so the same bits). Each run of A's unit k axis, for each value of the other k axes, is a block of rows by k steps
  // transposed in registers (GettPack.h), `a_k_step` k steps apart in the sliver, read in A's memory order (the
  // einsum-benchmark MPS's site tensor [k0, m, k1] by a [n, k1, k0] environment: k1 first in k's order, k0
  // contiguous; per KC block its gather read 19 cache lines per k step). Padding rows read `zeros` (a_k_run zeros),
  // so whole micro-tiles transpose and nothing is zeroed separately.
  void pack_a_whole(R* dst, const T* a, const R* zeros, ThreadPool* pool) const {
    const int64_t M = m.size, K = k.size, step = a_k_step, run = a_k_run;
    const int64_t slivers = (M + mrc - 1) / mrc, bases = K / run;
    parallel_for(pool, slivers * bases, [&](int64_t w0, int64_t w1) {
      const R* src[kMaxPackedRows];
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t t = w / bases, base = w % bases;
        const int64_t p = base % step + step * run * (base / step);
        const int64_t i0 = t * mrc, rows = std::min(mrc, M - i0);
        for (int64_t r = 0; r < mr; ++r) src[r] = r < rows ? a + m.a[i0 + r] + k.a[p] : zeros;
        if (base + 1 < bases) {  // the next runs' lines while these are transposed (GettPack.h: prefetch_run)
          const int64_t next = p + (base % step + 1 < step ? 1 : 1 + step * (run - 1));
          for (int64_t r = 0; r < rows; ++r) prefetch_run(a + m.a[i0 + r] + k.a[next], run);
        }
        pack_transposed<R>(pack_isa, dst + t * mr * K + p * mr, step * mr, src, mr, run);
      }
    });
  }

  // Packs k [p0, p0+kc) x columns [j0, j0+cols) of B into a sliver of kc*cf rows of nr reals.
  void pack_b_sliver(R* dst, const T* b, int64_t j0, int64_t cols, int64_t p0, int64_t kc) const {
    const int64_t* bn = n.b.data() + j0;
    const int64_t* bk = k.b.data() + p0;
    if constexpr (!is_complex_v<T>) {
      if (cols < nr) std::memset(dst, 0, sizeof(R) * size_t(kc * nr));  // padding columns, in one pass
      if (b_k_unit) {  // k contiguous (a column-major B[k, n]): blocks of columns by k steps transposed (GettPack.h)
        const T* src[kMaxPackedRows];
        EIN_ASSERT(cols <= kMaxPackedRows, "micro-tile wider than the packer's column table");
        for (int64_t j = 0; j < cols; ++j) src[j] = b + bn[j] + bk[0];
        pack_transposed<R>(pack_isa, dst, nr, src, cols, kc);
      } else if (unit_run(n.b, j0, cols)) {
        pack_runs<R>(dst, nr, b + bn[0], bk, cols, kc);
      } else {
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < cols; ++j) dst[p * nr + j] = b[bk[p] + bn[j]];
      }
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
    // The row chunks' A buffers, for the whole call: one buffer of `lease` (which holds the B panel too), whole pages
    // per chunk so that no two threads write the same line, so a call's scratch traffic does not depend on how its
    // KC steps were timed and the call allocates nothing (no table of per-chunk leases).
    const int chunks = row_chunks > 1 ? pool->chunk_count(row_tiles, chunk_tiles) : 1;
    const int64_t mc_max = std::min(mc_e, row_tiles * mrc);
    constexpr size_t kPage = 4096;
    const size_t a_bytes = (sizeof(R) * size_t(mc_max / mrc * mr * kc_max * cf) + kPage - 1) / kPage * kPage;
    // All of a gathered A packed once (pack_a_whole; a_k_run is set for one MC block of rows only), on one row
    // chunk, followed by the a_k_run zeros its padding rows read.
    const bool pack_whole = a_k_run > 0 && row_chunks == 1;
    const size_t whole_reals = pack_whole ? size_t(row_tiles * mr * K) : 0;
    std::byte* a_base =
        lease.buffer(kPackA, pack_whole ? sizeof(R) * (whole_reals + size_t(a_k_run)) : a_bytes * size_t(chunks));
    auto apack = [&](int ch) { return reinterpret_cast<R*>(a_base + a_bytes * size_t(ch)); };
    R* bpack = reinterpret_cast<R*>(lease.buffer(kPackB, sizeof(R) * size_t(nc_max * kc_max * cf)));
    const R* whole = nullptr;
    if constexpr (!is_complex_v<T>) {
      if (pack_whole) {
        R* buffer = reinterpret_cast<R*>(a_base);
        std::memset(buffer + whole_reals, 0, sizeof(R) * size_t(a_k_run));
        pack_a_whole(buffer, a, buffer + whole_reals, pool);
        whole = buffer;
      }
    }
    RowClaims claims(row_tiles, chunks, mc_max / mrc);
    BlockShare share;
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
          // Each thread takes whole row tiles as RowClaims shares them out, packs its own A blocks (in its core's L2)
          // and runs them against every column of the shared B panel, then helps with the blocks still running
          // (BlockShare): two pool barriers per KC step, not two per MC block. Chunk ch packs into apack(ch).
          claims.reset();
          share.reset(chunks, nslivers);
          pool->parallel_for(chunks, [&](int64_t ch, int64_t) {
            chunk_rows(int(ch), a, bpack, c, a_base, a_bytes, claims, share, jc, nslivers, pc, kc, beta);
          });
        } else {
          rows_block(a, bpack, c, apack(0), 0, M, jc, nslivers, pc, kc, beta, pool, whole);
        }
      }
    }
  }

  // Rows [r0, r1) (r0 a multiple of mrc) of one KC step against the packed B panel of columns [jc, jc + nslivers*nr),
  // in MC blocks of equal size (so a thread's last block is not a sliver): pack A into `apack` (MC x KC), then the
  // tiles. With a pool, each block's packing and its column slivers are split between threads (the small-M fallback
  // of gemm_row_chunks).
  // `whole`: A packed whole (pack_a_whole; r0 = 0 and one block), read in place instead of packed into `apack`.
  void rows_block(const T* a, const R* bpanel, T* c, R* apack, int64_t r0, int64_t r1, int64_t jc, int64_t nslivers,
                  int64_t pc, int64_t kc, int64_t beta, ThreadPool* pool, const R* whole = nullptr) const {
    const int64_t kc_real = kc * cf;
    // A sliver's KC block: in `whole`, sliver t's k steps from pc on; else packed here, slivers one after the other.
    const int64_t sliver_stride = whole ? mr * k.size : mr * kc_real;
    const R* ablock = whole ? whole + pc * mr : apack;
    const int64_t blocks = (r1 - r0 + mc_e - 1) / mc_e;
    const int64_t mc_cur = ((r1 - r0 + blocks - 1) / blocks + mrc - 1) / mrc * mrc;
    for (int64_t ic = r0; ic < r1; ic += mc_cur) {
      const int64_t mcur = std::min(mc_cur, r1 - ic);
      const int64_t mslivers = (mcur + mrc - 1) / mrc;
      if (!whole)
        parallel_for(pool, mslivers, [&](int64_t s0, int64_t s1) { pack_a_block(apack, a, ic, r1, s0, s1, pc, kc); });
      // Tiles are independent: split the columns (B slivers) between threads; each tile's k order is fixed.
      parallel_for(pool, nslivers, [&](int64_t s0, int64_t s1) {
        block_tiles(ablock, sliver_stride, bpanel, c, ic, std::min(r1, ic + mcur), jc, s0, s1, kc_real, beta);
      });
    }
  }

  // The tiles of column slivers [s0, s1) (of the panel at column jc) by the A block of rows [ic, r1) at `ablock`.
  void block_tiles(const R* ablock, int64_t sliver_stride, const R* bpanel, T* c, int64_t ic, int64_t r1, int64_t jc,
                   int64_t s0, int64_t s1, int64_t kc_real, int64_t beta) const {
    const int64_t N = n.size, mslivers = (r1 - ic + mrc - 1) / mrc;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t j0 = jc + s * nr, cols = std::min(nr, N - j0);
      for (int64_t t = 0; t < mslivers; ++t) {
        const int64_t i0 = ic + t * mrc;
        tile(ablock + t * sliver_stride, bpanel + s * nr * kc_real, kc_real, c, i0, std::min(mrc, r1 - i0), j0, cols,
             beta);
      }
    }
  }

  // Row chunk ch of one KC step (gemm, row_chunks > 1): its blocks as RowClaims hands them out, each packed into its
  // A buffer (a_base + ch * a_bytes) and published so its slivers can be shared (BlockShare), then the slivers of the
  // other chunks' blocks still running.
  void chunk_rows(int ch, const T* a, const R* bpanel, T* c, std::byte* a_base, size_t a_bytes, RowClaims& claims,
                  BlockShare& share, int64_t jc, int64_t nslivers, int64_t pc, int64_t kc, int64_t beta) const {
    const int64_t M = m.size, kc_real = kc * cf;
    auto apack = [&](int chunk) { return reinterpret_cast<R*>(a_base + a_bytes * size_t(chunk)); };
    if (!share.has_slot(ch)) {
      for (int64_t t0 = 0, t1 = 0; claims.next(ch, t0, t1);)
        rows_block(a, bpanel, c, apack(ch), t0 * mrc, std::min(M, t1 * mrc), jc, nslivers, pc, kc, beta, nullptr);
      return;
    }
    int64_t s0 = 0, s1 = 0, r0 = 0, r1 = 0;
    share.running(ch, true);
    for (int64_t t0 = 0, t1 = 0; claims.next(ch, t0, t1);) {
      pack_a_block(apack(ch), a, t0 * mrc, std::min(M, t1 * mrc), 0, t1 - t0, pc, kc);
      share.publish(ch, t0 * mrc, std::min(M, t1 * mrc));
      while (share.take(ch, s0, s1, r0, r1))
        block_tiles(apack(ch), mr * kc_real, bpanel, c, r0, r1, jc, s0, s1, kc_real, beta);
    }
    share.running(ch, false);
    for (int owner = 0; share.help(ch, owner, s0, s1, r0, r1);)
      block_tiles(apack(owner), mr * kc_real, bpanel, c, r0, r1, jc, s0, s1, kc_real, beta);
  }

  // ---- direct mode (small real problems): no packing, the kernel reads A and B through the offset tables ----

  void gemm_direct(const T* a, const T* b, T* c, ThreadPool* pool) const {
    const int64_t M = m.size, N = n.size;
    const int64_t nslivers = (N + nr - 1) / nr, mslivers = (M + mr - 1) / mr;
    const int64_t beta = accumulate ? 1 : 0;
    // Tiles are independent and each sums k in order, so any split gives the same bits. Work items run column
    // sliver by column sliver (tile order s * mslivers + t), so a matrix-vector step (one sliver) splits too.
    // A chunk divides once for its first item and then walks (s, t): a division per tile cost ~2% of a batch of
    // 64^3 entries (ijb,jkb->ikb, 32 tiles of ~0.18 us each).
    parallel_for(pool, nslivers * mslivers, [&](int64_t w0, int64_t w1) {
      int64_t b_coff[32];
      int64_t s = w0 / mslivers, t = w0 % mslivers;
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t j0 = s * nr, cols = std::min(nr, N - j0);
        if (w == w0 || t == 0)
          for (int64_t j = 0; j < nr; ++j) b_coff[j] = n.b[j0 + std::min(j, cols - 1)];
        const int64_t i0 = t * mr;
        call_jit(direct, k_inner, a + m.a[i0], b, c + m.c[i0], cn_real.data() + j0, std::min(mr, M - i0), cols, beta,
                 k_geometry, b_coff);
        if (++t == mslivers) t = 0, ++s;
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
    // One sliver: `rows` vectors (of `width`, the rest zero) per k step p < kc, row r's at base + koff[p] + roff[r];
    // a full block of lanes one vector move per copy (GettPack.h: pack_lanes), else element by element.
    const int isa = gett_detail::pack_isa();
    auto pack = [&](R* dst, const T* base, const int64_t* koff, const int64_t* roff, int64_t width, int64_t rows,
                    int64_t kc) {
      if constexpr (is_complex_v<T>) {
        EIN_ASSERT(false, "lane kernels are real");  // complex problems never take the lane path
      } else if (lane_rem == V) {
        pack_lanes<R>(isa, dst, base, koff, roff, width, rows, V, kc);
      } else {
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t r = 0; r < width; ++r, dst += V) {
            const T* src = base + koff[p] + roff[std::min(r, rows - 1)];
            for (int64_t l = 0; l < V; ++l) dst[l] = r < rows && l < lane_rem ? src[l] : R(0);
          }
      }
    };
    for (int64_t jc = 0; jc < N; jc += nc) {
      const int64_t ncur = std::min(nc, N - jc);
      for (int64_t pc = 0; pc < K; pc += kc_e) {
        const int64_t kc = std::min(kc_e, K - pc);
        const int64_t beta = (pc > 0 || accumulate) ? 1 : 0;
        for (int64_t s = 0; s * nr < ncur; ++s) {
          const int64_t j0 = jc + s * nr, cols = std::min(nr, N - j0);
          pack(bpack + s * nr * kc * V, b, k.b.data() + pc, n.b.data() + j0, nr, cols, kc);
        }
        for (int64_t ic = 0; ic < M; ic += mc_e) {
          const int64_t mcur = std::min(mc_e, M - ic);
          for (int64_t t = 0; t * mr < mcur; ++t) {
            const int64_t i0 = ic + t * mr, rows = std::min(mr, M - i0);
            pack(apack + t * mr * kc * V, a, k.a.data() + pc, m.a.data() + i0, mr, rows, kc);
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
    const int64_t blocks = (lane_extent + lanes - 1) / lanes, items = batch.size * blocks;
    // Lane blocks and batch entries are independent: each thread runs the blocks of its own range of them, and one
    // whose range is done takes the last block of the range with most left (RowClaims, one block at a time), so a
    // slower or descheduled vCPU does not hold the call up with a fixed half of the blocks (bij,bjk->bik at b=64 has
    // 8). Neighbouring blocks stay on one thread when both keep pace. Which thread runs a block never changes its bits.
    const int chunks = pool && pool->size() > 1 ? int(std::min<int64_t>(pool->size(), items)) : 1;
    RowClaims claims(items, chunks, 1);
    claims.reset();
    parallel_for(pool, chunks, [&](int64_t ch, int64_t) {
      ScratchAllocator::Lease lease = scratch->lease();  // one per chunk: chunks run at the same time
      for (int64_t w0 = 0, w1 = 0; claims.next(int(ch), w0, w1);)
        for (int64_t w = w0; w < w1; ++w) {
          int64_t bt = w / blocks, l0 = (w % blocks) * lanes;
          lane_gemm(a + batch.a[bt] + l0, b + batch.b[bt] + l0, c + batch.c[bt] + l0,
                    std::min(lanes, lane_extent - l0), lease);
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

  // Runs the problem this Gett was set up for on these data pointers (a problem's a, b and c).
  void run(const void* a_data, const void* b_data, void* c_data, ThreadPool* pool) const {
    const T* a = static_cast<const T*>(a_data);
    const T* b = static_cast<const T*>(b_data);
    T* c = static_cast<T*>(c_data);
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

}  // namespace einstage::gett_detail
