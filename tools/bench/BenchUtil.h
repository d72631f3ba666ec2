// Timing helpers shared by the benchmark programs under tools/bench/ (not part of any library).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>

namespace einstage::bench {

/// Best wall time of fn in seconds, after one warm-up call (which plans trees and compiles kernels), over at least
/// five calls and at least `min_time` seconds of calls. The best of many is the least disturbed by other processes.
inline double best_time(const std::function<void()>& fn, double min_time) {
  using Clock = std::chrono::steady_clock;
  fn();
  double best = 1e300, total = 0;
  int reps = 0;
  while (total < min_time || reps < 5) {
    auto t0 = Clock::now();
    fn();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
    ++reps;
  }
  return best;
}

}  // namespace einstage::bench
