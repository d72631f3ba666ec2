// Cache blocks from the analytic model (runtime/jit/Blocking.h) on made-up CPUs: a Sapphire-Rapids-like core gets
// the blocks first tuned on this project's Xeon, a Zen-3-like core smaller, distinct ones, a small L3 narrows NC;
// and the sysfs reader on fixture directories, with fallbacks for missing or unreadable levels.
#include "runtime/jit/Blocking.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/TileModel.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

using namespace einstage;

namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

// The blocks for the tile the model picks on that CPU (TileModel.h), as default_blocking gives them on the host.
GettBlocking for_default_tile(const CacheInfo& caches, DType real, bool avx512) {
  const MicroKernelSpec tile = model_micro_kernel(real, vector_isa(avx512), caches);
  return blocking_for(caches, static_cast<int64_t>(size_of(real)), tile.mr, tile.nr);
}

bool same(const GettBlocking& x, const GettBlocking& y) { return x.mc == y.mc && x.kc == y.kc && x.nc == y.nc; }

void write_index(const std::filesystem::path& root, int index, const std::string& level, const std::string& type,
                 const std::string& size) {
  const auto dir = root / "sys/devices/system/cpu/cpu0/cache" / ("index" + std::to_string(index));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "level") << level << "\n";
  std::ofstream(dir / "type") << type << "\n";
  std::ofstream(dir / "size") << size << "\n";
}

}  // namespace

TEST_CASE("blocking: Sapphire-Rapids-like and Zen-3-like cores get sensible, distinct blocks") {
  // 48 KiB L1d, 2 MiB L2, 105 MiB L3, AVX-512 tiles 24 x 8 (f64) and 48 x 8 (f32).
  const CacheInfo spr{48 * KiB, 2 * MiB, 105 * MiB};
  const GettBlocking spr64 = for_default_tile(spr, DType::f64, true);
  CHECK(spr64.mc == 480);
  CHECK(spr64.kc == 256);
  CHECK(spr64.nc == 4096);
  const GettBlocking spr32 = for_default_tile(spr, DType::f32, true);
  CHECK(spr32.mc == 480);
  CHECK(spr32.kc == 512);
  CHECK(spr32.nc == 4096);
  CHECK(direct_a_limit(spr) == 40 * KiB);
  CHECK(lane_kc(spr, 64, 4, 6) == 64);  // 4 x 6 zmm lane tiles

  // 32 KiB L1d, 512 KiB L2, 32 MiB L3 per CCX, AVX2 tiles 8 x 6 (f64) and 16 x 6 (f32).
  const CacheInfo zen3{32 * KiB, 512 * KiB, 32 * MiB};
  const GettBlocking zen64 = for_default_tile(zen3, DType::f64, false);
  CHECK(zen64.mc == 112);
  CHECK(zen64.kc == 256);  // the third-of-L1 rule's 224, raised to kMinKc
  CHECK(zen64.nc == 4092);  // 4096 rounded down to a multiple of NR = 6
  const GettBlocking zen32 = for_default_tile(zen3, DType::f32, false);
  CHECK(zen32.mc == 128);
  CHECK(zen32.kc == 448);
  CHECK(direct_a_limit(zen3) < direct_a_limit(spr));
  CHECK(lane_kc(zen3, 32, 3, 4) == 120);  // 3 x 4 ymm lane tiles
  CHECK_FALSE(same(zen64, spr64));

  // 32 KiB L1d, 1 MiB L2, 32 MiB L3, AVX-512 tiles: the third-of-L1 KC (168 f64) is raised to 256; f32 keeps 336.
  const CacheInfo zen4{32 * KiB, 1 * MiB, 32 * MiB};
  const GettBlocking zen4_64 = for_default_tile(zen4, DType::f64, true);
  CHECK(zen4_64.kc == 256);
  CHECK(zen4_64.mc == 240);
  CHECK(zen4_64.nc == 4096);
  CHECK(for_default_tile(zen4, DType::f32, true).kc == 336);

  // Every block holds what the model says it holds.
  for (const CacheInfo& c : {spr, zen3, zen4}) {
    for (DType real : {DType::f32, DType::f64}) {
      for (bool avx512 : {false, true}) {
        const MicroKernelSpec tile = model_micro_kernel(real, vector_isa(avx512), c);
        const int64_t s = static_cast<int64_t>(size_of(real));
        const GettBlocking b = for_default_tile(c, real, avx512);
        CAPTURE(c.l1d);
        CAPTURE(avx512);
        CHECK(b.mc % tile.mr == 0);
        CHECK(b.nc % tile.nr == 0);
        // The B sliver in a third of L1, or at KC = kMinKc in half of it.
        CHECK(tile.nr * b.kc * s <= (b.kc == kMinKc ? c.l1d / 2 : c.l1d / 3));
        CHECK(b.mc * b.kc * s <= c.l2 / 2);           // the A block in half of L2
        CHECK(b.kc * b.nc * s <= c.l3 / 2);           // the B panel in half of L3
      }
    }
  }
}

TEST_CASE("blocking: a small L3 narrows NC; a tiny cache still gives usable blocks") {
  const GettBlocking small_l3 = for_default_tile({48 * KiB, 2 * MiB, 4 * MiB}, DType::f64, true);
  CHECK(small_l3.nc == 1024);
  const GettBlocking tiny = blocking_for({1 * KiB, 4 * KiB, 0}, 8, 24, 8);
  CHECK(tiny.kc == 8);
  CHECK(tiny.mc == 24);
  CHECK(tiny.nc == 8);
}

