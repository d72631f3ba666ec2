// einstage_bench_planner: contraction-order quality and planning time on the NETWORKS.md benchmark set.
//
// Generates the NETWORKS.md §4a networks with its SplitMix64 recipe (checking the published fingerprints; a mismatch
// aborts with status 1), loads the cotengra and einsum-benchmark JSON files, runs every planner at the listed budgets,
// and prints tc, sc, planning wall time and the gap in bits to the best costs listed in NETWORKS.md §4b and to the
// einsum-benchmark file's own opt_flops path. All costs come from the one evaluator (ContractionTree.h).
//
//   einstage_bench_planner [--bench-dir DIR] [--budgets 0.01,0.1,1] [--threads N] [--only a,b] [--skip a,b]
//                          [--json FILE] [--seed S]
// DIR defaults to ../shared/bench relative to the repository root (found by walking up from the working directory).
#include "tools/bench/Machine.h"
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
namespace fs = std::filesystem;

namespace {

struct Instance {
  std::string name;
  std::string source;  // "generated", "cotengra", "einsum-benchmark"
  Subscripts subscripts;
  Extents extents;
  std::optional<double> own_path_tc;  // einsum-benchmark opt_flops path, evaluated here
};

// NETWORKS.md §4b: opt_einsum greedy, cotengra RG-128, best measured (60 s), stretch/published if better.
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

[[noreturn]] void die(const std::string& message) {
  fmt::print(stderr, "einstage_bench_planner: {}\n", message);
  std::exit(1);
}

// ---- generators (NETWORKS.md §4a) ----

struct Builder {
  Instance inst;
  int next_label = 0;
  explicit Builder(std::string name, int tensors) {
    inst.name = std::move(name);
    inst.source = "generated";
    inst.subscripts.inputs.resize(tensors);
  }
  // Labels are 0x10000 + creation index (printable, never colliding with ASCII); names "i<k>".
  Label index(int64_t size) {
    const Label l = 0x10000 + next_label;
    inst.subscripts.names[l] = fmt::format("i{}", next_label);
    inst.extents[l] = size;
    ++next_label;
    return l;
  }
  void on(int tensor, Label l) { inst.subscripts.inputs[tensor].push_back(l); }
};

void expect(bool ok, const std::string& what) {
  if (!ok) die("fingerprint mismatch: " + what + " (the generator does not follow NETWORKS.md §4a)");
}

Instance chain(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("chain_n{}", n), n);
  std::vector<Label> idx;
  std::vector<int64_t> d;
  for (int k = 0; k <= n; ++k) d.push_back(2 + static_cast<int64_t>(rng.randint(63)));
  for (int k = 0; k <= n; ++k) idx.push_back(b.index(d[k]));
  for (int k = 0; k < n; ++k) b.on(k, idx[k]), b.on(k, idx[k + 1]);
  b.inst.subscripts.output = {idx[0], idx[n]};
  if (seed == 1) expect(std::vector<int64_t>(d.begin(), d.begin() + 6) == std::vector<int64_t>{25, 9, 59, 58, 14, 25},
                        "chain d_0..d_5");
  return b.inst;
}

Instance rtree(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("rtree_n{}", n), n);
  std::vector<std::pair<int, int64_t>> first;
  for (int k = 1; k < n; ++k) {
    const int p = static_cast<int>(rng.randint(k));
    const int64_t size = 2 + static_cast<int64_t>(rng.randint(9));
    if (first.size() < 4) first.emplace_back(p, size);
    Label l = b.index(size);
    b.on(p, l), b.on(k, l);
  }
  if (seed == 2)
    expect(first == std::vector<std::pair<int, int64_t>>{{0, 7}, {1, 5}, {1, 8}, {2, 4}}, "rtree first (parent,size)");
  return b.inst;
}

Instance mps_inner(int L, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("mps_inner_L{}", L), 2 * L);
  std::vector<int64_t> kd, bd;
  for (int s = 0; s + 1 < L; ++s) kd.push_back(4 + static_cast<int64_t>(rng.randint(61)));
  for (int s = 0; s + 1 < L; ++s) bd.push_back(4 + static_cast<int64_t>(rng.randint(61)));
  if (seed == 3) {
    expect(std::vector<int64_t>(kd.begin(), kd.begin() + 4) == std::vector<int64_t>{40, 17, 34, 27}, "mps k_0..k_3");
    expect(std::vector<int64_t>(bd.begin(), bd.begin() + 4) == std::vector<int64_t>{48, 56, 20, 57}, "mps b_0..b_3");
  }
  std::vector<Label> k, br, p;
  for (int64_t d : kd) k.push_back(b.index(d));
  for (int64_t d : bd) br.push_back(b.index(d));
  for (int s = 0; s < L; ++s) p.push_back(b.index(2));
  for (int s = 0; s < L; ++s) {
    const int ket = 2 * s, bra = 2 * s + 1;
    b.on(ket, p[s]);
    if (s > 0) b.on(ket, k[s - 1]);
    if (s + 1 < L) b.on(ket, k[s]);
    b.on(bra, p[s]);
    if (s > 0) b.on(bra, br[s - 1]);
    if (s + 1 < L) b.on(bra, br[s]);
  }
  return b.inst;
}

