// einstage_bench_einsum: whole-einsum execution (one-shot and prepared) on the issue's three workloads, beside
// NumPy's einsum(optimize=True) measured in the same run. Not a test: it prints a table and JSON.
//
// Workloads (f64, column-major operands, seeded data): the 7-matrix chain ij,jk,kl,lm,mn,no,o->i with n = 256, the
// 4x4 grid of bond dimension 8 contracted to a scalar (planned with auto, and with auto(quality=high)), and a 16x16
// matmul. Columns: a cold one-shot call (parse,
// bind, plan, execute; the plan cache cleared first), a warm one-shot call (cache hit), a prepared plan's execute()
// (fresh output tensor) and execute_into() (preallocated output), each with the dispatcher's kernel (JIT for floating
// types) and with the portable kernel (EINSTAGE_JIT=0; its plans and cache entries are made with the variable set, so
// no step runs a specialised JIT kernel), and NumPy (an embedded script run by /usr/bin/python3, on the OpenBLAS core
// tools/bench/Machine.h chooses); the NumPy column says "n/a" and the output says why when python3 or numpy is
// missing or the script fails.
// Times are the best of repeated calls after a warm-up, on one thread unless --threads is given; a call shorter than
// 50 us is timed in blocks of calls (best block / calls per block), so the clock's own cost does not count.
//
// Usage: einstage_bench_einsum [--threads N] [--min-time S] [--json FILE] [--no-numpy] [--filter TEXT]
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/planner/ContractionTree.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace einstage;
using bench::best_time;
namespace es = einstage::einsum;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Workload {
  std::string name;
  std::string spec;
  std::vector<Shape> shapes;
  std::string plan = "auto";  // PlanSpec text
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  const auto [chain, chain_shapes] = bench::chain7_workload();
  const auto [grid, grid_shapes] = bench::grid4x4_workload();
  w.push_back({"chain7 n=256", chain, chain_shapes});
  w.push_back({"grid4x4 bond8", grid, grid_shapes});
  w.push_back({"grid (high)", grid, grid_shapes, "auto(quality=high)"});
  w.push_back({"matmul 16x16", "ij,jk->ik", {{16, 16}, {16, 16}}});
  return w;
}

std::vector<Tensor> operands(const Workload& w) {
  uint64_t s = 12345;
  std::vector<Tensor> ops;
  for (const Shape& shape : w.shapes) {
    std::vector<double> data(static_cast<size_t>(element_count(shape)));
    for (double& x : data) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = (static_cast<double>(s >> 11) * 0x1.0p-53 - 0.5) * 0.2;
    }
    ops.push_back(Tensor::from_col_major<double>(shape, data));
  }
  return ops;
}

// The NumPy side, run by /usr/bin/python3 on operands holding the same column-major bytes. optimize=True is NumPy's
// greedy path under its default memory limit (the largest input): on the grid that limit forces a fallback to one
// huge loop nest (~5e10 flops, minutes per call), so a path above kNumpyMaxFlops is reported, not timed. The second
// column is the same greedy search without the memory limit (optimize=("greedy", 2**62)).
constexpr const char* kNumpyScript = R"PY(
import json, sys, time
import numpy as np
rows = json.load(sys.stdin)
out = {"numpy": np.__version__, "rows": []}
def best(fn, min_time):
    fn()
    b, tot, n = float("inf"), 0.0, 0
    while tot < min_time or n < 5:
        t0 = time.perf_counter(); fn(); dt = time.perf_counter() - t0
        b = min(b, dt); tot += dt; n += 1
    return b
for row in rows:
    rng = np.random.default_rng(1234)
    ops = [np.asfortranarray(rng.standard_normal(s) * 0.1) for s in row["shapes"]]
    spec, mt = row["spec"], row["min_time"]
    r = {"name": row["name"]}
    path, info = np.einsum_path(spec, *ops, optimize=True)
    flops = float([l for l in info.split("\n") if "Optimized FLOP count" in l][0].split(":")[1])
    r["opt_true_path_flops"] = flops
    r["opt_true_s"] = best(lambda: np.einsum(spec, *ops, optimize=True), mt) if flops <= row["max_flops"] else None
    gpath = np.einsum_path(spec, *ops, optimize=("greedy", 2**62))[0]
    r["greedy_nolimit_s"] = best(lambda: np.einsum(spec, *ops, optimize=gpath), mt)
    out["rows"].append(r)
