// KernelCache: the compiled micro-kernels of one JIT instance, compiled lazily once per (dtype, tile) and kept on
// disk so that a second process compiles nothing (runtime stage). Depends on ir and runtime/jit/{Jit,MicroKernel}.h.
//
// Lookup order for a kernel: this cache's table (already in the JIT) -> disk file -> codegen (then written to disk).
// The disk key is the LLVM version, target triple, host CPU name and feature string, and the kernel's parameters
// (its symbol); the file starts with a header holding the key, the payload size and a checksum. An entry is read only
// if it is a regular file of at most 64 MiB (ir/FileIO.h read_regular_file: a FIFO or device never blocks the read);
// a stale, corrupt, truncated or unreadable entry (a directory, a FIFO, a link to /dev/zero) is recompiled with a
// one-line warning on stderr naming the path, and replaced. Files are written with write_file_atomically (temporary
// name, then rename), so concurrent processes never see a partial file. All methods are thread-safe; two threads
// asking for the same kernel compile it once.
#pragma once

#include "runtime/jit/Jit.h"
#include "runtime/jit/MicroKernel.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>
#include <string>

namespace einstage {

/// Counters of one KernelCache (monotone), for tests and benchmarks.
struct JitStats {
  int64_t kernels_compiled = 0;  // codegen runs
  int64_t disk_hits = 0;         // objects loaded from the disk cache
  int64_t disk_writes = 0;       // objects written to the disk cache
  int64_t disk_rejected = 0;     // cache entries found unusable: stale, corrupt, truncated, not a regular file
  double compile_ms = 0;         // wall time spent in codegen
  double load_ms = 0;            // wall time spent reading + linking cached objects
};

class KernelCache {
 public:
  /// A cache backed by `cache_dir` (created on demand); an empty string keeps objects in memory only.
  /// Creates the JIT for `target` (default: the host CPU); throws Error(runtime) if LLVM cannot target this machine.
  /// `warm_up` (a context's caches get their JitState's) goes to LlvmProcess::warm_up before each code generation,
  /// so the process's first one makes LLVM's lazily made statics first (WarmUp.h); an exception from it fails that
  /// kernel's request. nullptr (tests and tools that drive a JIT themselves) generates without it.
  explicit KernelCache(std::string cache_dir, const JitTarget& target = {}, void (*warm_up)() = nullptr);
  ~KernelCache();

  // A context's cache (JitState::kernels(); default_context().kernels() for contract() without a context) keeps its
  // objects in that context's Config::kernel_cache_dir (EINSTAGE_CACHE_DIR, else $XDG_CACHE_HOME/einstage, else
  // $HOME/.cache/einstage, else "": no disk cache).

  /// The compiled kernel for spec (compiled or loaded on first request).
  MicroKernelFn micro_kernel(const MicroKernelSpec& spec);

  /// The compiled lane kernel for spec (spec.lane must be set).
  LaneKernelFn lane_kernel(const MicroKernelSpec& spec) {
    return reinterpret_cast<LaneKernelFn>(reinterpret_cast<void*>(micro_kernel(spec)));
  }

  /// The compiled direct (no-pack) kernel for spec (spec.direct must be set).
  DirectKernelFn direct_kernel(const MicroKernelSpec& spec) {
    return reinterpret_cast<DirectKernelFn>(reinterpret_cast<void*>(micro_kernel(spec)));
  }

  /// The file a kernel is cached in ("" without a disk cache).
  std::string cache_file(const MicroKernelSpec& spec) const;

  /// Any other generated function (e.g. a shape-specialised step kernel, Specialise.h): the address of `symbol`,
  /// loaded from the disk cache or made by `compile` (then written to disk). `detail` is everything the object
  /// depends on besides the host (it goes into the disk key, so two different functions never share a file).
  void* compiled_function(const std::string& symbol, const std::string& detail,
                          const std::function<std::vector<char>(Jit&)>& compile);

  /// Whether compiled_function(symbol, detail, ...) would find a file to load (a regular file at its path; whether
  /// its contents are usable is decided when it is read). False without a disk cache.
  bool has_cached_file(const std::string& symbol, const std::string& detail) const;

  /// Distinct for every cache made in this process (never reused, unlike an address): a kept set-up that holds this
  /// cache's kernels (Gett.cpp: run_gett) is reused only by calls on the same cache.
  uint64_t serial() const { return serial_; }
  const JitHost& host() const { return jit_->host(); }
  const std::string& cache_dir() const { return cache_dir_; }
  JitStats stats() const;

 private:
  std::string disk_key(const std::string& detail) const;
  std::string file_for(const std::string& symbol, const std::string& key) const;
  // Looks symbol up, else loads or compiles it; mutex_ must be held.
  void* load_or_compile(const std::string& symbol, const std::string& detail,
                        const std::function<std::vector<char>(Jit&)>& compile);

  std::string cache_dir_;
  uint64_t serial_ = 0;
  void (*warm_up_)();
  std::unique_ptr<Jit> jit_;
  mutable std::mutex mutex_;                      // held through codegen
  std::map<std::string, void*> kernels_;  // by symbol
  // Kernels already linked, scanned without formatting a symbol (the per-call fast path).
  mutable std::shared_mutex fast_mutex_;
  std::vector<std::pair<MicroKernelSpec, MicroKernelFn>> fast_;
  JitStats stats_;
};

}  // namespace einstage
