// GETT execution of a ContractionProblem on JIT-compiled micro-kernels (runtime stage). Depends on ir,
// runtime/kernels/Contraction.h, runtime/ThreadPool.h and runtime/jit/KernelCache.h; no LLVM.
//
// The problem's m, n, k and batch groups are each fused into one index whose element offsets in A, B and C come from
// a table built by an odometer over the group's axes (axes ordered by stride so the unit-stride one varies fastest).
// BLIS-style loops run over NC x KC x MC cache blocks; A and B panels are packed straight from their strides (the
// permutation is folded into packing: no transpose pass, no TTGT workspace) and a register-blocked micro-kernel
// computes each MR x NR tile. C is written in place when a tile's rows are contiguous in C (the usual case: the
// unit-stride axis of C is an m axis); otherwise the micro-kernel writes a small tile buffer that is scattered through
// C's offset tables. Complex dtypes use the 1m method: A is packed as a real 2m x 2k matrix of [re -im; im re] blocks,
// B as a real 2k x n matrix, and the real micro-kernel then produces C's interleaved real and imaginary parts, so
// complex runs at the real kernel's rate. A batch axis with unit stride in A, B and C (column-major bij,bjk->bik) would
// make GEMM packing read one element per cache line; real problems with such an axis run on lane kernels instead,
// whose vectors run along that axis (MicroKernel.h). The micro-tile is chosen per problem among a few candidates by
// least padded work. Small real problems (A within 5/6 of L1d, at most 96^3 multiply-adds per batch entry) whose row
// tiles are contiguous in A and C and whose k offsets form at most two affine levels skip packing: direct kernels
// (MicroKernel.h: DirectKernelFn) read A and B in place; with K inside one KC block they give the packed path's bits.
// Rows contiguous in A only in runs of one vector a fixed distance apart take split-row direct tiles (and split-C ones
// when C's rows are such runs too, e.g. a cotangent laid out [i0 j0 i1 j1]), rows not
// contiguous in A at all but k contiguous in groups of a vector (a row-major i,k) k-major tiles; steps with fewer
// than 8 columns take narrow direct tiles at any size (A read once in place). Steps without a contracted axis whose
// per-entry GEMM is small or skinny (min(M, N) < 8 or M*N < 64^2, e.g. ij,ij->ij or batches of 3 x 3 outer
// products) run as a strided elementwise loop with broadcasting (single-threaded; a * b is the kernels' fma(a, b, 0)).
// Larger outer products (C at least a quarter of L2, rows contiguous in A and C) are written column by column
// (GettOuter.h), with streaming stores when the problem's stream_c asks for them.
// Explicit `blocking` or `direct` = false (Config::jit_direct) forces the packed path. i64 is not supported here
// (contract() sends it to the portable kernel).
//
// Determinism: every output element is summed over k in one fixed order (KC blocks in order, k in order inside),
// and the thread pool only splits independent tiles, slivers or batch entries, so results are bitwise identical for
// any thread count.
#pragma once

#include "runtime/jit/MicroKernel.h"
#include "runtime/kernels/Contraction.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace einstage {

class GemmTuning;
class KernelCache;
class ScratchAllocator;

/// Cache block sizes in real elements (complex problems use half as many complex rows / k steps).
struct GettBlocking {
  int64_t mc = 0;  // rows of a packed A block (multiple of the micro-kernel's MR)
  int64_t kc = 0;  // depth of packed panels
  int64_t nc = 0;  // columns of a packed B panel (multiple of NR)
};

/// The model's block sizes for a real dtype with the model's tile of the given vector width, derived from this host's
/// cache sizes (Blocking.h: 480 x 256 x 4096 for f64 on a 48 KiB L1d / 2 MiB L2 core): what contract_jit uses
/// without a tuning (GemmTuning::model(), Tuning.h). KC is always the model's; a context's tuning may set MC and NC.
GettBlocking default_blocking(DType real_dtype, bool avx512);

/// Fewest MR-row tiles a thread gets when contract_jit splits one packed GEMM's rows between threads.
inline constexpr int64_t kMinRowTilesPerThread = 4;
/// How many row ranges contract_jit's packed GEMM of M rows (tiles of `tile_rows` rows) runs on `threads` threads:
/// each range, whole tiles, packs its own A blocks against the shared B panel, so a KC step costs two pool barriers
/// whatever M is (per-MC-block splitting cost two per block: kac,bk->abc ran slower on 2 threads than on 1).
/// min(threads, tiles / kMinRowTilesPerThread), at least 1; 1 means the columns of each MC block are split instead.
int gemm_row_chunks(int64_t M, int64_t tile_rows, int threads);

/// Fewest multiply-adds (all batch entries) for which a contraction is worth splitting between threads: below it a
/// pool wake-up costs more than the work.
inline constexpr double kMinThreadedMacs = 32.0 * 32 * 32;
/// Fewest multiply-adds for which a matrix times one vector (GettDots.h with one vector, GettAxpy.h) is split between
/// threads: it reads each matrix element once, so its work is a few microseconds where a GEMM's is tens, and on the
/// Zen 5 guest a 256^2 or 512^2 product ran 5-9% slower on 2 threads than on 1 while 1024^2 ran 30% faster
/// (docs/performance.md, 2026-12-06). A size rule, so the split is the same for every call of a shape.
inline constexpr double kMinThreadedMatVecMacs = 1024.0 * 1024;

