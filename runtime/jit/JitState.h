// JitState: everything the JIT keeps for one execution context, and the only thing of the context the JIT sees
// (runtime stage, JIT). An ExecutionContext (runtime/Context.h) owns one and hands it to the JIT's entry points
// (contract_on in Dispatch.h, run_step in Specialise.h), so the dependency runs one way: runtime/Context includes
// runtime/jit/, never the reverse (ctest `api_includes` checks it). It holds the settings the JIT reads (a copy of the
// context's Config), the context's id and scratch allocator, the kernel cache (made on first use), the background
// specialiser, the contraction counters, and whether this context's JIT failed: a failure (LLVM cannot target the
// host, a code generation error) sends this context's later contractions to the portable kernel and is not seen by
// any other context. Depends on ir/Config.h; the cache, the specialiser and the allocator are forward declarations.
//
// Lifetime: the owner shuts the specialiser down (shutdown_specialiser) before it joins the threads that may run
// kernels, then destroys this. Destroyed after exit() began (a static context), it keeps its JIT and specialiser
// alive for the rest of the process instead of releasing them under LLVM statics that may already be gone
// (runtime/jit/LlvmProcess.h: LlvmProcess::exiting).
#pragma once

#include "ir/Config.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace einstage {

class GemmTuning;
class KernelCache;
class ScratchAllocator;
class Specialiser;

class JitState {
 public:
  /// The JIT of the context `id` with `config`'s switches; `scratch` (packing buffers) must outlive it. With config.jit
  /// on, its kernel caches (its own and its specialiser's) ask for the process's warm-up of LLVM's code generator
  /// (WarmUp.h: generate_host_warm_up, through LlvmProcess::warm_up) before they generate code; with it off, never.
  /// A warm-up that throws fails this context's request like any code generation error (fail()), and the process
  /// stays not warmed up: the next context to generate code runs its own.
  JitState(uint64_t id, const Config& config, ScratchAllocator& scratch);
  /// The same with `warm_up` instead of generate_host_warm_up (tests give one that fails).
  JitState(uint64_t id, const Config& config, ScratchAllocator& scratch, void (*warm_up)());
  ~JitState();
  JitState(const JitState&) = delete;
  JitState& operator=(const JitState&) = delete;

  /// The owning context's id: a kernel this state compiled is only called with this state (StepKernel checks it).
  uint64_t id() const { return id_; }
  const Config& config() const { return config_; }
  ScratchAllocator& scratch() const { return scratch_; }
  /// The kernel cache (config().kernel_cache_dir on disk), made on first use; a failure to make it is retried by
  /// the next caller. Throws Error(runtime) if LLVM cannot target this machine.
  KernelCache& kernels();
  /// The cache if kernels() made it, else nullptr (statistics that must not create a JIT to ask).
  KernelCache* kernels_if_made() const { return made_.load(std::memory_order_acquire); }
  Specialiser& specialiser() { return *specialiser_; }
  /// The packed GEMM's tile and blocks this context runs with (runtime/jit/Tuning.h: host_tuning(config()), its
  /// warning printed once), resolved on first use; contract_on and run_step pass it to every GETT set-up.
  const GemmTuning& tuning();
  /// Runs the process's warm-up of LLVM's code generator on the calling thread now (LlvmProcess::warm_up with this
  /// context's function) unless one has succeeded; nothing with config().jit off. Throws what the warm-up throws.
  /// The specialiser's thread never runs it (Specialise.h: exit), so run_step calls this before queueing a kernel
  /// that must be generated.
  void warm_up_now();
  /// Finishes the specialiser's running job, drops the queued ones and joins its thread. Idempotent.
  void shutdown_specialiser();

  /// Contractions run on this context, by kernel.
  struct Calls {
    std::atomic<int64_t> jit{0};
    std::atomic<int64_t> portable{0};
  };
  Calls& calls() { return calls_; }

  /// Whether this context's JIT failed (contractions then run on the portable kernel).
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  /// Records the failure `why` and prints it as a one-line warning on stderr, once per context.
  void fail(const std::string& why);
  /// Prints, once per context, that its contractions run on the portable kernel because config().jit is off.
  void warn_jit_off();

 private:
  const uint64_t id_;
  const Config config_;
  void (*const warm_up_)();  // nullptr with config.jit off
  ScratchAllocator& scratch_;
  std::mutex kernels_mutex_;
  std::unique_ptr<KernelCache> kernels_;
  std::atomic<KernelCache*> made_{nullptr};  // kernels_.get() once made: the per-call path takes no lock
  std::unique_ptr<Specialiser> specialiser_;
  std::once_flag tuning_once_;
  std::unique_ptr<const GemmTuning> tuning_;
  Calls calls_;
  std::atomic<bool> failed_{false};
  std::once_flag warned_;
};

}  // namespace einstage
