// einstage_bench_einsum: whole-einsum execution (one-shot and prepared) on the three workloads, beside
// NumPy's einsum(optimize=True) measured in the same run. Not a test: it prints a table and JSON.
//
// Workloads (f64, column-major operands, seeded data): the 7-matrix chain ij,jk,kl,lm,mn,no,o->i with n = 256, the
// 4x4 grid of bond dimension 8 contracted to a scalar, and a 16x16 matmul. Columns: a cold one-shot call (parse,
// bind, plan, execute; the plan cache cleared first), a warm one-shot call (cache hit), a prepared plan's execute(),
// each with the dispatcher's kernel (JIT for floating types) and with the portable kernel (EINSTAGE_JIT=0), and
// NumPy (tools/bench/peers.py through /usr/bin/python3, with OPENBLAS_CORETYPE=SkylakeX); the NumPy column says
// "n/a" and the output says why when python3 or numpy is missing. Times are the best of repeated calls after a
// warm-up, on one thread unless --threads is given.
//
// Usage: einstage_bench_einsum [--threads N] [--min-time S] [--json FILE] [--no-numpy]
#include "extensions/einsum/Einsum.h"
#include "extensions/einsum/planner/ContractionTree.h"
#include "runtime/ThreadPool.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
namespace es = einstage::einsum;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double best_time(const std::function<void()>& fn, double min_time) {
  fn();  // warm-up
  double best = 1e300, total = 0;
  int reps = 0;
  while (total < min_time || reps < 5) {
    auto t0 = Clock::now();
    fn();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
    ++reps;
  }
  return best;
}

struct Workload {
  std::string name;
  std::string spec;
  std::vector<Shape> shapes;
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  const int64_t n = 256;
  w.push_back({"chain7 n=256", "ij,jk,kl,lm,mn,no,o->i", {{n, n}, {n, n}, {n, n}, {n, n}, {n, n}, {n, n}, {n}}});
  // 4x4 grid, bond 8: site (r, c) carries its right bond h(r,c) and its down bond v(r,c); 24 labels a..x.
  std::string letters = "abcdefghijklmnopqrstuvwx";
  auto h = [&](int r, int c) { return letters[static_cast<size_t>(r * 3 + c)]; };
  auto v = [&](int r, int c) { return letters[static_cast<size_t>(12 + r * 4 + c)]; };
  std::string spec;
  std::vector<Shape> shapes;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      std::string t;
      if (c > 0) t += h(r, c - 1);
      if (c < 3) t += h(r, c);
      if (r > 0) t += v(r - 1, c);
      if (r < 3) t += v(r, c);
      spec += (spec.empty() ? "" : ",") + t;
      shapes.push_back(Shape(t.size(), 8));
    }
  w.push_back({"grid4x4 bond8", spec + "->", shapes});
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

// NumPy einsum(optimize=True) through tools/bench/peers.py; nullopt with a reason when it cannot run.
std::optional<json> numpy_times(const std::vector<Workload>& ws, double min_time, int threads, std::string& why) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    why = "/usr/bin/python3 not found";
    return std::nullopt;
  }
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    why = "numpy is not installed for /usr/bin/python3 (apt install python3-numpy)";
    return std::nullopt;
  }
  // peers.py sits beside this source file (CMake compiles it by its absolute path).
  const std::string peers = (std::filesystem::path(__FILE__).parent_path() / "peers.py").string();
  if (!std::filesystem::exists(peers)) {
    why = "tools/bench/peers.py not found";
    return std::nullopt;
  }
  json rows = json::array();
  for (const Workload& w : ws) {
    double naive = 1;  // plain np.einsum runs one loop nest over every label: skip it beyond 2e9 points
    std::map<char, int64_t> ext;
    size_t k = 0, a = 0;
    for (char c : w.spec) {
      if (c == ',') { ++k; a = 0; continue; }
      if (c == '-') break;
      ext[c] = w.shapes[k][a++];
    }
    for (auto& [c, e] : ext) naive *= static_cast<double>(e);
    rows.push_back({{"name", w.name}, {"spec", w.spec}, {"shapes", w.shapes}, {"dtype", "f64"}, {"flops", naive},
                    {"min_time", min_time}, {"threads", threads}});
  }
  char tmpl[] = "/tmp/einstage_bench_einsum_XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) {
    why = "cannot create a temporary file";
    return std::nullopt;
  }
  close(fd);
  std::ofstream(tmpl) << rows.dump();
  const std::string cmd = fmt::format("OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS={} /usr/bin/python3 '{}' < '{}'",
                                      threads, peers, tmpl);
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (f && std::fgets(buf, sizeof(buf), f)) out += buf;
  const int status = f ? pclose(f) : -1;
  std::filesystem::remove(tmpl);
  if (status != 0) {
    why = "peers.py failed";
    return std::nullopt;
  }
  return json::parse(out);
}