namespace {

// Recorded cpuid answers. A Zen 5 KVM guest (AMD EPYC, no cache/ folder in sysfs): no leaf 4, a topology leaf
// 0x8000001D that answers type 0, and the legacy leaves (48 KiB L1d, 1 MiB L2, L3 1016 x 512 KiB as the guest says).
std::array<uint32_t, 4> zen5_guest(uint32_t leaf, uint32_t) {
  switch (leaf) {
    case 0: return {0xd, 0, 0, 0};
    case 0x80000000u: return {0x80000021u, 0, 0, 0};
    case 0x80000005u: return {0xff48ff40u, 0xff48ff40u, 0x30080140u, 0x20080140u};
    case 0x80000006u: return {0x48002200u, 0x68004200u, 0x04006140u, 0x0fe09140u};
    default: return {0, 0, 0, 0};
  }
}
// An Intel Xeon's leaf 4: L1d 48 KiB (12 ways x 64 B x 64 sets), L1i, L2 2 MiB (16 ways x 2048 sets), L3 105 MiB.
std::array<uint32_t, 4> xeon(uint32_t leaf, uint32_t sub) {
  auto params = [](uint32_t type, uint32_t level, uint32_t ways, uint32_t sets) -> std::array<uint32_t, 4> {
    return {type | (level << 5), ((ways - 1) << 22) | 63u, sets - 1, 0};
  };
  if (leaf == 0) return {0x1b, 0, 0, 0};
  if (leaf == 0x80000000u) return {0x80000008u, 0, 0, 0};
  if (leaf != 4) return {0, 0, 0, 0};
  switch (sub) {
    case 0: return params(1, 1, 12, 64);
    case 1: return params(2, 1, 8, 64);
    case 2: return params(3, 2, 16, 2048);
    case 3: return params(3, 3, 15, 114688);
    default: return {0, 0, 0, 0};
  }
}
std::array<uint32_t, 4> nothing(uint32_t, uint32_t) { return {0, 0, 0, 0}; }

}  // namespace

TEST_CASE("blocking: cache sizes from cpuid where sysfs has none (a guest that hides them)") {
  const CacheInfo guest = cpuid_cache_info(zen5_guest);
  CHECK(guest.l1d == 48 * KiB);
  CHECK(guest.l2 == 1 * MiB);
  CHECK(guest.l3 == 1016 * 512 * KiB);
  const CacheInfo intel = cpuid_cache_info(xeon);
  CHECK(intel.l1d == 48 * KiB);
  CHECK(intel.l2 == 2 * MiB);
  CHECK(intel.l3 == 15 * 64 * 114688);
  const CacheInfo none = cpuid_cache_info(nothing);
  CHECK(none.l1d == 0);
  CHECK(none.l2 == 0);

  // sysfs first, cpuid for the levels it lacks, the fallback last.
  test::TempDir empty;
  const CacheInfo merged = merge_cache_info(empty.path(), guest);
  CHECK(merged.l1d == 48 * KiB);
  CHECK(merged.l2 == 1 * MiB);
  test::TempDir partial;
  write_index(partial.path(), 0, "1", "Data", "32K");
  const CacheInfo mixed = merge_cache_info(partial.path(), CacheInfo{48 * KiB, 0, 0});
  CHECK(mixed.l1d == 32 * KiB);
  CHECK(mixed.l2 == kFallbackCaches.l2);
  // The direct path's A limit on the guest's 48 KiB L1d takes the 32 KiB A of a grid step at bond 8 (f64 64 x 64).
  CHECK(direct_a_limit(merged) >= 64 * 64 * 8);
  CHECK(direct_a_limit(kFallbackCaches) < 64 * 64 * 8);
  // This machine: whatever it is, every level is known and positive.
  CHECK(host_cache_info().l1d > 0);
  CHECK(host_cache_info().l2 >= host_cache_info().l1d);
}

TEST_CASE("blocking: cache sizes from sysfs, with fallbacks for what cannot be read") {
  test::TempDir dir;
  write_index(dir.path(), 0, "1", "Data", "48K");
  write_index(dir.path(), 1, "1", "Instruction", "32K");
  write_index(dir.path(), 2, "2", "Unified", "2048K");
  write_index(dir.path(), 3, "3", "Unified", "105M");
  const CacheInfo read = read_cache_info(dir.path());
  CHECK(read.l1d == 48 * KiB);
  CHECK(read.l2 == 2 * MiB);
  CHECK(read.l3 == 105 * MiB);

  test::TempDir partial;
  write_index(partial.path(), 0, "1", "Data", "32K");
  write_index(partial.path(), 2, "2", "Unified", "lots");
  const CacheInfo fallback = read_cache_info(partial.path());
  CHECK(fallback.l1d == 32 * KiB);
  CHECK(fallback.l2 == kFallbackCaches.l2);
  CHECK(fallback.l3 == kFallbackCaches.l3);

  test::TempDir empty;
  const CacheInfo none = read_cache_info(empty.path());
  CHECK(none.l1d == kFallbackCaches.l1d);
  CHECK(none.l2 == kFallbackCaches.l2);
  CHECK(none.l3 == kFallbackCaches.l3);
}
