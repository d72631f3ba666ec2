// einstage_bench_einsum_suite: whole einsums against NumPy and PyTorch in the same run. Not a test: it prints a table
// and writes JSON.
//
// (a) 16x16 `ij,jk->ik` f64 through a prepared EinsumPlan and through the one-shot string API, beside np.einsum.
// (b) The einsum-benchmark instances (JSON files with format_string, shapes, paths.opt_flops and their column-major
//     forms) executed along their opt_flops path (PlanSpec path form) on seeded random f64 data (zeros when random
//     values overflow to inf/nan), beside NumPy and torch along the same path (tools/bench/einsum_suite.py, run by
//     /usr/bin/python3: twice when tools/bench/Machine.h forces an OpenBLAS core, forced ("SKX" columns) and with
//     OpenBLAS's own pick ("own"), else once ("own"); a peer that fails shows "failed" in its columns). Instances
//     whose estimated peak memory (inputs + output + the planner's arena + workspace) exceeds a third of the available memory, or whose
//     opt_flops estimate would take more than --max-seconds, are skipped and listed with the reason.
// The machine may be shared: every row is measured in rounds that interleave einstage and each peer (ours, peers,
// ours, peers, ...), each round giving a median, and the table shows the median over rounds; a peer slower than
// --max-seconds / 4 per run is timed on one run only. The load average is printed before and after. Ratios are peer
// time / einstage time (> 1: einstage faster). One thread unless --threads N: then einstage runs on a pool of N
// threads and the peers with OPENBLAS_NUM_THREADS / OMP_NUM_THREADS = N and torch.set_num_threads(N).
//
// Usage: einstage_bench_einsum_suite [BENCH_DIR] [--rounds N] [--max-seconds S] [--filter TEXT] [--json FILE]
//                                    [--threads N] [--no-peers]
// BENCH_DIR (the folder of einsum-benchmark instances) defaults to $EINSTAGE_BENCH_DIR/einsum-benchmark; the
// instances are not part of the repository (docs/networks.md). The peers' script is found by walking up from the
// working directory to the directory holding tools/bench/einsum_suite.py.
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/exec/Executor.h"
#include "extensions/einsum/planner/Random.h"
#include "ir/Tensor.h"
#include "runtime/ThreadPool.h"
#include "tools/bench/BenchData.h"
#include "tools/bench/Machine.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace einstage;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double value = 0;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return 4e9;
}

// Seeded uniform values in (-1, 1) from the planner's SplitMix64 (extensions/einsum/planner/Random.h).
double symmetric(einsum::SplitMix64& rng) { return 2 * rng.uniform() - 1; }

/// A python3 peer process speaking tools/bench/einsum_suite.py's line protocol.
class Peer {
 public:
  /// `coretype`: the OPENBLAS_CORETYPE the peer runs with; "" leaves OpenBLAS its own pick. The caller's
  /// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE never reach a peer (tools/bench/Machine.h).
  Peer(const std::string& script, std::string label, const std::string& coretype, int threads)
      : label_(std::move(label)) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::unsetenv("OPENBLAS_CORETYPE");
      ::unsetenv("OPENBLAS_L2_SIZE");
      if (!coretype.empty()) ::setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
      const std::string n = std::to_string(threads);
      ::setenv("OPENBLAS_NUM_THREADS", n.c_str(), 1);
      ::setenv("OMP_NUM_THREADS", n.c_str(), 1);
      ::execl("/usr/bin/python3", "python3", script.c_str(), "--threads", n.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = ::fdopen(from_child[0], "r");
    out_ = ::fdopen(to_child[1], "w");
  }
  ~Peer() {
    if (out_) {
      std::fputs("quit\n", out_);
      std::fclose(out_);
    }
    if (in_) std::fclose(in_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return in_ && out_; }
  const std::string& label() const { return label_; }

  /// Sends one command and returns the reply line ("" if the process is gone: SIGPIPE is ignored, see
  /// bench::detect_machine, so writing to a dead peer fails here instead of killing the benchmark).
  std::string ask(const std::string& command) {
    if (!ok()) return "";
    if (std::fputs((command + "\n").c_str(), out_) == EOF || std::fflush(out_) == EOF) return "";
    std::string line;
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, in_)) {
      line += buffer;
      if (!line.empty() && line.back() == '\n') break;
    }
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }

  std::optional<std::vector<double>> times(const std::string& lib, int n, double limit, std::string& error) {
    std::string reply = ask(fmt::format("time {} {} {}", lib, n, limit));
    if (reply.empty() || reply.rfind("error", 0) == 0) {
      error = reply.empty() ? "peer process ended" : reply.substr(6);
      return std::nullopt;
    }
    std::istringstream in(reply);
    std::vector<double> out;
    for (double t; in >> t;) out.push_back(t);
    return out;
  }

 private:
  std::string label_;
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

