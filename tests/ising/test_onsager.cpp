// Onsager's exact solution (examples/ising/Onsager.h) against values known in closed form (βc, ln Z at βc through
// Catalan's constant, u(βc) = −√2, K and E at k = 1/√2), against the high- and low-temperature expansions, and u and
// c against finite differences of the module's own ln Z quadrature (an independent route: the integral, not K, E).
#include "examples/ising/Onsager.h"

#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <numbers>

using namespace einstage::ising;

namespace {

// Richardson-extrapolated five-point differences of ln Z (steps h and h/2): first and second derivative.
struct Differences {
  double d1, d2;
};
Differences differences(double beta) {
  auto five = [&](double h) {
    double f[5];
    for (int k = -2; k <= 2; ++k) f[k + 2] = onsager(beta + k * h).lnz;
    return Differences{(f[0] - 8 * f[1] + 8 * f[3] - f[4]) / (12 * h),
                       (-f[0] + 16 * f[1] - 30 * f[2] + 16 * f[3] - f[4]) / (12 * h * h)};
  };
  Differences a = five(2e-3), b = five(1e-3);
  return {(16 * b.d1 - a.d1) / 15, (16 * b.d2 - a.d2) / 15};
}

}  // namespace

TEST_CASE("Onsager: closed forms at the critical point and the elliptic integrals") {
  const double bc = critical_beta();
  CHECK(bc == doctest::Approx(0.44068679350977151).epsilon(1e-15));
  const double catalan = 0.915965594177219015054603514932;
  const OnsagerValues v = onsager(bc);
  CHECK(std::abs(v.lnz - (2 * catalan / std::numbers::pi + std::log(2.0) / 2)) < 1e-14);
  CHECK(std::abs(v.energy + std::sqrt(2.0)) < 1e-14);
  CHECK(v.specific_heat > 10);  // logarithmic divergence: large at βc in floating point
  CHECK(onsager(bc - 1e-6).specific_heat > onsager(bc - 1e-3).specific_heat);
  const EllipticKE one = elliptic_ke(1.0);  // k = 0
  CHECK(std::abs(one.k - std::numbers::pi / 2) < 1e-15);
  CHECK(std::abs(one.e - std::numbers::pi / 2) < 1e-15);
  const EllipticKE half = elliptic_ke(std::sqrt(0.5));  // k = 1/√2, the lemniscatic case
  CHECK(std::abs(half.k - 1.8540746773013719) < 1e-15);
  CHECK(std::abs(half.e - 1.3506438810476755) < 1e-12);
  CHECK(std::isinf(elliptic_ke(0.0).k));
}

TEST_CASE("Onsager: high- and low-temperature expansions") {
  // β → 0: ln Z/N = ln 2 + 2 ln cosh β + tanh⁴β + O(tanh⁶β) (one plaquette per site in the high-T expansion).
  for (double beta : {0.01, 0.02}) {
    CAPTURE(beta);
    const double t = std::tanh(beta);
    CHECK(std::abs(onsager(beta).lnz - (std::log(2.0) + 2 * std::log(std::cosh(beta)) + std::pow(t, 4))) <
          3 * std::pow(t, 6));
  }
  // β → ∞: ln Z/N = 2β + e^{−8β} + O(e^{−12β}) (one flipped spin costs 8β; Z counts both ground states, 1/N → 0).
  for (double beta : {1.5, 2.0}) {
    CAPTURE(beta);
    CHECK(std::abs(onsager(beta).lnz - (2 * beta + std::exp(-8 * beta))) < 3 * std::exp(-12 * beta));
    CHECK(std::abs(onsager(beta).energy + 2) < 1e-4);
  }
}

TEST_CASE("Onsager: u and c from K and E agree with differences of the ln Z quadrature") {
  for (double beta : {0.2, 0.3, 0.4, 0.42, 0.46, 0.5, 0.6, 0.8}) {
    CAPTURE(beta);
    const OnsagerValues v = onsager(beta);
    const Differences d = differences(beta);
    CHECK(std::abs(v.energy + d.d1) < 1e-9 * std::abs(v.energy));  // the differences lose digits near βc
    CHECK(std::abs(v.specific_heat - beta * beta * d.d2) < 1e-6 * v.specific_heat);
  }
}
