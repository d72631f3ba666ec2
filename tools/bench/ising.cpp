// einstage_bench_ising: one evaluation of ln Z/N, u and c of the 2D Ising model by TRG (examples/ising/Trg.h: the
// traced program differentiated twice, forward over reverse) at chi = 16 and 32, N = 20 steps, beta = 0.44, against
// the same algorithm in PyTorch (tools/bench/ising_trg_peer.py: torch.autograd.grad(..., create_graph=True) twice),
// measured in the same run with the same thread count; then the sweep of 51 beta values 0.40:0.50:0.002 at chi = 16
// (one traced program, evaluated 51 times; with --threads N, N evaluations at a time). f64, best of repeated calls after a warm-up (einstage: the warm-up plans
// the einsums and compiles kernels; the trace + AD + prepare time is printed on its own). Not a test: it prints a
// table and JSON. The values of the two implementations are printed side by side.
//
// Usage: einstage_bench_ising [--min-time S] [--threads N] [--json FILE] [--no-torch] [--chi LIST]
#include "examples/ising/Trg.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "runtime/Runtime.h"
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace einstage;
using json = nlohmann::json;

namespace {

constexpr int kSteps = 20;
constexpr double kBeta = 0.44;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 2;
  int threads = 1;
  std::string json_file;
  bool torch = true;
  std::vector<int> chis = {16, 32};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-torch") torch = false;
    else if (a == "--chi" && i + 1 < argc) {
      chis.clear();
      for (std::string s = argv[++i]; !s.empty();) {
        const size_t comma = s.find(',');
        chis.push_back(std::atoi(s.substr(0, comma).c_str()));
        s = comma == std::string::npos ? "" : s.substr(comma + 1);
      }
    } else {
      std::fprintf(stderr, "usage: einstage_bench_ising [--min-time S] [--threads N] [--json FILE] [--no-torch] "
                           "[--chi 16,32]\n");
      return 2;
    }
  }
  const bench::Machine machine = bench::detect_machine();
  bench::reexec_with_openblas_env(machine, threads, argv);  // LAPACK (OpenBLAS) with the same thread count
  RuntimeOptions options;
  options.threads = threads;
  Runtime rt(options);
  rt.add_module(einsum::module_descriptor());
  rt.add_module(linalg::module_descriptor());
  std::string why = "--no-torch";
  if (torch && std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    torch = false;
    why = "python3-torch is not installed for /usr/bin/python3";
  }

  json result = {{"machine", machine.to_json()}, {"threads", threads}, {"steps", kSteps}, {"beta", kBeta},
                 {"rows", json::array()}};
  fmt::print("{}\n", machine.summary());
  fmt::print("2D Ising TRG, {} steps, beta {}: ln Z/N, u and c in one evaluation, f64, {} thread(s), best of repeated "
             "calls (seconds)\n", kSteps, kBeta, threads);
  fmt::print("{:>4} | {:>9} {:>10} | {:>10} | {:>7} | {:>22} {:>22}\n", "chi", "prepare", "einstage", "torch",
             "speedup", "c (einstage)", "c (torch)");
  for (int chi : chis) {
    const auto t0 = std::chrono::steady_clock::now();
    const ising::IsingTrg trg(rt, chi, kSteps);
    const double prepare = seconds_since(t0);
    ising::TrgValues v{};
    const double te = bench::best_time([&] { v = trg.evaluate(kBeta); }, min_time);
    std::optional<json> peer;
    if (torch) {
      const std::string cmd = fmt::format("{}OMP_NUM_THREADS={} OPENBLAS_NUM_THREADS={} /usr/bin/python3 '{}' {} {} {} {} {}",
                                          machine.peer_env(), threads, threads, EINSTAGE_BENCH_ISING_PEER, chi, kSteps,
                                          kBeta, min_time, threads);
      peer = bench::run_peer_json(cmd, "the torch script", why);
    }
    const double tt = peer ? (*peer)["seconds"].get<double>() : -1;
    fmt::print("{:>4} | {:>9.3f} {:>10.4f} | {:>10} | {:>7} | {:>22.16g} {:>22}\n", chi, prepare, te,
               peer ? fmt::format("{:.4f}", tt) : "n/a", peer ? fmt::format("{:.2f}x", tt / te) : "n/a",
               v.specific_heat, peer ? fmt::format("{:.16g}", (*peer)["specific_heat"].get<double>()) : "n/a");
    json row = {{"chi", chi}, {"prepare_s", prepare}, {"einstage_s", te}, {"lnz", v.lnz}, {"energy", v.energy},
                {"specific_heat", v.specific_heat}};
    if (peer) row["torch"] = *peer;
    result["rows"].push_back(row);
  }
  if (!torch || why != "--no-torch") fmt::print("torch: {}\n", why);

  // The sweep: 51 values at chi = 16 with one traced program, as `einstage example ising-trg --sweep` runs it.
  const auto t0 = std::chrono::steady_clock::now();
  const ising::IsingTrg trg(rt, 16, kSteps);
  std::vector<double> betas;
  for (int k = 0; k <= 50; ++k) betas.push_back(0.40 + 0.002 * k);
  trg.evaluate_all(betas);  // concurrently when --threads is above 1
  const double sweep = seconds_since(t0);
  fmt::print("sweep of 51 beta values 0.40:0.50:0.002 at chi 16 (trace, AD, prepare and 51 evaluations): {:.2f} s\n",
             sweep);
  result["sweep_chi16_51_s"] = sweep;
  if (!json_file.empty()) std::ofstream(json_file) << result.dump(2) << "\n";
  return 0;
}
