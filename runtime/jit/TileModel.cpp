#include "runtime/jit/TileModel.h"

namespace einstage {

VectorIsa vector_isa(bool avx512) {
  VectorIsa isa;
  isa.vector_bytes = avx512 ? 64 : 32;
  isa.registers = avx512 ? 32 : 16;
  return isa;
}

bool tile_fits(const VectorIsa& isa, RegisterTile t) {
  return t.vectors >= 1 && t.nr >= 1 && t.vectors * t.nr + t.vectors + 1 <= isa.registers;
}

bool tile_busy(const VectorIsa& isa, RegisterTile t) {
  const int fmas = t.vectors * t.nr;
  return fmas >= isa.fma_units * isa.fma_latency && (t.vectors + t.nr) * isa.fma_units <= isa.load_ports * fmas;
}

double tile_cost(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes, RegisterTile t) {
  (void)isa;
  // The KC the tile's B sliver allows in a third of L1d (Blocking.h's rule before its raise to kMinKc, which is a
  // correction for small L1s rather than a property of the tile).
  const double kc = double(caches.l1d) / (3.0 * t.nr * double(elem_bytes));
  return 1.0 / t.nr + kMemoryWeight * 2.0 / kc;
}

RegisterTile register_tile(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes) {
  RegisterTile best;
  double best_cost = 0;
  for (int v = 1; v <= isa.registers; ++v) {
    for (int nr = 1; nr <= isa.registers; ++nr) {
      const RegisterTile t{v, nr};
      if (!tile_fits(isa, t) || !tile_busy(isa, t)) continue;
      const double cost = tile_cost(isa, caches, elem_bytes, t);
      const int acc = v * nr, best_acc = best.vectors * best.nr;
      // Costs within rounding of each other are ties (e.g. two tiles whose KC both rose to kMinKc).
      const bool cheaper = best.vectors == 0 || cost < best_cost - 1e-12;
      const bool tie = best.vectors != 0 && cost <= best_cost + 1e-12 && !cheaper;
      if (cheaper || (tie && (acc > best_acc || (acc == best_acc && v > best.vectors)))) best = t, best_cost = cost;
    }
  }
  return best;
}

RegisterTile widest_tile(const VectorIsa& isa, int vectors, int max_nr) {
  for (int nr = max_nr; nr >= 1; --nr)
    if (tile_fits(isa, {vectors, nr})) return {vectors, nr};
  return {};
}

RegisterTile measured_tile(const VectorIsa& isa) { return isa.registers >= 32 ? RegisterTile{3, 8} : RegisterTile{2, 6}; }

}  // namespace einstage
