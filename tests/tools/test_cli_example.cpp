// `einstage example ising-trg`, run as a separate process: the JSON object's keys and values (the TRG values those
// of the library's IsingTrg, the exact ones Onsager's), the text table with 16 significant digits, and the usage
// errors for bad flags, each naming the flag (status 2, one line on stderr).
#include "examples/ising/Onsager.h"
#include "examples/ising/Trg.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "support/Cli.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace einstage;

TEST_CASE("example ising-trg --json: the keys, the TRG values and Onsager's") {
  test::TempDir dir;
  test::CliRun r = test::run_cli("example ising-trg --beta 0.4 --chi 5 --steps 5 --json --threads 1", dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"beta", "chi", "energy", "exact_energy", "exact_lnz", "exact_specific_heat",
                                         "lnz", "specific_heat", "steps"});
  CHECK(j["beta"] == 0.4);
  CHECK(j["chi"] == 5);
  CHECK(j["steps"] == 5);
  RuntimeOptions options;
  options.threads = 1;
  Runtime rt(options);
  rt.add_module(einsum::module_descriptor());
  rt.add_module(linalg::module_descriptor());
  const ising::TrgValues v = ising::IsingTrg(rt, 5, 5).evaluate(0.4);
  CHECK(std::abs(j["lnz"].get<double>() - v.lnz) <= 1e-13);
  CHECK(std::abs(j["energy"].get<double>() - v.energy) <= 1e-12);
  CHECK(std::abs(j["specific_heat"].get<double>() - v.specific_heat) <= 1e-10);
  const ising::OnsagerValues exact = ising::onsager(0.4);
  CHECK(j["exact_lnz"].get<double>() == exact.lnz);
  CHECK(j["exact_energy"].get<double>() == exact.energy);
  CHECK(j["exact_specific_heat"].get<double>() == exact.specific_heat);
}

TEST_CASE("example ising-trg prints the table with 16 significant digits") {
  test::TempDir dir;
  test::CliRun r = test::run_cli("example ising-trg --beta 0.4 --chi 5 --steps 5 --threads 1", dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("2D Ising model by TRG: beta = 0.4, chi = 5, steps = 5 (a torus of 2^5 sites)\n") == 0);
  const ising::OnsagerValues exact = ising::onsager(0.4);
  CHECK(r.out.find(fmt::format("{:.16g}\n", exact.lnz)) != std::string::npos);
  CHECK(r.out.find("\nln Z per site     0.89197886867471") != std::string::npos);  // the oracle's 0.8919788686747141
  CHECK(r.out.find("\nenergy u          -1.29442471283") != std::string::npos);    // and its -1.2944247128388
}

TEST_CASE("example ising-trg: bad flags are usage errors naming the flag") {
  test::TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {"--beta 0 --chi 5 --steps 5", "example ising-trg: --beta must be a positive finite number, got '0'"},
      {"--beta -0.3", "example ising-trg: --beta must be a positive finite number, got '-0.3'"},
      {"--beta nan", "example ising-trg: --beta must be a positive finite number, got 'nan'"},
      {"--beta inf", "example ising-trg: --beta must be a positive finite number, got 'inf'"},
      {"--beta 0.4x", "example ising-trg: --beta must be a positive finite number, got '0.4x'"},
      {"--beta 0.4 --chi 0", "example ising-trg: --chi must be a whole number of at least 1, got '0'"},
      {"--beta 0.4 --steps 0", "example ising-trg: --steps must be a whole number from 1 to 60, got '0'"},
      {"--beta 0.4 --steps 61", "example ising-trg: --steps must be a whole number from 1 to 60, got '61'"},
      {"--chi 4 --sweep 0.5:0.4:0.01", "example ising-trg: --sweep '0.5:0.4:0.01': STOP is below START"},
      {"--chi 4 --sweep 0.4:0.5:x", "example ising-trg: --sweep '0.4:0.5:x': STEP 'x' is not a finite number"},
      {"--chi 4", "example ising-trg: --beta is required (the inverse temperature, e.g. --beta 0.44), or --sweep"},
      {"--beta 0.4 --size 3", "example ising-trg: unknown option '--size'; run 'einstage example ising-trg --help'"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args);
    test::CliRun r = test::run_cli("example ising-trg " + args, dir);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "einstage: " + message + "\n");
  }
  test::CliRun r = test::run_cli("example frobnicate", dir);
  CHECK(r.err == "einstage: example: unknown example 'frobnicate'; the examples are [ising-trg, heisenberg-ipeps]\n");
}

TEST_CASE("example ising-trg --sweep writes the SVG plot, and a plot that cannot be written leaves no file") {
  test::TempDir dir;
  test::CliRun ok = test::run_cli("example ising-trg --chi 2 --steps 2 --sweep 0.40:0.42:0.02 --plot p.svg --threads 1",
                                  dir);
  REQUIRE(ok.status == 0);
  CHECK(ok.out.find("\n0.4 ") != std::string::npos);
  CHECK(ok.out.find("\n0.42 ") != std::string::npos);
  std::ifstream svg(dir.path() / "p.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(text.find("<svg") != std::string::npos);
  CHECK(text.find("</svg>") != std::string::npos);

  test::CliRun bad = test::run_cli("example ising-trg --chi 2 --steps 2 --sweep 0.40:0.42:0.02 --plot missing/p.svg", dir);
  CHECK(bad.status != 0);
  CHECK(bad.out.empty());
  CHECK(bad.err.find("einstage: cannot write 'missing/p.svg': ") == 0);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "missing"));
}
