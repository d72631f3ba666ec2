// Register-blocked GEMM micro-kernels generated as explicit vector LLVM IR (runtime stage, JIT). Depends on ir and
// runtime/jit/Jit.h; no LLVM type appears here.
//
// A micro-kernel computes one MR x NR tile of C from packed panels: C[0:m_rem, 0:n_rem] (+)= Ap · Bp where Ap holds
// kc columns of MR contiguous elements (k-major) and Bp holds kc rows of NR contiguous elements. The MR x NR
// accumulators are SSA vector values (MR/lanes vectors per column), so the whole tile lives in registers; each k step
// loads MR/lanes vectors of A, broadcasts NR elements of B and issues MR/lanes * NR `llvm.fma`s. The k loop runs kc
// times at run time (unrolled by `k_unroll` plus a remainder loop). Only real element types exist: complex problems
// run on the real kernels through the 1m method (see Gett.h). The epilogue writes column j at c + col_off[j] with unit
// stride between rows; beta = 0 overwrites C without reading it, beta = 1 accumulates. Edge tiles (m_rem < MR) use
// llvm.masked.load/store, and columns j >= n_rem are skipped, so no temporary tile is needed for edges.
// Summation order for every element is k = 0, 1, ..., kc-1 whatever the tile position: results do not depend on
// which thread runs a tile.
#pragma once

#include "ir/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace einstage {

class Jit;

/// Bump when the generated code changes for the same MicroKernelSpec: it is part of the disk-cache key, so objects
/// from an older generator are recompiled instead of reused.
inline constexpr int kMicroKernelGeneratorVersion = 5;

struct MicroKernelSpec {
  DType dtype = DType::f64;  // f32 or f64
  int mr = 24;               // rows, a multiple of lanes
  int nr = 8;                // columns
  int lanes = 8;             // vector width in elements (8 f64 / 16 f32 for AVX-512)
  int k_unroll = 4;
  /// Lane kernel (see LaneKernelFn): mr x nr accumulator vectors, each along the lane (batch) axis.
  bool lane = false;
  /// Direct kernel (see DirectKernelFn): reads A and B in place through offset tables, no packed panels.
  bool direct = false;
  /// Direct kernel whose tile rows are contiguous in A only in runs of `lanes`: vector v of the tile is read at
  /// k_geometry[5] * v elements from the tile's first row (e.g. acbd,ecfd->abef at 8^6: runs of 8 rows, 64 apart).
  bool split_rows = false;
  /// Split-row direct kernel whose tile rows are contiguous in C only in runs of `lanes` too: vector v of the tile is
  /// stored at k_geometry[6] * v elements from the tile's first row of C (A's distance stays k_geometry[5], which may
  /// be `lanes`). E.g. the reverse steps of a grid's gradient that write a cotangent laid out [i0 j0 i1 j1] (runs of
  /// 8 rows, 64 apart in C), which would otherwise take one-vector tiles.
  bool split_c = false;
  /// Direct kernel for a k-major A (rows not contiguous in A, k is: a row-major i,k, e.g. the reverse steps of a
  /// grid's gradient such as denr,dnbq->ebrq whose lhs has its contracted d first). One vector of rows (mr = lanes),
  /// row r of the tile at r * k_geometry[5] elements from its first row; the inner k level must be contiguous in A
  /// (k_geometry[1] = 1) and kc a multiple of lanes. Each group of `lanes` k steps is read as one vector per row and
  /// transposed in registers, then summed like the other direct kernels (k = 0, 1, ... per element: the same bits).
  bool kmajor_a = false;

  /// Unique symbol name, e.g. "ein_ukr_f64_24x8_v8_u4" (lane kernels "ein_lkr_...", direct kernels "ein_dkr_...",
  /// split-row direct kernels "ein_dks_...", split-row-and-C ones "ein_dkc_...", k-major direct kernels "ein_dkt_...").
  std::string symbol() const;
  friend bool operator==(const MicroKernelSpec&, const MicroKernelSpec&) = default;
};

/// void kernel(kc, packed A, packed B, C, column offsets (elements, nr of them), m_rem, n_rem, beta 0/1)
using MicroKernelFn = void (*)(int64_t kc, const void* a, const void* b, void* c, const int64_t* col_off,
                               int64_t m_rem, int64_t n_rem, int64_t beta);

/// A lane kernel serves a batch axis that has unit stride in A, B and C (e.g. column-major bij,bjk->bik): the
/// vector lanes run along that axis, so there is nothing to broadcast. Packed A holds kc x mr vectors ([k][row][lane]),
/// packed B kc x nr vectors; C element (lane l, row i, column j) is at c + l + row_off[i] + col_off[j]. Only lanes
/// < lane_rem, rows < m_rem and columns < n_rem are written.
using LaneKernelFn = void (*)(int64_t kc, const void* a, const void* b, void* c, const int64_t* row_off,
                              const int64_t* col_off, int64_t lane_rem, int64_t m_rem, int64_t n_rem, int64_t beta);

