// einstage_bench_ad: the cost of a gradient. For the 7-matrix chain ij,jk,kl,lm,mn,no,o->i (n = 256), the 4x4 grid
// of bond dimension 8, the 8x8 grid of bond 2 (both contracted to a scalar) and the TRG plaquette
// xwu,yxl,yzd,wzr->uldr at chi = 16 and 32, the loss L = sum(einsum(...)) is traced once, and ad::value_and_grad
// gives the program that returns L and the gradient with respect to every operand. The programs run on a Runtime
// with the einsum module (prepared and warm: trees planned and cached), and the table shows the time of the value
// alone, of value + gradient (the default program ad::value_and_grad returns: the reverse pass walks the planned
// tree, and the einsum family's rewrite_derivative, einsum::merge_walks, merges the forward einsum into it, so one
// walk gives the value and the gradients) and their ratio, the same without the merge (a registry whose
// rewrite_derivative is cleared: the walk recomputes the forward intermediates), then value + gradient by the per-operand rule (EinsumAdPath::per_operand: one reverse einsum per operand) and after
// einsum::split_einsums (the einsum rewritten into the pairwise einsums of its planned tree), and the bytes of
// forward intermediates the tree walk keeps. The torch columns do the same with torch.autograd through
// /usr/bin/python3 (when python3-torch is installed; "n/a" and the reason otherwise): "torch+path" contracts
// pairwise along einstage's planned tree with torch.einsum per step (what opt_einsum's contract_expression with the
// torch backend does; opt_einsum itself has no Debian package here), "torch.einsum" is one torch.einsum call (only
// where every label is a letter). f64, seeded data, one thread for both by default (torch.set_num_threads(1));
// --threads N runs einstage on N threads and torch with torch.set_num_threads(N) (0: einstage's default, every CPU
// this process may use, and the same count for torch). Best of repeated calls after a warm-up. Not a test: it
// prints a table and JSON.
//
// Usage: einstage_bench_ad [--min-time S] [--json FILE] [--no-torch] [--only TEXT] [--hvp] [--cpu-time]
//                          [--threads N]   (--only:
// workloads whose name contains TEXT; --hvp also times Hessian-vector products, ad::jvp of ad::grad, as returned
// (merged: the gradient and its tangent from one walk) and without the merge, and the work of the value and of the
// HVP's walk from their plans (multiply-adds, pairwise steps and calls by part: EinsumVjpPlan::tangent_work), with the
// time per step the HVP spends beyond its multiply-adds at the value's rate ("hvp_work" in the JSON); --cpu-time
// takes the best thread CPU time instead of wall time, for both systems, so a loaded machine's waits for a CPU drop
// out of the ratios; it measures the calling thread only, so it needs --threads 1)
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/einsum/exec/TreeAd.h"
#include "runtime/Cpus.h"
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
#include <map>
#include <numeric>
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
  const auto [grid8, grid8_shapes] = bench::grid_workload(8, 2);
  w.push_back({"grid8x8 bond2", grid8, grid8_shapes});
  for (int64_t chi : {16, 32}) {
    const auto [trg, trg_shapes] = bench::trg_plaquette_workload(chi);
    w.push_back({fmt::format("trg chi={}", chi), trg, trg_shapes});
  }
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
cfg = json.load(sys.stdin)
torch.set_num_threads(cfg["threads"])
out = {"torch": torch.__version__, "rows": []}
clock = time.thread_time if cfg["cpu_time"] else time.perf_counter
def best(fn, min_time):
    fn()
    best, total, reps = 1e300, 0.0, 0
    while total < min_time or reps < 5:
        t0 = clock(); fn(); dt = clock() - t0
        best = min(best, dt); total += dt; reps += 1
    return best
