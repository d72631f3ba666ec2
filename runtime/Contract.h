// The contraction entry points of the public kernel API (extensions/api/Kernels.h): contract(), which executes a
// ContractionProblem on the best kernel this machine has, and StepKernel, the handle a prepared plan keeps per call
// site so that a hot, small, fixed-shape contraction gets a fully shape-specialised kernel. Stage: runtime. Depends
// on runtime/kernels/Contraction.h only; the JIT stays behind these declarations (no LLVM or jit/ header here).
//
// Both give the same bits as each other and at every thread count. The policy (JIT for f32, f64, c64 and c128; the
// portable kernel for i64, with Config::jit off or when the JIT fails) is runtime/jit/Dispatch.h's; how a StepKernel
// specialises (after kHotCalls calls of one direct-path problem, compiled off the critical path, never waited for)
// is runtime/jit/Specialise.h's.
#pragma once

#include "runtime/kernels/Contraction.h"

#include <cstdint>
#include <memory>

namespace einstage {

class ExecutionContext;
class ThreadPool;

/// Executes p (C = A·B or C += A·B) on the best available kernel on `pool` (nullptr: the calling thread), with the
/// JIT kernels of `context` (runtime/Context.h) and its Config::jit. Throws einstage::Error before writing anything
/// for a problem whose operands have more elements than fit in 64 bits (kind shape) or whose A, B or C pointer is
/// null while that tensor has elements (kind invalid_argument): ContractionProblem::check.
void contract(const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool);
/// The same on default_context().
void contract(const ContractionProblem& p, ThreadPool* pool = nullptr);

/// One call site's contraction (an einsum step): runs every problem as contract() would, keeping the JIT's set-up of
/// the problem (offset tables, tile, kernels) for the next call with the same extents and strides, and once it has
/// seen kHotCalls calls of the same small problem, runs that problem on a kernel compiled for exactly its extents and
/// strides (same bits). Keep one handle per call site, for as long as the site's shapes stay fixed.
class StepKernel {
 public:
  /// Calls of a direct-path problem before its specialised kernel is queued.
  static constexpr int64_t kHotCalls = 16;

  StepKernel();
  ~StepKernel();
  StepKernel(const StepKernel&) = delete;
  StepKernel& operator=(const StepKernel&) = delete;

  /// Executes p (as contract(p, context, pool) would, with the same bits) on `pool`, with the context's kernels and
  /// specialiser. Thread-safe. `geometry` (0: unknown) is the caller's promise that every call of this handle with
  /// the same non-zero value has the same geometry (extents, strides, dtype, accumulate; not the pointers): a call
  /// whose value was seen with the handle's kernel or set-up skips comparing p with it (a prepared einsum step, whose
  /// problem only changes when its operands' strides do, passes one per version of its problem).
  void run(const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool, uint64_t geometry = 0);
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

}  // namespace einstage
