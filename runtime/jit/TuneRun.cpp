#include "runtime/jit/TuneRun.h"

#include "ir/Error.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/TileModel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <tuple>

namespace einstage {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A 64-byte aligned, zero-filled buffer of `bytes`.
struct Buffer {
  std::unique_ptr<char[]> storage;
  char* data = nullptr;
  explicit Buffer(size_t bytes) : storage(new char[bytes + 64]()) {
    data = storage.get() + (64 - reinterpret_cast<uintptr_t>(storage.get()) % 64) % 64;
  }
};

// The macro-kernel's inner loops for one candidate: packed A (mc x kc, slivers of mr), packed B (kc x n, slivers of
// nr), C (mc x n, column-major) accumulated in place.
struct Sweep {
  MicroKernelFn kernel = nullptr;
  int64_t mr = 0, nr = 0, mc = 0, kc = 0, n = 0, elem = 0;
  Buffer a, b, c;
  std::vector<int64_t> col_off;

  Sweep(MicroKernelFn fn, DType real, int64_t mr_, int64_t nr_, int64_t mc_, int64_t kc_, int64_t n_)
      : kernel(fn), mr(mr_), nr(nr_), mc(mc_), kc(kc_), n(n_), elem(int64_t(size_of(real))),
        a(size_t(mc_ * kc_ * elem)), b(size_t(kc_ * n_ * elem)), c(size_t(mc_ * n_ * elem)) {
    // Small values: C grows by at most kc per sweep, far from overflow, never subnormal.
    auto fill = [&](char* p, int64_t count) {
      for (int64_t i = 0; i < count; ++i) {
        const double v = 1.0 / double(1 + i % 7);
        if (real == DType::f64) reinterpret_cast<double*>(p)[i] = v;
        else reinterpret_cast<float*>(p)[i] = float(v);
      }
    };
    fill(a.data, mc * kc);
    fill(b.data, kc * n);
    for (int64_t j = 0; j < nr; ++j) col_off.push_back(j * mc);
  }

  double flops() const { return 2.0 * double(mc) * double(kc) * double(n); }

  // Seconds for one sweep.
  double run() {
    const auto t0 = Clock::now();
    for (int64_t j = 0; j < n; j += nr)
      for (int64_t i = 0; i < mc; i += mr)
        call_jit(kernel, kc, a.data + i * kc * elem, b.data + j * kc * elem, c.data + (i + j * mc) * elem,
                 col_off.data(), mr, nr, int64_t{1});
    return seconds_since(t0);
  }
};

// The best GFLOP/s of each sweep (other load on the machine only slows a sweep down): one warm-up each, then
// kTuneRepeats rounds, round-robin.
std::vector<double> time_sweeps(std::vector<std::unique_ptr<Sweep>>& sweeps) {
  for (auto& s : sweeps) (void)s->run();
  std::vector<std::vector<double>> rates(sweeps.size());
  for (int r = 0; r < kTuneRepeats; ++r)
    for (size_t i = 0; i < sweeps.size(); ++i) rates[i].push_back(sweeps[i]->flops() / sweeps[i]->run() * 1e-9);
  std::vector<double> best;
  for (auto& v : rates) best.push_back(*std::max_element(v.begin(), v.end()));
  return best;
}

// The first candidate (the model's) unless another is at least kTuneMargin faster, and again when the two are timed
// once more on their own; then the fastest, the earlier on a tie. `rates` gets the rates the choice rests on.
size_t choose(std::vector<std::unique_ptr<Sweep>>& sweeps, std::vector<double>& rates) {
  rates = time_sweeps(sweeps);
  size_t best = 0;
  for (size_t i = 1; i < rates.size(); ++i)
    if (rates[i] > rates[best]) best = i;
  if (best == 0 || rates[best] < rates[0] * (1 + kTuneMargin)) return 0;
  std::vector<std::unique_ptr<Sweep>> pair;
  pair.push_back(std::move(sweeps[0]));
  pair.push_back(std::move(sweeps[best]));
  const std::vector<double> again = time_sweeps(pair);
  sweeps[0] = std::move(pair[0]);
  sweeps[best] = std::move(pair[1]);
  // Against switching: the model's better rate of the two rounds, the challenger's worse.
  rates[0] = std::max(rates[0], again[0]);
  rates[best] = std::min(rates[best], again[1]);
  return rates[best] >= rates[0] * (1 + kTuneMargin) ? best : 0;
}

// The model's pick first, then the busy tiles with headroom by increasing cost (ties: more accumulators, then more A
// vectors, as register_tile breaks them), at most kTuneTiles.
std::vector<RegisterTile> tile_candidates(const VectorIsa& isa, const CacheInfo& caches, int64_t elem) {
  const RegisterTile model = register_tile(isa, caches, elem);
  std::vector<std::tuple<double, int, int, RegisterTile>> ranked;
  for (int v = 1; v <= isa.registers; ++v)
    for (int nr = 1; nr <= isa.registers; ++nr) {
      const RegisterTile t{v, nr};
      if (t == model || !tile_leaves_headroom(isa, t) || !tile_busy(isa, t)) continue;
      ranked.emplace_back(tile_cost(isa, caches, elem, t), -v * nr, -v, t);
    }
  std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    return std::tie(std::get<0>(x), std::get<1>(x), std::get<2>(x)) <
           std::tie(std::get<0>(y), std::get<1>(y), std::get<2>(y));
  });
  std::vector<RegisterTile> out{model};
  for (const auto& r : ranked)
    if (out.size() < size_t(kTuneTiles)) out.push_back(std::get<3>(r));
  return out;
}

}  // namespace

