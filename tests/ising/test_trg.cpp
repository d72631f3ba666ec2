// The traced Ising TRG program (examples/ising/Trg.h) against the independent NumPy implementation of the same
// algorithm (tests/ising/trg_oracle.py: its own TRG, derivatives by Richardson-extrapolated finite differences),
// against Onsager's exact solution at χ = 16, N = 20, and its second derivative by forward-over-reverse against
// ad::grad of ad::grad. Bad sizes and temperatures fail with pinned messages.
#include "examples/ising/Onsager.h"
#include "examples/ising/Trg.h"

#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

using namespace einstage;
using namespace einstage::ising;

namespace {

const Runtime& runtime() {
  static const Runtime rt = [] {
    RuntimeOptions options;
    options.threads = 2;
    Runtime r(options);
    r.add_module(einsum::module_descriptor());
    r.add_module(linalg::module_descriptor());
    return r;
  }();
  return rt;
}

// Runs tests/ising/trg_oracle.py and returns its JSON object.
nlohmann::json oracle(double beta, int chi, int steps) {
  // One BLAS thread: the oracle's matrices are small, and the test runs beside others.
  const std::string command = fmt::format("OPENBLAS_NUM_THREADS=1 {} {}/tests/ising/trg_oracle.py {} {} {}", EINSTAGE_PYTHON,
                                          EINSTAGE_SOURCE_DIR, beta, chi, steps);
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string text;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
  REQUIRE(pclose(pipe) == 0);
  return nlohmann::json::parse(text);
}

void check_against_oracle(double beta, int chi, int steps) {
  const nlohmann::json want = oracle(beta, chi, steps);
  const TrgValues got = IsingTrg(runtime(), chi, steps).evaluate(beta);
  const double lnz = want["lnz"], energy = want["energy"], c = want["specific_heat"];
  const double c_error = want["specific_heat_error_estimate"];
  INFO(fmt::format("beta {} chi {} steps {}: lnz {:.16g} vs oracle {:.16g}, -u {:.16g} vs {:.16g}, c {:.16g} vs "
                   "{:.16g} (oracle's estimate of its error {:.2g})", beta, chi, steps, got.lnz, lnz, -got.energy,
                   -energy, got.specific_heat, c, c_error));
  CHECK(std::abs(got.lnz - lnz) <= 1e-10);
  CHECK(std::abs(got.energy - energy) <= 1e-10);
  CHECK(std::abs(got.specific_heat - c) <= std::max(1e-7, 10 * c_error));
}

}  // namespace

TEST_CASE("TRG at beta 0.4, chi 5, 5 steps matches the NumPy oracle") { check_against_oracle(0.4, 5, 5); }

// The second published point (beta 0.5, chi 20, 20 steps) is not checked yet: a singular value crosses the
// 1e-15 truncation threshold within 4e-3 of beta = 0.5, so the oracle's finite-difference stencil for u and c spans
// two bond-dimension schedules and the oracle refuses (its exit status is nonzero). It needs a stencil that stops
// short of the nearest crossing.

TEST_CASE("TRG: forward-over-reverse second derivative equals grad of grad") {
  const ExtensionRegistry* reg = &runtime().registry();
  const IsingTrg trg(runtime(), 4, 6);
  Program gg = ad::grad(ad::grad(trg.program(), {0}, reg), {0}, reg);
  const double beta = 0.45;
  const double d2 = runtime().prepare(gg).run({Tensor::scalar<double>(beta)}).at(0).at<double>({});
  const TrgValues v = trg.evaluate(beta);
  CHECK(std::abs(v.specific_heat - beta * beta * d2) <= 1e-12 * std::abs(v.specific_heat));
}

TEST_CASE("TRG at chi 16, 20 steps against Onsager") {
  const IsingTrg trg(runtime(), 16, 20);
  for (double beta : {0.40, 0.42, 0.4607, 0.50}) {
    const TrgValues v = trg.evaluate(beta);
    const OnsagerValues exact = onsager(beta);
    INFO(fmt::format("beta {}: lnz {:.12g} vs {:.12g}, u {:.10g} vs {:.10g}, c {:.8g} vs {:.8g}", beta, v.lnz,
                     exact.lnz, v.energy, exact.energy, v.specific_heat, exact.specific_heat));
    CHECK(std::abs(v.lnz - exact.lnz) <= 1e-5 * exact.lnz);
    if (std::abs(beta - critical_beta()) >= 0.02) {
      CHECK(std::abs(v.energy - exact.energy) <= 1e-3 * std::abs(exact.energy));
      CHECK(std::abs(v.specific_heat - exact.specific_heat) <= 1e-2 * exact.specific_heat);
    }
  }
}

TEST_CASE("TRG: bad sizes and temperatures name the argument") {
  CHECK(test::error_of([] { bond_schedule(0, 5); }) == "ising-trg: chi = 0 must be at least 1");
  CHECK(test::error_of([] { bond_schedule(4, 0); }) ==
        "ising-trg: steps = 0 must be in 1..60 (the lattice has 2^steps sites)");
  CHECK(test::error_of([] { bond_schedule(4, 61); }) ==
        "ising-trg: steps = 61 must be in 1..60 (the lattice has 2^steps sites)");
  const IsingTrg trg(runtime(), 2, 1);
  CHECK(test::error_of([&] { trg.evaluate(-0.5); }) == "ising-trg: beta = -0.5 must be positive and finite");
  CHECK(test::error_of([&] { trg.evaluate(0); }) == "ising-trg: beta = 0 must be positive and finite");
  CHECK(test::error_of([&] { trg.evaluate(std::numeric_limits<double>::infinity()); }) ==
        "ising-trg: beta = inf must be positive and finite");
  CHECK(std::isfinite(trg.evaluate(0.3).lnz));
}
