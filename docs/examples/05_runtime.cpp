// Guide story (e): run a traced program fast: Runtime, module, prepare, run, the plan cache and the JIT. Quoted in
// docs/guide.md. ctest runs it three times: module linked in, module loaded from its shared library (argv[1]), and
// linked in with EINSTAGE_JIT=0.
#include "docs/examples/Check.h"
#include "compiler/Trace.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "runtime/Runtime.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"

#include <vector>

using namespace einstage;
using example::check;
using example::check_close;

// The chain a·b·c by loops (column-major), the independent oracle.
static std::vector<double> chain(const Tensor& a, const Tensor& b, const Tensor& c) {
  int64_t n = a.extent(0), p = c.extent(1);
  std::vector<double> out(static_cast<size_t>(n * p), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < p; ++l)
      for (int64_t j = 0; j < a.extent(1); ++j)
        for (int64_t k = 0; k < b.extent(1); ++k)
          out[static_cast<size_t>(i + n * l)] += a.at<double>({i, j}) * b.at<double>({j, k}) * c.at<double>({k, l});
  return out;
}

static Tensor filled(Shape shape, double scale) {
  std::vector<double> v(static_cast<size_t>(element_count(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = scale * (double(k % 11) - 5);
  return Tensor::from_col_major<double>(shape, v);
}

static Tensor identity(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k * n + k)] = 1.0;
  return Tensor::from_col_major<double>({n, n}, v);
}

int main(int argc, char** argv) {
  // [runtime]
  RuntimeOptions options;
  options.threads = 2;                                   // its own pool of 2 (default: the shared one, every CPU)
  Runtime rt(options);
  if (argc > 1) {
    rt.load_module(argv[1]);                             // path/to/libeinstage_einsum_module.so
  } else {
    rt.add_module(einsum::module_descriptor());          // the same module, linked in
  }

  TraceContext ctx("chain", &rt.registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {Dim::symbol("n"), 8});
  TracedTensor b = ctx.parameter("b", DType::f64, {8, 16});
  TracedTensor c = ctx.parameter("c", DType::f64, {16, 4});
  Program p = ctx.finish({einsum::einsum(ctx, "ij,jk,kl->il", {a, b, c})});

  Executable exe = rt.prepare(p);                        // checks the program; plans nothing yet
  Tensor a32 = filled({32, 8}, 0.25), bv = filled({8, 16}, 0.5), cv = filled({16, 4}, 1.0);
  Tensor r1 = exe.run({a32, bv, cv}).at(0);              // n = 32: plans the tree (a cache miss)
  Tensor r2 = exe.run({a32, bv, cv}).at(0);              // same shapes: runs the cached plan (a hit)
  Tensor a5 = filled({5, 8}, 0.25);
  Tensor r3 = exe.run({a5, bv, cv}).at(0);               // n = 5: a new shape, planned once more
  PreparedCacheStats cache = rt.cache_stats();           // hits 1, misses 2, entries 2
  fmt::print("{}", exe.describe_prepared(std::vector<Tensor>{a32, bv, cv}));   // the plan for these inputs

  DispatchStats jit = dispatch_stats(rt.context());      // which kernels ran this program's contractions
  fmt::print("jit {}: {} JIT calls, {} portable calls, {} kernels compiled, {} loaded from disk\n",
             jit_enabled() ? "on" : "off", jit.jit_calls, jit.portable_calls, jit.jit.kernels_compiled,
             jit.jit.disk_hits);
  // [runtime]

  check_close(r1, chain(a32, bv, cv), "chain n = 32");
  check_close(r2, chain(a32, bv, cv), "chain n = 32 again");
  check_close(r3, chain(a5, bv, cv), "chain n = 5");
  check(cache.misses == 2 && cache.hits == 1 && cache.entries == 2,
        fmt::format("cache hits {} misses {} entries {}", cache.hits, cache.misses, cache.entries));
  check(exe.stats().runs >= 3, "executable counted its runs");
  // A module loaded from its shared library runs on the host's einstage libraries (one JIT, one kernel cache, one set
  // of counters per context), so dispatch_stats(rt.context()) sees its contractions exactly as the linked-in module's.
  if (jit_enabled()) {
    check(jit.jit_calls > 0 && jit.portable_calls == 0, "the JIT ran every f64 contraction");
  } else {
    check(jit.jit_calls == 0 && jit.portable_calls > 0, "EINSTAGE_JIT=0: the portable kernel ran");
  }

  {  // The default context, replaced for a while (guide: "The default context") and restored.
    Tensor a = filled({6, 8}, 0.25), b = filled({8, 3}, 0.5);
    Environment env{{"EINSTAGE_NUM_THREADS", "2"}, {"EINSTAGE_JIT", "0"}};
    auto previous = set_default_context(std::make_shared<ExecutionContext>(Config::from(env)));
    const DispatchStats portable_before = dispatch_stats(default_context());
    Tensor c = einsum::einsum("ij,jk->ik", {a, b});  // on 2 threads, portable kernel, this context's plan cache
    const DispatchStats portable_after = dispatch_stats(default_context());
    const int installed_threads = default_context().threads();
    set_default_context(nullptr);                     // the built-in default again
    check_close(c, chain(a, b, identity(3)), "the product on the installed default context");
    check(previous != nullptr && installed_threads == 2, "set_default_context installed the 2-thread context");
    check(portable_after.portable_calls > portable_before.portable_calls &&
              portable_after.jit_calls == portable_before.jit_calls,
          "the installed default (EINSTAGE_JIT=0) ran the product on the portable kernel");
  }
  return example::result("05_runtime");
}
