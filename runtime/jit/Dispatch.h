// The policy of contract() (declared in runtime/Contract.h, which hands the context's JitState to contract_on here),
// the one entry point that executes a ContractionProblem, choosing the JIT GETT kernels or the portable reference
// kernel (runtime stage), its switches and its per-context statistics. Depends on ir, runtime/Contract.h and
// runtime/jit/{JitState,KernelCache}.h; never on runtime/Context.h.
//
// Policy: f32, f64, c64 and c128 run on the JIT (runtime/jit/Gett.h); i64 always runs on the portable kernel (the
// JIT has no integer micro-kernel: integer einsums are rare and not compute-bound in practice). EINSTAGE_JIT=0 in the
// environment (ir/Config.h: the context's Config::jit), or a failure of the context's JIT (LLVM cannot target the host,
// codegen error), sends that context's floating-point problems to contract_portable as well, with a one-line warning
// on stderr printed once per context (JitState); other contexts keep their JIT. Matrix-vector shaped steps
// (fewer than 8 columns) stay on the JIT too: its narrow direct tiles read A once in place and measured 1.05-4.6x the
// portable kernel from 256^2 up (tools/bench/contract.cpp, matvec rows); below that both take ~1 us and the JIT path
// is the one a hot step's specialised kernel reproduces bit for bit (runtime/jit/Specialise.h), so one rule serves.
#pragma once

#include "runtime/Contract.h"
#include "runtime/jit/JitState.h"
#include "runtime/jit/KernelCache.h"

#include <cstdint>

namespace einstage {

// contract(p, context, pool) and contract(p, pool) are declared in runtime/Contract.h (the public kernel API) and
// come here with their context's JitState; jit_enabled(context) and dispatch_stats(context) are in runtime/Context.h.

/// contract(p, context, pool) on the context's JIT state `jit`.
void contract_on(const ContractionProblem& p, JitState& jit, ThreadPool* pool);

/// False when `jit`'s Config::jit is off or its JIT failed.
bool jit_enabled(const JitState& jit);

/// Statistics of one context's kernel cache (all zero before its JIT first ran a contraction), plus how many
/// problems contract() ran on that context with the JIT and with the portable kernel. A loaded module's
/// contractions on a Runtime count on that Runtime's context (modules share the host's libraries).
struct DispatchStats {
  JitStats jit;
  int64_t jit_calls = 0;
  int64_t portable_calls = 0;
};
DispatchStats dispatch_stats(JitState& jit);

}  // namespace einstage
