// `einstage example ising-trg --beta B [--chi X] [--steps N] [--json]`: the worked examples of examples/, run from
// the command line. ising-trg traces the 2D Ising model's TRG once (examples/ising/Trg.h), differentiates it twice
// and prints ln Z per site, the energy u and the specific heat c with 16 significant digits beside Onsager's exact
// values (examples/ising/Onsager.h). docs/ising.md shows the output.
#include "examples/ising/Onsager.h"
#include "examples/ising/Sweep.h"
#include "examples/ising/Trg.h"
#include "extensions/einsum/Module.h"
#include "ir/FileIO.h"
#include "extensions/linalg/Module.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <optional>

namespace einstage::cli {
namespace {

constexpr std::string_view kHelp =
    "usage: einstage example ising-trg --beta B [--chi X] [--steps N] [--json] [--threads N]\n"
    "       einstage example ising-trg --sweep START:STOP:STEP [--plot FILE.svg] [--chi X] [--steps N] [--json]\n"
    "\n"
    "The 2D Ising model (J = 1) by Levin-Nave TRG on a torus of 2^N sites, as one traced program of the inverse\n"
    "temperature B, differentiated twice by AD (through SVD, slice, max and einsum): prints ln Z per site, the\n"
    "energy per site u = -d(ln Z/N)/dB and the specific heat c = B^2 d2(ln Z/N)/dB2 with 16 significant digits,\n"
    "beside Onsager's exact values for the infinite lattice (critical point B = ln(1 + sqrt 2)/2 = 0.4406868).\n"
    "\n"
    "options:\n"
    "  --beta B      inverse temperature, positive and finite (required)\n"
    "  --chi X       largest bond dimension kept, at least 1 (default 16)\n"
    "  --steps N     TRG steps, 1 to 60 (default 20)\n"
    "  --json        print one JSON object: beta, chi, steps, lnz, energy, specific_heat, exact_lnz, exact_energy,\n"
    "                exact_specific_heat (with --sweep, an array of them)\n"
    "  --sweep START:STOP:STEP\n"
    "                every B from START to STOP by STEP (e.g. 0.40:0.50:0.002): prints a table and writes a plot of u\n"
    "                and c against B, TRG points over the exact curves (one traced program serves every B; the B\n"
    "                values run concurrently, one per thread)\n"
    "  --plot FILE   where --sweep writes the plot, an SVG file (default ising_trg_sweep.svg)\n"
    "  --threads N   kernel threads ({threads})\n"
    "  -h, --help    print this help\n";

constexpr std::string_view kCommand = "example ising-trg";

double parse_beta(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v <= 0)
    usage_error("{}: --beta must be a positive finite number, got '{}'", kCommand, text);
  return v;
}

int parse_whole(std::string_view flag, std::string_view text, int lo, int hi, std::string_view range) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    usage_error("{}: {} must be a whole number {}, got '{}'", kCommand, flag, range, text);
  return v;
}

nlohmann::json values_json(double beta, int chi, int steps, const ising::TrgValues& trg,
                           const ising::OnsagerValues& exact) {
  return {{"beta", beta},
          {"chi", chi},
          {"steps", steps},
          {"lnz", trg.lnz},
          {"energy", trg.energy},
          {"specific_heat", trg.specific_heat},
          {"exact_lnz", exact.lnz},
          {"exact_energy", exact.energy},
          {"exact_specific_heat", exact.specific_heat}};
}

int run_sweep(const ising::IsingTrg& trg, const std::vector<double>& betas, int chi, int steps, bool json,
              const std::string& plot) {
  // The β values run concurrently on the Runtime's threads; the values are bitwise those of one --beta run each.
  const std::vector<ising::TrgValues> values = trg.evaluate_all(betas);
  std::vector<ising::SweepPoint> points;
  for (size_t i = 0; i < betas.size(); ++i) points.push_back({betas[i], values[i], ising::onsager(betas[i])});
  // Replaced in one rename: a failed write leaves no half-written plot (and an older plot untouched).
  write_file_atomically(plot, ising::sweep_svg(points, chi, steps));
  if (json) {
    nlohmann::json all = nlohmann::json::array();
    for (const ising::SweepPoint& p : points) all.push_back(values_json(p.beta, chi, steps, p.trg, p.exact));
    fmt::print("{}\n", all.dump());
    return 0;
  }
  fmt::print("2D Ising model by TRG: chi = {}, steps = {}; TRG derivatives by AD, exact values Onsager's\n", chi, steps);
  fmt::print("{:<8} {:>19} {:>19} {:>20} {:>20} {:>19} {:>19}\n", "beta", "ln Z/N", "exact", "u", "exact", "c",
             "exact");
  for (const ising::SweepPoint& p : points)
    fmt::print("{:<8.6g} {:>19.16g} {:>19.16g} {:>20.16g} {:>20.16g} {:>19.16g} {:>19.16g}\n", p.beta, p.trg.lnz,
               p.exact.lnz, p.trg.energy, p.exact.energy, p.trg.specific_heat, p.exact.specific_heat);
  fmt::print("plot written to {}\n", plot);
  return 0;
}

