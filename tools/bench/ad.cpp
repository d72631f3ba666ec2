// einstage_bench_ad: the cost of a gradient. For the 7-matrix chain ij,jk,kl,lm,mn,no,o->i (n = 256) and the 4x4
// grid of bond dimension 8 (contracted to a scalar), the loss L = sum(einsum(...)) is traced once, and
// ad::value_and_grad gives the program that returns L and the gradient with respect to every operand. Both programs
// run on a Runtime with the einsum module (prepared and warm: trees planned and cached), and the table shows the
// time of the value alone, of value + gradient, and their ratio; a second value+gradient column differentiates the
// loss after einsum::split_einsums (the einsum rewritten into the pairwise einsums of its planned tree), so the
// reverse sweep reuses forward intermediates. torch.autograd does the same in the same run
// (torch.einsum(...).sum() forward, then forward + backward) through /usr/bin/python3 when python3-torch is
// installed; the torch columns say "n/a" and the output says why otherwise. f64, seeded data, one thread for both
// (torch.set_num_threads(1)), best of repeated calls after a warm-up. Not a test: it prints a table and JSON.
//
// Usage: einstage_bench_ad [--min-time S] [--json FILE] [--no-torch]
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/EinsumAd.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/TraceEinsum.h"
#include "runtime/Runtime.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace einstage;
using bench::best_time;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Workload {
  std::string name;
  std::string spec;
  std::vector<Shape> shapes;
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  const auto [chain, chain_shapes] = bench::chain7_workload();
  const auto [grid, grid_shapes] = bench::grid4x4_workload();
  w.push_back({"chain7 n=256", chain, chain_shapes});
  w.push_back({"grid4x4 bond8", grid, grid_shapes});
  return w;
}

// Seeded values in [-0.5, 0.5) scaled so that long chains neither overflow nor vanish.
std::vector<Tensor> operands(const Workload& w) {
  uint64_t state = 42;
  std::vector<Tensor> ops;
  for (const Shape& s : w.shapes) {
    Tensor t = Tensor::empty(DType::f64, s);
    double* d = t.data<double>();
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.empty() ? 1 : s[0]));
    for (int64_t i = 0; i < t.numel(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      d[i] = (static_cast<double>(state >> 11) * 0x1.0p-53 - 0.5) * scale;
    }
    ops.push_back(std::move(t));
  }
  return ops;
}

constexpr const char* kTorchScript = R"PY(
import json, sys, time
import torch
torch.set_num_threads(1)
cfg = json.load(sys.stdin)
out = {"torch": torch.__version__, "rows": []}
def best(fn, min_time):
    fn()
    best, total, reps = 1e300, 0.0, 0
    while total < min_time or reps < 5:
        t0 = time.perf_counter(); fn(); dt = time.perf_counter() - t0
        best = min(best, dt); total += dt; reps += 1
    return best
for w in cfg["rows"]:
    g = torch.Generator().manual_seed(42)
    ops = [(torch.rand(s, dtype=torch.float64, generator=g) - 0.5) / (s[0] ** 0.5 if s else 1.0) for s in w["shapes"]]
    def value():
        with torch.no_grad():
            return torch.einsum(w["spec"], *ops).sum()
    def value_and_grad():
        xs = [o.detach().requires_grad_(True) for o in ops]
        loss = torch.einsum(w["spec"], *xs).sum()
        loss.backward()
        return loss, [x.grad for x in xs]
    out["rows"].append({"name": w["name"], "value_s": best(value, cfg["min_time"]),
                        "value_and_grad_s": best(value_and_grad, cfg["min_time"])})
print(json.dumps(out))
)PY";

// torch.autograd timings; nullopt with a reason when it cannot run.
std::optional<json> torch_times(const std::vector<Workload>& ws, double min_time, const bench::Machine& machine,
                                std::string& why) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    why = "/usr/bin/python3 not found";
    return std::nullopt;
  }
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    why = "python3-torch is not installed for /usr/bin/python3";
    return std::nullopt;
  }
  json cfg = {{"min_time", min_time}, {"rows", json::array()}};
  for (const Workload& w : ws) cfg["rows"].push_back({{"name", w.name}, {"spec", w.spec}, {"shapes", w.shapes}});
  char script[] = "/tmp/einstage_bench_ad_py_XXXXXX";
  char input[] = "/tmp/einstage_bench_ad_in_XXXXXX";
  int fs = mkstemp(script), fi = mkstemp(input);
  if (fs < 0 || fi < 0) {
    why = "cannot create a temporary file";
    return std::nullopt;
  }
  close(fs);
  close(fi);
  std::ofstream(script) << kTorchScript;
  std::ofstream(input) << cfg.dump();
  const std::string cmd = fmt::format("{}OMP_NUM_THREADS=1 /usr/bin/python3 '{}' < '{}'", machine.peer_env(),
                                      script, input);
  std::optional<json> out = bench::run_peer_json(cmd, "the torch script", why);
  std::filesystem::remove(script);
  std::filesystem::remove(input);
  return out;
}

