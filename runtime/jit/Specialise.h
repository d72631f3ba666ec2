// Specialiser: the background compiler a context's JitState owns (runtime/jit/JitState.h), which compiles a fully
// shape-specialised kernel for a hot small step off the critical path (runtime stage, JIT), and the implementation
// notes of StepKernel, the per-step kernel handle of a prepared plan (declared in runtime/Contract.h, the public
// kernel API's contraction entry points; StepKernel::run hands its context's JitState to run_step here). Depends on ir
// and runtime/Contract.h; no LLVM type appears here, and nothing of runtime/Context.h.
//
// A prepared einsum plan keeps one StepKernel per pairwise step and runs the step through it. A JIT call runs on the
// handle's GettPlan (Gett.h: contract_jit's set-up of the step's problem, made by the first call and remade, up to a
// few times, when a call's extents, strides or context differ), so the offset tables and the tile are not rebuilt
// per call; it gives contract()'s bits, and contract() (Dispatch.h) keeps the policy: the portable kernel for i64,
// with the JIT off or failed. Once the handle has seen kHotCalls calls of a problem that runs on the direct path
// (Gett.h: direct_schedule); it then queues that problem's specialised kernel (every extent, stride and tile a
// constant, MicroKernel.h: SpecialisedKernelSpec) on the context's Specialiser, one background thread, and returns at
// once. When the kernel is ready it is published through an atomic pointer; later calls on the same context whose
// problem matches the compiled one exactly (extents, strides, dtype, accumulate) run it, any other problem or context
// keeps going to contract(). No call waits for the specialised kernel's compilation (the one wait is the process's
// warm-up, see Exit). The specialised kernel sums every element in the direct kernel's order, so results are bitwise
// the same before and after the swap. Objects are cached on disk like every other kernel (KernelCache), by a second
// KernelCache whose JIT and lock are the background thread's own.
// Config::jit_specialise (EINSTAGE_JIT_SPECIALISE=0) turns this off.
//
// Exit: the Specialiser's destructor finishes the running job, drops the queued ones and joins its thread; its
// context is destroyed before any static that LLVM makes lazily during code generation when it was constructed after
// those statics exist (WarmUp.h warms the code generator up once per process, before a context's first code
// generation), and static destructors run in reverse order of construction; a static context made earlier keeps its
// specialiser alive during exit instead (JitState.h). The background thread never runs that warm-up itself: the
// statics it makes would be younger than every exit handler, so an exit() on another thread while it ran would
// destroy them under the job (a test suite whose kernels all came from the disk cache but a specialised one crashed
// at exit in 3 of 12 runs). When a hot step's kernel must be generated and the process is not warmed up, run_step
// warms up on the calling thread before queueing it, once per process.
#pragma once

#include "runtime/Contract.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace einstage {

class KernelCache;

/// One background thread that runs compilation jobs in order, with a KernelCache of its own.
class Specialiser {
 public:
  /// Starts no thread until the first job; its cache keeps objects in `cache_dir` ("" in memory only). Its thread
  /// never runs `warm_up` (see Exit above): with one given, a job that would generate code in a process not warmed up
  /// fails instead (run_step warms up on the calling thread before it queues such a job).
  explicit Specialiser(std::string cache_dir, void (*warm_up)() = nullptr);
  /// shutdown().
  ~Specialiser();
  Specialiser(const Specialiser&) = delete;
  Specialiser& operator=(const Specialiser&) = delete;

  /// Queues `job` (run on the background thread with its cache); dropped after shutdown().
  void submit(std::function<void(KernelCache&)> job);
  /// Finishes the running job, drops the queued ones and joins the thread. Idempotent.
  void shutdown();

  /// Test hooks: while paused the thread starts no job; wait_idle() blocks until the queue is empty (or paused, or
  /// shut down) and no job is running; the hook runs on the thread at the start of every job.
  void set_paused(bool paused);
  void wait_idle();
  void set_job_hook(std::function<void()> hook);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class JitState;

/// StepKernel::run(p, context, pool, geometry) on the context's JIT state `jit`; `shared` is the handle's state.
void run_step(const std::shared_ptr<StepKernel::Shared>& shared, const ContractionProblem& p, JitState& jit,
              ThreadPool* pool, uint64_t geometry);

}  // namespace einstage
