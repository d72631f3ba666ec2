// TileModel: the rules a GEMM micro-kernel's register tile (MR x NR) must meet on a vector ISA, a bandwidth estimate
// over the tiles that meet them, and the default tile (the measured best of those). Stage: runtime (JIT internals). Depends on runtime/jit/Blocking.h (CacheInfo,
// blocking_for) and the standard library; no LLVM. Pure: tests feed made-up CPUs.
//
// A tile is v A vectors (MR = v * lanes rows; lanes = vector bytes / element bytes) by NR broadcast columns. Per k step
// it loads v vectors of A, broadcasts NR elements of B and issues v * NR FMAs into v * NR accumulator registers.
//   fits   v * NR accumulators + v A vectors + 1 broadcast <= the vector registers (16 ymm with AVX2, 32 zmm with
//          AVX-512).
//   busy   the FMA units run at full rate: v * NR >= FMA units * FMA latency independent accumulators (2 x 4 on the
//          Intel and AMD cores einstage runs on), and a k step's v + NR loads issue on the load ports within the
//          cycles its FMAs take: (v + NR) * FMA units <= load ports * v * NR. A one-vector tile never is (v + NR > NR).
//   cost   a bandwidth estimate: elements moved per multiply-add. The packed A sliver is re-read from L2 for every
//          column sliver (1 / NR); C is read and written once per KC block (2 / KC), from memory, weighted by
//          kMemoryWeight = 16 (one core's L2 bandwidth over its share of memory bandwidth, ~64 vs ~4 bytes per cycle);
//          KC is what the tile's B sliver allows in a third of L1d (Blocking.h's rule, before its raise to kMinKc):
//              cost = 1 / NR + 16 * 2 / (L1d / (3 NR s))
//          A wider tile reads A less often but takes more of L1 per k, so KC shrinks and C passes more often.
// register_tile() is the busy, fitting tile of least cost (ties: more accumulators). It gives the measured tiles on
// AVX2 (8 x 6 f64, 16 x 6 f32, on a Zen 3 core and on a 48 KiB L1d) and on AVX-512 f64 with a 48 KiB L1d (24 x 8,
// this project's Xeon). Where it does not (pinned in tests/jit/test_tile_model.cpp):
//   - f32 on the Xeon: 32 x 11, measured level with the default 48 x 8 (docs/performance.md, "Register tiles from a
//     model", 2026-12-02: each tile on its own blocks, 1 thread; f64 24 x 8 and 32 x 6 level and fastest, 16 x 12 up
//     to 10% slower, 16 x 14 5-15% slower, 24 x 9 10-15% slower).
//   - a 32 KiB L1d with AVX-512 (Zen 4): f64 24 x 7 and f32 48 x 9, neither measured; 3 x 9 spills: with 31 of 32 zmm
//     registers LLVM 19 moves accumulators through the stack inside the k loop (2 x 14, 5 x 5 and 6 x 4, also 31
//     registers, do not), which the register count cannot see.
// So the GEMM driver's default is measured_tile(): the tile measured best, which the unit tests check fits and keeps
// the FMA units busy.
// Complex dtypes run on the real kernels (the 1m method, Gett.h), so they get their real dtype's tile.
#pragma once

#include "runtime/jit/Blocking.h"

#include <cstdint>

namespace einstage {

/// What the register tile depends on in a vector ISA.
struct VectorIsa {
  int vector_bytes = 64;  // 32 (ymm, AVX2) or 64 (zmm, AVX-512)
  int registers = 32;     // 16 ymm or 32 zmm
  int fma_units = 2;
  int fma_latency = 4;    // cycles
  int load_ports = 2;
};

/// The ISA of the micro-kernels the JIT emits: AVX-512 (64-byte vectors, 32 registers) or AVX2 (32, 16).
VectorIsa vector_isa(bool avx512);

/// v A vectors by nr broadcast columns.
struct RegisterTile {
  int vectors = 0;
  int nr = 0;
  friend bool operator==(const RegisterTile&, const RegisterTile&) = default;
};

/// The weight of C's memory traffic against A's L2 traffic in tile_cost (see above).
inline constexpr double kMemoryWeight = 16;

/// Accumulators + A vectors + one broadcast fit in the vector registers.
bool tile_fits(const VectorIsa& isa, RegisterTile t);

/// The FMA units run at full rate: latency hidden and the loads within the load ports.
bool tile_busy(const VectorIsa& isa, RegisterTile t);

/// Elements moved per multiply-add: 1 / nr (A from L2) + kMemoryWeight * 2 / KC (C from memory), KC from
/// blocking_for for this tile on `caches`.
double tile_cost(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes, RegisterTile t);

/// The busy, fitting tile of least tile_cost (ties: more accumulators, then more A vectors).
RegisterTile register_tile(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes);

/// The fitting tile with `vectors` A vectors and the most columns (at most max_nr); {0, 0} when none fits.
RegisterTile widest_tile(const VectorIsa& isa, int vectors, int max_nr);

/// The default GEMM tile, measured best on the CPUs einstage was timed on: 3 x 8 with 32 registers (AVX-512: Xeon,
/// Zen 4), 2 x 6 with 16 (AVX2: Zen 3). Both fit and keep the FMA units busy (tested).
RegisterTile measured_tile(const VectorIsa& isa);

}  // namespace einstage