for w in cfg["rows"]:
    g = torch.Generator().manual_seed(42)
    ops = [(torch.rand(s, dtype=torch.float64, generator=g) - 0.5) / (s[0] ** 0.5 if s else 1.0) for s in w["shapes"]]
    def along_path(xs):
        nodes = list(xs)
        for a, b, spec in w["steps"]:
            nodes.append(torch.einsum(spec, nodes[a], nodes[b]))
        return nodes[-1]
    def whole(xs):
        return torch.einsum(w["spec"], *xs)
    def timings(f):
        def value():
            with torch.no_grad():
                return f(ops).sum()
        def value_and_grad():
            xs = [o.detach().requires_grad_(True) for o in ops]
            loss = f(xs).sum()
            loss.backward()
            return loss, [x.grad for x in xs]
        return best(value, cfg["min_time"]), best(value_and_grad, cfg["min_time"])
    row = {"name": w["name"]}
    row["path_value_s"], row["path_value_and_grad_s"] = timings(along_path)
    if w["letters_only"]:
        row["value_s"], row["value_and_grad_s"] = timings(whole)
    out["rows"].append(row)
print(json.dumps(out))
)PY";

// The operands of w as the einsum plans see them (f64).
std::vector<einsum::TensorMeta> metas_of(const Workload& w) {
  std::vector<einsum::TensorMeta> metas;
  for (const Shape& s : w.shapes) metas.push_back({DType::f64, s});
  return metas;
}

// The pairwise steps of einstage's planned tree, each a torch.einsum string over letters (renamed per step).
json torch_row(const Workload& w) {
  const einsum::EinsumPlan plan = einsum::EinsumPlan::prepare(w.spec, metas_of(w));
  std::vector<einsum::Step> pairs = plan.is_shortcut() ? std::vector<einsum::Step>{{0, 1}} : plan.tree().steps();
  json steps = json::array();
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (size_t t = 0; t < pairs.size(); ++t) {
    const einsum::StepPlan& s = plan.steps()[t];
    std::map<einsum::Label, char> rename;
    auto text = [&](const std::vector<einsum::Label>& labels) {
      std::string out;
      for (einsum::Label l : labels) {
        if (!rename.count(l)) rename[l] = letters.at(rename.size());
        out += rename[l];
      }
      return out;
    };
    const std::string a = text(s.lhs.labels), b = text(s.rhs.labels);
    steps.push_back({pairs[t].first, pairs[t].second, a + "," + b + "->" + text(s.final ? s.output : s.result)});
  }
  const bool letters_only = std::all_of(w.spec.begin(), w.spec.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ',' || c == '-' || c == '>';
  });
  return {{"name", w.name}, {"spec", w.spec}, {"shapes", w.shapes}, {"steps", steps}, {"letters_only", letters_only}};
}

// The gradient walk's plan for every operand of w, as ad::value_and_grad's program prepares it.
einsum::EinsumVjpPlan vjp_plan(const Workload& w, const Shape& output) {
  std::vector<int> slots(w.shapes.size());
  std::iota(slots.begin(), slots.end(), 0);
  return einsum::EinsumVjpPlan::prepare(einsum::parse_subscripts(w.spec), metas_of(w), {DType::f64, output}, slots,
                                        {});
}

// The bytes of forward intermediates the tree walk keeps for the gradient of every operand.
int64_t kept_bytes(const Workload& w, const Shape& output) { return vjp_plan(w, output).kept_bytes(); }

// The work of the value (the einsum's planned tree) and of the HVP's one walk (EinsumVjpPlan::tangent_work: the
// gradient and its tangent, tangents for every operand, none for the loss's constant cotangent), from the plans.
struct HvpWork {
  einsum::ContractionWork value;
  einsum::EinsumVjpPlan::TangentWork hvp;
};
HvpWork hvp_work(const Workload& w, const Shape& output) {
  return {einsum::contraction_work(einsum::EinsumPlan::prepare(einsum::parse_subscripts(w.spec), metas_of(w))),
          vjp_plan(w, output).tangent_work(std::vector<bool>(w.shapes.size(), true), false, true)};
}

