// ExecutionContext: what einstage's kernels run with, owned in one object instead of process globals: the resolved
// Config (ir/Config.h), the thread pool, the JIT with its kernel cache, the background specialiser that compiles
// shape-specialised step kernels, and the scratch allocator that keeps freed memory for reuse under
// Config::scratch_cache_bytes (ir/Scratch.h: large tensor blocks, the executor's arenas, the JIT's packing buffers).
// Stage: runtime. Depends on ir/Config.h; the pool, the JIT, the specialiser and the allocator are behind forward
// declarations (runtime/ThreadPool.h, runtime/jit/KernelCache.h, runtime/jit/Specialise.h, ir/Scratch.h).
//
//   ExecutionContext context({.threads = 2});           // option > environment variable > default
//   Runtime rt(RuntimeOptions{.context = shared});      // a Runtime holds one, or shares one passed in
//   einsum("ij,jk->ik", {a, b}, {.context = &context});  // the direct API uses default_context() unless told
//
// A Runtime's extension ops receive the context in PreparedOp::run (runtime/Module.h). Results are bitwise the same
// on every context whatever its thread count. A context may be used from several threads at once.
//
// Lifetime. Destroying a context finishes the specialiser's running job, drops its queued ones and joins its thread,
// joins the pool's workers and releases the JIT (the code of every kernel it compiled): nothing may run on it then.
// A kernel a context compiled is only ever called through that context (StepKernel checks id()). LLVM makes some
// statics lazily; the process's first code generation first makes the common ones (warm_up_jit(), run then and not
// when a context is made, so a process whose kernels all come from the disk cache never pays for it). A context
// destroyed during exit (a static one) after those statics are gone leaves its JIT and specialiser alive instead of
// releasing them. default_context() is made on first use and never destroyed, because threads may still run kernels
// while the process exits; code generation on any context stops at exit before LLVM's statics are destroyed
// (runtime/jit/LlvmProcess.h), and what it would have compiled runs on the portable kernel or stays unspecialised. So
// exit() from any thread finds what it may still reach intact (tests/runtime/test_context.cpp starts processes
// that exit at random moments), with one window left: exit() while the process's first code generation (the
// warm-up: one small kernel, ~20 ms with LLVM's one-off costs; a program that must be safe from its start calls
// warm_up_jit() first) or a later one that is the first to take some rare LLVM path is still running; no order of
// handlers can cover a static made after exit() began or by code that is running while it does.
#pragma once

#include "ir/Config.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace einstage {

class JitState;
class KernelCache;
class ScratchAllocator;
class Specialiser;
class ThreadPool;

class ExecutionContext {
 public:
  /// Config::process(options): the options beat the environment's variables (read now, when the context is made),
  /// which beat the defaults. Throws einstage::Error naming a bad variable or option. Starts threads() - 1 pool
  /// workers.
  explicit ExecutionContext(const ConfigOptions& options = {});
  /// Builds a context from an explicit configuration: Config::from(env, options) for any map of variables, so two
  /// contexts in one process can have different settings without touching the process environment.
  explicit ExecutionContext(const Config& config);
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  const Config& config() const;
  /// Threads the kernels share (>= 1): config().threads, or every CPU this process may use when that is 0.
  int threads() const;
  /// The pool of threads() threads (one thread: everything runs inline on the caller).
  ThreadPool& pool();
  /// The JIT's kernel cache (config().kernel_cache_dir on disk). Throws Error(runtime) if LLVM cannot target this
  /// machine (contract() then falls back to the portable kernel).
  KernelCache& kernels();
  /// The background compiler of shape-specialised step kernels.
  Specialiser& specialiser();
  /// Where this context's outputs, scratch and packing buffers come from and go back to (ir/Scratch.h), keeping at
  /// most config().scratch_cache_bytes unused. The built-in default context shares ir's built-in pool
  /// (ScratchAllocator::builtin_default()); every other context owns one of its own. Tensors made without an
  /// allocator use the default context's (ScratchAllocator::process_default(), installed by set_default_context).
  ScratchAllocator& scratch();
  /// Distinct for every context this process made (never reused).
  uint64_t id() const;
  /// What the JIT keeps for this context (runtime/jit/JitState.h: its kernel cache, specialiser, contraction counters
  /// and failure); the JIT's entry points receive it and see nothing else of the context.
  JitState& jit();
  /// What an extension keeps per context (the einsum family's plan cache): the object stored under `key`, made by
  /// `make` on the first call for that key and destroyed with the context (default_context()'s never are). Keys are
  /// the family's name. Thread-safe; `make` runs under the context's lock, so it must not call back into this.
  std::shared_ptr<void> extension_state(std::string_view key, const std::function<std::shared_ptr<void>()>& make);

