// StepKernel: the per-step kernel handle of a prepared plan, which compiles a fully shape-specialised kernel for a
// hot small step off the critical path (runtime stage, JIT). Depends on ir, runtime/kernels/Contraction.h and
// runtime/jit/{Dispatch,Gett}.h; no LLVM type appears here.
//
// A prepared einsum plan keeps one StepKernel per pairwise step and runs the step through it. Every call goes to
// contract() (Dispatch.h) until the handle has seen kHotCalls calls of a problem that runs on the direct path
// (Gett.h: direct_schedule); it then queues that problem's specialised kernel (every extent, stride and tile a
// constant, MicroKernel.h: SpecialisedKernelSpec) on one background thread and returns at once. When the kernel is
// ready it is published through an atomic pointer; later calls whose problem matches the compiled one exactly
// (extents, strides, dtype, accumulate) run it, any other problem keeps going to contract(). No call ever waits for
// a compilation, not even the process's first code generation (Specialise.cpp explains how the worker is stopped at
// exit instead). The specialised kernel sums every element in the direct kernel's order, so results are bitwise the
// same before and after the swap. Objects are cached on disk like every other kernel (KernelCache), by a second
// KernelCache whose JIT and lock are the background thread's own. EINSTAGE_JIT_SPECIALISE=0 turns this off.
#pragma once

#include "runtime/kernels/Contraction.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace einstage {

class StepKernel {
 public:
  /// Calls of a direct-path problem before its specialised kernel is queued.
  static constexpr int64_t kHotCalls = 16;

  StepKernel();
  ~StepKernel();
  StepKernel(const StepKernel&) = delete;
  StepKernel& operator=(const StepKernel&) = delete;

  /// Executes p (as contract(p, pool) would, with the same bits). Thread-safe.
  void run(const ContractionProblem& p, ThreadPool* pool = nullptr);

  enum class State { generic, queued, ready, failed };
  State state() const;
  /// Calls that ran the specialised kernel (tests, benchmarks; concurrent calls of one handle may undercount).
  int64_t specialised_calls() const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;  // shared with the background job, which may outlive the handle
};

/// Test hooks: while paused the background thread starts no compilation (queued jobs wait); wait_idle() blocks until
/// the queue is empty and no job is running. Tests use them to observe that calls never wait for a compilation.
void set_specialise_paused(bool paused);
void wait_specialise_idle();
/// Test hook: runs on the background thread at the start of every job, before its kernel is compiled or loaded
/// (an empty function removes it). Tests hold a job inside it to check that the call that queued it returned.
void set_specialise_job_hook(std::function<void()> hook);

}  // namespace einstage
