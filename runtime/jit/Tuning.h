// Tuning: the JIT's CPU-dependent kernel parameters as an execution context uses them, from the model (TileModel.h,
// Blocking.h), from a tuning file that `einstage tune` measured on this CPU (TuneRun.h) and stored beside the kernel
// cache, or from a file named by EINSTAGE_TUNING (ir/Config.h: Config::kernel_tuning). Each context resolves its own
// from its Config (GemmTuning, held by its JitState) and passes it to every GETT set-up; nothing here is process
// state but the host's facts (its key, its model). Stage: runtime (JIT internals). Depends on ir and
// runtime/jit/{Blocking,MicroKernel,TileModel}.h; no LLVM type.
//
// What tuning may change is what leaves every result's bits as they are, so that on one machine the same inputs give
// the same bits with and without a tuning file, in every process and at every thread count: the packed GEMM's
// register tile (each element of C is still summed k = 0, 1, ... inside each KC block, whichever tile holds it) and
// its MC and NC blocks (which rows and columns form a block). What decides the order of additions stays the model's,
// from the CPU's cache sizes alone: KC (the KC blocks are summed one after another), the lane kernels' KC, the direct
// path's limits and tiles (a direct kernel sums all of k at once), the dot-product path and the tiny-problem path.
// The thread split never changes bits (ThreadPool.h), and its thresholds are built in.
//
// A tuning file is JSON:
//   {"format": "einstage-tuning 1", "cpu": "...", "llvm": "19.1.7", "isa": "avx512",
//    "f64": {"mr": 24, "nr": 8, "mc": 240, "nc": 4096}, "f32": {...}, "notes": ["...", ...]}
// A stored file is named tuning-<hash of its key>.json in the kernel-cache directory (Config::kernel_cache_dir) and is
// used only when its key (cpu: the cpuid brand string with family, model and stepping; llvm: the LLVM version; isa:
// avx512 or avx2, the JIT's vector width) is this process's. A file named by EINSTAGE_TUNING needs only "isa" and the
// dtypes it sets ("f64" and/or "f32"; a missing dtype or field keeps the model's value). Every value is checked: the
// tile must fit the vector registers (TileModel.h: tile_fits), mr be a multiple of the vector lanes, mc a multiple of
// mr, nc of nr, both from 1 to 65536. A file that is missing, unreadable, not JSON, made for another CPU or LLVM, or
// holds a bad value is not used: the context runs on the model's parameters and prints one warning on stderr that
// names the file, what is wrong and how to fix it (rerun `einstage tune`, delete the file, or unset EINSTAGE_TUNING).
#pragma once

#include "ir/Config.h"
#include "ir/DType.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/MicroKernel.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace einstage {

/// The tunable parameters of one real dtype's packed GEMM: the mr x nr register tile (in reals) and its MC x NC
/// blocks (KC is the model's: Tuning.h's first paragraph).
struct GemmParams {
  int mr = 0, nr = 0;
  int64_t mc = 0, nc = 0;
  friend bool operator==(const GemmParams&, const GemmParams&) = default;
};

/// The tunable parameters for one vector ISA (AVX-512: 64-byte vectors; AVX2: 32).
struct KernelTuning {
  bool avx512 = false;
  GemmParams f32, f64;
  const GemmParams& of(DType real) const { return real == DType::f64 ? f64 : f32; }
  GemmParams& of(DType real) { return real == DType::f64 ? f64 : f32; }
  friend bool operator==(const KernelTuning&, const KernelTuning&) = default;
};

/// What a stored tuning file is keyed by.
struct TuningKey {
  std::string cpu;   // e.g. "AMD EPYC 9B45 (family 26 model 2 stepping 1)"
  std::string llvm;  // e.g. "19.1.7"
  bool avx512 = false;
};

/// This process's key: the CPU's cpuid brand string, family, model and stepping, the LLVM version einstage was built
/// with, and whether the CPU has AVX-512 (runtime/kernels/HostIsa.h).
const TuningKey& host_tuning_key();