  struct Impl;

 private:
  friend ExecutionContext& default_context();
  ExecutionContext(const Config& config, ScratchAllocator* shared_scratch);  // nullptr: one of its own
  std::unique_ptr<Impl> impl_;
};

/// The default context: the one context-less calls run on (the direct einsum API, contract() and StepKernel::run
/// without a context, dispatch_stats(), default_pool(), Runtimes left at the default thread count). Unless replaced,
/// the built-in one: Config::process() (the environment as it was when first asked), made on first use, never
/// destroyed (see the file comment), sharing ir's built-in pool with tensors made without an allocator. Throws
/// what Config::process() throws.
ExecutionContext& default_context();
/// Makes `context` the default context (nullptr: the built-in one again) and returns the one it replaces (the
/// built-in one as a handle that owns nothing), so a test or a program can run context-less calls on a context of
/// its own configuration, e.g. set_default_context(std::make_shared<ExecutionContext>(Config::from(env))), in one
/// process. Tensors made without an allocator then come from `context`'s (ScratchAllocator::install_default, the one
/// registration point), and from the built-in pool again after nullptr. Calls already running keep the context they
/// started on: keep the returned handle until they finished.
/// An installed context still installed at exit is not destroyed.
std::shared_ptr<ExecutionContext> set_default_context(std::shared_ptr<ExecutionContext> context);
/// The default context as a handle: shares ownership of an installed one (a Runtime made at the default thread count
/// keeps it alive after it is replaced); the built-in one as a handle that owns nothing.
std::shared_ptr<ExecutionContext> default_context_handle();

/// Whether contractions on `context` run on the JIT: its Config::jit is on and its JIT has not failed (a failure is
/// the context's own: other contexts keep their JIT). The context-less form asks default_context().
bool jit_enabled(ExecutionContext& context);
bool jit_enabled();

/// Statistics of the context's kernel cache and how many contractions ran on it by kernel (runtime/jit/Dispatch.h
/// defines DispatchStats). The context-less form: default_context()'s.
struct DispatchStats;
DispatchStats dispatch_stats(ExecutionContext& context);
DispatchStats dispatch_stats();

/// Test hooks on default_context()'s Specialiser (runtime/jit/Specialise.h): while paused its thread starts no job;
/// wait_specialise_idle() blocks until its queue is empty (or paused) and no job runs; the hook runs on its thread
/// at the start of every job (an empty function removes it). Tests use them to observe that calls never wait for a
/// compilation.
void set_specialise_paused(bool paused);
void wait_specialise_idle();
void set_specialise_job_hook(std::function<void()> hook);

/// Generates a few kernels on a throwaway JIT once per process, so that LLVM's lazily made statics exist before
/// anything that must outlive them; otherwise done just before the process's first code generation. Call it first
/// in a program that may exit() from any thread at any moment. No-op after the first call; never throws.
void warm_up_jit();
/// Whether that warm-up has succeeded in this process (tests: a process whose kernels all came from the disk cache has
/// not run it).
bool jit_warmed_up();

}  // namespace einstage
