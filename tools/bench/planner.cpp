// einstage_bench_planner: contraction-order quality and planning time on the benchmark networks (docs/networks.md).
//
// Generates the networks of docs/networks.md with their SplitMix64 recipe (checking the published fingerprints; a
// mismatch aborts with status 1), loads the cotengra and einsum-benchmark JSON files, runs every planner at the listed
// budgets, and prints tc, sc, planning wall time and the gap in bits to the best costs listed in docs/networks.md and
// to the einsum-benchmark file's own opt_flops path. All costs come from the one evaluator (ContractionTree.h).
//
//   einstage_bench_planner [--bench-dir DIR] [--budgets 0.01,0.1,1] [--threads N] [--only a,b] [--skip a,b]
//                          [--json FILE] [--seed S]
// DIR defaults to $EINSTAGE_BENCH_DIR; without either, the file networks (cotengra/, einsum-benchmark/) are skipped.
#include "tools/bench/Machine.h"
#include "tools/bench/Networks.h"
#include "extensions/einsum/planner/ConnectedDp.h"
#include "extensions/einsum/planner/Exact.h"
#include "extensions/einsum/planner/PlanSpec.h"
#include "extensions/einsum/planner/Random.h"
#include "ir/Error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::bench;
namespace fs = std::filesystem;

