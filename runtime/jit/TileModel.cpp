#include "runtime/jit/TileModel.h"

#include "ir/Error.h"

namespace einstage {

VectorIsa vector_isa(bool avx512) {
  VectorIsa isa;
  isa.vector_bytes = avx512 ? 64 : 32;
  isa.registers = avx512 ? 32 : 16;
  return isa;
}

namespace {

int registers_used(RegisterTile t) { return t.vectors * t.nr + t.vectors + 1; }

}  // namespace

bool tile_fits(const VectorIsa& isa, RegisterTile t) {
  return t.vectors >= 1 && t.nr >= 1 && registers_used(t) <= isa.registers;
}

bool tile_leaves_headroom(const VectorIsa& isa, RegisterTile t) {
  return tile_fits(isa, t) && registers_used(t) <= isa.registers - isa.registers / 16;
}

bool tile_busy(const VectorIsa& isa, RegisterTile t) {
  const int fmas = t.vectors * t.nr;
  return fmas >= isa.fma_units * isa.fma_latency && (t.vectors + t.nr) * isa.fma_units <= isa.load_ports * fmas;
}

double tile_cost(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes, RegisterTile t) {
  const double f = isa.fma_units, b = isa.vector_bytes, v = t.vectors, nr = t.nr;
  const int64_t lanes = isa.vector_bytes / elem_bytes;
  const double kc = double(blocking_for(caches, elem_bytes, t.vectors * lanes, t.nr).kc);
  const double loads = f * (v + nr) / (isa.load_ports * v * nr);
  const double a_from_l2 = f * b / (nr * kL2BytesPerCycle);
  const double c_from_memory = 2 * f * b / (kc * kMemoryBytesPerCycle);
  return loads + a_from_l2 + c_from_memory;
}

RegisterTile register_tile(const VectorIsa& isa, const CacheInfo& caches, int64_t elem_bytes) {
  RegisterTile best;
  double best_cost = 0;
  // The registers a tile uses grow with both of its sides, so the first nr without headroom ends a row and the first
  // vector count without headroom at nr = 1 ends the search: the same candidates in the same order as trying all
  // registers x registers, in a few dozen steps (a context's first JIT call makes this search; issue 40).
  for (int v = 1; v <= isa.registers && tile_leaves_headroom(isa, {v, 1}); ++v) {
    for (int nr = 1; nr <= isa.registers; ++nr) {
      const RegisterTile t{v, nr};
      if (!tile_leaves_headroom(isa, t)) break;
      if (!tile_busy(isa, t)) continue;
      const double cost = tile_cost(isa, caches, elem_bytes, t);
      const int acc = v * nr, best_acc = best.vectors * best.nr;
      // Costs within rounding of each other are ties.
      const bool cheaper = best.vectors == 0 || cost < best_cost - 1e-12;
      const bool tie = best.vectors != 0 && cost <= best_cost + 1e-12 && !cheaper;
      if (cheaper || (tie && (acc > best_acc || (acc == best_acc && v > best.vectors)))) best = t, best_cost = cost;
    }
  }
  return best;
}

MicroKernelSpec model_micro_kernel(DType real_dtype, const VectorIsa& isa, const CacheInfo& caches) {
  EIN_ASSERT(real_dtype == DType::f32 || real_dtype == DType::f64, "micro-kernels are real");
  const int64_t elem_bytes = static_cast<int64_t>(size_of(real_dtype));
  const RegisterTile tile = register_tile(isa, caches, elem_bytes);
  EIN_ASSERT(tile.vectors > 0, "every vector ISA has a busy register tile");
  MicroKernelSpec spec;
  spec.dtype = real_dtype;
  spec.lanes = isa.vector_bytes / static_cast<int>(elem_bytes);
  spec.mr = tile.vectors * spec.lanes;
  spec.nr = tile.nr;
  spec.k_unroll = 4;
  return spec;
}

RegisterTile widest_tile(const VectorIsa& isa, int vectors, int max_nr) {
  for (int nr = max_nr; nr >= 1; --nr)
    if (tile_fits(isa, {vectors, nr})) return {vectors, nr};
  return {};
}

}  // namespace einstage
