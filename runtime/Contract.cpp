// contract() and StepKernel::run (runtime/Contract.h) on an ExecutionContext: each hands the context's JitState to the
// JIT's entry point (runtime/jit/Dispatch.h: contract_on, runtime/jit/Specialise.h: run_step), which sees nothing
// else of the context. The context-less overloads run on default_context().
#include "runtime/Contract.h"

#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Specialise.h"

namespace einstage {

void contract(const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool) {
  contract_on(p, context.jit(), pool);
}

void contract(const ContractionProblem& p, ThreadPool* pool) { contract_on(p, default_context().jit(), pool); }

void StepKernel::run(const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool, uint64_t geometry) {
  run_step(shared_, p, context.jit(), pool, geometry);
}

void StepKernel::run(const ContractionProblem& p, ThreadPool* pool) {
  run_step(shared_, p, default_context().jit(), pool, 0);
}

}  // namespace einstage
