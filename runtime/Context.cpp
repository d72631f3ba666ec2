#include "runtime/Context.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/Cpus.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Specialise.h"
#include "runtime/jit/WarmUp.h"

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace einstage {

namespace {

// LLVM's code generator makes some function-local statics on first use (runtime/jit/WarmUp.h). Statics are destroyed
// in reverse order of construction, so a context constructed after they exist is destroyed before them, and its
// specialiser's last job still finds them intact; and LLVM work still running when exit() starts (runtime/jit/Jit.cpp's
// gate) finds them intact too. One small specialised kernel on a throwaway JIT makes them once per process. It runs
// just before the process's first code generation (Jit::set_before_first_codegen), not when a context is made: a
// process whose kernels all come from the disk cache (a one-shot `einstage einsum` run again) never generates code
// and never pays for it.
std::atomic<bool> g_warmed_up{false};

void warm_up_code_generator() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_warmed_up.store(true);
    try {
      generate_warm_up_kernel(*Jit::create());
    } catch (const Error&) {
      // No JIT on this machine: nothing of LLVM's code generator will run; contract() reports the failure.
    }
  });
}

std::atomic<uint64_t> g_next_id{1};

// What a context destroyed after exit() began keeps alive (its JIT, its kernels' code and its specialiser's JIT: LLVM
// statics they would touch in their destructors may be gone by then). Held here, reachable, for the rest of the
// process, so that nothing is lost track of: LeakSanitizer reported one Specialiser and one KernelCache per static
// context (2 MB over the ad suite) when they were released into nothing. Only contexts destroyed during exit land
// here; a context destroyed while the process runs frees everything.
struct ExitRetained {
  std::mutex mutex;
  std::vector<std::unique_ptr<Specialiser>> specialisers;
  std::vector<std::unique_ptr<KernelCache>> kernels;
};
ExitRetained& exit_retained() {
  static auto* retained = new ExitRetained;  // never destroyed: it outlives every static context
  return *retained;
}

}  // namespace

struct ExecutionContext::Impl {
  Config config;
  uint64_t id = g_next_id.fetch_add(1);
  int threads = 1;
  std::mutex kernels_mutex;
  std::unique_ptr<KernelCache> kernels;  // made on first use (a failure is retried by the next caller)
  std::atomic<KernelCache*> made{nullptr};  // kernels.get() once made: the per-call path takes no lock
  std::unique_ptr<ScratchAllocator> own_scratch;  // every context but default_context()
  ScratchAllocator* scratch = nullptr;
  // Destroyed in reverse order: the specialiser (its job may call into the JIT) first, then the pool, then the JIT.
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Specialiser> specialiser;
  Calls calls;
  std::mutex states_mutex;
  std::map<std::string, std::shared_ptr<void>, std::less<>> states;  // extension_state(), after the threads joined
};

ExecutionContext::ExecutionContext(const ConfigOptions& options) : ExecutionContext(Config::process(options)) {}

ExecutionContext::ExecutionContext(const Config& config) : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->threads = threads_for(config);
  if (config.jit) Jit::set_before_first_codegen(&warm_up_code_generator);  // paid only by a process that compiles
  impl_->own_scratch = std::make_unique<ScratchAllocator>(config.scratch_cache_bytes);
  impl_->scratch = impl_->own_scratch.get();
  impl_->pool = std::make_unique<ThreadPool>(impl_->threads);
  impl_->specialiser = std::make_unique<Specialiser>(config.kernel_cache_dir);
}

ExecutionContext::~ExecutionContext() {
  if (Jit::process_exiting()) {
    // A static context made before the process's first code generation is destroyed after LLVM's statics that
    // generation made: leave its JIT and its specialiser (and their JIT) alive, as default_context() always does.
    ExitRetained& retained = exit_retained();
    std::lock_guard lock(retained.mutex);
    retained.specialisers.push_back(std::move(impl_->specialiser));
    retained.kernels.push_back(std::move(impl_->kernels));
    impl_->made.store(nullptr);
    impl_->pool.reset();
    return;
  }
  impl_->specialiser.reset();  // finishes the running job, drops the queued ones, joins
  impl_->pool.reset();         // joins the workers
  impl_->kernels.reset();      // releases the JIT and the code of its kernels
}

const Config& ExecutionContext::config() const { return impl_->config; }
int ExecutionContext::threads() const { return impl_->threads; }
ThreadPool& ExecutionContext::pool() { return *impl_->pool; }
Specialiser& ExecutionContext::specialiser() { return *impl_->specialiser; }
ScratchAllocator& ExecutionContext::scratch() { return *impl_->scratch; }
uint64_t ExecutionContext::id() const { return impl_->id; }
ExecutionContext::Calls& ExecutionContext::calls() { return impl_->calls; }

std::shared_ptr<void> ExecutionContext::extension_state(std::string_view key,
                                                        const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard lock(impl_->states_mutex);
  auto it = impl_->states.find(key);
  if (it == impl_->states.end()) it = impl_->states.emplace(std::string(key), make()).first;
  return it->second;
}

KernelCache& ExecutionContext::kernels() {
  if (KernelCache* k = impl_->made.load(std::memory_order_acquire)) return *k;
  std::lock_guard lock(impl_->kernels_mutex);
  if (!impl_->kernels) {
    impl_->kernels = std::make_unique<KernelCache>(impl_->config.kernel_cache_dir);
    impl_->made.store(impl_->kernels.get(), std::memory_order_release);
  }
  return *impl_->kernels;
}


void warm_up_jit() { warm_up_code_generator(); }
bool jit_warmed_up() { return g_warmed_up.load(); }

ExecutionContext& default_context() {
  // Never deleted: threads may still run kernels on its pool and JIT while the process exits (runtime/jit/Jit.cpp
  // stops code generation then, before LLVM's statics are destroyed).
  static ExecutionContext* const context = [] {
    auto* made = new ExecutionContext();
    made->impl_->own_scratch.reset();  // tensors made without a context share the default context's allocator
    made->impl_->scratch = &ScratchAllocator::process_default();
    return made;
  }();
  return *context;
}

}  // namespace einstage