json.dump(out, sys.stdout)
)PY";
constexpr double kNumpyMaxFlops = 5e9;

// NumPy timings; nullopt with a reason when python3 or numpy is missing.
std::optional<json> numpy_times(const std::vector<Workload>& ws, double min_time, int threads,
                                const bench::Machine& machine, std::string& why) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    why = "/usr/bin/python3 not found";
    return std::nullopt;
  }
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    why = "numpy is not installed for /usr/bin/python3 (apt install python3-numpy)";
    return std::nullopt;
  }
  json rows = json::array();
  for (const Workload& w : ws)
    rows.push_back({{"name", w.name}, {"spec", w.spec}, {"shapes", w.shapes}, {"min_time", min_time},
                    {"max_flops", kNumpyMaxFlops}});
  const auto dir = std::filesystem::temp_directory_path();
  const std::string script = (dir / fmt::format("einstage-bench-einsum-{}.py", ::getpid())).string();
  const std::string input = (dir / fmt::format("einstage-bench-einsum-{}.json", ::getpid())).string();
  std::ofstream(script) << kNumpyScript;
  std::ofstream(input) << rows.dump();
  const std::string cmd = fmt::format("{}OPENBLAS_NUM_THREADS={} /usr/bin/python3 '{}' < '{}'", machine.peer_env(),
                                      threads, script, input);
  std::optional<json> out = bench::run_peer_json(cmd, "the NumPy script", why);
  std::filesystem::remove(script);
  std::filesystem::remove(input);
  return out;
}

std::string us(double s) {
  if (s < 0) return "n/a";
  return s < 1e-5 ? fmt::format("{:.3f}", s * 1e6) : fmt::format("{:.1f}", s * 1e6);
}

