// Two modes of einstage_test_exit_child that check the JIT's process state (runtime/jit/LlvmProcess.h), each in a
// fresh process because that state is the process's. "handlers": the exit gate's std::atexit registrations stay
// bounded (counted independently by WarmUpStatics.cpp's __cxa_atexit, which sees atexit() as a registration without
// an object) while new contexts load kernels from the disk cache and compile new shapes: after one context has
// compiled, nothing registers the handler again. "warm-up-fault": a context whose warm-up fails runs on the portable
// kernel without marking the process warmed up; the next context warms up and runs on the JIT; a later context given
// the failing warm-up never calls it; a context with the JIT off never asks for a warm-up. "specialise-fill" and
// "specialise-cold": the specialiser's thread never warms LLVM up (runtime/jit/Specialise.h, Exit).
#include "extensions/einsum/exec/Einsum.h"
#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/JitState.h"
#include "runtime/jit/LlvmProcess.h"
#include "runtime/jit/Specialise.h"
#include "runtime/jit/WarmUp.h"
#include "runtime/kernels/Contraction.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace einstage::test {

int exit_handlers_seen();  // WarmUpStatics.cpp: atexit() registrations so far, -1 if this build cannot count them

namespace {

// Einsums of `shapes` new matmul shapes on `context`, each called often enough to be specialised in the background;
// returns the kernels the context's foreground cache compiled or loaded.
int64_t matmuls(ExecutionContext& context, int first_shape, int shapes) {
  einsum::EinsumOptions options;
  options.context = &context;
  for (int s = first_shape; s < first_shape + shapes; ++s) {
    const int64_t m = 3 + s % 17, k = 2 + s % 5, n = 1 + s % 7;
    const DType dtype = s % 2 ? DType::f32 : DType::f64;
    const std::vector<double> av(static_cast<size_t>(m * k), 1.0), bv(static_cast<size_t>(k * n), 1.0);
    const Tensor a = Tensor::from_col_major<double>({m, k}, av).astype(dtype),
                 b = Tensor::from_col_major<double>({k, n}, bv).astype(dtype);
    for (int64_t call = 0; call < StepKernel::kHotCalls + 2; ++call)
      einsum::einsum("ij,jk->ik", {a, b}, options);
  }
  context.specialiser().wait_idle();
  const DispatchStats stats = dispatch_stats(context);
  return stats.jit.kernels_compiled + stats.jit.disk_hits;
}

}  // namespace

// Exit status: 40 bounded; 41 registrations after the first context (counts on stderr); 42 more than the bound in
// all; 43 the workload used too few kernels to tell; 33 this build cannot count (a sanitizer owns __cxa_atexit).
int check_exit_handlers() {
  if (exit_handlers_seen() < 0) return 33;
  const LlvmProcess& process = LlvmProcess::get();
  int64_t kernels = 0;
  {
    ExecutionContext first(ConfigOptions{.threads = 1});
    kernels += matmuls(first, 0, 6);  // the warm-up and every kind of LLVM use a context makes
  }
  const int seen_after_first = exit_handlers_seen();
  const int64_t ours_after_first = process.exit_handler_registrations();
  for (int round = 1; round <= 6; ++round) {
    ExecutionContext context(ConfigOptions{.threads = 2});  // a new JIT: the first shapes from disk, the others compiled
    kernels += matmuls(context, 0, 6) + matmuls(context, 6 * round, 6);
  }
  const int seen = exit_handlers_seen();
  const int64_t ours = process.exit_handler_registrations();
  std::fprintf(stderr, "exit handlers: %d atexit() registrations (%d after the first context), %lld of the gate's; "
               "%lld kernels compiled or loaded\n", seen, seen - seen_after_first, static_cast<long long>(ours),
               static_cast<long long>(kernels));
  if (seen != seen_after_first || ours != ours_after_first) return 41;
  // One per kind of use (6) and one for the warm-up, each at most once per thread that raced to it (the foreground
  // and the specialiser), plus the warm-up's own uses (a JIT, its target machine, the statics).
  if (ours > 2 * (6 + 1) + 3) return 42;
  // Each kernel is two uses of LLVM or more (compile or read, link, look up): the old registration after every use
  // would have made at least twice this many.
  return kernels >= 20 ? 40 : 43;
}

