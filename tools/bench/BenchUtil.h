// Timing helpers and the workloads shared by the benchmark programs under tools/bench/ (not part of any library).
#pragma once

#include "ir/Tensor.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

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

/// The 7-matrix chain `ij,jk,kl,lm,mn,no,o->i` at n = 256 (BEHAVIOUR §3.5's anchor): subscripts and shapes.
inline std::pair<std::string, std::vector<Shape>> chain7_workload() {
  const int64_t n = 256;
  return {"ij,jk,kl,lm,mn,no,o->i", {{n, n}, {n, n}, {n, n}, {n, n}, {n, n}, {n, n}, {n}}};
}

/// The 4x4 grid with bond 8 contracted to a scalar (BEHAVIOUR §3.5's anchor): site (r, c) carries its right bond
/// h(r,c) and its down bond v(r,c); 24 labels a..x.
inline std::pair<std::string, std::vector<Shape>> grid4x4_workload() {
  const std::string letters = "abcdefghijklmnopqrstuvwx";
  auto h = [&](int r, int c) { return letters[static_cast<size_t>(r * 3 + c)]; };
  auto v = [&](int r, int c) { return letters[static_cast<size_t>(12 + r * 4 + c)]; };
  std::string spec;
  std::vector<Shape> shapes;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      std::string t;
      if (c > 0) t += h(r, c - 1);
      if (c < 3) t += h(r, c);
      if (r > 0) t += v(r - 1, c);
      if (r < 3) t += v(r, c);
      spec += (spec.empty() ? "" : ",") + t;
      shapes.push_back(Shape(t.size(), 8));
    }
  return {spec + "->", shapes};
}

}  // namespace einstage::bench
