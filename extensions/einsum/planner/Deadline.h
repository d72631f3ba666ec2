// Deadline: the limit every long planner loop checks: a work allowance counted in deterministic units, and a
// wall-clock guard.
//
// Planning stage utility, header-only. A budget in seconds becomes an allowance of work units (work_for_budget):
// every budgeted loop (greedy runs, the DPs, reconfiguration, annealing) charges the units of what it did, a count
// that depends only on its inputs, and stops when the allowance is spent. So a budgeted plan does the same work, and
// returns the same tree, in every process, on every machine and at every thread count. The units are calibrated to
// be about one nanosecond each on the reference machine (docs/planning.md, "Determinism and budgets"); per network
// the true cost of a unit varies by about +-40% (mostly annealing, whose label merges mispredict more on random
// graphs), so the allowance is 65% of the budget and on that machine the work ends before the clock. The clock is
// only a guard, so the budget is never overshot on a slower or loaded machine: when it fires first, the answer
// depends on timing, and the planners say so (clock_expired(); PlanResult::stopped_by_budget).
// Copies share one meter; with_allowance() starts a fresh one (a trial on another thread gets its own). A meter is
// charged by one thread at a time. A default-constructed deadline never expires and counts nothing.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

namespace einstage::einsum {

/// Work units per second of budget: 65% of the calibrated rate of about 1e9 units per second.
inline constexpr double kWorkUnitsPerSecond = 0.65e9;
/// The allowance of a budget of `seconds` for a network of `num_inputs` inputs (max int64 for no budget). Above 1000
/// inputs the working set leaves the caches and every loop is slower per unit (1.5x at 10 000 inputs on the reference
/// machine), so the allowance shrinks by 1 + 0.15 log2(n / 1000).
inline int64_t work_for_budget(double seconds, int num_inputs = 0) {
  if (!(seconds > 0)) return std::numeric_limits<int64_t>::max();
  const double scale = num_inputs > 1000 ? 1.0 + 0.15 * std::log2(num_inputs / 1000.0) : 1.0;
  const double units = seconds * kWorkUnitsPerSecond / scale;
  return units >= 9.0e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(units);
}

// Work units per operation of each budgeted loop, calibrated so that one unit is about one nanosecond on the
// reference machine (`einstage_bench_planner --calibrate` prints the measured nanoseconds per unit of each loop).
// Changing one changes which trees budgeted plans return, so they are constants of the planner, not settings.
inline constexpr int64_t kGreedyUnitsPerOp = 64;          // a queue push or pop of a greedy run
inline constexpr int64_t kOptEinsumGreedyUnitsPerOp = 170; // a candidate scored or a pop of the opt_einsum rule
inline constexpr int64_t kEvaluateUnitsPerLabel = 48;      // evaluate(): per label of an input (and per input)
inline constexpr int64_t kAnnealUnitsPerMove = 57;         // a rotation tried, plus per label of the four sets it reads:
inline constexpr int64_t kAnnealUnitsPerLabel = 4;
inline constexpr int64_t kAnnealUnitsPerSweepNode = 6;     // the total after each sweep, per internal node
inline constexpr int64_t kReconfigureUnitsPerCall = 1000;  // one subtree re-solved, plus its DP's pairs:
inline constexpr int64_t kDpUnitsPerPair = 4;              // a (subset, split) pair of solve_small
inline constexpr int64_t kConnectedDpUnitsPerVisit = 3;    // per 2 pairs of table entries the connected DP visits,
inline constexpr int64_t kConnectedDpUnitsPerJoin = 60;    // and per visited pair that shares a label (joinable)
inline constexpr int64_t kIntervalDpUnitsPerSplit = 3;     // a (range, split) of interval_optimal()

class Deadline {
 public:
  Deadline() = default;
  /// A clock guard of `seconds` (<= 0: none) and no work limit.
  explicit Deadline(double seconds) {
    if (seconds > 0) {
      unlimited_ = false;
      end_ = std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    }
  }
  /// A clock guard of `seconds` and a fresh meter with `allowance` units.
  Deadline(double seconds, int64_t allowance) : Deadline(seconds) { meter_ = std::make_shared<Meter>(Meter{0, allowance}); }

  /// The same clock guard with a fresh meter of `allowance` units.
  Deadline with_allowance(int64_t allowance) const {
    Deadline d = *this;
    d.meter_ = std::make_shared<Meter>(Meter{0, allowance});
    return d;
  }
  /// Adds the units of work just done to the meter (no-op without one).
  void charge(int64_t units) const {
    if (meter_) meter_->used += units;
  }
  int64_t used() const { return meter_ ? meter_->used : 0; }
  /// Units left before the allowance is spent (max int64 without a meter).
  int64_t allowance_left() const {
    if (!meter_ || meter_->limit == std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
    return meter_->limit > meter_->used ? meter_->limit - meter_->used : 0;
  }
  bool work_spent() const { return meter_ && meter_->used >= meter_->limit; }
  bool clock_expired() const { return !unlimited_ && std::chrono::steady_clock::now() >= end_; }
  bool expired() const { return work_spent() || clock_expired(); }
  /// No clock guard and no work limit.
  bool unlimited() const { return unlimited_ && allowance_left() == std::numeric_limits<int64_t>::max(); }
  /// Seconds left on the clock (0 when passed; a large number without a clock).
  double remaining() const {
    if (unlimited_) return 1e30;
    const double left = std::chrono::duration<double>(end_ - std::chrono::steady_clock::now()).count();
    return left > 0 ? left : 0;
  }
  /// The same clock moved `seconds` earlier (no clock stays none), sharing the meter: room kept for work after a loop.
  Deadline earlier_by(double seconds) const {
    Deadline d = *this;
    if (!unlimited_)
      d.end_ -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }

 private:
  struct Meter {
    int64_t used = 0;
    int64_t limit = std::numeric_limits<int64_t>::max();
  };
  bool unlimited_ = true;
  std::chrono::steady_clock::time_point end_{};
  std::shared_ptr<Meter> meter_;
};

}  // namespace einstage::einsum