struct PeerColumn {
  Peer* peer;
  std::string lib;  // numpy | torch | numpy_plain
  std::string name() const { return lib + " " + peer->label(); }
};

// Rounds of (ours, each peer): ours is a callable timing `reps` calls and returning per-call seconds.
struct RowResult {
  double ours = NAN;
  std::map<std::string, double> peer;          // column -> median seconds
  std::map<std::string, std::string> failure;  // column -> why not measured
};

// A peer slower than `limit` seconds per run is timed once (its warm-up run) and not asked again.
template <typename Ours>
RowResult interleave(int rounds, Ours&& ours, std::vector<PeerColumn>& columns, double limit = 60) {
  RowResult r;
  std::vector<double> mine;
  std::map<std::string, std::vector<double>> theirs;
  std::map<std::string, int> reps;
  std::set<std::string> slow;
  for (int round = 0; round < rounds; ++round) {
    mine.push_back(ours());
    for (PeerColumn& col : columns) {
      const std::string key = col.name();
      if (r.failure.count(key)) continue;
      std::string error;
      if (slow.count(key)) continue;
      auto t = col.peer->times(col.lib, reps.count(key) ? reps[key] : 1, limit, error);
      if (!t) {
        r.failure[key] = error;
        continue;
      }
      double m = median(*t);
      theirs[key].push_back(m);
      if (m > limit) slow.insert(key);
      reps[key] = int(std::clamp(0.2 / std::max(m, 1e-9), 1.0, 200.0));
    }
  }
  r.ours = median(mine);
  for (auto& [key, v] : theirs) r.peer[key] = median(v);
  return r;
}

fs::path repo_root() {
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "tools/bench/einsum_suite.py")) return p;
    if (p == p.parent_path()) break;
  }
  return {};
}

std::string ratio(const RowResult& r, const std::string& key) {
  auto it = r.peer.find(key);
  if (it == r.peer.end()) return r.failure.count(key) ? "failed" : "-";
  return fmt::format("{:.2f}", it->second / r.ours);
}

}  // namespace