namespace {

// docs/networks.md, "Costs other tools reach": opt_einsum greedy, cotengra RG-128, best measured (60 s),
// stretch/published if better.
struct Known {
  double greedy_oe = NAN, rg128 = NAN, best = NAN;
};
const std::map<std::string, Known> kKnown = {
    {"chain_n100", {21.16, 17.99, 17.943}},       {"rtree_n100", {17.21, 16.42, 16.27}},
    {"mps_inner_L200", {25.22, 24.51, 24.21}},    {"grid2d_16x16_d2", {28.76, 26.60, 25.25}},
    {"grid2d_8x8_d16", {56.18, 52.35, 47.81}},    {"grid2d_24x30_d2", {47.90, NAN, 36.33}},
    {"grid2d_100x100_d2", {152.0, NAN, 116.2}},   {"grid3d_6x6x10_d2", {89.2, 53.42, 53.42}},
    {"rrg3_n100", {22.35, 20.00, 17.57}},         {"rrg3_n200", {48.39, 49.27, 33.75}},
    {"rrg3_n500", {140.0, 107.6, 77.36}},         {"rrg3mis_n200", {40.92, 35.67, 31.14}},
    {"rand_n50", {71.18, 59.82, 52.21}},          {"sycamore_m20", {72.35, 61.98, 59.93}},
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// --greedy-speed: CPU time per greedy run (process CPU clock, so other processes' load does not count; the median of
// 7 batches of `reps` runs), per rule, on the 16x16 grid and a random 3-regular graph of 256 vertices.
void greedy_speed(int reps) {
  std::vector<Instance> nets = {grid({16, 16}, 2), rrg3(256, 4)};
  nets[1].name = "rrg3_n256 (seed 4)";
  fmt::print("{:<22} {:>5} {:<16} {:>12} {:>12}\n", "network", "n", "rule", "us/run", "us/tensor");
  for (const Instance& inst : nets) {
    const Network net = make_network(inst.subscripts, inst.extents);
    for (GreedyCost rule : {GreedyCost::memory_removed, GreedyCost::smallest_result, GreedyCost::opt_einsum}) {
      std::vector<double> batch;
      size_t sink = 0;
      for (int b = 0; b < 7; ++b) {
        const double t0 = cpu_seconds();
        for (int r = 0; r < reps; ++r) sink += greedy(net, {rule}).steps().size();
        batch.push_back((cpu_seconds() - t0) / reps);
      }
      std::sort(batch.begin(), batch.end());
      const double us = batch[3] * 1e6;
      fmt::print("{:<22} {:>5} {:<16} {:>12.1f} {:>12.3f}{}\n", inst.name, net.num_inputs, to_string(rule), us,
                 us / net.num_inputs, sink == 0 ? " (no steps)" : "");
    }
  }
}

// --connected-dp: the connected-subset DP (cap starting at the greedy tier's cost) on growing grids and 3-regular
// graphs, with the all-subsets DP beside it where n <= 20; CPU seconds, passes and subsets, up to a 5 s deadline.
void connected_dp_scaling() {
  std::vector<Instance> nets;
  for (auto [r, c] : std::vector<std::pair<int, int>>{{3, 4}, {4, 4}, {4, 5}, {5, 5}, {5, 6}, {6, 6}, {6, 7}, {7, 7}})
    nets.push_back(grid({r, c}, 2));
  for (int n : {16, 20, 24, 28, 32, 36, 40, 44, 48}) nets.push_back(rrg3(n, 4));
  fmt::print("{:<18} {:>3} {:>9} {:>9} {:>10} {:>7} {:>10} {:>10}\n", "network", "n", "greedy tc", "dp tc", "dp cpu s",
             "passes", "subsets", "all-sub s");
  for (const Instance& inst : nets) {
    const Network net = make_network(inst.subscripts, inst.extents);
    const double greedy_flops = evaluate(net, best_greedy(net)).flops;
    ConnectedDpOptions o;
    o.start_cap = greedy_flops;
    o.deadline = Deadline(5.0);
    ConnectedDpStats st;
    const double t0 = cpu_seconds();
    auto tree = optimal_connected(net, o, &st);
    const double t = cpu_seconds() - t0;
    std::string all = "-";
    if (net.num_inputs <= 20) {
      ExactOptions eo;
      eo.max_inputs = 20;
      const double t1 = cpu_seconds();
      (void)optimal(net, eo);
      all = fmt::format("{:.3f}", cpu_seconds() - t1);
    }
    fmt::print("{:<18} {:>3} {:>9.2f} {:>9} {:>10.3f} {:>7} {:>10} {:>10}\n", inst.name, net.num_inputs,
               std::log2(greedy_flops), tree ? fmt::format("{:.2f}", evaluate(net, *tree).tc) : "timeout", t, st.passes,
               st.subsets, all);
    std::fflush(stdout);
  }
}

// --calibrate: nanoseconds (process CPU time) per work unit (Deadline.h) of each budgeted loop, per instance, and of
// a whole auto(quality=high, budget=1) plan. The unit weights in Deadline.h are set so that these are about 1 on the
// reference machine; the budget's allowance is 65% of that rate, so the work ends before the clock guard.
void calibrate(const std::vector<Instance>& instances) {
  fmt::print("{:<44} {:>5} {:<16} {:>12} {:>9} {:>8}\n", "instance", "n", "loop", "units", "cpu ms", "ns/unit");
  std::map<std::string, std::vector<double>> per_loop;
  for (const Instance& inst : instances) {
    const Network net = make_network(inst.subscripts, inst.extents);
    const int n = net.num_inputs;
    if (n < 3) continue;
    const ContractionTree start = greedy(net);
    auto measure = [&](const std::string& loop, const std::function<void(const Deadline&)>& body) {
      const Deadline meter(0.0, std::numeric_limits<int64_t>::max());
      const double t0 = cpu_seconds();
      body(meter);
      const double t = cpu_seconds() - t0;
      if (meter.used() <= 0) return;
      const double ns = t * 1e9 / static_cast<double>(meter.used());
      per_loop[loop].push_back(ns);
      fmt::print("{:<44} {:>5} {:<16} {:>12} {:>9.2f} {:>8.3f}\n", inst.name, n, loop, meter.used(), t * 1e3, ns);
      std::fflush(stdout);
    };
    measure("greedy x16", [&](const Deadline& d) {
      SplitMix64 rng(1);
      for (int r = 0; r < 16; ++r) {
        GreedyOptions g;
        g.alpha = std::exp2(std::log2(0.01) + rng.uniform() * (std::log2(16.0) - std::log2(0.01)));
        g.temperature = std::exp2(std::log2(0.001) * (1.0 - rng.uniform()));
        g.seed = rng.next();
        g.deadline = &d;
        (void)greedy_until(net, g);
      }
    });
    measure("opt_einsum", [&](const Deadline& d) {
      GreedyOptions g{GreedyCost::opt_einsum};
      g.deadline = &d;
      (void)greedy_until(net, g);
    });
    measure("evaluate x16", [&](const Deadline& d) {
      for (int r = 0; r < 16; ++r) {
        (void)evaluate(net, start, false);
        d.charge(evaluate_units(net));
      }
    });
    if (n <= 2000) measure("reconfigure", [&](const Deadline& d) { (void)reconfigure(net, start, 8, 4, d); });
    measure("anneal", [&](const Deadline& d) {
      AnnealOptions a;
      a.moves = std::max<int64_t>(50000, 20 * n);
      (void)anneal(net, start, a, d);
    });
    if (n <= 40) measure("connected_dp", [&](const Deadline& d) {
      ConnectedDpOptions o;
      o.start_cap = evaluate(net, start, false).flops;
      o.max_subsets = 60000;
      o.deadline = d;
      (void)optimal_connected(net, o);
    });
    if (n <= 200) measure("interval_dp", [&](const Deadline& d) {
      (void)interval_optimal(net);
      d.charge(kIntervalDpUnitsPerSplit * int64_t{n} * n * n / 6);
    });
    {
      PlanSpec spec = PlanSpec::automatic_plan(PlanQuality::high);
      spec.budget_s = 1.0;
      const double t0 = cpu_seconds();
      PlanResult r = plan(spec, net);
      const double t = cpu_seconds() - t0;
      const double ns = t * 1e9 / static_cast<double>(std::max<int64_t>(1, r.work_units));
      per_loop["auto(high) 1s"].push_back(ns);
      fmt::print("{:<44} {:>5} {:<16} {:>12} {:>9.2f} {:>8.3f}{}\n", inst.name, n, "auto(high) 1s", r.work_units,
                 t * 1e3, ns, r.stopped_by_budget ? "  (clock guard fired)" : "");
      std::fflush(stdout);
    }
  }
  fmt::print("\n{:<16} {:>8} {:>8} {:>8}\n", "loop", "min", "median", "max");
  for (auto& [loop, v] : per_loop) {
    std::sort(v.begin(), v.end());
    fmt::print("{:<16} {:>8.3f} {:>8.3f} {:>8.3f}\n", loop, v.front(), v[v.size() / 2], v.back());
  }
}

std::string gap(double tc, double ref) { return std::isnan(ref) ? "-" : fmt::format("{:+.2f}", tc - ref); }

}  // namespace

int main(int argc, char** argv) {
  fs::path bench_dir = default_bench_dir();
  std::vector<double> budgets = {0.01, 0.1, 1.0};
  int threads = 1;
  uint64_t seed = 0;
  std::set<std::string> only, skip;
  std::string json_path;
  bool scale = true;
  std::optional<uint64_t> shuffle_seed;
  bool calibrate_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--bench-dir") bench_dir = value();
    else if (a == "--budgets") {
      budgets.clear();
      for (auto& s : split_list(value())) budgets.push_back(std::stod(s));
    } else if (a == "--threads") threads = std::stoi(value());
    else if (a == "--seed") seed = std::stoull(value());
    else if (a == "--only") for (auto& s : split_list(value())) only.insert(s);
    else if (a == "--skip") for (auto& s : split_list(value())) skip.insert(s);
    else if (a == "--json") json_path = value();
    else if (a == "--no-scale") scale = false;
    else if (a == "--shuffle") shuffle_seed = std::stoull(value());
    else if (a == "--calibrate") calibrate_only = true;
    else if (a == "--connected-dp") {
      connected_dp_scaling();
      return 0;
    } else if (a == "--greedy-speed") {
      greedy_speed(200);
      return 0;
    }
    else if (a == "--help" || a == "-h") {
      fmt::print("usage: einstage_bench_planner [--bench-dir DIR] [--budgets 0.01,0.1,1] [--threads N] [--seed S]\n"
                 "                              [--only a,b] [--skip a,b] [--json FILE] [--no-scale] [--shuffle S]\n"
                 "  --shuffle S: list every instance's tensors in a seeded random order first (the published\n"
                 "               instances list them in geometric order, which the input-order sweep exploits)\n"
                 "       einstage_bench_planner --greedy-speed   (CPU time per greedy run at n = 256)\n"
                 "       einstage_bench_planner --connected-dp   (connected-subset DP on growing sparse networks)\n"
                 "       einstage_bench_planner --calibrate [--only a,b]  (CPU ns per work unit of each budgeted loop)\n");
      return 0;
    } else die("unknown option " + a + " (see --help)");
  }
  std::vector<Instance> instances = generated(scale);
  fmt::print("# {}\n", bench::detect_machine().summary());
  fmt::print("# generator fingerprints: OK (docs/networks.md, Generators)\n");
  if (bench_dir.empty()) {
    fmt::print("# file networks skipped: {}\n", bench::missing_bench_dir_message(bench_dir));
  } else {
    if (!fs::exists(bench_dir)) die(bench::missing_bench_dir_message(bench_dir));
    for (auto& x : load_cotengra(bench_dir / "cotengra")) instances.push_back(std::move(x));
    for (auto& x : load_einsum_benchmark(bench_dir / "einsum-benchmark")) instances.push_back(std::move(x));
  }
  if (shuffle_seed) {
    // Fisher-Yates with the planner's SplitMix64: the same order in every run. A tree's cost does not depend on
    // the order, so the file's own path (evaluated before) keeps its cost.
    for (Instance& inst : instances) {
      SplitMix64 rng(*shuffle_seed);
      auto& terms = inst.subscripts.inputs;
      for (size_t k = terms.size(); k > 1; --k) std::swap(terms[k - 1], terms[rng.randint(k)]);
    }
    fmt::print("# inputs shuffled with seed {}\n", *shuffle_seed);
  }