/// The model's parameters for one vector ISA on `caches`: TileModel.h's tile and Blocking.h's blocks for it.
KernelTuning model_tuning(bool avx512, const CacheInfo& caches);

/// KC of a real dtype for one vector ISA: the model tile's (blocking_for), whatever tile is in force.
int64_t model_kc(DType real, bool avx512, const CacheInfo& caches);

/// Where `einstage tune` stores the tuning for `key` in `cache_dir`: "<cache_dir>/tuning-<16 hex digits>.json";
/// "" when cache_dir is "" (no disk cache).
std::string tuning_path(const std::string& cache_dir, const TuningKey& key);

/// The file's JSON text for `tuning` made under `key`, with `notes` (what was measured) kept as a list of lines.
std::string tuning_json(const KernelTuning& tuning, const TuningKey& key, const std::vector<std::string>& notes);

/// Reads a tuning file's text: a stored one (`stored`: cpu, llvm and isa must be key's) or an EINSTAGE_TUNING one
/// (isa must be key's; missing values are `model`'s). Throws Error(invalid_argument) whose message says what is wrong
/// ("f64.mc is 100; expected a multiple of mr (24) from 1 to 65536") without naming the file.
KernelTuning parse_tuning(std::string_view text, const TuningKey& key, bool stored, const KernelTuning& model);

enum class TuningSource { model, file, override_file };

/// The parameters in force, where they came from, and why a file was not used.
struct TuningInForce {
  KernelTuning params;
  TuningSource source = TuningSource::model;
  std::string path;     // the file used, or the one refused ("" when none was looked at or found)
  std::string warning;  // "" or the one-line warning printed for a file that was not used
};

/// The parameters for `setting` (Config::kernel_tuning: "", "off" or a file) with `cache_dir`'s stored file, for a
/// process whose key is `key` and whose model parameters are `model`. Reads files only; prints nothing.
TuningInForce resolve_tuning(const std::string& setting, const std::string& cache_dir, const TuningKey& key,
                             const KernelTuning& model);

/// resolve_tuning for `config` (its kernel_tuning and kernel_cache_dir) on this host (host_tuning_key(), model_tuning
/// on host_cache_info()); its warning, if any, is printed on stderr.
TuningInForce host_tuning(const Config& config);

/// The packed GEMM's parameters one execution context runs with, ready for the GETT driver (Gett.h): per real dtype
/// and vector width the candidate tiles (MicroKernel.h: micro_kernel_candidates around the tile in force, which comes
/// first) and the blocks (MC and NC in force, KC the model's). A TuningInForce's parameters serve the vector width
/// they were made for; the other width gets the model's. Immutable, so one object serves concurrent calls. A
/// context's JIT owns one (runtime/jit/JitState.h: tuning(), resolved from the context's Config), so two contexts
/// with different Config::kernel_tuning each run with their own; model() is the host model's, an immutable host fact,
/// for calls made without a context.
class GemmTuning {
 public:
  explicit GemmTuning(TuningInForce in_force);
  /// The model's parameters on this host (no file read), made once.
  static const GemmTuning& model();

  const TuningInForce& in_force() const { return in_force_; }
  GettBlocking blocking(DType real, bool avx512) const { return blocks_[index(real, avx512)]; }
  const std::vector<MicroKernelChoice>& candidates(DType real, bool avx512) const {
    return candidates_[index(real, avx512)];
  }
  const MicroKernelSpec& tile(DType real, bool avx512) const { return candidates(real, avx512).front().spec; }

 private:
  static int index(DType real, bool avx512);
  TuningInForce in_force_;
  std::array<GettBlocking, 4> blocks_;
  std::array<std::vector<MicroKernelChoice>, 4> candidates_;
};

/// "model", "tuned" or "EINSTAGE_TUNING".
std::string_view source_name(TuningSource source);

}  // namespace einstage
