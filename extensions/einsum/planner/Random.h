// SplitMix64: the one seeded random stream of the planner (and of the planner benchmark's network generator).
//
// Planning stage utility. docs/networks.md (Generators) relies on it bit for bit; every randomised optimiser draws from
// one of these, seeded per trial, so plans never depend on std::random_device, the standard library's distributions,
// thread scheduling or process. Header-only; depends on nothing.
#pragma once

#include <cmath>
#include <cstdint>

namespace einstage::einsum {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// next() % n, exactly as the benchmark generators' randint (slightly biased; kept for the generator's fingerprints).
  uint64_t randint(uint64_t n) { return next() % n; }
  /// Uniform in (0, 1): 53 random bits, never exactly 0 or 1.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  /// Standard Gumbel variate.
  double gumbel() { return -std::log(-std::log(uniform())); }

 private:
  uint64_t state_;
};

/// A well-mixed seed for trial `index` of a search seeded with `seed` (independent of thread count).
inline uint64_t trial_seed(uint64_t seed, uint64_t index) {
  SplitMix64 mix(seed ^ (0xD1B54A32D192ED03ULL * (index + 1)));
  return mix.next();
}

}  // namespace einstage::einsum