Instance grid(std::vector<int> dims, int64_t d) {
  int sites = 1;
  for (int x : dims) sites *= x;
  std::string name = dims.size() == 2 ? fmt::format("grid2d_{}x{}_d{}", dims[0], dims[1], d)
                                      : fmt::format("grid3d_{}x{}x{}_d{}", dims[0], dims[1], dims[2], d);
  Builder b(name, sites);
  std::vector<int> stride(dims.size(), 1);
  for (int a = static_cast<int>(dims.size()) - 2; a >= 0; --a) stride[a] = stride[a + 1] * dims[a + 1];
  for (int s = 0; s < sites; ++s)
    for (size_t a = 0; a < dims.size(); ++a) {
      const int coord = (s / stride[a]) % dims[a];
      if (coord + 1 < dims[a]) {
        Label l = b.index(d);
        b.on(s, l), b.on(s + stride[a], l);
      }
    }
  return b.inst;
}

std::vector<std::pair<int, int>> rrg3_edges(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  for (;;) {
    std::vector<int> pts;
    for (int v = 0; v < n; ++v) pts.insert(pts.end(), {v, v, v});
    for (int i = static_cast<int>(pts.size()) - 1; i >= 1; --i) std::swap(pts[i], pts[rng.randint(i + 1)]);
    std::vector<std::pair<int, int>> edges;
    std::set<std::pair<int, int>> seen;
    bool ok = true;
    for (size_t i = 0; i + 1 < pts.size(); i += 2) {
      const int u = std::min(pts[i], pts[i + 1]), v = std::max(pts[i], pts[i + 1]);
      if (u == v || !seen.insert({u, v}).second) {
        ok = false;
        break;
      }
      edges.emplace_back(u, v);
    }
    if (ok) return edges;
  }
}

Instance rrg3(int n, uint64_t seed) {
  auto edges = rrg3_edges(n, seed);
  using E = std::vector<std::pair<int, int>>;
  if (n == 100 && seed == 4) expect(E(edges.begin(), edges.begin() + 3) == E{{83, 97}, {3, 61}, {22, 92}}, "rrg3 n100");
  if (n == 200 && seed == 5) expect(E(edges.begin(), edges.begin() + 2) == E{{52, 137}, {53, 142}}, "rrg3 n200");
  if (n == 500 && seed == 6) expect(E(edges.begin(), edges.begin() + 2) == E{{34, 44}, {273, 493}}, "rrg3 n500");
  Builder b(fmt::format("rrg3_n{}", n), n);
  for (auto [u, v] : edges) {
    Label l = b.index(2);
    b.on(u, l), b.on(v, l);
  }
  return b.inst;
}

Instance rrg3mis(int n, uint64_t seed) {
  auto edges = rrg3_edges(n, seed);
  Builder b(fmt::format("rrg3mis_n{}", n), n + static_cast<int>(edges.size()));
  std::vector<Label> vl;
  for (int v = 0; v < n; ++v) vl.push_back(b.index(2));
  for (int v = 0; v < n; ++v) b.on(v, vl[v]);
  for (size_t e = 0; e < edges.size(); ++e) b.on(n + static_cast<int>(e), vl[edges[e].first]), b.on(n + e, vl[edges[e].second]);
  return b.inst;
}

Instance rand_net(int n, int reg, int out, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("rand_n{}", n), n);
  for (int k = 0; k < n * reg / 2; ++k) {
    const int a = static_cast<int>(rng.randint(n));
    int c = static_cast<int>(rng.randint(n - 1));
    c += (c >= a);
    Label l = b.index(2 + static_cast<int64_t>(rng.randint(4)));
    b.on(a, l), b.on(c, l);
  }
  std::vector<int64_t> out_sizes;
  for (int k = 0; k < out; ++k) {
    const int64_t size = 2 + static_cast<int64_t>(rng.randint(4));
    out_sizes.push_back(size);
    Label l = b.index(size);
    b.on(static_cast<int>(rng.randint(n)), l);
    b.inst.subscripts.output.push_back(l);
  }
  if (seed == 8) {
    std::vector<int> t0;
    for (Label l : b.inst.subscripts.inputs[0]) t0.push_back(l - 0x10000);
    expect(t0 == std::vector<int>{5, 17, 29, 31, 44, 49, 55, 66, 72, 112}, "rand T_0");
    expect(out_sizes == std::vector<int64_t>{3, 2, 3, 4}, "rand output sizes");
    expect(b.inst.subscripts.output.front() - 0x10000 == 125, "rand first output index");
  }
  return b.inst;
}

