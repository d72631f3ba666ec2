// einstage_bench_slicing: slicing under a memory limit, planned and executed.
//
// Part 1 (planner): the grid, random-regular and Sycamore instances of NETWORKS.md. Each is planned unsliced
// (auto(quality=high) at the given budget, work-only budget so the trees are the same on every machine), then sliced
// to a limit of 2^(floor(sc) - 8) elements (>= 256 slices) with plan_sliced(); the table gives the unsliced tc / sc,
// the slices, one slice's tc / sc, the total tc and the overhead (total sliced flops / unsliced flops; target <= 2).
// Sycamore is also sliced to 2^42 elements (OMEinsum's knee) and to 2^30 (a node of 8 GiB of complex64, docs/scale.md).
// Part 2 (executed): a grid of tensors whose unsliced largest intermediate is >= 16x the limit, contracted unsliced,
// then sliced on 1 and 2 threads: wall times, the time the flop overhead predicts (unsliced 1-thread time x
// overhead), the speed-up of 2 threads and the relative difference of the results.
//
//   einstage_bench_slicing [--bench-dir DIR] [--budget S] [--only a,b] [--skip-plan] [--skip-execute]
//                          [--grid SIDE] [--bond D] [--cut BITS] [--dtype T] [--json FILE]
// Prints a table and writes JSON (default bench-slicing.json); names the CPU.
#include "extensions/einsum/Einsum.h"
#include "extensions/einsum/SlicedEinsum.h"
#include "extensions/einsum/planner/Slicing.h"
#include "runtime/Context.h"
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "tools/bench/Networks.h"

#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::bench;

namespace {

struct PlanRow {
  std::string instance;
  double limit_log2 = 0;
  double unsliced_tc = 0, unsliced_sc = 0;
  double slices = 0, slice_tc = 0, slice_sc = 0, total_tc = 0, overhead = 0, slice_peak = 0;
  double unsliced_s = 0, sliced_s = 0;
  size_t sliced_labels = 0;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<PlanRow> plan_part(const std::vector<Instance>& instances, double budget) {
  std::vector<PlanRow> rows;
  fmt::print("{:<18} {:>7} {:>6} {:>6} {:>9} {:>8} {:>6} {:>8} {:>8} {:>8}\n", "instance", "tc", "sc", "limit",
             "slices", "slice tc", "sc", "total tc", "overhead", "plan s");
  for (const Instance& inst : instances) {
    PlanSpec spec = PlanSpec::automatic_plan(PlanQuality::high);
    spec.budget_s = budget;
    PlanOptions options;
    options.clock_guard = false;
    const double t0 = now_s();
    const PlanResult base = plan_contraction(spec, inst.subscripts, inst.extents, options);
    const double t1 = now_s();
    std::vector<double> limits = {std::floor(base.cost.sc) - 8};
    if (inst.name == "sycamore_m20") limits.insert(limits.end(), {42, 30});
    for (double bits : limits) {
      // The unsliced tree is planned once; plan_sliced plans it again (same work, same tree), so time that apart.
      const double s0 = now_s();
      const SlicedPlan p = plan_sliced(spec, inst.subscripts, inst.extents, {std::exp2(bits)}, options);
      const double s1 = now_s();
      PlanRow r{inst.name, bits, base.cost.tc, base.cost.sc, p.num_slices, p.slice_cost.tc, p.slice_cost.sc,
                std::log2(p.total_flops), p.overhead, p.slice_cost.peak_memory, t1 - t0, (s1 - s0) - (t1 - t0),
                p.sliced.size()};
      fmt::print("{:<18} {:>7.2f} {:>6.2f} {:>6} {:>9.3g} {:>8.2f} {:>6.2f} {:>8.2f} {:>7.3f}x {:>8.2f}\n", r.instance,
                 r.unsliced_tc, r.unsliced_sc, fmt::format("2^{:.0f}", bits), r.slices, r.slice_tc, r.slice_sc,
                 r.total_tc, r.overhead, r.unsliced_s + std::max(0.0, r.sliced_s));
      std::fflush(stdout);
      rows.push_back(r);
    }
  }
  return rows;
}

double rel_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.astype(DType::c128).to_col_major<std::complex<double>>();
  const auto y = b.astype(DType::c128).to_col_major<std::complex<double>>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(std::abs(x[i])) || !std::isfinite(std::abs(y[i]))) return NAN;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1e-300, std::max(std::abs(x[i]), std::abs(y[i]))));
  return worst;
}