int main(int argc, char** argv) {
  std::string bench_dir, json_path = "bench-einsum-suite.json", filter;
  int rounds = 5, threads = 1;
  double max_seconds = 60;
  bool peers = true;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", arg);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--rounds") rounds = std::max(1, std::stoi(value()));
    else if (arg == "--max-seconds") max_seconds = std::stod(value());
    else if (arg == "--filter") filter = value();
    else if (arg == "--json") json_path = value();
    else if (arg == "--threads") threads = std::max(1, std::stoi(value()));
    else if (arg == "--no-peers") peers = false;
    else if (!arg.empty() && arg[0] != '-') bench_dir = arg;
    else {
      fmt::print(stderr, "usage: einstage_bench_einsum_suite [BENCH_DIR] [--rounds N] [--max-seconds S] "
                         "[--filter TEXT] [--json FILE] [--threads N] [--no-peers]\n");
      return 2;
    }
  }
  const fs::path root = repo_root();
  if (bench_dir.empty()) {
    const fs::path data = bench::default_bench_dir();
    if (data.empty()) {
      fmt::print(stderr, "einstage_bench_einsum_suite: {}\n", bench::missing_bench_dir_message(data));
      return 2;
    }
    bench_dir = (data / "einsum-benchmark").string();
  }
  const std::string script = (root / "tools/bench/einsum_suite.py").string();
  const std::string load_before = load_average();

  const bench::Machine machine = bench::detect_machine();
  std::vector<std::unique_ptr<Peer>> procs;
  std::vector<PeerColumn> columns;
  std::string peer_info = "not run (--no-peers)";
  if (peers && !root.empty() && fs::exists("/usr/bin/python3")) {
    if (!machine.forced_core.empty()) {
      procs.push_back(std::make_unique<Peer>(script, "SKX", machine.forced_core, threads));
      procs.push_back(std::make_unique<Peer>(script, "own", "", threads));
    } else {
      procs.push_back(std::make_unique<Peer>(script, "own", "", threads));
    }
    peer_info.clear();
    for (auto& p : procs) {
      const std::string info = p->ask("info");
      peer_info += fmt::format("{}{}: {}", peer_info.empty() ? "" : " | ", p->label(), info.empty() ? "failed" : info);
    }
    for (auto& p : procs)
      for (const char* lib : {"numpy", "torch"}) columns.push_back({p.get(), lib});
  } else if (peers) {
    peer_info = "not run: /usr/bin/python3 or tools/bench/einsum_suite.py not found";
  }
  // One ratio column per (peer process, library): "xnp SKX", "xtorch own", ...
  auto ratio_heading = [&](int width) {
    std::string h;
    for (auto& p : procs)
      for (const char* lib : {"np", "torch"})
        h += fmt::format(" {:>{}}", fmt::format("x{} {}", lib, p->label()), width);
    return h;
  };
  auto ratio_cells = [&](const RowResult& r, const char* numpy_lib, int width) {
    std::string cells;
    for (auto& p : procs)
      for (const std::string lib : {numpy_lib, "torch"})
        cells += fmt::format(" {:>{}}", ratio(r, lib + " " + p->label()), width);
    return cells;
  };
  fmt::print("{}\n", machine.summary());
  // einstage's pool for --threads N > 1 (nullptr: the calling thread).
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  fmt::print("einstage einsum suite: f64, {} thread{}, {} interleaved rounds, medians\n", threads,
             threads > 1 ? "s" : "", rounds);
  fmt::print("peers: {}\nload average before: {}\n\n", peer_info, load_before);
  json report;
  report["machine"] = machine.to_json();
  report["load_before"] = load_before;
  report["peers"] = peer_info;
  report["threads"] = threads;
  const fs::path tmp = fs::temp_directory_path() / fmt::format("einstage-suite-{}", ::getpid());
  fs::create_directories(tmp);

  // ---- (a) 16x16 matmul ----
  {
    const int64_t n = 16;
    einsum::SplitMix64 rng(16);
    std::vector<double> a(n * n), b(n * n);
    for (double& x : a) x = symmetric(rng);
    for (double& x : b) x = symmetric(rng);
    Tensor ta = Tensor::from_col_major<double>({n, n}, a), tb = Tensor::from_col_major<double>({n, n}, b);
    std::vector<Tensor> ops = {ta, tb};
    std::vector<einsum::TensorMeta> metas = {einsum::TensorMeta::of(ta), einsum::TensorMeta::of(tb)};
    einsum::EinsumPlan plan = einsum::EinsumPlan::prepare("ij,jk->ik", metas);
    Tensor out = Tensor::empty(DType::f64, {n, n});
    auto block = [](auto&& call) {
      const int calls = 2000;
      auto t0 = Clock::now();
      for (int c = 0; c < calls; ++c) call();
      return seconds_since(t0) / calls;
    };
    // The peers' 16x16 instance: plain np.einsum / torch.einsum (no path for two operands) on the same bytes.
    json inst = {{"name", "matmul16"}, {"format_string_colmajor", "ij,jk->ik"},
                 {"shapes_colmajor", {{16, 16}, {16, 16}}}, {"paths", {{"opt_flops", {{"path", {{0, 1}}}}}}}};
    std::ofstream(tmp / "m16.json") << inst.dump();
    {
      std::ofstream data(tmp / "m16.bin", std::ios::binary);
      data.write(reinterpret_cast<const char*>(a.data()), std::streamsize(a.size() * 8));
      data.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size() * 8));
    }
    std::vector<PeerColumn> small;
    for (auto& p : procs) {
      p->ask(fmt::format("load {} {}", (tmp / "m16.json").string(), (tmp / "m16.bin").string()));
      small.push_back({p.get(), "numpy_plain"});
      small.push_back({p.get(), "torch"});
    }
    RowResult prepared =
        interleave(rounds, [&] { return block([&] { plan.execute_into(ops, out, pool.get()); }); }, small);
    RowResult prepared_new =
        interleave(rounds, [&] { return block([&] { (void)plan.execute(ops, pool.get()); }); }, small);
    einsum::EinsumOptions on_pool;
    on_pool.threads = 1;  // the calling thread, like its peers, unless --threads gave a pool
    on_pool.pool = pool.get();
    RowResult one_shot =
        interleave(rounds, [&] { return block([&] { (void)einsum::einsum("ij,jk->ik", ops, on_pool); }); }, small);
    fmt::print("{:<36} {:>7}{}\n", "16x16 ij,jk->ik f64", "us", ratio_heading(11));
    for (auto [name, r] : {std::pair{"prepared execute_into", &prepared}, std::pair{"prepared execute", &prepared_new},
                           std::pair{"one-shot einsum(string)", &one_shot}}) {
      fmt::print("{:<36} {:>7.3f}{}\n", name, r->ours * 1e6, ratio_cells(*r, "numpy_plain", 11));
      json row = {{"row", name}, {"einstage_s", r->ours}};
      for (auto& [k, v] : r->peer) row[k + "_s"] = v;
      report["small"].push_back(row);
    }
    fmt::print("\n");
  }

  // ---- (b) einsum-benchmark instances ----
  std::vector<fs::path> files;
  if (fs::is_directory(bench_dir))
    for (const auto& entry : fs::directory_iterator(bench_dir))
      if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) fmt::print("no instances in {}\n", bench_dir);
  fmt::print("{:<44} {:>8} {:>10}{} {:>9}  {}\n", "instance (opt_flops path)", "log10 F", "einstage s",
             ratio_heading(10), "agree", "note");
  const double memory_limit = available_bytes() / 3;
  for (const fs::path& file : files) {
    json inst = json::parse(std::ifstream(file));
    const std::string name = inst.value("name", file.stem().string());
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    json row = {{"instance", name}};
    auto skip = [&](const std::string& why) {
      fmt::print("{:<44} {:>8} {:>10}  skipped: {}\n", name, "", "", why);
      row["skipped"] = why;
      report["instances"].push_back(row);
    };
    const double log10_flops = inst["paths"]["opt_flops"].value("log10_flops", 0.0);
    row["log10_flops"] = log10_flops;
    std::vector<einsum::TensorMeta> metas;
    for (const auto& shape : inst["shapes_colmajor"]) metas.push_back({DType::f64, shape.get<Shape>()});
    std::vector<std::pair<int, int>> path;
    for (const auto& step : inst["paths"]["opt_flops"]["path"]) path.push_back({step[0].get<int>(), step[1].get<int>()});
    einsum::EinsumOptions options;
    options.plan = einsum::PlanSpec::path_plan(path);
    std::optional<einsum::EinsumPlan> plan;
    try {
      plan = einsum::EinsumPlan::prepare(inst["format_string_colmajor"].get<std::string>(), metas, options);
    } catch (const std::exception& e) {
      skip(std::string("prepare failed: ") + e.what());
      continue;
    }
    double input_bytes = 0;
    for (const auto& m : metas) {
      double e = 8;
      for (int64_t d : m.shape) e *= double(d);
      input_bytes += e;
    }
    double out_bytes = 8;
    for (int64_t d : plan->output_shape()) out_bytes *= double(d);
    const double peak = input_bytes + out_bytes + double(plan->arena_bytes()) + double(plan->workspace_bytes());
    row["peak_bytes_estimate"] = peak;
    // Peers hold about as much again (their intermediates), so each side may use a third of what is free.
    if (peak > memory_limit) {
      skip(fmt::format("needs ~{:.1f} GB (inputs + output + arena + workspace), over a third of the {:.1f} GB "
                       "available",
                       peak / 1e9, available_bytes() / 1e9));
      continue;
    }
    // ~20 GFLOP/s is what a loaded machine sustains on these steps; 2 multiply-add flops per log10_flops unit
    // are already counted by opt_einsum.
    const double estimate = std::pow(10.0, log10_flops) / 20e9;
    if (estimate > max_seconds) {
      skip(fmt::format("opt_flops path 1e{:.1f} flops: ~{:.0f} s per run at 20 GFLOP/s (over {} s)", log10_flops,
                       estimate, max_seconds));
      continue;
    }
    // Data: seeded uniform [-1, 1); zeros if the result is not finite.
    std::vector<Tensor> ops;
    einsum::SplitMix64 rng(1234);
    for (const auto& m : metas) {
      Tensor t = Tensor::empty(DType::f64, m.shape);
      double* d = t.data<double>();
      for (int64_t i = 0; i < t.numel(); ++i) d[i] = symmetric(rng);
      ops.push_back(std::move(t));
    }
    std::string note;
    Tensor result = plan->execute(ops, pool.get());
    auto total = [](const Tensor& t) {
      double s = 0;
      const double* d = t.data<double>();
      for (int64_t i = 0; i < t.numel(); ++i) s += d[i];
      return s;
    };
    double sum = total(result);
    if (!std::isfinite(sum)) {
      for (Tensor& t : ops) std::memset(t.raw_data(), 0, t.nbytes());
      note = "zeros (random data overflowed)";
      sum = total(plan->execute(ops, pool.get()));
    }
    {
      std::ofstream data(tmp / "data.bin", std::ios::binary);
      for (const Tensor& t : ops) data.write(static_cast<const char*>(t.raw_data()), std::streamsize(t.nbytes()));
    }
    std::string agree = "-";
    for (auto& p : procs) {
      std::string reply = p->ask(fmt::format("load {} {}", file.string(), (tmp / "data.bin").string()));
      if (reply != "ok") note += " peer load: " + reply;
    }
    if (!procs.empty()) {
      std::string reply = procs[0]->ask("sum numpy");
      char* end = nullptr;
      double theirs = std::strtod(reply.c_str(), &end);
      if (end != reply.c_str()) {
        double rel = std::abs(theirs - sum) / std::max({std::abs(sum), std::abs(theirs), 1e-300});
        agree = rel < 1e-6 || (sum == 0 && theirs == 0) ? "yes" : fmt::format("rel {:.1e}", rel);
        row["numpy_sum"] = theirs;
      }
    }
    row["einstage_sum"] = sum;
    auto t_first = Clock::now();
    (void)plan->execute(ops, pool.get());
    const double first = seconds_since(t_first);
    const int reps = int(std::clamp(0.2 / std::max(first, 1e-9), 1.0, 100.0));
    RowResult r = interleave(
        rounds,
        [&] {
          std::vector<double> t;
          for (int k = 0; k < reps; ++k) {
            auto t0 = Clock::now();
            (void)plan->execute(ops, pool.get());
            t.push_back(seconds_since(t0));
          }
          return median(t);
        },
        columns, max_seconds / 4);
    fmt::print("{:<44} {:>8.2f} {:>10.4g}{} {:>9}  {}\n", name, log10_flops, r.ours, ratio_cells(r, "numpy", 10),
               agree, note);
    for (auto& [k, why] : r.failure) fmt::print("    {} not measured: {}\n", k, why);
    row["einstage_s"] = r.ours;
    row["agree"] = agree;
    row["note"] = note;
    for (auto& [k, v] : r.peer) row[k + "_s"] = v;
    for (auto& [k, v] : r.failure) row[k + "_error"] = v;
    report["instances"].push_back(row);
    std::fflush(stdout);
  }
  const std::string load_after = load_average();
  report["load_after"] = load_after;
  fmt::print("\nload average after: {}\nratios: peer time / einstage time (> 1: einstage faster); agree: sum of the "
             "result vs NumPy's (relative 1e-6)\n",
             load_after);
  std::ofstream(json_path) << report.dump(2) << "\n";
  fmt::print("wrote {}\n", json_path);
  fs::remove_all(tmp);
  return 0;
}