std::vector<std::string> TuneResult::notes() const {
  std::vector<std::string> out;
  for (const TuneMeasurement& m : measured)
    out.push_back(fmt::format("{} {}x{} mc {}: {:.1f} GFLOP/s{}", name(m.dtype), m.params.mr, m.params.nr,
                              m.params.mc, m.gflops, m.chosen ? ", chosen" : ""));
  out.push_back(fmt::format("{:.2f} s{}", seconds, budget_reached ? ", some candidates skipped (time budget)" : ""));
  return out;
}

TuneResult tune_kernels(KernelCache& cache, double budget_seconds) {
  const auto t0 = Clock::now();
  const bool avx512 = host_tuning_key().avx512;
  if (cache.host().has_avx512 != avx512)
    fail(ErrorKind::runtime,
         "tune: the JIT compiles {} kernels (LLVM cpu '{}') on a CPU whose cpuid reports {}; the tuning would not "
         "serve its kernels, so nothing was measured",
         cache.host().has_avx512 ? "AVX-512" : "AVX2", cache.host().cpu, avx512 ? "AVX-512" : "no AVX-512");
  const CacheInfo& caches = host_cache_info();
  const VectorIsa isa = vector_isa(avx512);
  TuneResult result;
  result.tuning = model_tuning(avx512, caches);
  const DType dtypes[] = {DType::f64, DType::f32};
  for (size_t d = 0; d < 2; ++d) {
    const DType real = dtypes[d];
    const int64_t elem = int64_t(size_of(real)), lanes = isa.vector_bytes / elem;
    const int64_t kc = model_kc(real, avx512, caches);
    // Each dtype may use its share of what is left of the budget.
    const double deadline = seconds_since(t0) + (budget_seconds - seconds_since(t0)) / double(2 - d);
    MicroKernelSpec base = model_host_micro_kernel(real, avx512);
    std::vector<std::unique_ptr<Sweep>> sweeps;
    std::vector<GemmParams> params;
    for (const RegisterTile& t : tile_candidates(isa, caches, elem)) {
      if (!sweeps.empty() && seconds_since(t0) > deadline * 0.7) {
        result.budget_reached = true;
        break;
      }
      MicroKernelSpec spec = base;
      spec.mr = int(t.vectors * lanes);
      spec.nr = t.nr;
      const GettBlocking b = blocking_for_kc(caches, elem, spec.mr, spec.nr, kc);
      const int64_t n = (384 + spec.nr - 1) / spec.nr * spec.nr;
      sweeps.push_back(std::make_unique<Sweep>(cache.micro_kernel(spec), real, spec.mr, spec.nr, b.mc, kc, n));
      params.push_back({spec.mr, spec.nr, b.mc, b.nc});
    }
    std::vector<double> rates;
    const size_t tile = choose(sweeps, rates);
    for (size_t i = 0; i < params.size(); ++i) result.measured.push_back({real, params[i], rates[i], false});
    // MC for the chosen tile: its model value, half and twice it.
    const GemmParams won = params[tile];
    std::vector<int64_t> mcs{won.mc};
    for (int64_t mc : {won.mc / 2 / won.mr * won.mr, won.mc * 2})
      if (mc >= won.mr && mc <= 65536) mcs.push_back(mc);
    std::vector<std::unique_ptr<Sweep>> blocks;
    for (int64_t mc : mcs) {
      if (!blocks.empty() && seconds_since(t0) > deadline) {
        result.budget_reached = true;
        break;
      }
      blocks.push_back(std::make_unique<Sweep>(sweeps[tile]->kernel, real, won.mr, won.nr, mc, kc, sweeps[tile]->n));
    }
    sweeps.clear();
    std::vector<double> mc_rates;
    const size_t block = choose(blocks, mc_rates);
    for (size_t i = 0; i < blocks.size(); ++i)
      result.measured.push_back({real, {won.mr, won.nr, blocks[i]->mc, won.nc}, mc_rates[i], i == block});
    result.tuning.of(real) = {won.mr, won.nr, blocks[block]->mc, won.nc};
  }
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace einstage