std::string us(double s) { return s < 0 ? "n/a" : fmt::format("{:.1f}", s * 1e6); }

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double min_time = 0.3;
  std::string json_file;
  bool numpy = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-numpy") numpy = false;
    else {
      std::fprintf(stderr, "usage: einstage_bench_einsum [--threads N] [--min-time S] [--json FILE] [--no-numpy]\n");
      return 2;
    }
  }
  ThreadPool pool(threads);
  es::EinsumOptions options;
  options.pool = &pool;
  const auto ws = workloads();
  json result = {{"threads", threads}, {"rows", json::array()}};
  std::string why = "--no-numpy";
  std::optional<json> np = numpy ? numpy_times(ws, min_time, threads, why) : std::nullopt;
  if (np) result["numpy"] = (*np)["numpy"];

  fmt::print("einsum execution, f64, {} thread(s), best of repeated calls (microseconds)\n", threads);
  fmt::print("{:<15} {:>10} {:>9} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>9}\n", "workload", "flops", "method",
             "cold", "one-shot", "prepared", "cold", "one-shot", "prepared", "numpy");
  fmt::print("{:<15} {:>10} {:>9} | {:^29} | {:^29} | {:>9}\n", "", "", "", "dispatcher (JIT)", "portable kernel",
             "opt=True");
  for (size_t r = 0; r < ws.size(); ++r) {
    const Workload& w = ws[r];
    std::vector<Tensor> ops = operands(w);
    std::vector<es::TensorMeta> metas;
    for (const Tensor& t : ops) metas.push_back(es::TensorMeta::of(t));
    es::EinsumPlan plan = es::EinsumPlan::prepare(w.spec, metas, options);
    double flops = 0;
    if (!plan.tree().steps().empty()) flops = es::evaluate(plan.subscripts(), plan.extents(), plan.tree()).flops;
    else flops = 16.0 * 16 * 16;
    json row = {{"name", w.name}, {"spec", w.spec}, {"flops", flops}, {"shortcut", plan.is_shortcut()},
                {"tree", plan.tree().to_string()}, {"arena_bytes", plan.arena_bytes()}};
    double t[2][3];
    for (int portable = 0; portable < 2; ++portable) {
      if (portable) setenv("EINSTAGE_JIT", "0", 1);
      else unsetenv("EINSTAGE_JIT");
      // Cold: a fresh plan cache, so the call parses, binds, plans and executes (kernels already compiled).
      t[portable][0] = best_time([&] {
        es::clear_einsum_cache();
        es::einsum(w.spec, ops, options);
      }, min_time);
      t[portable][1] = best_time([&] { es::einsum(w.spec, ops, options); }, min_time);
      t[portable][2] = best_time([&] { plan.execute(ops, &pool); }, min_time);
    }
    unsetenv("EINSTAGE_JIT");
    double tn = -1;
    if (np)
      for (const json& pr : (*np)["rows"])
        if (pr["name"] == w.name && !pr["numpy_einsum_opt"].is_null()) tn = pr["numpy_einsum_opt"].get<double>();
    fmt::print("{:<15} {:>10.3g} {:>9} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>9}\n", w.name, flops,
               plan.is_shortcut() ? "shortcut" : "tree", us(t[0][0]), us(t[0][1]), us(t[0][2]), us(t[1][0]),
               us(t[1][1]), us(t[1][2]), us(tn));
    row["jit"] = {{"cold_s", t[0][0]}, {"one_shot_s", t[0][1]}, {"prepared_s", t[0][2]}};
    row["portable"] = {{"cold_s", t[1][0]}, {"one_shot_s", t[1][1]}, {"prepared_s", t[1][2]}};
    row["numpy_einsum_opt_s"] = tn < 0 ? json(nullptr) : json(tn);
    result["rows"].push_back(row);
  }
  if (!np) fmt::print("numpy: not measured ({})\n", why);
  fmt::print("flops = multiply-adds of the planned tree (evaluate()); cold = plan cache cleared before each call\n");
  const std::string text = result.dump(2);
  if (!json_file.empty()) std::ofstream(json_file) << text << "\n";
  fmt::print("{}\n", text);
  return 0;
}