nlohmann::json execute_part(int side, int64_t bond, int cut, DType dtype) {
  auto [text, shapes] = grid_workload(side, bond);
  std::vector<Tensor> ops;
  SplitMix64 rng(12345);
  std::vector<TensorMeta> metas;
  for (const Shape& s : shapes) {
    Tensor t = Tensor::empty(DType::f64, s);
    // Values 0.5..1.5 times bond^(-bonds/sites): no cancellation, so relative differences mean something, and the
    // sum of bond^bonds products stays near 1 (finite in f32 too).
    const double scale = std::pow(static_cast<double>(bond), -2.0 * (side - 1) / side);
    for (int64_t k = 0; k < t.numel(); ++k) t.data<double>()[k] = (0.5 + rng.uniform()) * scale;
    if (dtype != DType::f64) t = t.astype(dtype);
    ops.push_back(t);
    metas.push_back(TensorMeta::of(t));
  }
  ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  const EinsumPlan unsliced = EinsumPlan::prepare(text, metas);
  const TreeCost cost = evaluate(unsliced.subscripts(), unsliced.extents(), unsliced.tree());
  const double limit_elements = std::exp2(std::floor(cost.sc) - cut);
  const int64_t limit_bytes = static_cast<int64_t>(limit_elements) * static_cast<int64_t>(size_of(dtype));
  const SlicedEinsumPlan sliced = SlicedEinsumPlan::prepare(text, metas, limit_bytes);
  const SlicedPlan& sp = sliced.slicing();
  Tensor want, got1, got2;
  const double t_unsliced = best_time([&] { want = unsliced.execute(ops, one); }, 1.0);
  const double t1 = best_time([&] { got1 = sliced.execute(ops, one, &one.pool()); }, 1.0);
  const double t2 = best_time([&] { got2 = sliced.execute(ops, two, &two.pool()); }, 1.0);
  const double predicted = t_unsliced * sp.overhead;
  const bool same = std::memcmp(got1.raw_data(), got2.raw_data(), got1.nbytes()) == 0;
  fmt::print("\nexecuted: grid {}x{} bond {} ({} tensors), {}\n", side, side, bond, ops.size(), name(dtype));
  fmt::print("  unsliced: tc {:.2f}, largest intermediate 2^{:.2f} elements, peak {:.3g} elements\n", cost.tc, cost.sc,
             cost.peak_memory);
  fmt::print("  limit 2^{:.0f} elements ({}): unsliced largest / limit = {:.0f}x; {} slices ({} labels), {} chunks, "
             "slice tc {:.2f} sc {:.2f}, overhead {:.3f}x\n", std::log2(limit_elements), format_memory_size(limit_bytes),
             cost.max_intermediate / limit_elements, sliced.num_slices(), sp.sliced.size(), sliced.num_chunks(),
             sp.slice_cost.tc, sp.slice_cost.sc, sp.overhead);
  fmt::print("  unsliced 1 thread {:.4f} s; sliced 1 thread {:.4f} s ({:.2f}x the flop-predicted {:.4f} s); "
             "2 threads {:.4f} s ({:.2f}x 1 thread); bits 1 vs 2 threads {}; rel diff vs unsliced {:.2e}\n",
             t_unsliced, t1, t1 / predicted, predicted, t2, t1 / t2, same ? "identical" : "DIFFER",
             rel_diff(got1, want));
  const double total = sliced.num_slices() * sp.slice_cost.flops;
  fmt::print("  sliced rate: {:.3g} multiply-adds/s on 1 thread, {:.3g} on 2 ({} per slice: {:.3g} multiply-adds, "
             "{:.3g} s on 2 threads)\n", total / t1, total / t2, name(dtype), sp.slice_cost.flops,
             t2 / static_cast<double>(sliced.num_slices()));
  return {{"network", fmt::format("grid{}x{}_bond{}", side, side, bond)},
          {"dtype", std::string(name(dtype))},
          {"rate_1t", total / t1},
          {"rate_2t", total / t2},
          {"unsliced_tc", cost.tc},
          {"unsliced_sc", cost.sc},
          {"limit_elements", limit_elements},
          {"peak_over_limit", cost.max_intermediate / limit_elements},
          {"slices", sliced.num_slices()},
          {"chunks", sliced.num_chunks()},
          {"overhead", sp.overhead},
          {"unsliced_s", t_unsliced},
          {"sliced_1t_s", t1},
          {"sliced_2t_s", t2},
          {"wall_over_predicted", t1 / predicted},
          {"speedup_2t", t1 / t2},
          {"bits_identical_1_2", same},
          {"rel_diff", rel_diff(got1, want)}};
}

}  // namespace