/// A direct kernel serves small problems without packing (packing both panels costs about as much as the product
/// there). k runs on two levels: g = k_geometry = {outer count (>= 1), inner A stride, inner B stride, outer A stride,
/// outer B stride, A distance between row vectors (split_rows kernels only), C distance between row vectors (split_c
/// kernels only)} (elements, kKGeometry of them), kc inner steps per outer step, so k index p = q + kc * o sits at A offset
/// q * g[1] + o * g[3] and B offset q * g[2] + o * g[4]: one or two k axes, or any nesting of them, fit. Row r of the
/// tile is at a + (A offset) + r (the rows are contiguous in A); B's column j at b + (B offset) + b_coff[j]. A is read
/// with masked loads (rows >= m_rem are neither read nor stored); b_coff must hold nr valid offsets (callers repeat
/// the last valid column's offset for j >= n_rem: read, never stored). Every element is summed in the order
/// p = 0, 1, ..., like the packed kernel over one KC block, so both give the same bits. The epilogue is the packed
/// kernel's.
/// Entries of a direct kernel's k_geometry table.
inline constexpr int kKGeometry = 7;
using DirectKernelFn = void (*)(int64_t kc, const void* a, const void* b, void* c, const int64_t* col_off,
                                int64_t m_rem, int64_t n_rem, int64_t beta, const int64_t* k_geometry,
                                const int64_t* b_coff);


/// The lane-kernel tile for a real dtype (AVX-512 widths; AVX2 halves the lanes).
MicroKernelSpec default_lane_kernel(DType real_dtype, bool avx512);

/// Emits the kernel as LLVM IR and compiles it for the JIT's host; returns the relocatable object.
std::vector<char> compile_micro_kernel(Jit& jit, const MicroKernelSpec& spec);

/// The same kernel as AT&T assembly text, for tests (e.g. to find stack traffic in its k loop).
std::string micro_kernel_assembly(Jit& jit, const MicroKernelSpec& spec);

/// The model's tile for a real dtype on this host (AVX-512 or AVX2 widths): TileModel.h's pick for that vector ISA
/// on this host's caches, made once per process. The direct path's tiles, the lane kernels and KC derive from it.
MicroKernelSpec model_host_micro_kernel(DType real_dtype, bool avx512);

/// The packed GEMM's default tile for a real dtype on this host: the model's (model_host_micro_kernel). A context
/// runs the packed path with the tile its tuning sets (Tuning.h: GemmTuning), the same bits either way.
MicroKernelSpec default_micro_kernel(DType real_dtype, bool avx512);

/// The tiles the GETT driver chooses from (default first) with their relative throughput; it takes the one with the
/// least padded work for the problem's m and n extents, so e.g. 64 x 64 does not run 72 rows of 24-row tiles.
struct MicroKernelChoice {
  MicroKernelSpec spec;
  double efficiency = 1;
};
/// `base` (a packed tile: the tile in force) comes first; the (dtype, width) form is around the model's tile.
std::vector<MicroKernelChoice> micro_kernel_candidates(const MicroKernelSpec& base);
std::vector<MicroKernelChoice> micro_kernel_candidates(DType real_dtype, bool avx512);

/// Vector registers of the target: 32 (zmm0-31) with AVX-512, 16 (ymm0-15) with AVX2.
int vector_registers(bool avx512);

/// A vectors (rows / lanes) of the direct path's narrow tile with `nr` columns (1, 2 or 4): the most, up to 4, whose
/// registers fit in vector_registers() beside one broadcast: per A vector its nr accumulators, itself and, without
/// AVX-512's mask registers, its row mask (AVX2's masked loads take the mask in a vector register). AVX-512: 4, 4, 4;
/// AVX2: 4, 3, 2 for 1, 2, 4 columns (4 x 4 needed 25 of 16 ymm registers and moved ~160 vectors through the stack).
int narrow_tile_vectors(int nr, bool avx512);

/// The tiles the direct path chooses from (same rule as micro_kernel_candidates); the k-major ones (kmajor_a) serve
/// only problems whose A rows are not contiguous.
std::vector<MicroKernelChoice> direct_kernel_candidates(DType real_dtype, bool avx512);

/// One tile call of a shape-specialised step kernel: the direct kernel's arguments that vary per tile.
struct SpecialisedTile {
  int64_t a_off = 0, c_off = 0, j0 = 0, m_rem = 0, n_rem = 0;
  std::vector<int64_t> b_coff;  // nr entries
};

/// A whole small contraction (one batch entry) compiled with every extent, stride and tile as a constant: the direct
/// kernel's calls with constant arguments, inlined and optimised by LLVM's O2 pipeline (Specialise.h compiles these
/// off the critical path). Every element is summed in the direct kernel's order, so the bits are the direct path's.
struct SpecialisedKernelSpec {
  MicroKernelSpec tile;  // a direct tile
  int64_t k_inner = 0;
  int64_t k_geometry[kKGeometry] = {};
  bool accumulate = false;
  std::vector<int64_t> col_off;  // C column offsets, padded with nr zeros
  std::vector<SpecialisedTile> tiles;

  /// Everything the generated code depends on (the disk-cache detail).
  std::string describe() const;
  /// "ein_spec_<64-bit hash of describe()>".
  std::string symbol() const;
};

/// void kernel(A, B, C): one batch entry of the specialised problem.
using SpecialisedKernelFn = void (*)(const void* a, const void* b, void* c);

std::vector<char> compile_specialised_kernel(Jit& jit, const SpecialisedKernelSpec& spec);

}  // namespace einstage
