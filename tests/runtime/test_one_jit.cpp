// One JIT per process: a host that loads the einsum module from its shared library and runs it shares the module's
// kernels, kernel cache and dispatch counters, because both link the one libeinstage_runtime.so. The test case runs
// in a process of its own (ctest runtime_one_jit, `--no-skip`): only there is it known that no kernel was brought
// into the JIT before it started; the suite's main process skips it.
#include "runtime/Runtime.h"

#include "RuntimeTestUtil.h"
#include "compiler/Trace.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::runtime_test;

namespace {

/// Kernels brought into the JIT so far (compiled, or loaded from the disk cache): each enters once per cache.
int64_t kernels_in_jit(const DispatchStats& s) { return s.jit.kernels_compiled + s.jit.disk_hits; }

}  // namespace

TEST_CASE("one jit: a process that loads the einsum module brings each kernel into one JIT once" * doctest::skip()) {
  REQUIRE(jit_enabled());
  ExtensionRegistry registry;
  einsum::register_einsum_semantics(registry);
  TraceContext ctx("gemm", &registry);
  TracedTensor a = ctx.parameter("a", DType::f64, {40, 30});
  TracedTensor b = ctx.parameter("b", DType::f64, {30, 20});
  Program p = ctx.finish({einsum::einsum(ctx, "ij,jk->ik", {a, b})});
  Tensor av = random_tensor(DType::f64, {40, 30}, 1), bv = random_tensor(DType::f64, {30, 20}, 2);
  Tensor expect = naive_einsum<double>({"ij", "jk"}, "ik", {av, bv});

  const DispatchStats start = dispatch_stats();
  CHECK(start.jit_calls == 0);
  Runtime loaded;
  loaded.load_module(EINSTAGE_EINSUM_MODULE_PATH);
  CHECK(max_abs_diff(loaded.prepare(p).run({av, bv}).at(0), expect) < 1e-12);
  // The module's contraction went through the host's dispatcher into the host's kernel cache: the host counted it.
  const DispatchStats after_module = dispatch_stats();
  CHECK(after_module.jit_calls > start.jit_calls);
  CHECK(kernels_in_jit(after_module) > 0);

  // The linked-in module and the direct API run the same contraction on kernels that are already in that cache.
  Runtime linked;
  linked.add_module(einsum::module_descriptor());
  CHECK(max_abs_diff(linked.prepare(p).run({av, bv}).at(0), expect) < 1e-12);
  CHECK(max_abs_diff(einsum::einsum("ij,jk->ik", {av, bv}), expect) < 1e-12);
  const DispatchStats after_host = dispatch_stats();
  CHECK(after_host.jit_calls > after_module.jit_calls);
  CHECK(kernels_in_jit(after_host) == kernels_in_jit(after_module));
  CHECK(after_host.jit.kernels_compiled == after_module.jit.kernels_compiled);
}
