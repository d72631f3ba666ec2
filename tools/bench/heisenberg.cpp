// einstage_bench_heisenberg: the Heisenberg iPEPS example (examples/heisenberg/, docs/ipeps.md) measured three ways.
//
//   --memory      the backward pass's peak memory, fixed-point adjoint against the unrolled one, after N = 20 and
//                 N = 200 CTMRG steps from a converged environment (D and chi from --D/--chi, default 3 and 36). Each
//                 (method, N) runs in a child process of its own (this program re-executed), which converges the
//                 environment, evaluates once to warm up (plans, kernels), then resets the kernel's peak-RSS counter
//                 (/proc/self/clear_refs, 5) after N steps, before the backward pass: the table shows what the
//                 backward pass holds when it begins (the unrolled checkpoints: N environments; nothing for the
//                 fixed-point adjoint, which needs only the last), what it allocated at its peak above the resident
//                 set then (VmHWM − VmRSS), and their sum, the backward pass's peak.
//   --eval        one energy + gradient evaluation (CTMRG from the boundary start to convergence, the energy's
//                 value_and_grad, the fixed-point adjoint), best of repeats, with the time of each part, at the
//                 --D/--chi given (default 2 and 16), and the torch peer (tools/bench/heisenberg_peer.py) on the same
//                 state with the same tolerances and threads when it is installed.
//   --optimize    a full optimisation (L-BFGS from random_start(D, seed 1)) at --D/--chi, its seconds and result,
//                 and the torch peer's (heisenberg_peer.py --optimize: torch.optim.LBFGS, the same memory, stopping
//                 rule and warm starts) from the same start.
//
// Usage: einstage_bench_heisenberg (--memory | --eval | --optimize) [--D N] [--chi X] [--threads N] [--json FILE]
//        [--no-torch]
#include "compiler/ad/Ad.h"
#include "examples/heisenberg/Optimize.h"
#include "examples/heisenberg/Unrolled.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "ir/Npy.h"
#include "runtime/Runtime.h"
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

using namespace einstage;
using namespace einstage::heisenberg;
using json = nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The process's CPU seconds so far (every thread): on a machine shared with other work, CPU time is less disturbed
// than wall time, and the peer reports its own (time.process_time()).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// kB from /proc/self/status ("VmRSS:", "VmHWM:").
int64_t status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size());
  return -1;
}

void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

