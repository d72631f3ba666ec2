// TileModel: the GEMM micro-kernel's register tile (MR x NR) chosen from the vector ISA and the cache sizes: the rules
// a tile must meet, and a cost estimate that ranks the tiles that meet them. The GEMM driver's default tile is the
// estimate's pick (MicroKernel.h: model_micro_kernel), and its cache blocks follow from that tile (Blocking.h).
// Stage: runtime (JIT internals). Depends on runtime/jit/Blocking.h (CacheInfo, blocking_for), MicroKernel.h
// (MicroKernelSpec) and the standard library; no LLVM. Pure: tests feed made-up CPUs.
//
// A tile is v A vectors (MR = v * lanes rows; lanes = vector bytes / element bytes) by NR broadcast columns. Per k step
// it loads v vectors of A, broadcasts NR elements of B and issues v * NR FMAs into v * NR accumulator registers.
//   fits      v * NR accumulators + v A vectors + 1 broadcast <= the vector registers (16 ymm with AVX2, 32 zmm with
//             AVX-512): every tile the driver may run.
//   headroom  the same count leaves the compiler one register in 16 (<= 15 of 16 ymm, <= 30 of 32 zmm): LLVM 19 moves
//             two accumulators of 3 x 9 (31 zmm) through the stack inside the k loop when it schedules for
//             skylake-avx512 or rocketlake (this project's Xeon), though not for znver4 or sapphirerapids, and 2 x 14
//             (also 31) never; the default tile must not depend on that, so it is chosen with headroom.
//   busy      the FMA units run at full rate: v * NR >= FMA units * FMA latency independent accumulators, and a k step's
//             v + NR loads issue on the load ports within the cycles its FMAs take. A one-vector tile never is.
//   cost      what the tile spends besides its FMAs, as the utilisation of three resources while the FMA units run at
//             full rate (F FMAs per cycle, P loads per cycle, vectors of b bytes), summed:
//               loads  (v + NR) loads per v * NR FMAs:           F (v + NR) / (P v NR)
//               A      the packed A sliver streams from L2 once per column sliver, b bytes per NR FMAs:
//                                                                  F b / (NR * kL2BytesPerCycle)
//               C      the tile's C passes through memory once per KC block, 2 b bytes per KC FMAs:
//                                                                  2 F b / (KC * kMemoryBytesPerCycle)
//             with KC what blocking_for gives this tile on these caches (the B sliver in a third of L1d, at least 256
//             while it fits in half). The loads term favours square tiles (3 x 8 over 2 x 12), the A term wide ones,
//             the C term narrow ones (a wide B sliver shortens KC).
// register_tile() is the busy tile with headroom of least cost (ties: more accumulators, then more A vectors). On the
// CPUs einstage was timed on it gives the measured best tiles (tests/jit/test_tile_model.cpp holds them as a
// cross-check): 3 x 8 (24 x 8 f64, 48 x 8 f32) with AVX-512 on the Xeon (48 KiB L1d) and on Zen 4 (32 KiB L1d), 2 x 6
// (8 x 6 f64, 16 x 6 f32) with AVX2 on Zen 3. On the Xeon it ranks the f64 tiles in the measured order (24 x 8 level
// with 32 x 6, then 16 x 12, then 16 x 14); for f32 it puts 32 x 10 - 32 x 12 10-14% behind 48 x 8 where they
// measured level (docs/performance-log.md, "Register tiles from a model").
// Complex dtypes run on the real kernels (the 1m method, Gett.h), so they get their real dtype's tile.
#pragma once

#include "runtime/jit/Blocking.h"
#include "runtime/jit/MicroKernel.h"

#include <cstdint>

namespace einstage {

/// What the register tile depends on in a vector ISA.
struct VectorIsa {
  int vector_bytes = 64;  // 32 (ymm, AVX2) or 64 (zmm, AVX-512)
  int registers = 32;     // 16 ymm or 32 zmm
  int fma_units = 2;      // vector FMAs issued per cycle
  int fma_latency = 4;    // cycles
  int load_ports = 2;     // vector loads issued per cycle
};

/// The ISA of the micro-kernels the JIT emits: AVX-512 (64-byte vectors, 32 registers) or AVX2 (32, 16), with two FMA
/// units of latency 4 and two load ports (every Intel and AMD core with AVX2 since Haswell and Zen).
VectorIsa vector_isa(bool avx512);

/// v A vectors by nr broadcast columns.
struct RegisterTile {
  int vectors = 0;
  int nr = 0;
  friend bool operator==(const RegisterTile&, const RegisterTile&) = default;
};

/// The cost estimate's bandwidths (bytes per cycle, one core): L2 to L1 one cache line per cycle (Intel since Skylake,
/// AMD since Zen 4; Zen 3 has half, which does not change its pick), memory one core's share of a busy socket.
inline constexpr double kL2BytesPerCycle = 64;
inline constexpr double kMemoryBytesPerCycle = 8;

/// Accumulators + A vectors + one broadcast fit in the vector registers.
bool tile_fits(const VectorIsa& isa, RegisterTile t);

/// The same count leaves the compiler one register in 16.
bool tile_leaves_headroom(const VectorIsa& isa, RegisterTile t);

/// The FMA units run at full rate: latency hidden and the loads within the load ports.
bool tile_busy(const VectorIsa& isa, RegisterTile t);

/// The tile's cost besides its FMAs (see above): load-port, L2 and memory utilisation at the full FMA rate, with KC
/// from blocking_for for this tile on `caches`.
double tile_cost(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes, RegisterTile t);

/// The busy tile with headroom of least tile_cost (ties: more accumulators, then more A vectors).
RegisterTile register_tile(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes);

/// The GEMM micro-kernel for a real dtype with register_tile's tile on `isa` and `caches`: what default_micro_kernel
/// (MicroKernel.h) gives on this host, and what tests ask for on the CPUs einstage was timed on.
MicroKernelSpec model_micro_kernel(DType real_dtype, const VectorIsa& isa, const CacheInfo& caches);

/// The fitting tile with `vectors` A vectors and the most columns (at most max_nr); {0, 0} when none fits.
RegisterTile widest_tile(const VectorIsa& isa, int vectors, int max_nr);

}  // namespace einstage
