#include "runtime/jit/Dispatch.h"

#include "ir/Config.h"
#include "ir/Error.h"
#include "runtime/Context.h"
#include "runtime/jit/Gett.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace einstage {

namespace {
std::atomic<bool> g_jit_failed{false};  // LLVM cannot target this machine: the same for every context

std::atomic<bool> g_portable_only{false};  // set_portable_only()

bool portable_only(const ExecutionContext& context) {
  return g_portable_only.load(std::memory_order_relaxed) || !context.config().jit;
}

void warn_once(const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] { std::fprintf(stderr, "einstage: %s\n", message.c_str()); });
}

}  // namespace

bool jit_enabled() { return jit_enabled(default_context()); }
bool jit_enabled(const ExecutionContext& context) { return !g_jit_failed.load() && !portable_only(context); }

void contract(const ContractionProblem& p, ThreadPool* pool) { contract(p, default_context(), pool); }

void contract(const ContractionProblem& p, ExecutionContext& context, ThreadPool* pool) {
  if (p.dtype != DType::i64) {
    if (portable_only(context)) {
      if (!g_portable_only.load())
        warn_once("the JIT is off (EINSTAGE_JIT=0 or Config::jit): contractions run on the portable kernel");
    } else if (!g_jit_failed.load()) {
      try {
        // Throws before writing C if a kernel cannot be made.
        contract_jit(p, pool, &context.kernels(), nullptr, &context.scratch(), context.config().jit_direct);
        context.calls().jit.fetch_add(1, std::memory_order_relaxed);
        return;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::runtime) throw;  // a bad problem is the caller's error on every path
        g_jit_failed = true;
        warn_once("JIT unavailable (" + std::string(e.what()) + "); contractions run on the portable kernel");
      }
    }
  }
  p.check("contract");  // contract_portable checks again, but a refusal names what the caller called
  context.calls().portable.fetch_add(1, std::memory_order_relaxed);
  contract_portable(p, pool);
}

void set_portable_only(bool portable) { g_portable_only = portable; }

DispatchStats dispatch_stats() { return dispatch_stats(default_context()); }

DispatchStats dispatch_stats(ExecutionContext& context) {
  DispatchStats stats;
  stats.jit_calls = context.calls().jit.load();
  stats.portable_calls = context.calls().portable.load();
  // A context whose JIT never ran a contraction reports zeros rather than creating its JIT to ask.
  if (stats.jit_calls > 0 && !g_jit_failed.load()) stats.jit = context.kernels().stats();
  return stats;
}

}  // namespace einstage