namespace {

int g_failing_warm_ups = 0;
void failing_warm_up() {
  ++g_failing_warm_ups;
  fail(ErrorKind::runtime, "jit: injected warm-up failure");
}

// C (m x 5) = A (m x 4) B (4 x 5), column-major, on `jit` (contract_on); whether C is exact (A = 1..., B = 2: every
// element is 8, in either kernel).
bool matmul_exact(JitState& jit, int64_t m) {
  std::vector<double> a(static_cast<size_t>(m * 4), 1.0), b(20, 2.0), c(static_cast<size_t>(m * 5), -1.0);
  ContractionProblem p;
  p.m = {{m, 1, 0, 1}};
  p.n = {{5, 0, 4, m}};
  p.k = {{4, m, 1, 0}};
  p.a = a.data();
  p.b = b.data();
  p.c = c.data();
  contract_on(p, jit, nullptr);
  for (double x : c)
    if (x != 8.0) return false;
  return true;
}

}  // namespace

// Exit status: 50 as described in the file comment; 51-54 the step (JIT off, failing, next, later) that went wrong.
int check_warm_up_fault() {
  const LlvmProcess& process = LlvmProcess::get();
  ScratchAllocator scratch(0);
  const Config on = Config::from({}), off = Config::from({}, {.jit = false});
  if (process.warmed_up()) return 55;  // nothing may have warmed up before the first context
  {
    JitState jit(1, off, scratch, &failing_warm_up);
    if (!matmul_exact(jit, 6) || g_failing_warm_ups != 0 || process.warmed_up() || jit.calls().portable != 1) return 51;
  }
  JitState failing(2, on, scratch, &failing_warm_up);
  if (!matmul_exact(failing, 6) || g_failing_warm_ups != 1 || process.warmed_up() || !failing.failed() ||
      failing.calls().portable != 1)
    return 52;
  JitState next(3, on, scratch);
  if (!matmul_exact(next, 7) || !process.warmed_up() || next.failed() || next.calls().jit != 1) return 53;
  JitState later(4, on, scratch, &failing_warm_up);
  if (!matmul_exact(later, 9) || g_failing_warm_ups != 1 || later.failed() || later.calls().jit != 1 ||
      !failing.failed() || next.failed())
    return 54;
  return 50;
}

namespace {
int specialised_files() {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::getenv("EINSTAGE_CACHE_DIR")))
    if (entry.path().filename().string().rfind("ein_spec_", 0) == 0) ++count;
  return count;
}
}  // namespace

// "specialise-fill" (status 60) fills the disk cache with two hot matmuls' kernels; the parent then removes the
// specialised ones, and "specialise-cold" runs the same matmuls again: every ordinary kernel now comes from disk, so
// the first code this process generates is a specialised kernel, queued for the background thread. The warm-up must run
// on this thread before it is queued (its throwaway JIT's target machine is the one made here: the foreground cache
// compiles nothing, and the warm-up generates warm_up_code_generations(): none, one kernel on the shared libLLVM) and
// the background must still generate the kernels. Before that rule the specialiser's thread warmed up itself, and an
// exit() during it destroyed the statics it was making under it. Status 61: so; 62: the foreground compiled kernels
// (the fill did not fill); 63: no warm-up on this thread; 64: no specialised kernel generated; 65: not warmed up.
int check_specialise(bool fill) {
  ExecutionContext context(ConfigOptions{.threads = 1});
  (void)matmuls(context, 0, 2);
  if (fill) return 60;
  if (dispatch_stats(context).jit.kernels_compiled != 0) return 62;
  if (Jit::target_machines_on_this_thread() != 1 || Jit::codegens_on_this_thread() != warm_up_code_generations())
    return 63;
  if (specialised_files() == 0) return 64;
  return LlvmProcess::get().warmed_up() ? 61 : 65;
}

}  // namespace einstage::test