std::vector<Instance> generated(bool with_scale) {
  {
    SplitMix64 rng(1);
    expect(rng.next() == 0x910a2dec89025cc1ULL && rng.next() == 0xbeeb8da1658eec67ULL, "SplitMix64(seed 1)");
  }
  std::vector<Instance> v = {chain(100, 1),       rtree(100, 2),      mps_inner(200, 3),  grid({16, 16}, 2),
                             grid({8, 8}, 16),     grid({24, 30}, 2),  grid({6, 6, 10}, 2), rrg3(100, 4),
                             rrg3(200, 5),         rrg3(500, 6),       rrg3mis(200, 7),    rand_net(50, 5, 4, 8)};
  if (with_scale) v.push_back(grid({100, 100}, 2));
  return v;
}

// ---- data files ----

std::vector<Label> utf8_labels(std::string_view s) {
  std::vector<Label> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    Label cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) die("cannot read " + p.string());
  return nlohmann::json::parse(in);
}

// The .json files of a folder, sorted by name (so instances load in the same order everywhere).
std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Instance> load_cotengra(const fs::path& dir) {
  std::vector<Instance> v;
  for (auto& f : json_files(dir)) {
    nlohmann::json j = read_json(f);
    Instance inst;
    inst.name = f.stem().string();
    if (inst.name.rfind("sycamore_n53_m20", 0) == 0) inst.name = "sycamore_m20";
    inst.source = "cotengra";
    std::map<std::string, Label> intern;
    auto label = [&](const std::string& s) {
      auto [it, fresh] = intern.emplace(s, 0x10000 + static_cast<Label>(intern.size()));
      if (fresh) inst.subscripts.names[it->second] = s;
      return it->second;
    };
    for (auto& term : j["inputs"]) {
      std::vector<Label> t;
      for (auto& s : term) t.push_back(label(s.get<std::string>()));
      inst.subscripts.inputs.push_back(t);
    }
    for (auto& s : j["output"]) inst.subscripts.output.push_back(label(s.get<std::string>()));
    for (auto& [k, size] : j["size_dict"].items())
      if (intern.count(k)) inst.extents[intern[k]] = size.get<int64_t>();
    v.push_back(std::move(inst));
  }
  return v;
}

std::vector<Instance> load_einsum_benchmark(const fs::path& dir) {
  std::vector<Instance> v;
  for (auto& f : json_files(dir)) {
    nlohmann::json j = read_json(f);
    Instance inst;
    inst.name = j["name"].get<std::string>();
    inst.source = "einsum-benchmark";
    const std::string fmt_string = j["format_string"].get<std::string>();
    const size_t arrow = fmt_string.find("->");
    std::string lhs = fmt_string.substr(0, arrow), rhs = fmt_string.substr(arrow + 2);
    std::stringstream ss(lhs);
    for (std::string term; std::getline(ss, term, ',');) inst.subscripts.inputs.push_back(utf8_labels(term));
    inst.subscripts.output = utf8_labels(rhs);
    std::vector<std::vector<int64_t>> shapes = j["shapes"].get<std::vector<std::vector<int64_t>>>();
    inst.extents = extents_from_shapes(inst.subscripts, shapes);
    std::vector<Step> path;
    for (auto& p : j["paths"]["opt_flops"]["path"]) path.emplace_back(p[0].get<int>(), p[1].get<int>());
    const int n = static_cast<int>(inst.subscripts.inputs.size());
    inst.own_path_tc = evaluate(inst.subscripts, inst.extents, ContractionTree::from_positional_path(n, path)).tc;
    v.push_back(std::move(inst));
  }
  return v;
}

fs::path default_bench_dir() {
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "extensions" / "einsum" / "Subscripts.h")) return p.parent_path() / "shared" / "bench";
    if (p == p.parent_path()) break;
  }
  return fs::path("..") / "shared" / "bench";
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

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
      for (auto& s : split(value())) budgets.push_back(std::stod(s));
    } else if (a == "--threads") threads = std::stoi(value());
    else if (a == "--seed") seed = std::stoull(value());
    else if (a == "--only") for (auto& s : split(value())) only.insert(s);
    else if (a == "--skip") for (auto& s : split(value())) skip.insert(s);
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
  fmt::print("# generator fingerprints: OK (NETWORKS.md §4a)\n");
  if (!fs::exists(bench_dir)) die("bench folder " + bench_dir.string() + " not found; pass --bench-dir");
  for (auto& x : load_cotengra(bench_dir / "cotengra")) instances.push_back(std::move(x));
  for (auto& x : load_einsum_benchmark(bench_dir / "einsum-benchmark")) instances.push_back(std::move(x));
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
