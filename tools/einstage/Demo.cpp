// `einstage` with no arguments (or `einstage demo`): a short tour of the whole pipeline on one small program --
// trace it, print it, plan its einsum for concrete shapes, lower it to standard ops, and run it both ways.
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace einstage::cli {

namespace {

constexpr std::string_view kDemoHelp =
    "usage: einstage [demo]\n"
    "\n"
    "A short built-in demonstration: traces y = einsum(\"bij,jk,k->bi\", x, w, v) and loss = sum(y * y) with a\n"
    "symbolic batch dim b, prints the program, plans the einsum for b = 2, prints the program lowered to standard\n"
    "ops, and runs it through the runtime (einsum module) and as the lowered program, comparing the two.\n"
    "Run 'einstage --help' for the commands.\n";

// Small exact values so the printed numbers are short: (i mod 5 - 2) / 2 over the column-major index.
Tensor demo_tensor(Shape shape, int offset) {
  Tensor t = Tensor::empty(DType::f64, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = static_cast<double>((i + offset) % 5 - 2) / 2;
  return t;
}

}  // namespace

int run_demo(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kDemoHelp);
    return 0;
  }
  if (!args.empty()) usage_error("demo: takes no arguments; run 'einstage --help' for the commands");

  Runtime runtime;
  runtime.add_module(einsum::module_descriptor());
  TraceContext ctx("demo", &runtime.registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("b"), 3, 4});
  TracedTensor w = ctx.parameter("w", DType::f64, {4, 5});
  TracedTensor v = ctx.parameter("v", DType::f64, {5});
  TracedTensor y = einsum::einsum(ctx, "bij,jk,k->bi", {x, w, v});
  Program program = ctx.finish({y, sum(y * y)});

  fmt::print("einstage: a tracing compiler with a staged runtime for tensor contractions.\n"
             "Run 'einstage --help' for the commands; this is a tour of the pipeline on one small program.\n\n");
  fmt::print("1. Traced: the einsum is one extension op; b is a symbolic batch dim, no tree is stored yet\n\n{}\n",
             print_program(program));

  const int64_t b = 2;
  std::vector<Tensor> inputs = {demo_tensor({b, 3, 4}, 0), demo_tensor({4, 5}, 1), demo_tensor({5}, 2)};
  Executable exe = runtime.prepare(program);
  fmt::print("2. Planned: the first run with b = {} plans the contraction tree and caches it\n\n{}\n", b,
             exe.describe_prepared(inputs));

  Program lowered = lower_to_standard_ops(program, {{"b", b}}, runtime.registry());
  fmt::print("3. Lowered: the same program as standard ops for b = {} (for runtimes without the einsum module)\n\n{}\n",
             b, print_program(lowered));

  std::vector<Tensor> out = exe.run(inputs);
  Runtime bare;  // no modules at all
  std::vector<Tensor> low = bare.prepare(lowered).run(inputs);
  double diff = 0;
  auto a = out[0].to_col_major<double>(), c = low[0].to_col_major<double>();
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - c[i]));
  PreparedCacheStats stats = runtime.cache_stats();
  fmt::print("4. Run on b = {} (x, w, v filled with (i mod 5 - 2) / 2)\n\ny = {}\nloss = {}\n\n", b,
             out[0].to_string(), out[1].to_string());
  fmt::print("The lowered program on a runtime without the einsum module gives max |difference| {} in y; the plan "
             "cache saw {} miss{} and {} hit{}.\n",
             diff, stats.misses, stats.misses == 1 ? "" : "es", stats.hits, stats.hits == 1 ? "" : "s");
  return 0;
}

}  // namespace einstage::cli
