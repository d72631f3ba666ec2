// `einstage tune` and `einstage show --cpu`: the JIT's CPU-dependent kernel parameters. tune times the packed GEMM's
// register tiles and MC blocks on this CPU (runtime/jit/TuneRun.h, under 2 s) and stores the choice beside the kernel
// cache, where every later process reads it (runtime/jit/Tuning.h); show --cpu prints the CPU, its vector features
// and cache sizes, and every parameter in force with where it came from.
#include "ir/Config.h"
#include "ir/FileIO.h"
#include "runtime/Context.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/TuneRun.h"
#include "runtime/jit/Tuning.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

namespace einstage::cli {

namespace {

constexpr std::string_view kTuneHelp =
    "usage: einstage tune [--print-only]\n"
    "\n"
    "Times the JIT's GEMM register tiles and cache blocks on this CPU (one thread, under 2 s) and stores the choice\n"
    "beside the kernel cache (EINSTAGE_CACHE_DIR, else $XDG_CACHE_HOME/einstage, else $HOME/.cache/einstage) as\n"
    "tuning-<key>.json, keyed by the CPU model and the LLVM version; every later process on this CPU reads it.\n"
    "Only parameters that change no result's bits are tuned (register tile, MC and NC blocks), so results are the\n"
    "same bits before and after. 'einstage show --cpu' prints the parameters in force; EINSTAGE_TUNING=off ignores\n"
    "the stored tuning and EINSTAGE_TUNING=FILE uses FILE instead (docs/reference.md, \"Kernel tuning\").\n"
    "\n"
    "options:\n"
    "  --print-only   measure and print, store nothing\n"
    "  -h, --help     print this help\n";

constexpr double kBudgetSeconds = 1.8;

std::string bytes_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

// The vector features the kernels use, as LLVM reports them for the JIT's CPU.
std::string kernel_features(const std::string& features) {
  std::vector<std::string> found;
  for (const char* f : {"avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"})
    if (("," + features + ",").find(fmt::format(",+{},", f)) != std::string::npos) found.emplace_back(f);
  return found.empty() ? "none" : fmt::format("{}", fmt::join(found, " "));
}

std::string tile_text(const GemmParams& p) { return fmt::format("{} x {}", p.mr, p.nr); }

}  // namespace

int run_tune(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kTuneHelp);
    return 0;
  }
  bool print_only = false;
  ArgScanner scan("tune", args);
  while (scan.next()) {
    if (scan.flag("--print-only")) {
      print_only = true;
      continue;
    }
    usage_error("tune: unexpected argument '{}'; usage: einstage tune [--print-only]", scan.positional());
  }
  const std::string& cache_dir = Config::process().kernel_cache_dir;
  const std::string path = tuning_path(cache_dir, host_tuning_key());
  if (path.empty() && !print_only)
    usage_error("tune: there is no kernel-cache directory to store the tuning in; set EINSTAGE_CACHE_DIR (or HOME), "
                "or pass --print-only");
  KernelCache& cache = default_context().kernels();
  const TuneResult result = tune_kernels(cache, kBudgetSeconds);
  fmt::print("cpu: {}\nllvm: {}, JIT target {}\n", host_tuning_key().cpu, host_tuning_key().llvm, cache.host().cpu);
  for (const std::string& line : result.notes()) fmt::print("  {}\n", line);
  const KernelTuning model = model_tuning(result.tuning.avx512, host_cache_info());
  for (DType real : {DType::f64, DType::f32})
    fmt::print("{}: tile {} (model {}), mc {} (model {}), nc {}\n", name(real), tile_text(result.tuning.of(real)),
               tile_text(model.of(real)), result.tuning.of(real).mc, model.of(real).mc, result.tuning.of(real).nc);
  if (print_only) return 0;
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  write_file_atomically(path, tuning_json(result.tuning, host_tuning_key(), result.notes()), SpecialTarget::replace);
  fmt::print("stored in {}\n", path);
  return 0;
}

