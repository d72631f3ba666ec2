// Blocking: the GETT driver's cache blocks (MC, KC, NC) and the direct path's A limit, derived from the CPU's cache
// sizes and the micro-tile instead of constants tuned for one CPU. Stage: runtime (JIT internals). Depends on
// runtime/jit/Gett.h's GettBlocking and the standard library; no LLVM.
//
// The analytic model (BLIS; Low et al., "Analytical modeling is enough for high-performance BLIS", 2016), in real
// elements of s bytes with an mr x nr micro-tile:
//   KC  the B sliver (nr x KC) that every A sliver of a block is multiplied with stays in L1 next to the A sliver
//       streaming through and the C tile: the B sliver takes a third of L1d. KC = L1d / (3 nr s), a multiple of 8,
//       raised to kMinKc (256) when the sliver then still fits in half of L1d: each KC block passes the whole of C
//       through memory once more, and on a 32 KiB L1d (Zen 3, Zen 4) the third-of-L1 rule alone gave f64 KC 168
//       (Zen 4), measured 10% slower on 1024² DGEMM than KC 256 (docs/performance-log.md, Zen 4).
//   MC  the packed A block (MC x KC) stays in L2 while B slivers stream through it: half of L2 less two B slivers.
//       MC = (L2 / 2 - 2 nr KC s) / (KC s), a multiple of mr.
//   NC  the packed B panel (KC x NC), shared by all threads, within half of L3 (NC = L3 / 2 / (KC s), a multiple
//       of nr), at most 4096 columns: a wider panel only packs less often, which stops paying off long before.
//   direct  a small problem runs unpacked when A fits in five sixths of L1d (the rest holds a B sliver and C);
//       lane kernels' A and B slivers together take as much.
// On the Xeon these were first tuned on (48 KiB L1d, 2 MiB L2, 12-way L1), the model gives exactly the tuned values:
// f64 MC 480 KC 256 NC 4096, f32 MC 480 KC 512 NC 4096, direct A <= 40 KiB. A Zen 3 core (32 KiB L1d, 512 KiB L2,
// 32 MiB L3 per CCX, AVX2 8 x 6 f64 tiles) gets f64 MC 112 KC 256 NC 4092; a Zen 4 core (32 KiB L1d, 1 MiB L2,
// AVX-512 24 x 8 f64 tiles) f64 MC 240 KC 256 NC 4096. Cache sizes come from Linux's sysfs
// (cpu0's cache/index*/{level,type,size}); a level sysfs does not give comes from cpuid (a KVM guest on Zen 5 has no
// cache/ folder in sysfs at all, and the fallback's 32 KiB L1d kept 32 KiB direct problems off the direct path on
// its 48 KiB L1d); what neither gives gets a conservative fallback (32 KiB L1d, 256 KiB L2, 8 MiB L3). Read once per
// process.
#pragma once

#include "runtime/jit/Gett.h"

#include <array>
#include <cstdint>
#include <filesystem>

namespace einstage {

/// Data cache sizes in bytes as one core sees them (L3: the whole cache the core shares).
struct CacheInfo {
  int64_t l1d = 0, l2 = 0, l3 = 0;
};

/// The smallest KC the model raises a third-of-L1 KC to, when the B sliver still fits in half of L1d.
inline constexpr int64_t kMinKc = 256;

/// The fallback for a level sysfs does not report.
inline constexpr CacheInfo kFallbackCaches{32 * 1024, 256 * 1024, 8 * 1024 * 1024};

/// Reads root/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size} ("48K", "2048K", "32M"); levels that are
/// missing or unreadable keep kFallbackCaches' value. `root` is "/" for this machine, a fixture directory in tests.
CacheInfo read_cache_info(const std::filesystem::path& root);

/// One cpuid query: {eax, ebx, ecx, edx} of `leaf`, `subleaf`; all zero for a leaf the CPU does not have.
using CpuidQuery = std::array<uint32_t, 4> (*)(uint32_t leaf, uint32_t subleaf);

/// The cache sizes cpuid reports, 0 for a level it does not: the deterministic cache parameters (leaf 4 on Intel,
/// 0x8000001D on AMD: ways x partitions x line size x sets), else AMD's legacy leaves (0x80000005 ECX[31:24] KiB of
/// L1d, 0x80000006 ECX[31:16] KiB of L2 and EDX[31:18] units of 512 KiB of L3). Pure: tests feed recorded registers.
CacheInfo cpuid_cache_info(CpuidQuery query);

/// This CPU's cpuid (CpuidQuery).
std::array<uint32_t, 4> host_cpuid(uint32_t leaf, uint32_t subleaf);

/// Each level from sysfs (read_cache_info's files), else from cpuid (cpuid_cache_info), else kFallbackCaches.
CacheInfo merge_cache_info(const std::filesystem::path& root, const CacheInfo& from_cpuid);

/// merge_cache_info("/", cpuid_cache_info(host_cpuid)), once per process.
const CacheInfo& host_cache_info();

/// The cache blocks for a real dtype of `elem_bytes` bytes and an mr x nr micro-tile (in reals) on `caches`
/// (the model above). Pure: tests feed made-up CPUs.
GettBlocking blocking_for(const CacheInfo& caches, int64_t elem_bytes, int64_t mr, int64_t nr);

/// MC and NC of the model above for an mr x nr tile with a given KC: the tuned tiles' blocks (Tuning.h), whose KC
/// stays the model tile's because KC decides the order of additions.
GettBlocking blocking_for_kc(const CacheInfo& caches, int64_t elem_bytes, int64_t mr, int64_t nr, int64_t kc);

/// Bytes of A up to which a small problem runs on the direct (unpacked) path: five sixths of L1d.
int64_t direct_a_limit(const CacheInfo& caches);

/// KC of the lane kernels (MicroKernel.h), which read mr + nr vectors of `vector_bytes` per k step: the A and B
/// slivers together within five sixths of L1d, a multiple of 8 (64 for 4 x 6 zmm tiles on a 48 KiB L1d).
int64_t lane_kc(const CacheInfo& caches, int64_t vector_bytes, int64_t mr, int64_t nr);

}  // namespace einstage
