#include "runtime/jit/Dispatch.h"

#include "ir/Error.h"
#include "runtime/jit/Gett.h"

#include <string>

namespace einstage {

bool jit_enabled(const JitState& jit) { return jit.config().jit && !jit.failed(); }

void contract_on(const ContractionProblem& p, JitState& jit, ThreadPool* pool) {
  if (p.dtype != DType::i64) {
    if (!jit.config().jit) {
      jit.warn_jit_off();
    } else if (!jit.failed()) {
      try {
        // Throws before writing C if a kernel cannot be made.
        contract_jit(p, pool, &jit.kernels(), nullptr, &jit.scratch(), jit.config().jit_direct, &jit.tuning());
        jit.calls().jit.fetch_add(1, std::memory_order_relaxed);
        return;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::runtime) throw;  // a bad problem is the caller's error on every path
        jit.fail(e.what());
      }
    }
  }
  p.check("contract");  // contract_portable checks again, but a refusal names what the caller called
  jit.calls().portable.fetch_add(1, std::memory_order_relaxed);
  contract_portable(p, pool);
}

DispatchStats dispatch_stats(JitState& jit) {
  DispatchStats stats;
  stats.jit_calls = jit.calls().jit.load();
  stats.portable_calls = jit.calls().portable.load();
  // A context whose JIT never ran a contraction reports zeros rather than creating its JIT to ask.
  if (stats.jit_calls > 0 && !jit.failed()) stats.jit = jit.kernels().stats();
  return stats;
}

}  // namespace einstage
