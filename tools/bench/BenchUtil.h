// Timing helpers and the workloads shared by the benchmark programs under tools/bench/ (not part of any library).
#pragma once

#include "ir/Tensor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace einstage::bench {

/// The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID): on a loaded machine it leaves out the time
/// the thread waited for a CPU, which wall time charges to whichever call was descheduled. Only for one-thread runs.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Best wall time of fn in seconds (with `cpu_time`, best thread CPU time), after one warm-up call (which plans trees
/// and compiles kernels), over at least five calls and at least `min_time` seconds of calls. The best of many is
/// the least disturbed by other processes.
inline double best_time(const std::function<void()>& fn, double min_time, bool cpu_time = false) {
  using Clock = std::chrono::steady_clock;
  auto now = [cpu_time] {
    return cpu_time ? thread_cpu_seconds() : std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  fn();
  double best = 1e300, total = 0;
  int reps = 0;
  while (total < min_time || reps < 5) {
    const double t0 = now();
    fn();
    double dt = now() - t0;
    best = std::min(best, dt);
    total += dt;
    ++reps;
  }
  return best;
}

/// The 7-matrix chain `ij,jk,kl,lm,mn,no,o->i` at n = 256 (docs/behaviour.md §3.5's anchor): subscripts and shapes.
inline std::pair<std::string, std::vector<Shape>> chain7_workload() {
  const int64_t n = 256;
  return {"ij,jk,kl,lm,mn,no,o->i", {{n, n}, {n, n}, {n, n}, {n, n}, {n, n}, {n, n}, {n}}};
}

/// The 4x4 grid with bond 8 contracted to a scalar (docs/behaviour.md §3.5's anchor): site (r, c) carries its right
/// bond h(r,c) and its down bond v(r,c); 24 labels a..x.
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

/// UTF-8 of one code point (the grid workloads need more labels than letters).
inline std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

/// A side x side grid of tensors with bond dimension `bond`, contracted to a scalar: site (r, c) carries its right
/// and down bonds. Labels are letters while 52 suffice, else CJK code points from U+4E00.
inline std::pair<std::string, std::vector<Shape>> grid_workload(int side, int64_t bond) {
  const int bonds = 2 * side * (side - 1);
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  auto label = [&](int i) {
    return bonds <= 52 ? std::string(1, letters[static_cast<size_t>(i)]) : utf8(0x4E00 + static_cast<uint32_t>(i));
  };
  auto h = [&](int r, int c) { return label(r * (side - 1) + c); };
  auto v = [&](int r, int c) { return label(side * (side - 1) + r * side + c); };
  std::string spec;
  std::vector<Shape> shapes;
  for (int r = 0; r < side; ++r)
    for (int c = 0; c < side; ++c) {
      std::string t;
      int rank = 0;
      if (c > 0) t += h(r, c - 1), ++rank;
      if (c < side - 1) t += h(r, c), ++rank;
      if (r > 0) t += v(r - 1, c), ++rank;
      if (r < side - 1) t += v(r, c), ++rank;
      spec += (spec.empty() ? "" : ",") + t;
      shapes.push_back(Shape(static_cast<size_t>(rank), bond));
    }
  return {spec + "->", shapes};
}

/// The TRG plaquette contraction `xwu,yxl,yzd,wzr->uldr` with every bond of dimension chi.
inline std::pair<std::string, std::vector<Shape>> trg_plaquette_workload(int64_t chi) {
  return {"xwu,yxl,yzd,wzr->uldr", std::vector<Shape>(4, Shape{chi, chi, chi})};
}

}  // namespace einstage::bench
