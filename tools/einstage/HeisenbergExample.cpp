// `einstage example heisenberg-ipeps [--D N] [--chi X] [--seed S] [--max-iter N] [--json] [--save FILE.npy]` and
// `... --load FILE.npy --evaluate`: the Heisenberg antiferromagnet by a C4v iPEPS (examples/heisenberg/Optimize.h,
// docs/ipeps.md), optimised by L-BFGS with the energy gradient through CTMRG by the fixed-point adjoint; one progress
// line per evaluation on stderr, the result on stdout (text, or one JSON object).
#include "examples/heisenberg/Optimize.h"
#include "examples/heisenberg/Plot.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "ir/Error.h"
#include "ir/Npy.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>

namespace einstage::cli {
namespace {

constexpr std::string_view kHelp =
    "usage: einstage example heisenberg-ipeps [--D N] [--chi X] [--seed S] [--max-iter N] [--adjoint M] [--save FILE.npy]\n"
    "                                         [--plot FILE.svg] [--json]\n"
    "       einstage example heisenberg-ipeps --load FILE.npy [--chi X] [--evaluate] [--json]\n"
    "\n"
    "The spin-1/2 Heisenberg antiferromagnet on the square lattice by a C4v-symmetric single-site iPEPS of bond\n"
    "dimension D: CTMRG with environment dimension chi evaluates the energy per site, its gradient comes from AD\n"
    "through the converged CTMRG by the fixed-point adjoint, and L-BFGS minimises it (docs/ipeps.md). Prints one\n"
    "progress line per evaluation on stderr and the energy per site and staggered magnetisation on stdout. The\n"
    "published C4v optimum at D = 2 is -0.66023109348 (magnetisation 0.3911).\n"
    "\n"
    "options:\n"
    "  --D N         bond dimension, at least 1 (default 2)\n"
    "  --chi X       environment dimension, at least D^2 (default 16)\n"
    "  --seed S      the start: a random tensor from seed S, entries uniform in [-1, 1), unit norm (default 1)\n"
    "  --max-iter N  L-BFGS iterations at most (default 200)\n"
    "  --adjoint M   the gradient through CTMRG: fixed-point (default; memory independent of the CTMRG steps) or\n"
    "                unrolled (reverse mode through every step from per-step checkpoints)\n"
    "  --save FILE   write the optimised parameters (f64[2,D,D,D,D], .npy) to FILE\n"
    "  --plot FILE   draw the energy error against the evaluation (SVG) to FILE; the reference is the published\n"
    "                optimum at D = 2 and the run's lowest energy otherwise\n"
    "  --load FILE   start from saved parameters instead (their shape gives D)\n"
    "  --evaluate    with --load: only evaluate the energy and magnetisation at --chi, no optimisation\n"
    "  --json        print one JSON object: D, chi, energy, magnetization, iterations, evaluations, seconds\n"
    "  --threads N   kernel threads ({threads})\n"
    "  -h, --help    print this help\n";

constexpr std::string_view kCommand = "example heisenberg-ipeps";
constexpr double kPublishedD2 = -0.66023109348;  // the published C4v optimum at D = 2 (docs/ipeps.md)

long long parse_count(std::string_view flag, std::string_view text, long long lo, long long hi) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    usage_error("{}: {} must be a whole number from {} to {}, got '{}'", kCommand, flag, lo, hi, text);
  return v;
}

// The parameters in `path`, checked to be an iPEPS tensor f64[2,D,D,D,D].
Tensor load_parameters(const std::string& path) {
  Tensor t = read_npy(path);
  const Shape& s = t.shape();
  bool ok = t.dtype() == DType::f64 && s.size() == 5 && s[0] == 2 && s[1] >= 1;
  for (size_t k = 2; ok && k < s.size(); ++k) ok = s[k] == s[1];
  if (!ok)
    usage_error("{}: '{}' holds {}{} but the parameters must be f64[2,D,D,D,D] (physical dimension 2, bond "
                "dimension D on four legs), as --save writes them", kCommand, path, name(t.dtype()),
                shape_to_string(s));
  return t;
}

}  // namespace

