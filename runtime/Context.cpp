#include "runtime/Context.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/Cpus.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/JitState.h"
#include "runtime/jit/Specialise.h"
#include "runtime/jit/WarmUp.h"

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace einstage {

namespace {
std::atomic<uint64_t> g_next_id{1};
}  // namespace

struct ExecutionContext::Impl {
  Config config;
  uint64_t id = g_next_id.fetch_add(1);
  int threads = 1;
  std::unique_ptr<ScratchAllocator> own_scratch;  // every context but default_context()
  ScratchAllocator* scratch = nullptr;
  // Destroyed in reverse order: the pool (after the specialiser was shut down), then the JIT's state.
  std::unique_ptr<JitState> jit;
  std::unique_ptr<ThreadPool> pool;
  std::mutex states_mutex;
  std::map<std::string, std::shared_ptr<void>, std::less<>> states;  // extension_state(), after the threads joined
};

ExecutionContext::ExecutionContext(const ConfigOptions& options) : ExecutionContext(Config::process(options)) {}

ExecutionContext::ExecutionContext(const Config& config) : ExecutionContext(config, nullptr) {}

ExecutionContext::ExecutionContext(const Config& config, ScratchAllocator* shared_scratch)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->threads = threads_for(config);
  if (!shared_scratch) impl_->own_scratch = std::make_unique<ScratchAllocator>(config.scratch_cache_bytes);
  impl_->scratch = shared_scratch ? shared_scratch : impl_->own_scratch.get();
  impl_->jit = std::make_unique<JitState>(impl_->id, config, *impl_->scratch);
  impl_->pool = std::make_unique<ThreadPool>(impl_->threads);
}

ExecutionContext::~ExecutionContext() {
  impl_->jit->shutdown_specialiser();  // its job may call into the JIT
  impl_->pool.reset();                 // joins the workers
  impl_->jit.reset();                  // releases the JIT and the code of its kernels (kept alive during exit)
}

const Config& ExecutionContext::config() const { return impl_->config; }
int ExecutionContext::threads() const { return impl_->threads; }
ThreadPool& ExecutionContext::pool() { return *impl_->pool; }
KernelCache& ExecutionContext::kernels() { return impl_->jit->kernels(); }
Specialiser& ExecutionContext::specialiser() { return impl_->jit->specialiser(); }
ScratchAllocator& ExecutionContext::scratch() { return *impl_->scratch; }
uint64_t ExecutionContext::id() const { return impl_->id; }
JitState& ExecutionContext::jit() { return *impl_->jit; }

std::shared_ptr<void> ExecutionContext::extension_state(std::string_view key,
                                                        const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard lock(impl_->states_mutex);
  auto it = impl_->states.find(key);
  if (it == impl_->states.end()) it = impl_->states.emplace(std::string(key), make()).first;
  return it->second;
}

bool jit_enabled(ExecutionContext& context) { return jit_enabled(context.jit()); }
bool jit_enabled() { return jit_enabled(default_context()); }
DispatchStats dispatch_stats(ExecutionContext& context) { return dispatch_stats(context.jit()); }
DispatchStats dispatch_stats() { return dispatch_stats(default_context()); }

void set_specialise_paused(bool paused) { default_context().specialiser().set_paused(paused); }
void wait_specialise_idle() { default_context().specialiser().wait_idle(); }
void set_specialise_job_hook(std::function<void()> hook) {
  default_context().specialiser().set_job_hook(std::move(hook));
}

void warm_up_jit() { warm_up_code_generator(); }
bool jit_warmed_up() { return code_generator_warmed_up(); }

namespace {

struct Installed {
  std::mutex mutex;
  std::shared_ptr<ExecutionContext> owner;
  std::atomic<ExecutionContext*> current{nullptr};
};
Installed& installed() {
  static auto* held = new Installed;
  return *held;
}

}  // namespace

ExecutionContext& default_context() {
  if (ExecutionContext* c = installed().current.load(std::memory_order_acquire)) return *c;
  // The built-in default: Config::process(), made on first use. Never deleted: threads may still run kernels on its
  // pool and JIT while the process exits (runtime/jit/LlvmProcess.h stops code generation then, before LLVM's statics are
  // destroyed). Tensors made without a context share its allocator.
  static ExecutionContext* const builtin =
      new ExecutionContext(Config::process(), &ScratchAllocator::builtin_default());
  return *builtin;
}

std::shared_ptr<ExecutionContext> default_context_handle() {
  Installed& in = installed();
  std::lock_guard lock(in.mutex);
  if (in.owner) return in.owner;
  return std::shared_ptr<ExecutionContext>(&default_context(), [](ExecutionContext*) {});
}

std::shared_ptr<ExecutionContext> set_default_context(std::shared_ptr<ExecutionContext> context) {
  Installed& in = installed();
  std::lock_guard lock(in.mutex);
  std::shared_ptr<ExecutionContext> previous = std::move(in.owner);
  if (!previous) previous = std::shared_ptr<ExecutionContext>(&default_context(), [](ExecutionContext*) {});
  in.owner = std::move(context);
  in.current.store(in.owner.get(), std::memory_order_release);
  // Allocator-less calls (Tensor::empty without one) follow the default context: one default allocator, no second
  // pool (the built-in context's is ir's built-in pool, which nullptr restores).
  ScratchAllocator::install_default(in.owner ? &in.owner->scratch() : nullptr);
  return previous;
}

}  // namespace einstage
