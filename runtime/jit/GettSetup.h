// The set-up of one GETT problem (runtime/jit/Gett.h), shared by the files that implement contract_jit and GettPlan:
// which mode a problem runs in (GettModes.cpp: the shape predicates and the direct path's tile and k geometry), the
// set-up that fills a GettSetup (GettSetup.cpp: offset tables, tile, blocking, kernels) and the loops that run one
// (GettRun.cpp: the only file that instantiates the loops of GettLoops.h, GettDots.h, GettOuter.h and GettAxpy.h).
// Internal to runtime/jit/Gett*.cpp; nothing else includes this header. Stage: runtime (JIT internals); no LLVM.
#pragma once

#include "ir/Scratch.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/GettAxpy.h"
#include "runtime/jit/GettDots.h"
#include "runtime/jit/GettLoops.h"
#include "runtime/jit/GettOuter.h"
#include "runtime/kernels/Contraction.h"

#include <cstdint>
#include <vector>

namespace einstage {

class GemmTuning;
class KernelCache;

namespace gett_detail {

// ---- which mode a problem runs in (GettModes.cpp) ----

// Problems up to this many multiply-adds per batch entry that no direct kernel reads run as scalar loops
// (GettLoops.h: tiny_run) instead of packed: packing both panels, padding to a tile and the pool calls cost more there.
inline constexpr double kTinyMacs = 256;

// A batch axis with unit stride in A, B and C (the lane-kernel case), or p.batch.end().
std::vector<Axis>::const_iterator lane_axis(const ContractionProblem& p);
// The vector width GettDots.h, GettOuter.h and GettAxpy.h run at on this CPU: 2 AVX-512, 1 AVX2 with FMA, 0 neither.
int dots_isa();
// The shapes of the modes elementwise, dots, outer and axpy (GettModes.cpp says which problems each takes).
bool elementwise_shaped(const Fused& m, const Fused& n, const Fused& k);
bool dots_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch);
bool outer_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch, bool accumulate, size_t elt);
bool axpy_shaped(const Fused& m, const Fused& n, const Fused& k, const Fused& batch);
// The direct path's candidate tiles for a real dtype and vector width (around the model's tile, never a tuned one).
const std::vector<MicroKernelChoice>& direct_candidates(DType real, bool avx512);
// The direct tile for g's fused tables and its k geometry, column order (g.n fused again from `n_axes` by B's strides
// where that reads B better) and C column offsets (T float or double); false when the problem cannot run direct.
template <typename T>
bool plan_direct(Gett<T>& g, DType real, bool avx512, MicroKernelSpec& tile, const std::vector<Axis>& n_axes,
                 FuseScratch& scratch);
// Whether columns `n` (fused from `n_axes` in C's order) should be fused again by B's strides: neighbouring columns
// are not neighbours in B but some n axis is contiguous in B (the direct path, and the packed path for a B that is
// not contiguous along k). The bits never depend on the columns' order.
bool columns_by_b(const Fused& n, const std::vector<Axis>& n_axes);

// ---- the set-up (GettSetup.cpp) and the loops (GettRun.cpp) ----

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
  // The problem (pointers cleared) and kernel cache this set-up was made for, while run_gett may run the next call
  // in its slot on it instead of setting the same problem up again (Gett.cpp: kept_for): a set-up of a 64^3 direct
  // step cost ~0.9 us of its ~6 us. Only set-ups that depend on nothing but the problem, the cache and `direct`
  // are kept: no explicit blocking and no packed GEMM (whose tile and blocks are the tuning's).
  struct Kept {
    ContractionProblem problem;
    uint64_t cache = 0;  // KernelCache::serial()
    bool direct = true;
    bool valid = false;
  } kept;

  // Runs the set-up problem on a call's data pointers (GettRun.cpp).
  void run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const;
  size_t table_bytes() const {
    return g.table_bytes() + t.table_bytes() + axes.capacity() * sizeof(Axis) + dots.table_bytes() +
           outer.table_bytes() + axpy.table_bytes();
  }

  // Tables above this many bytes go back to malloc after a call: memory kept in a slot's object is outside the
  // allocator's byte limit, and a step that large is not dominated by its set-up (a 4.8-million-entry batch has 115 MB
  // of tables).
  static constexpr size_t kKeepBytes = size_t(1) << 18;
  void trim() {
    if (table_bytes() > kKeepBytes)
      g = Gett<T>(), t = Gett<T>(), axes = {}, dots = {}, outer = {}, axpy = {}, kept.valid = false;
  }
};

// Orders and merges the axes of an elementwise product once per problem (GettRun.cpp's elementwise() runs them).
void order_elementwise(std::vector<Axis>& axes);
// The packed path for g's fused tables: tile (among `tuning`'s candidates), kernel, blocking (explicit, else
// `tuning`'s) and the tables the loops derive.
template <typename T>
void set_up_packed(Gett<T>& g, KernelCache& cache, const GettBlocking* blocking, const GemmTuning& tuning);
// Everything contract_jit decides about p, into ws (T float, double, c64 or c128).
template <typename T>
void set_up(GettSetup<T>& ws, const ContractionProblem& p, KernelCache& cache, const GettBlocking* blocking,
            ScratchAllocator& scratch, bool direct, const GemmTuning& tuning);
// contract_jit's and GettPlan::run's block split (kernels::block_product_in_place): true when p split (and ran).
bool split_in_place(const ContractionProblem& p, ThreadPool* pool, KernelCache& cache, ScratchAllocator& scratch,
                    const GemmTuning& tuning);

}  // namespace gett_detail
}  // namespace einstage
