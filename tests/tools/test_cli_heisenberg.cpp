// `einstage example heisenberg-ipeps`, run as a separate process: an optimisation at D = 2 reaching the published
// C4v optimum (energy −0.66023109348 per site, staggered magnetisation 0.3911) with its JSON keys, progress lines on
// stderr and the saved parameters, re-evaluated at a larger χ with --load --evaluate; and the usage errors, each
// naming the flag (status 2, one line on stderr); --plot's SVG holds one point per accepted evaluation.
#include "support/Cli.h"
#include "support/TempDir.h"
#include "ir/Npy.h"
#include "ir/Tensor.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace einstage;

TEST_CASE("example heisenberg-ipeps: optimise, save, re-evaluate at a larger chi") {
  test::TempDir dir;
  test::CliRun r =
      test::run_cli("example heisenberg-ipeps --D 2 --chi 8 --seed 3 --json --save a.npy --plot p.svg --threads 1", dir);
  REQUIRE(r.status == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"D", "chi", "energy", "magnetization", "iterations", "evaluations", "seconds"})
    CHECK(j.contains(key));
  CHECK(j["D"] == 2);
  CHECK(j["chi"] == 8);
  CHECK(std::abs(j["energy"].get<double>() - -0.66023109348) < 1e-8);
  CHECK(std::abs(j["magnetization"].get<double>() - 0.3911) < 1e-3);
  CHECK(j["evaluations"].get<int>() > 10);
  CHECK(r.err.find("eval    1  energy ") == 0);  // one progress line per evaluation
  CHECK(std::filesystem::exists(dir.file("a.npy")));
  // The plot: one circle per accepted evaluation (a progress line with an energy), and the last one's energy.
  std::ifstream in(dir.file("p.svg"));
  std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t circles = 0, lines = 0;
  for (size_t p = svg.find("<circle "); p != std::string::npos; p = svg.find("<circle ", p + 1)) ++circles;
  for (size_t p = r.err.find("  energy "); p != std::string::npos; p = r.err.find("  energy ", p + 1)) ++lines;
  CHECK(svg.rfind("<?xml version=\"1.0\"", 0) == 0);
  CHECK(svg.find("</svg>\n") == svg.size() - 7);
  CHECK(circles == lines);
  CHECK(circles > 10);

  test::CliRun e = test::run_cli("example heisenberg-ipeps --load a.npy --chi 16 --evaluate --threads 1", dir);
  REQUIRE(e.status == 0);
  CHECK(e.out.find("Heisenberg antiferromagnet, C4v iPEPS: D = 2, chi = 16\nenergy per site            -0.66023") == 0);
  CHECK(e.err.empty());
}

TEST_CASE("example heisenberg-ipeps: bad input names the flag") {
  test::TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {"--D 0", "example heisenberg-ipeps: --D must be a whole number from 1 to 16, got '0'"},
      {"--D 2 --chi 3",
       "example heisenberg-ipeps: --chi 3 is below D^2 = 4 (D = 2); the environment must hold at least one "
       "double-layer bond"},
      {"--evaluate", "example heisenberg-ipeps: --evaluate needs --load FILE (the parameters to evaluate)"},
      {"--frob", "example heisenberg-ipeps: unknown option '--frob'"},
      {"--adjoint reverse", "example heisenberg-ipeps: --adjoint must be fixed-point or unrolled, got 'reverse'"},
      {"--evaluate --plot p.svg",
       "example heisenberg-ipeps: --plot draws an optimisation's progress; drop it with --evaluate"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args);
    test::CliRun r = test::run_cli("example heisenberg-ipeps " + args, dir);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("einstage: " + message) == 0);
  }
  // A file of the wrong shape, and one that is missing.
  write_npy(dir.file("bad.npy"), Tensor::zeros(DType::f64, {2, 2, 2, 3, 2}));
  test::CliRun bad = test::run_cli("example heisenberg-ipeps --load bad.npy --evaluate", dir);
  CHECK(bad.status == 2);
  CHECK(bad.err ==
        "einstage: example heisenberg-ipeps: 'bad.npy' holds f64[2,2,2,3,2] but the parameters must be f64[2,D,D,D,D] "
        "(physical dimension 2, bond dimension D on four legs), as --save writes them\n");
  write_npy(dir.file("f32.npy"), Tensor::zeros(DType::f32, {2, 2, 2, 2, 2}));
  test::CliRun f32 = test::run_cli("example heisenberg-ipeps --load f32.npy --evaluate", dir);
  CHECK(f32.status == 2);
  CHECK(f32.err.find("einstage: example heisenberg-ipeps: 'f32.npy' holds f32[2,2,2,2,2] but the parameters must be "
                     "f64[2,D,D,D,D]") == 0);
  test::CliRun missing = test::run_cli("example heisenberg-ipeps --load missing.npy --evaluate", dir);
  CHECK(missing.status != 0);
  CHECK(missing.err.find("missing.npy") != std::string::npos);
}
