// einstage_bench_linalg: the decompositions of `einstage.linalg.v1` against NumPy's np.linalg and torch.linalg, in
// the same run. For svd (thin), qr (reduced) and eigh, on a batch of 64 matrices 128 x 128 and on one 1024 x 1024
// matrix (f64, seeded), each op is traced into a one-instruction program and run on a Runtime with the linalg module
// (prepared and warm); the peers run /usr/bin/python3 tools/bench/linalg_peers.py on the very same matrices (written
// to a temporary .npy file; the number of iterations of ?gesdd and ?syevd depends on the spectrum, so peers given
// other random matrices time other work). The table shows the best time per call and the ratios einstage / NumPy and
// einstage / torch (below 1: einstage is faster), plus, for svd, value + gradient of sum(S) (ad::value_and_grad, the
// rule of extensions/linalg/LinalgAd.h) over the value alone. Every column uses the same OpenBLAS (Debian's LAPACK
// alternative) on the same core: on a CPU with AVX-512 where OpenBLAS would pick a core without it (Debian's 0.3.21 on
// newer Xeons picks Prescott), the program re-executes itself with OPENBLAS_CORETYPE=SkylakeX and gives the peers the
// same (tools/bench/Machine.h; the line above the table names the core). Threads (--threads N, default every
// available CPU): einstage's context has N threads (a batch: one matrix per task on its pool, OpenBLAS on one thread
// inside each; a single matrix: OpenBLAS on N threads, extensions/linalg/Lapack.h), and the peers run with
// OPENBLAS_NUM_THREADS=N, OMP_NUM_THREADS=N and torch.set_num_threads(N); the "cpu/wall" column is each column's CPU
// seconds per wall second over its timed calls (einstage / NumPy / torch), which shows that nobody used more threads
// than N. Rounds (--rounds R, default 3): each row is timed R times, alternating einstage and the peers row by row,
// and the best of all rounds is kept: on a shared machine (a sibling hyperthread, other processes) the background
// load drifts, and alternating gives every column the same background. Not a test: it prints a table and JSON.
//
// Usage: einstage_bench_linalg [--min-time S] [--rounds R] [--threads N] [--json FILE] [--no-peers] [--only TEXT]
//   e.g. chrt -f 50 build/tools/einstage_bench_linalg --threads 1 --json linalg-1.json
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "ir/Npy.h"
#include "extensions/linalg/Module.h"
#include "extensions/linalg/TraceLinalg.h"
#include "runtime/Runtime.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace einstage;
using bench::best_time;
using json = nlohmann::json;

namespace {

struct Workload {
  std::string name, op;
  int64_t m, n, batch;
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  for (const char* op : {"svd", "qr", "eigh"}) {
    w.push_back({fmt::format("{} 64x128x128", op), op, 128, 128, 64});
    w.push_back({fmt::format("{} 1024x1024", op), op, 1024, 1024, 1});
  }
  return w;
}

// Seeded values in [-1, 1); eigh gets the symmetric part (it reads the lower triangle only, but the peers read all).
Tensor matrices(const Workload& w) {
  Shape shape{w.m, w.n};
  if (w.batch > 1) shape.push_back(w.batch);
  Tensor t = Tensor::empty(DType::f64, shape);
  double* d = t.data<double>();
  uint64_t state = 7;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    d[i] = static_cast<double>(state >> 11) / 4503599627370496.0 - 1.0;
  }
  if (w.op == "eigh")
    for (int64_t b = 0; b < w.batch; ++b)
      for (int64_t j = 0; j < w.n; ++j)
        for (int64_t i = 0; i < j; ++i) d[b * w.m * w.n + i * w.m + j] = d[b * w.m * w.n + j * w.m + i];
  return t;
}

