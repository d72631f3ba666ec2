// SplitMix64, the seeded random stream of the test suites: the same numbers on every platform and in every process,
// so a failing property case is reproduced from the seed it prints. Suites map next() to their own value ranges on
// top of the helpers here. (The planner's own stream is extensions/einsum/planner/Random.h; its uniform() excludes 0
// for the Gumbel draws, which the tests do not need.) Test-only; depends on nothing from einstage.
#pragma once

#include <cstdint>

namespace einstage::test {

struct SplitMix64 {
  uint64_t state;

  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) from the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [-1, 1).
  double symmetric() { return 2 * uniform() - 1; }
  /// next() % n for n > 0 (slightly biased; fine for choosing cases).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return uniform() < p; }
};

}  // namespace einstage::test