// The child of --memory: prints one JSON object.
int memory_child(const Runtime& rt, int d, int chi, const std::string& method, int steps) {
  IpepsEnergy warm(rt, d, chi);
  Tensor a = c4v_symmetrize(random_start(d, 1));
  Ctmrg ctmrg(rt, d, chi);
  CtmrgResult r = ctmrg.converge(a, initial_environment(a, chi));
  Executable step = rt.prepare(ctmrg.forward_program());
  Executable energy_grad = rt.prepare(ad::value_and_grad(ctmrg.energy_program(), {0, 1, 2}, &rt.registry()));
  ad::FixedPointAdjoint adjoint(ctmrg.step_program(), {0, 1}, {2}, &rt.registry(), ad::preparer_of(rt));
  UnrolledGradient unrolled(rt, ctmrg);
  // N forward steps (recorded as checkpoints for the unrolled adjoint), then the backward pass; the peak counter is
  // reset between the two, so `added` is what the backward pass allocated at its peak above what was resident when it
  // began (which includes the unrolled checkpoints: `held`).
  int64_t before = 0, peak = 0;
  auto run = [&](int n) {
    CtmEnvironment env = r.env;
    unrolled.begin();
    for (int k = 0; k < n; ++k) {
      if (method == "unrolled") unrolled.record(env, r.gauge);
      std::vector<Tensor> out = step.run({env.c, env.t, a, r.gauge});
      env = {out[0], out[1]};
    }
    reset_peak();
    before = status_kb("VmRSS:");
    std::vector<Tensor> vg = energy_grad.run({env.c, env.t, a});
    Tensor g = method == "unrolled" ? unrolled.backward(a, vg[1], vg[2])
                                    : adjoint.vjp({env.c, env.t, a, r.gauge}, {vg[1], vg[2]}).cotangents.at(0);
    peak = status_kb("VmHWM:");
    return g;
  };
  run(2);  // warm-up: plans, kernels, the allocator's blocks of these sizes
  Tensor g = run(steps);
  const int64_t env_bytes = int64_t(r.env.c.nbytes() + r.env.t.nbytes());
  json j = {{"method", method}, {"steps", steps}, {"backward_added_kib", peak - before}, {"rss_before_kib", before},
            {"held_bytes", method == "unrolled" ? int64_t(steps) * env_bytes : 0}, {"env_bytes", env_bytes}};
  fmt::print("{}\n", j.dump());
  return g.defined() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, json_file, child_method;
  int d = 0, chi = 0, threads = 1, child_steps = 0;
  bool torch = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--memory" || a == "--eval" || a == "--optimize") mode = a;
    else if (a == "--D" && i + 1 < argc) d = std::atoi(argv[++i]);
    else if (a == "--chi" && i + 1 < argc) chi = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_file = argv[++i];
    else if (a == "--no-torch") torch = false;
    else if (a == "--memory-child" && i + 2 < argc) {
      mode = a;
      child_method = argv[++i];
      child_steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: einstage_bench_heisenberg (--memory | --eval | --optimize) [--D N] [--chi X] "
                           "[--threads N] [--json FILE] [--no-torch]\n");
      return 2;
    }
  }
  if (d == 0) d = mode == "--eval" || mode == "--optimize" ? 2 : 3;
  if (chi == 0) chi = mode == "--eval" || mode == "--optimize" ? 16 : 36;
  const bench::Machine machine = bench::detect_machine();  // first: it may re-execute this program as a probe
  if (mode.empty()) {
    std::fprintf(stderr, "einstage_bench_heisenberg: give --memory, --eval or --optimize\n");
    return 2;
  }
  if (mode != "--memory-child") bench::reexec_with_openblas_env(machine, threads, argv);
  RuntimeOptions options;
  options.threads = threads;
  Runtime rt(options);
  rt.add_module(einsum::module_descriptor());
  rt.add_module(linalg::module_descriptor());
  if (mode == "--memory-child") return memory_child(rt, d, chi, child_method, child_steps);

  json result = {{"machine", machine.to_json()}, {"threads", threads}, {"D", d}, {"chi", chi}, {"mode", mode}};
  fmt::print("{}\nthreads {}, D = {}, chi = {}\n", machine.summary(), threads, d, chi);
  // The torch peer (tools/bench/heisenberg_peer.py) on `theta` with `args` (its arguments after the script, '{}'
  // standing for the parameter file), compared with einstage's `seconds` and `energy`; at the peer's best (the
  // machine's OpenBLAS variables unset for its command only) and with this run's threads; `cpu` is einstage's CPU
  // seconds of the same work.
  auto run_torch_peer = [&](const Tensor& theta, const std::string& args, double seconds, double cpu, double energy) {
#ifdef EINSTAGE_BENCH_HEISENBERG_PEER
    std::string why = "--no-torch";
    if (torch && std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
      torch = false;
      why = "python3-torch is not installed for /usr/bin/python3";
    }
    if (!torch) {
      fmt::print("torch: {}\n", why);
      return;
    }
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      fmt::format("einstage_bench_heisenberg_{}", ::getpid());
    std::filesystem::create_directories(dir);
    const std::string file = (dir / "theta.npy").string();
    write_npy(file, theta);
    const std::string cmd = fmt::format("{}OMP_NUM_THREADS={} OPENBLAS_NUM_THREADS={} /usr/bin/python3 '{}' {}",
                                        machine.peer_env(), threads, threads, EINSTAGE_BENCH_HEISENBERG_PEER,
                                        fmt::format(fmt::runtime(args), file));
    auto peer = bench::run_peer_json(cmd, "the torch script", why);
    std::filesystem::remove_all(dir);
    if (!peer) {
      fmt::print("torch: {}\n", why);
      return;
    }
    const double ts = (*peer)["seconds"].get<double>();
    if (peer->contains("ctmrg_seconds"))
      fmt::print("torch     energy {:.12f}  {:.3f} s = CTMRG {:.3f} s ({} steps) + energy grad {:.3f} s + adjoint "
                 "{:.3f} s ({} GMRES iterations)\n", (*peer)["energy"].get<double>(), ts,
                 (*peer)["ctmrg_seconds"].get<double>(), (*peer)["ctmrg_steps"].get<int>(),
                 (*peer)["energy_grad_seconds"].get<double>(), (*peer)["adjoint_seconds"].get<double>(),
                 (*peer)["gmres_iterations"].get<int>());
    else
      fmt::print("torch     energy {:.12f}  {:.2f} s  ({} iterations, {} evaluations, {} rejected)\n",
                 (*peer)["energy"].get<double>(), ts, (*peer)["iterations"].get<int>(),
                 (*peer)["evaluations"].get<int>(), (*peer)["rejected"].get<int>());
    const double tcpu = peer->value("cpu_seconds", 0.0);
    fmt::print("speed-up  {:.2f}x wall, {:.2f}x CPU ({:.3f} s against {:.3f} s)   |energy difference| {:.2e}\n",
               ts / seconds, tcpu / cpu, cpu, tcpu, std::abs((*peer)["energy"].get<double>() - energy));
    result["torch"] = *peer;
    result["speedup"] = ts / seconds;
    result["cpu_speedup"] = tcpu / cpu;
#else
    (void)theta, (void)args, (void)seconds, (void)cpu, (void)energy;
    fmt::print("torch: the peer script's path was not configured\n");
#endif
  };
  if (mode == "--memory") {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    fmt::print("\nbackward pass after N CTMRG steps: what it holds when it begins (the unrolled checkpoints), what it\n"
               "allocates at its peak above the resident set then (VmHWM - VmRSS), and their sum\n");
    fmt::print("{:<12} {:>6} {:>14} {:>14} {:>14}\n", "adjoint", "N", "held", "peak added", "backward peak");
    json rows = json::array();
    for (std::string method : {"fixed-point", "unrolled"})
      for (int n : {20, 200}) {
        std::string why;
        auto j = bench::run_peer_json(fmt::format("'{}' --memory-child {} {} --D {} --chi {} --threads {}", self,
                                                  method, n, d, chi, threads), "the child", why);
        if (!j) {
          fmt::print("{:<12} {:>6} failed: {}\n", method, n, why);
          continue;
        }
        const int64_t added = (*j)["backward_added_kib"].get<int64_t>(), held = (*j)["held_bytes"].get<int64_t>() / 1024;
        fmt::print("{:<12} {:>6} {:>10} KiB {:>10} KiB {:>10} KiB\n", method, n, held, added, held + added);
        rows.push_back(*j);
      }
    result["rows"] = rows;
  } else if (mode == "--eval") {
    Tensor theta = random_start(d, 1);
    Tensor a = c4v_symmetrize(theta);
    Ctmrg ctmrg(rt, d, chi);
    Executable energy_grad = rt.prepare(ad::value_and_grad(ctmrg.energy_program(), {0, 1, 2}, &rt.registry()));
    ad::FixedPointAdjoint adjoint(ctmrg.step_program(), {0, 1}, {2}, &rt.registry(), ad::preparer_of(rt));
    double t_ctmrg = 1e300, t_energy = 1e300, t_adjoint = 1e300, cpu = 0, energy = 0;
    int steps = 0, gmres = 0;
    for (int rep = 0; rep < 3; ++rep) {  // the first run plans and compiles; best of the rest
      const double cpu0 = cpu_seconds();
      auto t0 = std::chrono::steady_clock::now();
      CtmrgResult r = ctmrg.converge(a, initial_environment(a, chi));
      const double tc = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> vg = energy_grad.run({r.env.c, r.env.t, a});
      const double te = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      ad::FixedPointVjp fp = adjoint.vjp({r.env.c, r.env.t, a, r.gauge}, {vg[1], vg[2]});
      const double ta = seconds_since(t0), tcpu = cpu_seconds() - cpu0;
      if (rep == 0) continue;
      if (tc + te + ta < t_ctmrg + t_energy + t_adjoint) {
        cpu = tcpu;
        t_ctmrg = tc;
        t_energy = te;
        t_adjoint = ta;
      }
      energy = vg[0].at<double>({});
      steps = r.steps;
      gmres = fp.report.gmres_iterations;
    }
    const double total = t_ctmrg + t_energy + t_adjoint;
    fmt::print("\none energy + gradient evaluation (best of 2 after a warm-up)\n");
    fmt::print("einstage  energy {:.12f}  {:.3f} s = CTMRG {:.3f} s ({} steps, {:.2f} ms/step) + energy grad {:.3f} s "
               "+ adjoint {:.3f} s ({} GMRES iterations)\n", energy, total, t_ctmrg, steps, 1e3 * t_ctmrg / steps,
               t_energy, t_adjoint, gmres);
    result["einstage"] = {{"energy", energy}, {"seconds", total}, {"cpu_seconds", cpu}, {"ctmrg_seconds", t_ctmrg},
                          {"ctmrg_steps", steps},
                          {"energy_grad_seconds", t_energy}, {"adjoint_seconds", t_adjoint},
                          {"gmres_iterations", gmres}};
    run_torch_peer(theta, fmt::format("'{{}}' {} {}", chi, threads), total, cpu, energy);
  } else {
    OptimizeOptions o;
    o.d = d;
    o.chi = chi;
    const double cpu0 = cpu_seconds();
    OptimizeResult r = optimize(rt, o);
    const double cpu = cpu_seconds() - cpu0;
    fmt::print("\nfull optimisation from random_start(D, 1)\neinstage  energy {:.12f}  {:.2f} s  ({} iterations, {} "
               "evaluations; m {:.6f})\n", r.energy, r.seconds, r.iterations, r.evaluations, r.magnetization);
    result["einstage"] = {{"energy", r.energy}, {"magnetization", r.magnetization}, {"iterations", r.iterations},
                          {"evaluations", r.evaluations}, {"seconds", r.seconds}, {"cpu_seconds", cpu}};
    run_torch_peer(random_start(d, 1), fmt::format("--optimize '{{}}' {} {} {}", chi, threads, o.max_iterations),
                   r.seconds, cpu, r.energy);
  }
  if (!json_file.empty()) std::ofstream(json_file) << result.dump(2) << "\n";
  return 0;
}