// The one-op program of a workload, and for svd the loss sum(S) whose value + gradient is timed too.
Program trace(const Workload& w, const ExtensionRegistry& registry, bool loss) {
  TraceContext ctx(w.op, &registry);
  std::vector<Dim> dims{w.m, w.n};
  if (w.batch > 1) dims.push_back(w.batch);
  TracedTensor a = ctx.parameter("a", DType::f64, dims);
  if (w.op == "svd") {
    auto [u, s, vh] = linalg::svd(ctx, a);
    if (loss) return ctx.finish({sum(s)});
    return ctx.finish({u, s, vh});
  }
  if (w.op == "qr") {
    auto [q, r] = linalg::qr(ctx, a);
    return ctx.finish({q, r});
  }
  auto [ev, v] = linalg::eigh(ctx, a);
  return ctx.finish({ev, v});
}

// The best seconds per call of `fn` (warm, at least five calls and min_time seconds) and this process's CPU seconds per
// wall second over those calls.
std::pair<double, double> timed(const std::function<void()>& fn, double min_time) {
  auto clock = [](clockid_t id) {
    timespec t{};
    clock_gettime(id, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  fn();
  const double cpu0 = clock(CLOCK_PROCESS_CPUTIME_ID), wall0 = clock(CLOCK_MONOTONIC);
  const double best = best_time(fn, min_time);
  return {best, (clock(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / (clock(CLOCK_MONOTONIC) - wall0)};
}

// The peers' times for one workload whose matrices are in the .npy file `input`.
std::optional<json> peer_times(const Workload& w, const std::string& input, double min_time, int threads,
                               const bench::Machine& machine, std::string& why) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    why = "/usr/bin/python3 not found";
    return std::nullopt;
  }
  json cfg = {{"min_time", min_time}, {"threads", threads}, {"rows", json::array()}};
  cfg["rows"].push_back(
      {{"name", w.name}, {"op", w.op}, {"m", w.m}, {"n", w.n}, {"batch", w.batch}, {"input", input}});
  char config[] = "/tmp/einstage_bench_linalg_in_XXXXXX";
  const int fd = mkstemp(config);
  if (fd < 0) {
    why = "cannot create a temporary file";
    return std::nullopt;
  }
  close(fd);
  std::ofstream(config) << cfg.dump();
  const std::string cmd = fmt::format("{}OPENBLAS_NUM_THREADS={} OMP_NUM_THREADS={} /usr/bin/python3 '{}' < '{}'",
                                      machine.peer_env(), threads, threads, EINSTAGE_BENCH_LINALG_PEERS, config);
  std::optional<json> out = bench::run_peer_json(cmd, "the NumPy/torch script", why);
  std::filesystem::remove(config);
  return out;
}

// The best of every round, per column (-1: not measured), and the largest CPU / wall seen.
struct Best {
  double s = -1, cpu_per_wall = -1;
  void add(double seconds, double cpu) {
    if (seconds < 0) return;
    s = s < 0 ? seconds : std::min(s, seconds);
    cpu_per_wall = std::max(cpu_per_wall, cpu);
  }
  json to_json() const { return s < 0 ? json(nullptr) : json(s); }
};

std::string ms(double s) { return s < 0 ? "n/a" : fmt::format("{:.2f}", s * 1e3); }
std::string ratio(double a, double b) { return a < 0 || b < 0 ? "n/a" : fmt::format("{:.2f}x", a / b); }
std::string load(double x) { return x < 0 ? "-" : fmt::format("{:.2f}", x); }
double seconds(const json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key].get<double>() : -1;
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 1.0;
  int threads = 0, rounds = 3;
  std::string json_file, only;
  bool peers = true;
  const char* usage = "usage: einstage_bench_linalg [--min-time S] [--rounds R] [--threads N] [--json FILE] "
                      "[--no-peers] [--only TEXT]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-peers") peers = false;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      return 0;
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  std::vector<Workload> ws;
  for (Workload& w : workloads())
    if (w.name.find(only) != std::string::npos) ws.push_back(std::move(w));

  const bench::Machine machine = bench::detect_machine();
  if (threads <= 0) threads = machine.cores;
  bench::reexec_with_openblas_env(machine, threads, argv);  // this process's OpenBLAS: the peers' core and threads
  std::string why = peers ? "" : "--no-peers";

  RuntimeOptions options;
  options.threads = threads;
  Runtime rt(options);
  rt.add_module(linalg::module_descriptor());
  fmt::print("{}; {} thread(s); best of {} round(s), einstage and the peers alternating\n", machine.summary(), threads,
             rounds);
  fmt::print("f64, best of repeated calls (milliseconds); ratios are einstage / peer (below 1: einstage faster); "
             "cpu/wall: CPU seconds per wall second of einstage / numpy / torch\n");
  fmt::print("{:<16} | {:>9} | {:>9} {:>7} | {:>9} {:>7} | {:>10} {:>6} | {:>14}\n", "workload", "einstage", "numpy",
             "ratio", "torch", "ratio", "value+grad", "/value", "cpu/wall");
  json result = {{"machine", machine.to_json()}, {"threads", threads}, {"rounds", rounds}, {"rows", json::array()}};
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    fmt::format("einstage_bench_linalg_{}", static_cast<long>(getpid()));
  std::filesystem::create_directories(dir);
  for (const Workload& w : ws) {
    const Tensor a = matrices(w);
    const std::string input = (dir / "a.npy").string();
    write_npy(input, a);  // the peers decompose these very matrices
    const Executable exe = rt.prepare(trace(w, rt.registry(), false));
    std::optional<Executable> lv, vg;
    if (w.op == "svd") {
      const Program loss = trace(w, rt.registry(), true);
      lv = rt.prepare(loss);
      vg = rt.prepare(ad::value_and_grad(loss, {0}, &rt.registry()));
    }
    Best value, numpy, torch, loss_value, grad;
    for (int round = 0; round < rounds; ++round) {
      if (peers && why.empty()) {
        if (std::optional<json> pt = peer_times(w, input, min_time, threads, machine, why)) {
          const json& r = (*pt)["rows"][0];
          numpy.add(seconds(r, "numpy_s"), seconds(r, "numpy_cpu_per_wall"));
          torch.add(seconds(r, "torch_s"), seconds(r, "torch_cpu_per_wall"));
          result["numpy"] = (*pt)["numpy"];
          result["torch"] = (*pt)["torch"];
          result["torch_threads"] = (*pt)["torch_threads"];
        }
      }
      auto [v, cpu] = timed([&] { exe.run({a}); }, min_time);
      value.add(v, cpu);
      if (lv) {
        loss_value.add(best_time([&] { lv->run({a}); }, min_time), 0);
        grad.add(best_time([&] { vg->run({a}); }, min_time), 0);
      }
    }
    fmt::print("{:<16} | {:>9} | {:>9} {:>7} | {:>9} {:>7} | {:>10} {:>6} | {:>14}\n", w.name, ms(value.s),
               ms(numpy.s), ratio(value.s, numpy.s), ms(torch.s), ratio(value.s, torch.s), ms(grad.s),
               ratio(grad.s, loss_value.s),
               fmt::format("{}/{}/{}", load(value.cpu_per_wall), load(numpy.cpu_per_wall), load(torch.cpu_per_wall)));
    result["rows"].push_back({{"name", w.name},
                              {"einstage_s", value.s},
                              {"numpy_s", numpy.to_json()},
                              {"torch_s", torch.to_json()},
                              {"einstage_cpu_per_wall", value.cpu_per_wall},
                              {"numpy_cpu_per_wall", numpy.s < 0 ? json(nullptr) : json(numpy.cpu_per_wall)},
                              {"torch_cpu_per_wall", torch.s < 0 ? json(nullptr) : json(torch.cpu_per_wall)},
                              {"sum_s_value_s", loss_value.to_json()},
                              {"sum_s_value_and_grad_s", grad.to_json()}});
  }
  std::filesystem::remove_all(dir);
  if (!why.empty()) {
    fmt::print("peers: n/a ({})\n", why);
    result["peer_failure"] = why;
  }
  const std::string text = result.dump(2);
  if (!json_file.empty()) std::ofstream(json_file) << text << "\n";
  else fmt::print("{}\n", text);
  return 0;
}
