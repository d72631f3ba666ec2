// Shared helpers for the kernel tests: the seeded test stream (SplitMix64), random values per dtype, tolerant
// comparison.
#pragma once

#include "ir/DType.h"
#include "support/Random.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

namespace kt {

// The shared test stream (tests/support/Random.h) with this suite's integer range and seeded constructor.
struct Rng : einstage::test::SplitMix64 {
  explicit Rng(uint64_t seed) : einstage::test::SplitMix64{seed} {}
  int64_t uniform(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }
  double unit() { return einstage::test::SplitMix64::uniform(); }
};

template <typename T> T random_value(Rng& r) {
  if constexpr (std::is_same_v<T, int64_t>) return r.uniform(-5, 5);
  else if constexpr (std::is_same_v<T, einstage::c64> || std::is_same_v<T, einstage::c128>) {
    using R = typename T::value_type;
    return T(static_cast<R>(r.unit() * 2 - 1), static_cast<R>(r.unit() * 2 - 1));
  } else return static_cast<T>(r.unit() * 2 - 1);
}

/// Relative tolerance per dtype, applied against a scale (e.g. sum of |a||b|).
template <typename T> double tolerance() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, einstage::c64>) return 2e-5;
  else if constexpr (std::is_same_v<T, int64_t>) return 0;
  else return 1e-12;
}

template <typename T> double magnitude(T v) {
  if constexpr (std::is_same_v<T, int64_t>) return std::abs(static_cast<double>(v));
  else return static_cast<double>(std::abs(v));
}

template <typename T> using Wide = std::conditional_t<
    std::is_same_v<T, int64_t>, int64_t,
    std::conditional_t<std::is_same_v<T, einstage::c64> || std::is_same_v<T, einstage::c128>, std::complex<long double>,
                       long double>>;

template <typename T> Wide<T> widen(T v) {
  if constexpr (std::is_same_v<T, einstage::c64> || std::is_same_v<T, einstage::c128>)
    return Wide<T>(v.real(), v.imag());
  else return static_cast<Wide<T>>(v);
}

template <typename T> double distance(T got, Wide<T> want) {
  if constexpr (std::is_same_v<T, int64_t>) return got == want ? 0.0 : 1e300;
  else return static_cast<double>(std::abs(widen(got) - want));
}

}  // namespace kt
