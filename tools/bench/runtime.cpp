// einstage_bench_runtime: what the staged runtime adds on top of the einsum executor. Not a test: it prints a table.
//
// For a few traced programs (one einsum op, with a symbolic batch where it has one), it times on one thread:
// the prepared EinsumPlan's execute() (the floor), Executable::run on a Runtime with the einsum module linked in
// (binding, constraint checks, the prepared-op cache lookup, output ownership), the same program lowered to standard
// ops and run on a runtime with no modules (the interpreter's kernels), and the first run of a fresh Executable for
// the shapes (planning included). Times are the best of repeated calls after a warm-up.
//
// Usage: einstage_bench_runtime [--min-time S]
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "runtime/Runtime.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace einstage;
using bench::best_time;
using Clock = std::chrono::steady_clock;

namespace {

Tensor filled(Shape shape, double seed) {
  Tensor t = Tensor::empty(DType::f64, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = std::sin(seed + 0.37 * static_cast<double>(i));
  return t;
}

std::string us(double s) { return fmt::format("{:.2f}", s * 1e6); }

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::stod(argv[++i]);
    else {
      fmt::print(stderr, "usage: einstage_bench_runtime [--min-time S]\n");
      return 2;
    }
  }
  fmt::print("{}\n", bench::detect_machine().summary());
  struct Workload {
    std::string name, subscripts;
    std::vector<std::vector<Dim>> dims;  // traced parameter dims
    std::vector<Shape> shapes;            // the run's shapes
    DimBindings bindings;
  };
  const Dim b = Dim::symbol("b");
  std::vector<Workload> workloads = {
      {"matmul 16x16", "ij,jk->ik", {{16, 16}, {16, 16}}, {{16, 16}, {16, 16}}, {}},
      {"batched bij,bjk->bik b=8, 32^3", "bij,bjk->bik", {{b, 32, 32}, {b, 32, 32}}, {{8, 32, 32}, {8, 32, 32}},
       {{"b", 8}}},
      {"chain ij,jk,kl,lm->im 64", "ij,jk,kl,lm->im", {{64, 64}, {64, 64}, {64, 64}, {64, 64}},
       {{64, 64}, {64, 64}, {64, 64}, {64, 64}}, {}},
  };
  fmt::print("{:<34} {:>12} {:>14} {:>14} {:>16}\n", "workload (us, best of runs)", "plan.execute", "Executable.run",
             "lowered (std)", "first run (plan)");
  for (const Workload& w : workloads) {
    Runtime rt(RuntimeOptions{1});  // one thread, as the table says
    rt.add_module(einsum::module_descriptor());
    TraceContext ctx("bench", &rt.registry());
    std::vector<TracedTensor> params;
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < w.dims.size(); ++k) {
      params.push_back(ctx.parameter(fmt::format("x{}", k), DType::f64, w.dims[k]));
      inputs.push_back(filled(w.shapes[k], static_cast<double>(k)));
    }
    Program p = ctx.finish({einsum::einsum(ctx, w.subscripts, params)});
    std::vector<einsum::TensorMeta> metas;
    for (const Tensor& t : inputs) metas.push_back(einsum::TensorMeta::of(t));
    einsum::EinsumPlan plan = einsum::EinsumPlan::prepare(w.subscripts, metas);
    double t_plan = best_time([&] { plan.execute(inputs); }, min_time);
    Executable exe = rt.prepare(p);
    double t_exe = best_time([&] { exe.run(inputs); }, min_time);
    Runtime bare(RuntimeOptions{1});
    Executable low = bare.prepare(lower_to_standard_ops(p, w.bindings, rt.registry()));
    double t_low = best_time([&] { low.run(inputs); }, min_time);
    double t_first = best_time([&] {
      rt.clear_cache();
      exe.run(inputs);
    }, min_time);
    fmt::print("{:<34} {:>12} {:>14} {:>14} {:>16}\n", w.name, us(t_plan), us(t_exe), us(t_low), us(t_first));
  }
  return 0;
}
