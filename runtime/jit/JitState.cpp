#include "runtime/jit/JitState.h"

#include "runtime/jit/KernelCache.h"
#include "runtime/jit/LlvmProcess.h"
#include "runtime/jit/Specialise.h"
#include "runtime/jit/Tuning.h"
#include "runtime/jit/WarmUp.h"

#include <cstdio>
#include <vector>

namespace einstage {

namespace {

// What a JitState destroyed after exit() began keeps alive (its JIT, its kernels' code and its specialiser's JIT:
// LLVM statics they would touch in their destructors may be gone by then). Held here, reachable, for the rest of the
// process, so that nothing is lost track of: LeakSanitizer reported one Specialiser and one KernelCache per static
// context (2 MB over the ad suite) when they were released into nothing. Only contexts destroyed during exit land
// here; a context destroyed while the process runs frees everything.
struct ExitRetained {
  std::mutex mutex;
  std::vector<std::unique_ptr<Specialiser>> specialisers;
  std::vector<std::unique_ptr<KernelCache>> kernels;
  std::vector<std::unique_ptr<const GemmTuning>> tunings;  // read by plans that may still run (GettPlan::run)
};
ExitRetained& exit_retained() {
  static auto* retained = new ExitRetained;  // never destroyed: it outlives every static context
  return *retained;
}

}  // namespace

JitState::JitState(uint64_t id, const Config& config, ScratchAllocator& scratch)
    : JitState(id, config, scratch, &generate_host_warm_up) {}

JitState::JitState(uint64_t id, const Config& config, ScratchAllocator& scratch, void (*warm_up)())
    : id_(id),
      config_(config),
      warm_up_(config.jit ? warm_up : nullptr),
      scratch_(scratch),
      specialiser_(std::make_unique<Specialiser>(config.kernel_cache_dir, warm_up_)) {}

JitState::~JitState() {
  if (LlvmProcess::get().exiting()) {
    // A static context made before the process's first code generation is destroyed after LLVM's statics that
    // generation made: leave its JIT and its specialiser (and their JIT) alive.
    ExitRetained& retained = exit_retained();
    std::lock_guard lock(retained.mutex);
    retained.specialisers.push_back(std::move(specialiser_));
    retained.kernels.push_back(std::move(kernels_));
    retained.tunings.push_back(std::move(tuning_));
    made_.store(nullptr);
    return;
  }
  specialiser_.reset();  // finishes the running job, drops the queued ones, joins
  kernels_.reset();      // releases the JIT and the code of its kernels
}

void JitState::warm_up_now() {
  if (warm_up_) LlvmProcess::get().warm_up(warm_up_);
}

void JitState::shutdown_specialiser() {
  if (!LlvmProcess::get().exiting()) specialiser_->shutdown();
}

KernelCache& JitState::kernels() {
  if (KernelCache* k = made_.load(std::memory_order_acquire)) return *k;
  std::lock_guard lock(kernels_mutex_);
  if (!kernels_) {
    kernels_ = std::make_unique<KernelCache>(config_.kernel_cache_dir, JitTarget{}, warm_up_);
    made_.store(kernels_.get(), std::memory_order_release);
  }
  return *kernels_;
}

const GemmTuning& JitState::tuning() {
  std::call_once(tuning_once_, [&] { tuning_ = std::make_unique<const GemmTuning>(host_tuning(config_)); });
  return *tuning_;
}

void JitState::fail(const std::string& why) {
  failed_.store(true);
  std::call_once(warned_, [&] {
    std::fprintf(stderr, "einstage: JIT unavailable (%s); contractions run on the portable kernel\n", why.c_str());
  });
}

void JitState::warn_jit_off() {
  std::call_once(warned_, [] {
    std::fprintf(stderr,
                 "einstage: the JIT is off (EINSTAGE_JIT=0 or Config::jit): contractions run on the portable kernel\n");
  });
}

}  // namespace einstage