int run_show_cpu() {
  KernelCache& cache = default_context().kernels();
  const JitHost& host = cache.host();
  const GemmTuning tuning(host_tuning(Config::process()));  // what default_context()'s JIT resolves (JitState.h)
  const TuningInForce& in_force = tuning.in_force();
  const KernelTuning& t = in_force.params;
  const CacheInfo& caches = host_cache_info();
  fmt::print("cpu:       {}\n", host_tuning_key().cpu);
  fmt::print("llvm:      {}, JIT target {} ({})\n", host.llvm_version, host.cpu, host.triple);
  fmt::print("features:  {} (kernels: {})\n", kernel_features(host.features), host.has_avx512 ? "AVX-512" : "AVX2");
  fmt::print("caches:    L1d {}, L2 {}, L3 {}\n", bytes_text(caches.l1d), bytes_text(caches.l2), bytes_text(caches.l3));
  const std::string stored = tuning_path(Config::process().kernel_cache_dir, host_tuning_key());
  switch (in_force.source) {
    case TuningSource::model:
      if (!in_force.warning.empty()) fmt::print("tuning:    model (not used: {})\n", in_force.warning);
      else if (Config::process().kernel_tuning == "off") fmt::print("tuning:    model (EINSTAGE_TUNING=off)\n");
      else fmt::print("tuning:    model (no tuning file yet; 'einstage tune' stores one in {})\n",
                      stored.empty() ? std::string("the kernel cache") : stored);
      break;
    case TuningSource::file: fmt::print("tuning:    tuned, from {}\n", in_force.path); break;
    case TuningSource::override_file: fmt::print("tuning:    EINSTAGE_TUNING={}\n", in_force.path); break;
  }
  const std::string source(source_name(in_force.source));
  const bool wide = host.has_avx512;
  fmt::print("\n{:<36}{:<14}{:<14}{}\n", "parameter", "f64", "f32", "source");
  auto row = [](std::string_view what, const std::string& f64, const std::string& f32, std::string_view from) {
    fmt::print("{:<36}{:<14}{:<14}{}\n", what, f64, f32, from);
  };
  const GettBlocking b64 = tuning.blocking(DType::f64, wide), b32 = tuning.blocking(DType::f32, wide);
  row("register tile (packed GEMM)", tile_text(t.f64), tile_text(t.f32), source);
  row("MC x NC", fmt::format("{} x {}", b64.mc, b64.nc), fmt::format("{} x {}", b32.mc, b32.nc), source);
  row("KC", std::to_string(b64.kc), std::to_string(b32.kc), "model (orders the additions)");
  const MicroKernelSpec l64 = default_lane_kernel(DType::f64, wide), l32 = default_lane_kernel(DType::f32, wide);
  auto lane_kc_of = [&](const MicroKernelSpec& s, int64_t elem) {
    return lane_kc(caches, s.lanes * elem, s.mr, s.nr);
  };
  row("lane kernel vectors, KC", fmt::format("{} x {}, {}", l64.mr, l64.nr, lane_kc_of(l64, 8)),
      fmt::format("{} x {}, {}", l32.mr, l32.nr, lane_kc_of(l32, 4)), "model (orders the additions)");
  const MicroKernelSpec m64 = model_host_micro_kernel(DType::f64, wide), m32 = model_host_micro_kernel(DType::f32, wide);
  row("direct path: tiles around", fmt::format("{} x {}", m64.mr, m64.nr), fmt::format("{} x {}", m32.mr, m32.nr),
      "model (orders the additions)");
  row("direct path: A up to", bytes_text(direct_a_limit(caches)), bytes_text(direct_a_limit(caches)),
      "model: 5/6 of L1d, and <= 96^3 multiply-adds or k <= 8");
  row("dot-product path", "shape rule", "shape rule", "built in (orders the additions)");
  row("threads from (multiply-adds)", fmt::format("{}", kMinThreadedMacs), fmt::format("{}", kMinThreadedMacs),
      "built in (never changes bits)");
  row("row tiles per thread, at least", std::to_string(kMinRowTilesPerThread), std::to_string(kMinRowTilesPerThread),
      "built in (never changes bits)");
  return 0;
}

}  // namespace einstage::cli