std::string ms(double s) { return s < 0 ? "n/a" : fmt::format("{:.2f}", s * 1e3); }
std::string ratio(double a, double b) { return a < 0 || b < 0 ? "n/a" : fmt::format("{:.2f}x", a / b); }

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.5;
  std::string json_file;
  bool torch = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-torch") torch = false;
    else {
      std::fprintf(stderr, "usage: einstage_bench_ad [--min-time S] [--json FILE] [--no-torch]\n");
      return 2;
    }
  }
  const auto ws = workloads();
  std::string why = "--no-torch";
  const bench::Machine machine = bench::detect_machine();
  std::optional<json> tt = torch ? torch_times(ws, min_time, machine, why) : std::nullopt;

  Runtime rt(RuntimeOptions{1});  // one thread, like torch here
  rt.add_module(einsum::module_descriptor());
  json result = {{"machine", machine.to_json()}, {"threads", 1}, {"rows", json::array()}};
  if (tt) result["torch"] = (*tt)["torch"];
  else result["torch_failure"] = why;
  fmt::print("{}\n", machine.summary());
  fmt::print("value vs value + gradient (all operands), f64, 1 thread, best of repeated calls (milliseconds)\n");
  fmt::print("{:<15} | {:>9} {:>11} {:>7} | {:>11} {:>7} | {:>9} {:>11} {:>7}\n", "workload", "value",
             "value+grad", "ratio", "value+grad", "ratio", "value", "value+grad", "ratio");
  fmt::print("{:<15} | {:^29} | {:^19} | {:^29}\n", "", "einstage (n-ary einsum)", "split along tree",
             "torch.autograd");
  for (const Workload& w : ws) {
    TraceContext ctx("loss", &rt.registry());
    std::vector<TracedTensor> params;
    std::vector<int> wrt;
    for (size_t k = 0; k < w.shapes.size(); ++k) {
      std::vector<Dim> dims(w.shapes[k].begin(), w.shapes[k].end());
      params.push_back(ctx.parameter(fmt::format("a{}", k), DType::f64, dims));
      wrt.push_back(static_cast<int>(k));
    }
    TracedTensor y = einsum::einsum(ctx, w.spec, std::span<const TracedTensor>(params));
    Program loss = ctx.finish({y.rank() == 0 ? y : sum(y)});
    Program vg = ad::value_and_grad(loss, wrt, &rt.registry());
    // The same loss with the einsum split into the pairwise einsums of its planned tree first (EinsumAd.h).
    Program split_vg = ad::value_and_grad(einsum::split_einsums(loss, &rt.registry()), wrt, &rt.registry());
    int reverse_einsums = 0;
    for (const Instruction& i : vg.instructions) reverse_einsums += std::holds_alternative<ExtensionOp>(i.op);
    Executable value_exe = rt.prepare(loss), grad_exe = rt.prepare(vg), split_exe = rt.prepare(split_vg);
    std::vector<Tensor> ops = operands(w);
    std::span<const Tensor> in(ops);
    const double tv = best_time([&] { value_exe.run(in); }, min_time);
    const double tg = best_time([&] { grad_exe.run(in); }, min_time);
    const double ts = best_time([&] { split_exe.run(in); }, min_time);
    double pv = -1, pg = -1;
    if (tt)
      for (const json& r : (*tt)["rows"])
        if (r["name"] == w.name) {
          pv = r["value_s"].get<double>();
          pg = r["value_and_grad_s"].get<double>();
        }
    fmt::print("{:<15} | {:>9} {:>11} {:>7} | {:>11} {:>7} | {:>9} {:>11} {:>7}\n", w.name, ms(tv), ms(tg),
               ratio(tg, tv), ms(ts), ratio(ts, tv), ms(pv), ms(pg), ratio(pg, pv));
    result["rows"].push_back({{"name", w.name},
                              {"spec", w.spec},
                              {"einsums_in_value_and_grad", reverse_einsums},
                              {"instructions_in_value_and_grad", vg.instructions.size()},
                              {"einstage", {{"value_s", tv}, {"value_and_grad_s", tg},
                                            {"value_and_grad_split_s", ts},
                                            {"einsums_in_split_value_and_grad",
                                             std::count_if(split_vg.instructions.begin(), split_vg.instructions.end(),
                                                           [](const Instruction& i) {
                                                             return std::holds_alternative<ExtensionOp>(i.op);
                                                           })}}},
                              {"torch", tt ? json{{"value_s", pv}, {"value_and_grad_s", pg}} : json(nullptr)}});
  }
  if (!tt) fmt::print("torch: not measured ({})\n", why);
  fmt::print("value+grad returns the loss and the gradient with respect to every operand; ratio = value+grad / value\n");
  const std::string text = result.dump(2);
  if (!json_file.empty()) std::ofstream(json_file) << text << "\n";
  fmt::print("{}\n", text);
  return 0;
}
