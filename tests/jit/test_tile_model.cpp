// Register tiles (runtime/jit/TileModel.h): which tiles fit the vector registers and keep the FMA units busy on AVX2
// and AVX-512, that every tile the GETT driver can ask for meets those rules, and what the bandwidth estimate picks on
// made-up cores (where it differs from the measured tiles it is pinned, so a change to it is seen).
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/TileModel.h"

#include <doctest/doctest.h>

#include <string>

using namespace einstage;

namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;
const CacheInfo kXeon{48 * KiB, 2 * MiB, 105 * MiB};  // this project's Xeon (Sapphire-Rapids-like core)
const CacheInfo kZen3{32 * KiB, 512 * KiB, 32 * MiB};

}  // namespace

TEST_CASE("tile model: the ISAs' registers and vector widths") {
  CHECK(vector_isa(true).registers == 32);
  CHECK(vector_isa(true).vector_bytes == 64);
  CHECK(vector_isa(false).registers == 16);
  CHECK(vector_isa(false).vector_bytes == 32);
  CHECK(vector_registers(true) == 32);
  CHECK(vector_registers(false) == 16);
}

TEST_CASE("tile model: which tiles fit the registers and keep the FMA units busy") {
  const VectorIsa avx2 = vector_isa(false), avx512 = vector_isa(true);
  // AVX2: 2 x 6 takes 12 + 2 + 1 = 15 of 16 ymm; 2 x 7 would take 17.
  CHECK(tile_fits(avx2, {2, 6}));
  CHECK(tile_busy(avx2, {2, 6}));
  CHECK_FALSE(tile_fits(avx2, {2, 7}));
  CHECK(tile_fits(avx2, {3, 4}));
  CHECK(tile_busy(avx2, {3, 4}));
  CHECK(tile_fits(avx2, {1, 14}));
  CHECK_FALSE(tile_busy(avx2, {1, 14}));  // 15 loads per 14 FMAs: bound by the load ports
  CHECK_FALSE(tile_busy(avx2, {2, 3}));   // 6 accumulators cannot hide 2 x 4 cycles of FMA latency
  // AVX-512: 3 x 8 takes 28 of 32 zmm, 2 x 14 31; 4 x 7 would take 33.
  CHECK(tile_fits(avx512, {3, 8}));
  CHECK(tile_busy(avx512, {3, 8}));
  CHECK(tile_fits(avx512, {2, 14}));
  CHECK(tile_busy(avx512, {2, 14}));
  CHECK_FALSE(tile_fits(avx512, {4, 7}));
  CHECK(tile_fits(avx512, {1, 24}));
  CHECK_FALSE(tile_busy(avx512, {1, 24}));
  CHECK(widest_tile(avx512, 2, 14) == RegisterTile{2, 14});
  CHECK(widest_tile(avx512, 3, 24) == RegisterTile{3, 9});
  CHECK(widest_tile(avx2, 2, 24) == RegisterTile{2, 6});
  CHECK(widest_tile(avx2, 16, 24) == RegisterTile{});
}

TEST_CASE("tile model: every GEMM tile the driver may take fits; the default also keeps the FMA units busy") {
  for (bool avx512 : {false, true}) {
    const VectorIsa isa = vector_isa(avx512);
    CHECK(tile_fits(isa, measured_tile(isa)));
    CHECK(tile_busy(isa, measured_tile(isa)));
    for (DType real : {DType::f32, DType::f64}) {
      const MicroKernelSpec base = default_micro_kernel(real, avx512);
      INFO(base.symbol());
      CHECK(base.lanes * static_cast<int>(size_of(real)) == isa.vector_bytes);
      CHECK(base.mr == measured_tile(isa).vectors * base.lanes);
      CHECK(base.nr == measured_tile(isa).nr);
      for (const MicroKernelChoice& c : micro_kernel_candidates(real, avx512)) {
        INFO(c.spec.symbol());
        CHECK(c.spec.mr % c.spec.lanes == 0);
        const RegisterTile t{c.spec.mr / c.spec.lanes, c.spec.nr};
        CHECK(tile_fits(isa, t));
        // Tiles the driver treats as full rate are busy; the one-vector tile is load-bound and weighted below 1.
        CHECK((tile_busy(isa, t) || c.efficiency < 1));
      }
    }
  }
  // The shapes: AVX-512 24 x 8 f64 and 48 x 8 f32 (this Xeon, Zen 4); AVX2 8 x 6 f64 and 16 x 6 f32 (Zen 3).
  CHECK(default_micro_kernel(DType::f64, true).mr == 24);
  CHECK(default_micro_kernel(DType::f64, true).nr == 8);
  CHECK(default_micro_kernel(DType::f32, true).mr == 48);
  CHECK(default_micro_kernel(DType::f64, false).mr == 8);
  CHECK(default_micro_kernel(DType::f64, false).nr == 6);
  CHECK(default_micro_kernel(DType::f32, false).mr == 16);
}

TEST_CASE("tile model: the bandwidth estimate's picks on made-up cores") {
  // AVX2: the measured tiles, on a Zen 3 core and on a 48 KiB L1d.
  for (const CacheInfo& c : {kZen3, kXeon}) {
    CAPTURE(c.l1d);
    CHECK(register_tile(vector_isa(false), c, 8) == RegisterTile{2, 6});
    CHECK(register_tile(vector_isa(false), c, 4) == RegisterTile{2, 6});
  }
  // AVX-512 on a 48 KiB L1d (this Xeon): the measured 24 x 8 for f64; 32 x 11 for f32 (measured level with 48 x 8).
  CHECK(register_tile(vector_isa(true), kXeon, 8) == RegisterTile{3, 8});
  CHECK(register_tile(vector_isa(true), kXeon, 4) == RegisterTile{2, 11});
  // AVX-512 on a 32 KiB L1d (Zen 4): 24 x 7 f64 and 48 x 9 f32, not measured; 3 x 9 spills (TileModel.h).
  const CacheInfo zen4{32 * KiB, 1 * MiB, 32 * MiB};
  CHECK(register_tile(vector_isa(true), zen4, 8) == RegisterTile{3, 7});
  CHECK(register_tile(vector_isa(true), zen4, 4) == RegisterTile{3, 9});
  // Its cost: a narrower tile reads A more often, a wider one shortens KC.
  const VectorIsa avx512 = vector_isa(true);
  CHECK(tile_cost(avx512, kXeon, 8, {3, 8}) == doctest::Approx(1.0 / 8 + 16 * 2.0 / 2048 * 8));
  CHECK(tile_cost(avx512, kXeon, 8, {2, 14}) == doctest::Approx(1.0 / 14 + 16 * 2.0 / 2048 * 14));
  CHECK(tile_cost(avx512, kXeon, 8, {2, 12}) > tile_cost(avx512, kXeon, 8, {3, 8}));
  CHECK(tile_cost(avx512, kXeon, 8, {4, 6}) > tile_cost(avx512, kXeon, 8, {3, 8}));
}