int run_heisenberg_ipeps(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", with_threads_default(kHelp));
    return 0;
  }
  ArgScanner scan(kCommand, args);
  std::string value, save, load, plot;
  heisenberg::OptimizeOptions o;
  std::optional<int> d;
  bool json = false, evaluate = false;
  int threads = 0;
  while (scan.next()) {
    if (scan.option("--D", &value)) { d = int(parse_count("--D", value, 1, 16)); continue; }
    if (scan.option("--chi", &value)) { o.chi = int(parse_count("--chi", value, 1, 4096)); continue; }
    if (scan.option("--seed", &value)) { o.seed = uint64_t(parse_count("--seed", value, 0, 1LL << 62)); continue; }
    if (scan.option("--max-iter", &value)) {
      o.max_iterations = int(parse_count("--max-iter", value, 1, 1 << 20));
      continue;
    }
    if (scan.option("--save", &value)) { save = value; continue; }
    if (scan.option("--plot", &value)) { plot = value; continue; }
    if (scan.option("--adjoint", &value)) {
      if (value == "fixed-point") o.method = heisenberg::AdjointMethod::fixed_point;
      else if (value == "unrolled") o.method = heisenberg::AdjointMethod::unrolled;
      else usage_error("{}: --adjoint must be fixed-point or unrolled, got '{}'", kCommand, value);
      continue;
    }
    if (scan.option("--load", &value)) { load = value; continue; }
    if (scan.option("--threads", &value)) { threads = parse_threads(kCommand, value); continue; }
    if (scan.flag("--evaluate")) { evaluate = true; continue; }
    if (scan.flag("--json")) { json = true; continue; }
    usage_error("{}: unexpected argument '{}'; run 'einstage example heisenberg-ipeps --help'", kCommand,
                scan.positional());
  }
  if (evaluate && !plot.empty())
    usage_error("{}: --plot draws an optimisation's progress; drop it with --evaluate", kCommand);
  if (evaluate && load.empty()) usage_error("{}: --evaluate needs --load FILE (the parameters to evaluate)", kCommand);
  std::optional<Tensor> start;
  if (!load.empty()) {
    start = load_parameters(load);
    const int loaded = int(start->shape()[1]);
    if (d && *d != loaded)
      usage_error("{}: --D {} but '{}' holds parameters of bond dimension {}; drop --D or load another file",
                  kCommand, *d, load, loaded);
    d = loaded;
  }
  o.d = d.value_or(2);
  if (o.chi < o.d * o.d)
    usage_error("{}: --chi {} is below D^2 = {} (D = {}); the environment must hold at least one double-layer bond",
                kCommand, o.chi, o.d * o.d, o.d);

  RuntimeOptions options;
  options.threads = threads;
  Runtime runtime(options);
  runtime.add_module(einsum::module_descriptor());
  runtime.add_module(linalg::module_descriptor());

  heisenberg::OptimizeResult r;
  std::vector<heisenberg::PlotPoint> points;
  if (evaluate) {
    const auto t0 = std::chrono::steady_clock::now();
    heisenberg::IpepsEnergy energy(runtime, o.d, o.chi, o.ctmrg, o.adjoint);
    std::tie(r.energy, r.magnetization) = energy.measure(*start);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else {
    o.progress = [&points](const heisenberg::Progress& p) {
      if (p.rejected.empty()) points.push_back({p.evaluation, p.energy});
      if (!p.rejected.empty())
        fmt::print(stderr, "eval {:4d}  rejected: {}  {:.2f} s\n", p.evaluation, p.rejected, p.seconds);
      else
        fmt::print(stderr, "eval {:4d}  energy {:.12f}  |grad| {:.3e}  ctmrg steps {:4d}  adjoint iterations {:3d}  "
                   "{:.2f} s{}\n", p.evaluation, p.energy, p.gradient_norm, p.ctmrg_steps, p.adjoint_iterations,
                   p.seconds, p.fresh_start ? "  (CTMRG restarted from the boundary start)" : "");
      if (!p.fallback.empty())
        fmt::print(stderr, "          the fixed-point adjoint failed, the unrolled one ran instead: {}\n", p.fallback);
    };
    r = heisenberg::optimize(runtime, o, start ? &*start : nullptr);
    if (!save.empty()) write_npy(save, r.theta);
    if (!plot.empty()) {
      const bool published = o.d == 2;
      double reference = r.energy;
      for (const auto& p : points) reference = std::min(reference, p.energy);
      if (published) reference = kPublishedD2;
      std::string title = fmt::format("Heisenberg C4v iPEPS, D = {}, chi = {}: E - E_ref, E_ref = {:.11f} ({})", o.d,
                                      o.chi, reference, published ? "published optimum" : "lowest energy of the run");
      std::ofstream out(plot, std::ios::binary);
      out << heisenberg::energy_error_svg(points, reference, title);
      if (!out.flush())
        fail(ErrorKind::io, "{}: cannot write the plot to '{}'; check that its folder exists and is writable",
             kCommand, plot);
    }
  }
  if (json) {
    nlohmann::json j = {{"D", o.d},
                        {"chi", o.chi},
                        {"energy", r.energy},
                        {"magnetization", r.magnetization},
                        {"iterations", r.iterations},
                        {"evaluations", r.evaluations},
                        {"seconds", r.seconds}};
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("Heisenberg antiferromagnet, C4v iPEPS: D = {}, chi = {}\n", o.d, o.chi);
  fmt::print("energy per site            {:.12f}\n", r.energy);
  fmt::print("staggered magnetisation    {:.6f}\n", r.magnetization);
  if (!evaluate) {
    fmt::print("L-BFGS iterations          {}{}\n", r.iterations,
               r.stop_reason.empty() ? "" : fmt::format(" (stopped early: {})", r.stop_reason));
    fmt::print("evaluations                {}\n", r.evaluations);
  }
  fmt::print("seconds                    {:.2f}\n", r.seconds);
  if (!save.empty()) fmt::print("parameters written to {}\n", save);
  if (!plot.empty()) fmt::print("plot written to {}\n", plot);
  return 0;
}

}  // namespace einstage::cli
