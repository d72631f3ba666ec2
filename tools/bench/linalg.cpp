// einstage_bench_linalg: the decompositions of `einstage.linalg.v1` against NumPy's np.linalg and torch.linalg, in
// the same run. For svd (thin), qr (reduced) and eigh, on a batch of 64 matrices 128 x 128 and on one 1024 x 1024
// matrix (f64, seeded), each op is traced into a one-instruction program and run on a Runtime with the linalg module
// (prepared and warm); the peers run /usr/bin/python3 tools/bench/linalg_peers.py on matrices of the same shapes. The
// table shows the best time per call and the ratios einstage / NumPy and einstage / torch (below 1: einstage is
// faster), plus, for svd, value + gradient of sum(S) (ad::value_and_grad, the rule of extensions/linalg/LinalgAd.h)
// over the value alone. Every column uses the same OpenBLAS (Debian's LAPACK alternative) on the same core: on a CPU
// with AVX-512 where OpenBLAS would pick a core without it (Debian's 0.3.21 on newer Xeons picks Prescott), the program
// re-executes itself with OPENBLAS_CORETYPE=SkylakeX and gives the peers the same (tools/bench/Machine.h; the line
// above the table names the core). Threads (--threads N, default every available CPU): einstage's context has N
// threads (a batch: one matrix per task on its pool, OpenBLAS on one thread inside each; a single matrix: OpenBLAS on
// N threads, extensions/linalg/Lapack.h), and the peers run with OPENBLAS_NUM_THREADS=N and torch.set_num_threads(N).
// Not a test: it prints a table and JSON.
//
// Usage: einstage_bench_linalg [--min-time S] [--threads N] [--json FILE] [--no-peers] [--only TEXT]
//   e.g. chrt -f 50 build/tools/einstage_bench_linalg --threads 1 --json linalg-1.json
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/linalg/Module.h"
#include "extensions/linalg/TraceLinalg.h"
#include "runtime/Runtime.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
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

std::optional<json> peer_times(const std::vector<Workload>& ws, double min_time, int threads,
                               const bench::Machine& machine, std::string& why) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    why = "/usr/bin/python3 not found";
    return std::nullopt;
  }
  json cfg = {{"min_time", min_time}, {"threads", threads}, {"rows", json::array()}};
  for (const Workload& w : ws)
    cfg["rows"].push_back({{"name", w.name}, {"op", w.op}, {"m", w.m}, {"n", w.n}, {"batch", w.batch}});
  char input[] = "/tmp/einstage_bench_linalg_in_XXXXXX";
  const int fd = mkstemp(input);
  if (fd < 0) {
    why = "cannot create a temporary file";
    return std::nullopt;
  }
  close(fd);
  std::ofstream(input) << cfg.dump();
  const std::string cmd = fmt::format("{}OPENBLAS_NUM_THREADS={} OMP_NUM_THREADS={} /usr/bin/python3 '{}' < '{}'",
                                      machine.peer_env(), threads, threads, EINSTAGE_BENCH_LINALG_PEERS, input);
  std::optional<json> out = bench::run_peer_json(cmd, "the NumPy/torch script", why);
  std::filesystem::remove(input);
  return out;
}

std::string ms(double s) { return s < 0 ? "n/a" : fmt::format("{:.2f}", s * 1e3); }
std::string ratio(double a, double b) { return a < 0 || b < 0 ? "n/a" : fmt::format("{:.2f}x", a / b); }
double seconds(const json& row, const char* key) { return row.contains(key) && row[key].is_number() ? row[key].get<double>() : -1; }

}  // namespace

int main(int argc, char** argv) {
  double min_time = 1.0;
  int threads = 0;
  std::string json_file, only;
  bool peers = true;
  const char* usage = "usage: einstage_bench_linalg [--min-time S] [--threads N] [--json FILE] [--no-peers] "
                      "[--only TEXT]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
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
  std::string why = "--no-peers";
  const std::optional<json> pt = peers ? peer_times(ws, min_time, threads, machine, why) : std::nullopt;

  RuntimeOptions options;
  options.threads = threads;
  Runtime rt(options);
  rt.add_module(linalg::module_descriptor());
  fmt::print("{}; {} thread(s)\n", machine.summary(), threads);
  fmt::print("f64, best of repeated calls (milliseconds); ratios are einstage / peer (below 1: einstage faster)\n");
  fmt::print("{:<16} | {:>9} | {:>9} {:>7} | {:>9} {:>7} | {:>10} {:>6}\n", "workload", "einstage", "numpy",
             "ratio", "torch", "ratio", "value+grad", "/value");
  json result = {{"machine", machine.to_json()}, {"threads", threads}, {"rows", json::array()}};
  if (pt) {
    result["numpy"] = (*pt)["numpy"];
    result["torch"] = (*pt)["torch"];
    result["torch_threads"] = (*pt)["torch_threads"];
  } else {
    result["peer_failure"] = why;
  }
  for (const Workload& w : ws) {
    const Tensor a = matrices(w);
    const Executable exe = rt.prepare(trace(w, rt.registry(), false));
    const double value = best_time([&] { exe.run({a}); }, min_time);
    double grad = -1, loss_value = -1;
    if (w.op == "svd") {
      const Program loss = trace(w, rt.registry(), true);
      const Executable lv = rt.prepare(loss);
      const Executable vg = rt.prepare(ad::value_and_grad(loss, {0}, &rt.registry()));
      loss_value = best_time([&] { lv.run({a}); }, min_time);
      grad = best_time([&] { vg.run({a}); }, min_time);
    }
    double numpy = -1, torch = -1;
    if (pt)
      for (const json& r : (*pt)["rows"])
        if (r["name"] == w.name) numpy = seconds(r, "numpy_s"), torch = seconds(r, "torch_s");
    fmt::print("{:<16} | {:>9} | {:>9} {:>7} | {:>9} {:>7} | {:>10} {:>6}\n", w.name, ms(value), ms(numpy),
               ratio(value, numpy), ms(torch), ratio(value, torch), ms(grad), ratio(grad, loss_value));
    result["rows"].push_back({{"name", w.name},
                              {"einstage_s", value},
                              {"numpy_s", numpy >= 0 ? json(numpy) : json(nullptr)},
                              {"torch_s", torch >= 0 ? json(torch) : json(nullptr)},
                              {"sum_s_value_s", loss_value >= 0 ? json(loss_value) : json(nullptr)},
                              {"sum_s_value_and_grad_s", grad >= 0 ? json(grad) : json(nullptr)}});
  }
  if (!pt) fmt::print("peers: n/a ({})\n", why);
  const std::string text = result.dump(2);
  if (!json_file.empty()) std::ofstream(json_file) << text << "\n";
  else fmt::print("{}\n", text);
  return 0;
}
