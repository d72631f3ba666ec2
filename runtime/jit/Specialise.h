// StepKernel: the per-step kernel handle of a prepared plan, which compiles a fully shape-specialised kernel for a
// hot small step off the critical path (runtime stage, JIT); Specialiser: the background compiler an
// ExecutionContext owns (runtime/Context.h). Depends on ir, runtime/kernels/Contraction.h and
// runtime/jit/{Dispatch,Gett}.h; no LLVM type appears here.
//
// A prepared einsum plan keeps one StepKernel per pairwise step and runs the step through it. Every call goes to
// contract() (Dispatch.h) until the handle has seen kHotCalls calls of a problem that runs on the direct path
// (Gett.h: direct_schedule); it then queues that problem's specialised kernel (every extent, stride and tile a
// constant, MicroKernel.h: SpecialisedKernelSpec) on the context's Specialiser, one background thread, and returns at
// once. When the kernel is ready it is published through an atomic pointer; later calls on the same context whose
// problem matches the compiled one exactly (extents, strides, dtype, accumulate) run it, any other problem or context
// keeps going to contract(). No call ever waits for a compilation. The specialised kernel sums every element in the
// direct kernel's order, so results are bitwise the same before and after the swap. Objects are cached on disk like
// every other kernel (KernelCache), by a second KernelCache whose JIT and lock are the background thread's own.
// Config::jit_specialise (EINSTAGE_JIT_SPECIALISE=0) turns this off.
//
// Exit: the Specialiser's destructor finishes the running job, drops the queued ones and joins its thread; its
// context is destroyed before any static that LLVM makes lazily during code generation, because every context is
// constructed after those statics exist (runtime/Context.cpp warms the code generator up once per process first),
// and static destructors run in reverse order of construction.
#pragma once

#include "runtime/kernels/Contraction.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace einstage {

class ExecutionContext;
class KernelCache;
class ThreadPool;

/// One background thread that runs compilation jobs in order, with a KernelCache of its own.
class Specialiser {
 public:
  /// Starts no thread until the first job; its cache keeps objects in `cache_dir` ("" in memory only).
  explicit Specialiser(std::string cache_dir);
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

class StepKernel {
 public:
  /// Calls of a direct-path problem before its specialised kernel is queued.
  static constexpr int64_t kHotCalls = 16;

  StepKernel();
  ~StepKernel();
  StepKernel(const StepKernel&) = delete;
  StepKernel& operator=(const StepKernel&) = delete;

  /// Executes p (as contract(p, context, pool) would, with the same bits) on `pool`, with the context's kernels and
  /// specialiser. Thread-safe.
  void run(const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool);
  /// The same on default_context().
  void run(const ContractionProblem& p, ThreadPool* pool = nullptr);

  enum class State { generic, queued, ready, failed };
  State state() const;
  /// Calls that ran the specialised kernel (tests, benchmarks; concurrent calls of one handle may undercount).
  int64_t specialised_calls() const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;  // shared with the background job, which may outlive the handle
};

/// Test hooks on default_context()'s Specialiser (see Specialiser). Tests use them to observe that calls never wait
/// for a compilation.
void set_specialise_paused(bool paused);
void wait_specialise_idle();
/// Test hook: runs on the background thread at the start of every job, before its kernel is compiled or loaded
/// (an empty function removes it). Tests hold a job inside it to check that the call that queued it returned.
void set_specialise_job_hook(std::function<void()> hook);

}  // namespace einstage