int run_ising_trg(std::span<const std::string_view> args) {
  ArgScanner scan(kCommand, args);
  std::string value;
  std::optional<double> beta;
  std::optional<std::vector<double>> sweep;
  std::string plot = "ising_trg_sweep.svg";
  int chi = 16, steps = 20, threads = 0;
  bool json = false;
  while (scan.next()) {
    if (scan.option("--beta", &value)) { beta = parse_beta(value); continue; }
    if (scan.option("--sweep", &value)) {
      try {
        sweep = ising::parse_sweep(value);
      } catch (const Error& e) {
        throw UsageError(fmt::format("{}: {}", kCommand, e.what()));  // parse_sweep escaped the user's text
      }
      continue;
    }
    if (scan.option("--plot", &value)) { plot = value; continue; }
    if (scan.option("--chi", &value)) { chi = parse_whole("--chi", value, 1, 1 << 20, "of at least 1"); continue; }
    if (scan.option("--steps", &value)) { steps = parse_whole("--steps", value, 1, 60, "from 1 to 60"); continue; }
    if (scan.option("--threads", &value)) { threads = parse_threads(kCommand, value); continue; }
    if (scan.flag("--json")) { json = true; continue; }
    usage_error("{}: unexpected argument '{}'; run 'einstage example ising-trg --help'", kCommand, scan.positional());
  }
  if (beta && sweep) usage_error("{}: give --beta or --sweep, not both", kCommand);
  if (!beta && !sweep)
    usage_error("{}: --beta is required (the inverse temperature, e.g. --beta 0.44), or --sweep", kCommand);

  RuntimeOptions options;
  options.threads = threads;
  Runtime runtime(options);
  runtime.add_module(einsum::module_descriptor());
  runtime.add_module(linalg::module_descriptor());
  const ising::IsingTrg program(runtime, chi, steps);
  if (sweep) return run_sweep(program, *sweep, chi, steps, json, plot);
  const ising::TrgValues trg = program.evaluate(*beta);
  const ising::OnsagerValues exact = ising::onsager(*beta);
  if (json) {
    fmt::print("{}\n", values_json(*beta, chi, steps, trg, exact).dump());
    return 0;
  }
  fmt::print("2D Ising model by TRG: beta = {:.16g}, chi = {}, steps = {} (a torus of 2^{} sites)\n", *beta, chi,
             steps, steps);
  fmt::print("{:<18}{:<26}{}\n", "", "TRG, derivatives by AD", "exact (Onsager)");
  fmt::print("{:<18}{:<26.16g}{:.16g}\n", "ln Z per site", trg.lnz, exact.lnz);
  fmt::print("{:<18}{:<26.16g}{:.16g}\n", "energy u", trg.energy, exact.energy);
  fmt::print("{:<18}{:<26.16g}{:.16g}\n", "specific heat c", trg.specific_heat, exact.specific_heat);
  return 0;
}

}  // namespace

int run_heisenberg_ipeps(std::span<const std::string_view> args);  // HeisenbergExample.cpp

int run_example(std::span<const std::string_view> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("usage: einstage example NAME [options]\n\nexamples:\n  ising-trg          the 2D Ising model by TRG, "
               "differentiated twice, against Onsager's solution\n  heisenberg-ipeps   the Heisenberg "
               "antiferromagnet by a C4v iPEPS, gradients through CTMRG, L-BFGS\n\nRun 'einstage example NAME "
               "--help' for its "
               "options.\n");
    return 0;
  }
  const std::span<const std::string_view> rest = args.subspan(1);
  if (args[0] == "ising-trg") {
    if (wants_help(rest)) {
      fmt::print("{}", with_threads_default(kHelp));
      return 0;
    }
    return run_ising_trg(rest);
  }
  if (args[0] == "heisenberg-ipeps") return run_heisenberg_ipeps(rest);
  usage_error("example: unknown example '{}'; the examples are [ising-trg, heisenberg-ipeps]", args[0]);
}

}  // namespace einstage::cli