// Seconds per call of fn: best_time of one call, or of a block of calls when one call is shorter than 50 us.
double per_call(const std::function<void()>& fn, double min_time) {
  fn();  // warm-up: plans and kernels
  const auto t0 = Clock::now();
  fn();
  const double one = std::chrono::duration<double>(Clock::now() - t0).count();
  if (one >= 50e-6) return best_time(fn, min_time);
  const int block = static_cast<int>(std::min(10000.0, 50e-6 / std::max(one, 1e-9))) + 1;
  return best_time([&] {
    for (int i = 0; i < block; ++i) fn();
  }, min_time) / block;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double min_time = 0.3;
  std::string json_file;
  bool numpy = true;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-numpy") numpy = false;
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else {
      std::fprintf(stderr, "usage: einstage_bench_einsum [--threads N] [--min-time S] [--json FILE] [--no-numpy] "
                           "[--filter TEXT]\n");
      return 2;
    }
  }
  const bench::Machine machine = bench::detect_machine();
  ThreadPool pool(threads);
  es::EinsumOptions options;
  options.pool = &pool;
  // The portable kernel's columns run on a context of their own with the JIT off (it says so once on stderr).
  ExecutionContext portable_context(ConfigOptions{.threads = threads, .jit = false});
  std::vector<Workload> ws;
  for (Workload& w : workloads())
    if (filter.empty() || w.name.find(filter) != std::string::npos) ws.push_back(std::move(w));
  json result = {{"machine", machine.to_json()}, {"threads", threads}, {"rows", json::array()}};
  std::string why = "--no-numpy";
  std::optional<json> np = numpy ? numpy_times(ws, min_time, threads, machine, why) : std::nullopt;
  if (np) result["numpy"] = (*np)["numpy"];
  else result["numpy_failure"] = why;

  fmt::print("{}\n", machine.summary());
  fmt::print("einsum execution, f64, {} thread(s), best of repeated calls (microseconds)\n", threads);
  fmt::print("{:<15} {:>10} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9}\n", "workload",
             "flops", "method", "cold", "one-shot", "prepared", "into", "cold", "one-shot", "prepared", "into",
             "opt=True", "greedy");
  fmt::print("{:<15} {:>10} {:>9} | {:^39} | {:^39} | {:^19}\n", "", "", "", "dispatcher (JIT)", "portable kernel",
             "numpy einsum");
  for (size_t r = 0; r < ws.size(); ++r) {
    const Workload& w = ws[r];
    std::vector<Tensor> ops = operands(w);
    std::vector<es::TensorMeta> metas;
    for (const Tensor& t : ops) metas.push_back(es::TensorMeta::of(t));
    es::EinsumOptions opt = options;
    opt.plan = es::PlanSpec::parse(w.plan);
    const es::EinsumPlan plan = es::EinsumPlan::prepare(w.spec, metas, opt);
    double flops = 0;
    if (!plan.tree().steps().empty()) flops = es::evaluate(plan.subscripts(), plan.extents(), plan.tree()).flops;
    else flops = 16.0 * 16 * 16;
    json row = {{"name", w.name}, {"spec", w.spec}, {"plan", w.plan}, {"flops", flops}, {"shortcut", plan.is_shortcut()},
                {"tree", plan.tree().to_string()}, {"arena_bytes", plan.arena_bytes()}};
    double t[2][4];
    Tensor out = Tensor::empty(plan.dtype(), plan.output_shape());
    for (int portable = 0; portable < 2; ++portable) {
      // The portable pass runs on a context whose JIT is off (same thread count), with a plan (and cache entries)
      // made there: a plan whose steps were specialised in the JIT pass would keep running its specialised kernels.
      ExecutionContext& context = portable ? portable_context : default_context();
      es::EinsumOptions mode_opt = opt;
      mode_opt.context = &context;
      const es::EinsumPlan mode_plan = portable ? es::EinsumPlan::prepare(w.spec, metas, mode_opt) : plan;
      es::clear_einsum_cache(context);
      // Cold: a fresh plan cache, so the call parses, binds, plans and executes (kernels already compiled).
      t[portable][0] = per_call([&] {
        es::clear_einsum_cache(context);
        es::einsum(w.spec, ops, mode_opt);
      }, min_time);
      t[portable][1] = per_call([&] { es::einsum(w.spec, ops, mode_opt); }, min_time);
      if (portable) t[portable][2] = per_call([&] { mode_plan.execute(ops, context); }, min_time);
      else t[portable][2] = per_call([&] { mode_plan.execute(ops, &pool); }, min_time);
      t[portable][3] = per_call([&] { mode_plan.execute_into(ops, out, context, &pool); }, min_time);
    }
    double tn = -1, tg = -1, np_flops = 0;
    if (np)
      for (const json& pr : (*np)["rows"])
        if (pr["name"] == w.name) {
          if (!pr["opt_true_s"].is_null()) tn = pr["opt_true_s"].get<double>();
          tg = pr["greedy_nolimit_s"].get<double>();
          np_flops = pr["opt_true_path_flops"].get<double>();
        }
    fmt::print("{:<15} {:>10.3g} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9}\n", w.name,
               flops, plan.is_shortcut() ? "shortcut" : "tree", us(t[0][0]), us(t[0][1]), us(t[0][2]), us(t[0][3]),
               us(t[1][0]), us(t[1][1]), us(t[1][2]), us(t[1][3]),
               np && tn < 0 ? fmt::format("({:.1e}fl)", np_flops) : us(tn), us(tg));
    row["jit"] = {{"cold_s", t[0][0]}, {"one_shot_s", t[0][1]}, {"prepared_s", t[0][2]}, {"prepared_into_s", t[0][3]}};
    row["portable"] = {{"cold_s", t[1][0]}, {"one_shot_s", t[1][1]}, {"prepared_s", t[1][2]},
                       {"prepared_into_s", t[1][3]}};
    row["numpy_opt_true_s"] = tn < 0 ? json(nullptr) : json(tn);
    row["numpy_opt_true_path_flops"] = np_flops;
    row["numpy_greedy_nolimit_s"] = tg < 0 ? json(nullptr) : json(tg);
    result["rows"].push_back(row);
  }
  if (!np) fmt::print("numpy: not measured ({})\n", why);
  fmt::print("flops = multiply-adds of the planned tree (evaluate()); cold = plan cache cleared before each call;\n"
             "prepared = execute() (fresh output), into = execute_into() (preallocated output);\n"
             "numpy opt=True = np.einsum(optimize=True), not timed when its path exceeds {:.0e} flops (shown in\n"
             "parentheses); greedy = np.einsum with np.einsum_path(optimize=('greedy', 2**62)), no memory limit\n",
             kNumpyMaxFlops);
  const std::string text = result.dump(2);
  if (!json_file.empty()) std::ofstream(json_file) << text << "\n";
  fmt::print("{}\n", text);
  return 0;
}
