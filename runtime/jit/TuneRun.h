// TuneRun: the measurement behind `einstage tune`: the packed GEMM's register tile and MC block timed on this CPU,
// bounded in time, with a deterministic choice given the timings. Stage: runtime (JIT internals). Depends on
// runtime/jit/{KernelCache,Tuning}.h; no LLVM type.
//
// Per real dtype (f64, then f32), on one thread:
//   tiles   the model's pick (TileModel.h: register_tile) and the next cheapest tiles by its cost estimate that keep
//           the FMA units busy with headroom, at most kTuneTiles in all. Each is compiled (or loaded from the disk
//           cache) and timed on the macro-kernel's inner loops over packed panels: an MC x KC block of A against
//           KC x N of B, N about 384 columns, MC its model blocks (Blocking.h: blocking_for_kc with the model's KC),
//           C accumulated in place. Every candidate is timed once to warm up, then kTuneRepeats times, round-robin
//           (a load change on the machine hits every candidate alike); its rate is the best of them (other load only
//           slows a sweep down: medians of equal candidates moved by up to 7% from run to run on a shared machine).
//   MC      the chosen tile at its model MC, half of it and twice it (multiples of mr), timed the same way.
// Choice: the model's value stays unless another candidate's rate is at least kTuneMargin higher (5%: about the
// run-to-run spread of equal candidates on a machine shared with builds), and still is when the two are timed again
// on their own (the model's better rate of the two rounds against the challenger's worse); then the
// fastest wins (ties: the earlier candidate). NC is the model's for the chosen tile and KC. Candidates are added only
// while the run is within its budget (compiling a kernel takes 25-200 ms, so a first run on a CPU compiles the most
// and later runs load them from the disk cache). Nothing here changes bits (Tuning.h).
#pragma once

#include "runtime/jit/Tuning.h"

#include <string>
#include <vector>

namespace einstage {

class KernelCache;

inline constexpr int kTuneTiles = 4;
inline constexpr int kTuneRepeats = 15;
inline constexpr double kTuneMargin = 0.05;

/// One timed candidate: the best GFLOP/s of its repeats.
struct TuneMeasurement {
  DType dtype = DType::f64;
  GemmParams params;  // nc unused
  double gflops = 0;
  bool chosen = false;
};

struct TuneResult {
  KernelTuning tuning;  // what was chosen (the model's where nothing beat it)
  std::vector<TuneMeasurement> measured;
  double seconds = 0;
  bool budget_reached = false;  // some candidates were skipped to stay within the budget
  /// One line per measurement ("f64 24x8 mc 240 kc 256: 51.2 GFLOP/s, chosen"), for the tuning file's notes.
  std::vector<std::string> notes() const;
};

/// Times the candidates on `cache`'s JIT (the host's) within about `budget_seconds`; the vector width is the host's
/// (host_tuning_key().avx512). Throws Error(runtime) when `cache` compiles for another width (nothing is measured).
TuneResult tune_kernels(KernelCache& cache, double budget_seconds);

}  // namespace einstage
