// Config: every setting einstage takes from the environment, in one documented struct, read from the process
// environment once. Stage: ir (the lowest layer, because the compiler's pass dumps and the scratch allocator of tensor
// storage (ir/Scratch.h) read it as well as the runtime). Depends on ir/Error.h and ir/Quote.h.
//
// Each field has a default, an environment variable that overrides it, and may be overridden again by an explicit
// option (ConfigOptions, which RuntimeOptions, EinsumOptions and the command line's flags fill):
//
//   explicit option > environment variable > default
//
// | field                | variable                  | accepted                                 | default        |
// | threads              | EINSTAGE_NUM_THREADS      | a whole number from 1 to 1024            | 0: every CPU   |
// | kernel_cache_dir     | EINSTAGE_CACHE_DIR        | a directory (else $XDG_CACHE_HOME/       | "" (no disk    |
// |                      |                           | einstage, else $HOME/.cache/einstage)    | cache)         |
// | jit                  | EINSTAGE_JIT              | 0 or 1                                   | 1              |
// | jit_specialise       | EINSTAGE_JIT_SPECIALISE   | 0 or 1                                   | 1              |
// | jit_direct           | EINSTAGE_JIT_DIRECT       | 0 or 1                                   | 1              |
// | scratch_cache_bytes  | EINSTAGE_TENSOR_CACHE_MB  | a whole number of MiB, 0 to 1048576      | 1024 MiB       |
// | dump_passes          | EINSTAGE_DUMP_PASSES      | 0 or 1                                   | 0              |
// | ad_keep_bytes        | EINSTAGE_AD_KEEP_BYTES    | a whole number of bytes >= 0             | -1: no limit   |
// | kernel_tuning        | EINSTAGE_TUNING           | "off" (the model's kernel parameters) or | "": the tuning |
// |                      |                           | a tuning file (runtime/jit/Tuning.h)     | file, if any   |
//
// A variable set to the empty string counts as unset. Any other value outside the accepted forms is an
// einstage::Error (invalid_argument) naming the variable, its value (escaped by ir/Quote.h) and what it accepts,
// raised by every call that resolves a Config from it, never a silent default; a field given by an explicit option
// does not read its variable at all, so a bad value there is not an error. Config::from(env, options) is a pure
// function of its arguments (tests feed it maps, and ExecutionContext(Config) runs on the result, so two contexts in
// one process can have different settings); Config::process(options) applies it to the process environment as it is
// when called (a context made from options reads it then), and Config::process() to a snapshot taken at its first
// call (the built-in default context's, runtime/Context.h). current_environment() is the only place in the library
// that reads the environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace einstage {

/// Environment variables by name (only the ones Config reads matter).
using Environment = std::map<std::string, std::string, std::less<>>;

/// Explicit settings; each one set takes precedence over its environment variable. Every member has an initializer
/// so that `ConfigOptions{.threads = 2}` leaves the rest unset without -Wmissing-field-initializers warnings.
struct ConfigOptions {
  std::optional<int> threads{};  // 0: the default (every CPU this process may use)
  std::optional<std::string> kernel_cache_dir{};
  std::optional<bool> jit{};
  std::optional<bool> jit_specialise{};
  std::optional<bool> jit_direct{};
  std::optional<size_t> scratch_cache_bytes{};
  std::optional<bool> dump_passes{};
  std::optional<int64_t> ad_keep_bytes{};  // -1: no limit
  std::optional<std::string> kernel_tuning{};
};

struct Config {
  /// Threads for the kernels; 0 means every CPU this process may use (runtime/Cpus.h: available_cpus()).
  int threads = 0;
  /// Where compiled kernels are kept on disk ("" keeps them in memory only).
  std::string kernel_cache_dir;
  /// Floating-point contractions run on JIT-compiled kernels (false: the portable kernel).
  bool jit = true;
  /// Hot small steps get a shape-specialised kernel compiled in the background (runtime/jit/Specialise.h).
  bool jit_specialise = true;
  /// Small problems may take the JIT's direct (no-pack) path (false forces the packed path).
  bool jit_direct = true;
  /// Bytes of freed memory a context's ScratchAllocator (ir/Scratch.h) keeps for reuse (0: none is kept).
  size_t scratch_cache_bytes = size_t{1} << 30;
  /// The compiler's pipelines print the program after every pass to stderr.
  bool dump_passes = false;
  /// Bytes of forward intermediates an einsum's reverse pass keeps; the rest are recomputed when read
  /// (extensions/einsum/exec/TreeAd.h). -1: no limit.
  int64_t ad_keep_bytes = -1;
  /// The JIT's CPU-dependent kernel parameters (runtime/jit/Tuning.h): "" takes the tuning file stored beside the
  /// kernel cache by `einstage tune` when there is one (else the model's), "off" the model's, anything else is the
  /// path of a tuning file to use instead. Read once per process.
  std::string kernel_tuning;

  /// The largest thread count any option or EINSTAGE_NUM_THREADS accepts.
  static constexpr int kMaxThreads = 1024;
  /// The largest EINSTAGE_TENSOR_CACHE_MB (1 TiB).
  static constexpr uint64_t kMaxScratchCacheMb = uint64_t{1} << 20;

  /// The settings for `env` and `options` (option > variable > default); throws on a bad variable or option.
  static Config from(const Environment& env, const ConfigOptions& options = {});
  /// Config::from applied to the process environment as it was at the first call of process() (or
  /// process_environment()): computed once; a bad variable is raised by every call.
  static const Config& process();
  /// Config::from applied to the process environment as it is now, with explicit options (computed on every call:
  /// an ExecutionContext made from options reads the environment when it is made).
  static Config process(const ConfigOptions& options);
  /// The snapshot of the variables Config reads, taken from the process environment at the first call.
  static const Environment& process_environment();
  /// The variables Config reads, from the process environment as it is now.
  static Environment current_environment();

  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace einstage
