// The traced Ising TRG program (examples/ising/Trg.h) against the independent NumPy implementation of the same
// algorithm (tests/ising/trg_oracle.py: its own TRG, derivatives by Richardson-extrapolated finite differences) and
// against the values the paper's code and its ports publish, against Onsager's exact solution at χ = 16, N = 20, and
// its second derivative by forward-over-reverse against ad::grad of ad::grad. Bad sizes and temperatures fail with
// pinned messages.
#include "examples/ising/Onsager.h"
#include "examples/ising/Trg.h"

#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "support/ErrorOf.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
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

TrgValues check_against_oracle(double beta, int chi, int steps) {
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
  // The oracle's own error estimate must leave room for the 1e-10 check.
  CHECK(want["energy_error_estimate"].get<double>() <= 1e-11);
  return got;
}

}  // namespace

// The published values: ln Z/N at beta 0.4, chi 5, 5 steps is the tensorgrad result its ports test against
// (`python 1_ising_TRG/ising.py -chi 5 -Niter 5`); ln Z/N and d(ln Z/N)/d beta at beta 0.5, chi 20, 20 steps are
// those in TensorNetworkAD.jl's README (trg(a, 20, 20) and its Zygote gradient).
TEST_CASE("TRG at beta 0.4, chi 5, 5 steps matches the NumPy oracle and the published value") {
  const TrgValues got = check_against_oracle(0.4, 5, 5);
  CHECK(std::abs(got.lnz - 0.8919788686747141) <= 1e-10);
}

// At beta 0.5 the step-2 matrices have rank 4 of 16: the oracle holds the truncation of beta 0.5 at its stencil
// points (trg_oracle.py says why), and einstage keeps the modes below the threshold as exact zeros.
TEST_CASE("TRG at beta 0.5, chi 20, 20 steps matches the NumPy oracle and the published values") {
  const TrgValues got = check_against_oracle(0.5, 20, 20);
  CHECK(std::abs(got.lnz - 1.0257933734351765) <= 1e-10);
  CHECK(std::abs(-got.energy - 1.7455677143228514) <= 1e-10);
}

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

// The sweep runs its β values concurrently on the Runtime's two threads: each value must carry the bits of a single
// evaluation, in the order given (a truncating χ, so the split SVD and the zero-mode masks are on the path).
TEST_CASE("TRG: evaluate_all gives the bits of one evaluate per beta, in order") {
  const IsingTrg trg(runtime(), 6, 7);
  const std::vector<double> betas{0.50, 0.40, 0.4406868, 0.43, 0.47, 0.41, 0.45};
  const std::vector<TrgValues> all = trg.evaluate_all(betas);
  REQUIRE(all.size() == betas.size());
  for (size_t i = 0; i < betas.size(); ++i) {
    const TrgValues one = trg.evaluate(betas[i]);
    INFO(fmt::format("beta {}: c {:.17g} in the sweep, {:.17g} alone", betas[i], all[i].specific_heat,
                     one.specific_heat));
    CHECK(std::memcmp(&all[i], &one, sizeof one) == 0);
  }
  CHECK(trg.evaluate_all({}).empty());
  CHECK(test::error_of([&] { trg.evaluate_all(std::vector<double>{0.4, -1.0}); }) ==
        "ising-trg: beta = -1 must be positive and finite");
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