  if (calibrate_only) {
    std::vector<Instance> chosen;
    for (const Instance& inst : instances)
      if ((only.empty() || only.count(inst.name)) && !skip.count(inst.name)) chosen.push_back(inst);
    calibrate(chosen);
    return 0;
  }

  nlohmann::json records = nlohmann::json::array();
  fmt::print("{:<44} {:>5} {:<26} {:>8} {:>7} {:>9} {:>7} {:>7} {:>7} {:>7} {:>8}\n", "instance", "n", "planner", "tc",
             "sc", "ms", "d_oeG", "d_RG128", "d_best", "d_file", "over_ms");
  for (const Instance& inst : instances) {
    if ((!only.empty() && !only.count(inst.name)) || skip.count(inst.name)) continue;
    const Network net = make_network(inst.subscripts, inst.extents);
    const int n = net.num_inputs;
    Known known;
    if (auto it = kKnown.find(inst.name); it != kKnown.end()) known = it->second;
    std::vector<std::pair<std::string, PlanSpec>> runs = {
        {"greedy", PlanSpec::greedy_plan()},
        {"greedy(smallest_result)", PlanSpec::greedy_plan(GreedyCost::smallest_result)},
        {"greedy(opt_einsum)", PlanSpec::greedy_plan(GreedyCost::opt_einsum)},
        {"auto(fast)", PlanSpec::automatic_plan(PlanQuality::fast)},
        {"auto", PlanSpec::automatic_plan()},
    };
    if (n <= 14 || is_chain(net)) runs.emplace_back("optimal", PlanSpec::optimal_plan());
    for (double b : budgets) {
      PlanSpec s = PlanSpec::automatic_plan(PlanQuality::high);
      s.budget_s = b;
      s.seed = seed;
      runs.emplace_back(fmt::format("auto(high) {}s", b), s);
    }
    for (auto& [label, spec] : runs) {
      PlanOptions po;
      po.threads = threads;
      PlanResult r = plan(spec, net, po);
      const double tc = r.cost.tc, sc = r.cost.sc;
      const std::string d_file = inst.own_path_tc ? fmt::format("{:+.2f}", tc - *inst.own_path_tc) : "-";
      // over_ms: wall time minus the budget for budgeted runs (how far the budget was overshot; negative = early);
      // "+raised" when the budget was smaller than the first greedy run.
      const std::string over = spec.budget_s > 0 ? fmt::format("{:+.1f}{}", (r.seconds - spec.budget_s) * 1e3,
                                                              r.budget_raised ? " raised" : "")
                                                : "-";
      fmt::print("{:<44} {:>5} {:<26} {:>8.3f} {:>7.2f} {:>9.2f} {:>7} {:>7} {:>7} {:>7} {:>8}\n", inst.name, n, label,
                 tc, sc, r.seconds * 1e3, gap(tc, known.greedy_oe), gap(tc, known.rg128), gap(tc, known.best), d_file,
                 over);
      std::fflush(stdout);
      nlohmann::json rec = {{"instance", inst.name}, {"source", inst.source}, {"n", n},
                            {"planner", label},      {"spec", spec.to_string()}, {"method", r.method},
                            {"tc", tc},              {"sc", sc},             {"rw", r.cost.rw},
                            {"seconds", r.seconds},  {"trials", r.trials_done}, {"work_units", r.work_units}, {"stopped_by_budget", r.stopped_by_budget}, {"budget_raised", r.budget_raised},
                            {"threads", threads}};
      if (!std::isnan(known.greedy_oe)) rec["known_greedy_oe"] = known.greedy_oe;
      if (!std::isnan(known.rg128)) rec["known_rg128"] = known.rg128;
      if (!std::isnan(known.best)) rec["known_best"] = known.best;
      if (inst.own_path_tc) rec["file_opt_flops_tc"] = *inst.own_path_tc;
      records.push_back(rec);
    }
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << records.dump(1) << "\n";
  }
  return 0;
}