int main(int argc, char** argv) {
  fs::path bench_dir = default_bench_dir();
  double budget = 1.0;
  std::vector<std::string> only = {"grid2d_16x16_d2", "grid2d_8x8_d16", "grid2d_24x30_d2", "rrg3_n100", "rrg3_n200",
                                   "sycamore_m20"};
  bool do_plan = true, do_execute = true;
  int side = 8, cut = 4;
  int64_t bond = 4;
  DType dtype = DType::f64;
  std::string json_path = "bench-slicing.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--bench-dir") bench_dir = value();
    else if (a == "--budget") budget = std::stod(value());
    else if (a == "--only") only = split_list(value());
    else if (a == "--skip-plan") do_plan = false;
    else if (a == "--skip-execute") do_execute = false;
    else if (a == "--grid") side = std::stoi(value());
    else if (a == "--bond") bond = std::stoll(value());
    else if (a == "--cut") cut = std::stoi(value());
    else if (a == "--json") json_path = value();
    else if (a == "--dtype") {
      const auto d = parse_dtype(value());
      if (!d) die("--dtype takes f32, f64, c64, c128 or i64");
      dtype = *d;
    }
    else die("unknown argument " + a);
  }
  const Machine machine = detect_machine();
  fmt::print("{}\n", machine.summary());
  nlohmann::json out{{"machine", machine.to_json()}, {"budget_s", budget}};
  if (do_plan) {
    std::vector<Instance> all = generated(false);
    if (fs::exists(bench_dir / "cotengra"))
      for (Instance& i : load_cotengra(bench_dir / "cotengra")) all.push_back(std::move(i));
    std::vector<Instance> chosen;
    for (const std::string& name : only) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Instance& i) { return i.name == name; });
      if (it == all.end()) fmt::print("(skipped {}: not found; --bench-dir?)\n", name);
      else chosen.push_back(*it);
    }
    fmt::print("\nslicing overhead, auto(quality=high,budget={}) work-only; limit 2^(floor(sc)-8) (>= 256 slices)\n",
               budget);
    nlohmann::json rows = nlohmann::json::array();
    for (const PlanRow& r : plan_part(chosen, budget))
      rows.push_back({{"instance", r.instance}, {"limit_log2", r.limit_log2}, {"unsliced_tc", r.unsliced_tc},
                      {"unsliced_sc", r.unsliced_sc}, {"slices", r.slices}, {"sliced_labels", r.sliced_labels},
                      {"slice_tc", r.slice_tc}, {"slice_sc", r.slice_sc}, {"total_tc", r.total_tc},
                      {"overhead", r.overhead}, {"slice_peak_elements", r.slice_peak},
                      {"unsliced_plan_s", r.unsliced_s}});
    out["planner"] = rows;
  }
  if (do_execute) out["execute"] = execute_part(side, bond, cut, dtype);
  std::ofstream(json_path) << out.dump(2) << "\n";
  fmt::print("\nwrote {}\n", json_path);
  return 0;
}