json work_json(const einsum::ContractionWork& w) {
  return {{"calls", w.calls}, {"steps", w.steps}, {"multiply_adds", w.multiply_adds}};
}

// torch.autograd timings; nullopt with a reason when it cannot run.
std::optional<json> torch_times(const std::vector<Workload>& ws, double min_time, bool cpu_time, int threads,
                                const bench::Machine& machine, std::string& why) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    why = "/usr/bin/python3 not found";
    return std::nullopt;
  }
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    why = "python3-torch is not installed for /usr/bin/python3";
    return std::nullopt;
  }
  json cfg = {{"min_time", min_time}, {"cpu_time", cpu_time}, {"threads", threads}, {"rows", json::array()}};
  for (const Workload& w : ws) cfg["rows"].push_back(torch_row(w));
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
  const std::string cmd = fmt::format("{}OMP_NUM_THREADS={} /usr/bin/python3 '{}' < '{}'", machine.peer_env(),
                                      threads, script, input);
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
  std::string only;
  bool hvp = false;
  bool cpu_time = false;
  int threads = 1;
  const char* usage = "usage: einstage_bench_ad [--min-time S] [--json FILE] [--no-torch] [--only TEXT] [--hvp] "
                      "[--cpu-time] [--threads N]\n";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-torch") torch = false;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--hvp") hvp = true;
    else if (a == "--cpu-time") cpu_time = true;
    else if (a == "--threads" && i + 1 < argc) {
      const std::string v = argv[++i];
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > 1024) {
        std::fprintf(stderr, "einstage_bench_ad: --threads takes a count from 0 (every CPU) to 1024, got '%s'\n",
                     v.c_str());
        return 2;
      }
      threads = static_cast<int>(n);
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  if (threads == 0) threads = default_threads();
  if (cpu_time && threads > 1) {
    std::fprintf(stderr, "einstage_bench_ad: --cpu-time measures the calling thread only, so it cannot time %d "
                         "threads; drop --cpu-time (wall time) or use --threads 1\n", threads);
    return 2;
  }
  std::vector<Workload> ws;
  for (Workload& w : workloads())
    if (w.name.find(only) != std::string::npos) ws.push_back(std::move(w));
  std::string why = "--no-torch";
  const bench::Machine machine = bench::detect_machine();
  std::optional<json> tt = torch ? torch_times(ws, min_time, cpu_time, threads, machine, why) : std::nullopt;

  Runtime rt(RuntimeOptions{threads});  // the same thread count as torch
  rt.add_module(einsum::module_descriptor());
  json result = {{"machine", machine.to_json()}, {"threads", threads}, {"cpu_time", cpu_time}, {"rows", json::array()}};
  if (tt) result["torch"] = (*tt)["torch"];
  else result["torch_failure"] = why;
  fmt::print("{}\n", machine.summary());
  fmt::print("value vs value + gradient (all operands), f64, {} thread{} (einstage and torch), best {} of repeated "
             "calls (milliseconds)\n", threads, threads == 1 ? "" : "s", cpu_time ? "thread CPU time" : "wall time");
  fmt::print("{:<14} | {:>8} {:>10} {:>6} | {:>10} {:>6} | {:>10} {:>6} | {:>10} {:>6} | {:>8} | {:>8} {:>10} {:>6} | "
             "{:>10} | {:>7}\n", "workload", "value", "value+grad", "ratio", "value+grad", "ratio", "value+grad",
             "ratio", "value+grad", "ratio", "kept MiB", "value", "value+grad", "ratio", "value+grad", "speedup");
  fmt::print("{:<14} | {:^26} | {:^17} | {:^17} | {:^17} | {:>8} | {:^26} | {:^10} | {:>7}\n", "",
             "einstage (default)", "walk, no merge", "per-operand rule", "split_einsums", "", "torch+path",
             "torch.einsum", "vs t+p");
  ExtensionRegistry per_operand = rt.registry();
  einsum::register_einsum_ad_rules(per_operand, einsum::EinsumAdPath::per_operand);
  ExtensionRegistry unmerged = rt.registry();  // the programs as AD builds them, before the family merges walks
  unmerged.find_mutable(einsum::kEinsumAdFamily)->rewrite_derivative = nullptr;
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
    Shape out_shape;
    for (const Dim& d : y.type().dims) out_shape.push_back(d.constant());
    Program loss = ctx.finish({y.rank() == 0 ? y : sum(y)});
    Program vg = ad::value_and_grad(loss, wrt, &rt.registry());
    Program unmerged_vg = ad::value_and_grad(loss, wrt, &unmerged);
    Program old_vg = ad::value_and_grad(loss, wrt, &per_operand);
    // The same loss with the einsum split into the pairwise einsums of its planned tree first (EinsumAd.h).
    Program split_vg = ad::value_and_grad(einsum::split_einsums(loss, &rt.registry()), wrt, &rt.registry());
    Executable value_exe = rt.prepare(loss), grad_exe = rt.prepare(vg), old_exe = rt.prepare(old_vg),
               split_exe = rt.prepare(split_vg), unmerged_exe = rt.prepare(unmerged_vg);
    std::vector<Tensor> ops = operands(w);
    std::span<const Tensor> in(ops);
    const double tv = best_time([&] { value_exe.run(in); }, min_time, cpu_time);
    const double tg = best_time([&] { grad_exe.run(in); }, min_time, cpu_time);
    const double tu = best_time([&] { unmerged_exe.run(in); }, min_time, cpu_time);
    const double to = best_time([&] { old_exe.run(in); }, min_time, cpu_time);
    const double ts = best_time([&] { split_exe.run(in); }, min_time, cpu_time);
    const int64_t kept = kept_bytes(w, out_shape);
    // Hessian-vector products: jvp of the gradient program (forward over reverse), tangents for every operand.
    double th = -1, thu = -1;
    json hvp_json = nullptr;  // the work of the value and of the HVP, from the plans
    if (hvp) {
      // The gradient and its tangent from one walk (the default), and the two walks unmerged.
      Program hv = ad::jvp(ad::grad(loss, wrt, &rt.registry()), wrt, &rt.registry());
      Program unmerged_hv = ad::jvp(ad::grad(loss, wrt, &unmerged), wrt, &unmerged);
      Executable hvp_exe = rt.prepare(hv), unmerged_hvp_exe = rt.prepare(unmerged_hv);
      std::vector<Tensor> hin = ops;
      for (const Tensor& t : ops) hin.push_back(t);
      th = best_time([&] { hvp_exe.run(std::span<const Tensor>(hin)); }, min_time, cpu_time);
      thu = best_time([&] { unmerged_hvp_exe.run(std::span<const Tensor>(hin)); }, min_time, cpu_time);
      fmt::print("{:<14} | hvp (jvp of grad) {} ms = {} value; without the merge {} ms = {}\n", w.name, ms(th),
                 ratio(th, tv), ms(thu), ratio(thu, tv));
      const HvpWork work = hvp_work(w, out_shape);
      const einsum::ContractionWork total = work.hvp.total();
      auto part = [&](const einsum::ContractionWork& p) {
        return fmt::format("{} in {} steps", ratio(p.multiply_adds, work.value.multiply_adds), p.steps);
      };
      // The time the HVP takes beyond its multiply-adds at the value's rate, per step: the cost of a step that is
      // not its arithmetic (calls, copies, smaller kernels).
      const double floor_s = tv * total.multiply_adds / work.value.multiply_adds;
      fmt::print("{:<14} | hvp multiply-adds / value multiply-adds {} (value {:.3g} in {} steps, {:.1f} per ns; hvp "
                 "{} steps in {} calls, {:.1f} per ns; {:.2f} us per step beyond the value's rate): forward values "
                 "{}, their tangents {}, cotangents {}, their tangents {}\n", w.name,
                 ratio(total.multiply_adds, work.value.multiply_adds), work.value.multiply_adds, work.value.steps,
                 work.value.multiply_adds / tv * 1e-9, total.steps, total.calls, total.multiply_adds / th * 1e-9,
                 (th - floor_s) / static_cast<double>(total.steps) * 1e6, part(work.hvp.values),
                 part(work.hvp.tangents), part(work.hvp.cotangents), part(work.hvp.cotangent_tangents));
      hvp_json = {{"value", work_json(work.value)}, {"hvp", work_json(total)},
                  {"hvp_forward_values", work_json(work.hvp.values)},
                  {"hvp_forward_tangents", work_json(work.hvp.tangents)},
                  {"hvp_cotangents", work_json(work.hvp.cotangents)},
                  {"hvp_cotangent_tangents", work_json(work.hvp.cotangent_tangents)},
                  {"hvp_multiply_adds_per_value", total.multiply_adds / work.value.multiply_adds}};
    }
    double pv = -1, pg = -1, ev = -1, eg = -1;
    if (tt)
      for (const json& r : (*tt)["rows"])
        if (r["name"] == w.name) {
          pv = r["path_value_s"].get<double>();
          pg = r["path_value_and_grad_s"].get<double>();
          if (r.contains("value_s")) {
            ev = r["value_s"].get<double>();
            eg = r["value_and_grad_s"].get<double>();
          }
        }
    fmt::print("{:<14} | {:>8} {:>10} {:>6} | {:>10} {:>6} | {:>10} {:>6} | {:>10} {:>6} | {:>8.2f} | {:>8} {:>10} "
               "{:>6} | {:>10} | {:>7}\n", w.name, ms(tv), ms(tg), ratio(tg, tv), ms(tu), ratio(tu, tv), ms(to),
               ratio(to, tv), ms(ts), ratio(ts, tv),
               static_cast<double>(kept) / (1 << 20), ms(pv), ms(pg), ratio(pg, pv), ms(eg), ratio(pg, tg));
    auto count_ext = [](const Program& p) {
      return std::count_if(p.instructions.begin(), p.instructions.end(),
                           [](const Instruction& i) { return std::holds_alternative<ExtensionOp>(i.op); });
    };
    result["rows"].push_back({{"name", w.name},
                              {"spec", w.spec},
                              {"instructions_in_value_and_grad", vg.instructions.size()},
                              {"einstage", {{"value_s", tv}, {"value_and_grad_s", tg},
                                            {"value_and_grad_unmerged_s", tu},
                                            {"value_and_grad_per_operand_s", to},
                                            {"value_and_grad_split_s", ts},
                                            {"kept_intermediate_bytes", kept},
                                            {"hvp_s", th},
                                            {"hvp_unmerged_s", thu},
                                            {"hvp_work", hvp_json},
                                            {"extension_ops_in_value_and_grad", count_ext(vg)},
                                            {"extension_ops_per_operand", count_ext(old_vg)},
                                            {"extension_ops_split", count_ext(split_vg)}}},
                              {"torch", tt ? json{{"path_value_s", pv}, {"path_value_and_grad_s", pg},
                                                  {"einsum_value_s", ev}, {"einsum_value_and_grad_s", eg}}
                                           : json(nullptr)}});
  }
  if (!tt) fmt::print("torch: not measured ({})\n", why);
  fmt::print("value+grad returns the loss and the gradient with respect to every operand; ratio = value+grad / value "
             "(of the same system); speedup = torch+path value+grad / einstage value+grad; kept = forward "
             "intermediates the tree walk keeps\n");
  const std::string text = result.dump(2);
  if (!json_file.empty()) std::ofstream(json_file) << text << "\n";
  fmt::print("{}\n", text);
  return 0;
}