/// A problem that contract_jit runs on the direct path, as one shape-specialised kernel per batch entry plus the
/// entries' element offsets (Specialise.h compiles it).
struct DirectSchedule {
  SpecialisedKernelSpec kernel;
  std::vector<int64_t> batch_a, batch_b, batch_c;
};
/// Most tile calls one specialised kernel may inline (a 96^3 step has 48 with 24x8 tiles).
inline constexpr int64_t kMaxSpecialisedTiles = 256;
/// True (and `out` filled) when contract_jit(p) without explicit blocking takes the direct path with at most
/// kMaxSpecialisedTiles tiles per batch entry: the same tile, k geometry and tile order, so the specialised kernel's
/// bits are contract_jit's.
bool direct_schedule(const ContractionProblem& p, bool avx512, DirectSchedule& out);
/// True when contract_jit(p) without explicit blocking runs p as dot products along a contiguous k (GettDots.h: a
/// real matrix-vector product i,ij->j or ji,j->i, or a few such vectors against a k-major matrix), which sum in
/// another order than the direct and packed kernels.
bool runs_as_dots(const ContractionProblem& p);
/// True when contract_jit(p) without explicit blocking runs p as a large outer product (GettOuter.h: real, no
/// contracted axis, C overwritten, A's and C's rows contiguous, C at least a quarter of L2), with the direct kernels'
/// bits; with the problem's stream_c its stores stream past the caches.
bool runs_as_streamed_outer(const ContractionProblem& p);
/// True when contract_jit(p) without explicit blocking runs p as a matrix times one vector by row blocks (GettAxpy.h:
/// real, ij,j->i with A's and C's rows contiguous, at least 64 rows and 16 k steps), with the direct kernels' bits.
bool runs_as_axpy(const ContractionProblem& p);

/// True when contract_jit(p) without explicit blocking runs p (f32 or f64) as scalar loops over its offset tables
/// (GettLoops.h: tiny_run; up to 256 multiply-adds per batch entry that no direct kernel reads), with the bits of
/// the packed path. Kernels come from `cache`.
bool runs_tiny(const ContractionProblem& p, KernelCache& cache);

/// Executes p with JIT micro-kernels from `cache` (required; a context's: JitState::kernels()) and packing buffers
/// leased from `scratch` (nullptr: ScratchAllocator::process_default()). Without explicit `blocking`, a product whose
/// exact zeros split it into blocks runs block by block (runtime/kernels/BlockProduct.h; GettPlan::run too): the
/// same bits when K fits one KC block, but for the sign of a zero. dtype f32, f64, c64 or c128; throws
/// Error(unsupported) for i64 and Error(runtime) if the JIT cannot compile. Nothing is written to C before all
/// kernels are available (split: the first block's). `blocking` overrides the default block sizes (tests, tuning); `direct` false forces the
/// packed path (a context's Config::jit_direct, EINSTAGE_JIT_DIRECT=0). `tuning` is the packed GEMM's tile and blocks
/// in force (Tuning.h: a context's JitState::tuning(); nullptr: GemmTuning::model()); the bits are the same whatever
/// it sets. A set-up that depends on nothing but the problem, `cache` and `direct` (no explicit blocking, no packed
/// GEMM) stays in its scratch slot, and the next call in that slot with the same geometry runs on it as a GettPlan
/// would (KernelCache::serial() tells caches apart).
void contract_jit(const ContractionProblem& p, ThreadPool* pool = nullptr, KernelCache* cache = nullptr,
                  const GettBlocking* blocking = nullptr, ScratchAllocator* scratch = nullptr, bool direct = true,
                  const GemmTuning* tuning = nullptr);

/// True when x and y have the same dtype, accumulate flag and axes (extents and strides, group by group, in order):
/// whatever contract_jit decides for one it decides for the other. Pointers are not compared.
bool same_geometry(const ContractionProblem& x, const ContractionProblem& y);

/// contract_jit's set-up of one problem, made once: its mode (elementwise, direct, lane, packed, or one of those on
/// C^T = B^T A^T), the fused m, n, k and batch offset tables, the tile, the blocking and the kernels. run() then
/// executes any problem with the same geometry (matches(): same_geometry and the same `direct` switch) on that call's
/// data pointers, with contract_jit's bits at every thread count and without redoing the set-up: a prepared einsum
/// step (StepKernel, runtime/Contract.h) keeps one per problem it runs, because on small steps (the grid workloads'
/// 2 x 2 x 2 contractions) the set-up cost more than the arithmetic. Immutable once made: concurrent run() calls are
/// safe. It holds `cache`'s kernels and pointers to `scratch` (packing buffers) and `tuning`, so it must not outlive
/// any of them; StepKernel keys its plans by context.
class GettPlan {
 public:
  /// Sets p up as contract_jit(p, pool, &cache, nullptr, &scratch, direct, tuning) would; throws what contract_jit
  /// throws (p.check's errors, Error(unsupported) for i64, Error(runtime) when a kernel cannot be compiled).
  GettPlan(const ContractionProblem& p, KernelCache& cache, ScratchAllocator& scratch, bool direct,
           const GemmTuning* tuning = nullptr);
  ~GettPlan();
  GettPlan(const GettPlan&) = delete;
  GettPlan& operator=(const GettPlan&) = delete;

  /// p has the geometry this plan was made for, and `direct` is the switch it was made with.
  bool matches(const ContractionProblem& p, bool direct) const;
  /// Executes p, which matches() this plan (not checked), as contract_jit would; refuses null pointers as
  /// ContractionProblem::check does.
  void run(const ContractionProblem& p, ThreadPool* pool) const;
  /// Bytes of offset tables the plan keeps (their capacity).
  size_t table_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace einstage
