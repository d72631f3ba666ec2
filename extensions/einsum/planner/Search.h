// Tree search: subtree reconfiguration, simulated annealing over tree rotations, and the multi-trial driver.
//
// Planning stage. All of it minimises total flops (ContractionTree.h's cost model); the best tree is chosen by the one
// evaluator. Determinism: a trial's work is fixed by its options and its seed (trial_seed(seed, index)), never by the
// clock or the thread that runs it, and a budget is an allowance of work units (Deadline.h), not of time: every loop
// charges what it did, and the trials that count are the longest prefix 0..T whose work stays within the allowance
// (see search()). So a budgeted search returns the same tree in every process and at every thread count. The clock
// is a guard only: when it stops a search first (a machine much slower or busier than the calibration), the result
// depends on timing and SearchResult::stopped_by_budget says so.
// Depends on Network.h, ContractionTree.h, Greedy.h, Exact.h and SliceFinder.h; uses std::thread for trials.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Deadline.h"
#include "extensions/einsum/planner/Greedy.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>

namespace einstage::einsum {

/// Progress of a long search, reported after every finished trial (from the calling thread).
struct PlanProgress {
  int trials_done = 0;
  int trials_total = 0;      // 0 when the count is bounded only by the budget
  double best_flops = 0;     // best total flops so far (multiply-adds)
  double elapsed_s = 0;
};
using ProgressCallback = std::function<void(const PlanProgress&)>;

/// Re-solves, bottom-up, every subtree of up to `subtree_size` frontier operands exactly (solve_small) and keeps the
/// change when it lowers that subtree's flops; repeats passes until a pass improves nothing or `max_passes` ran.
/// Never returns a costlier tree than `tree`.
ContractionTree reconfigure(const Network& network, const ContractionTree& tree, int subtree_size = 8,
                            int max_passes = 8, const Deadline& deadline = {});

struct AnnealOptions {
  int64_t moves = 200000;   // rotation attempts in total (the schedule spreads them over the betas)
  double beta_start = 1.0;  // inverse temperature per bit of local cost change, linear schedule
  double beta_end = 15.0;
  uint64_t seed = 0;
  // With a finite size_target (log2 elements), the energy also counts size_weight bits per bit by which the largest
  // intermediate exceeds it, so the anneal looks for trees that fit (or nearly fit) a memory limit.
  double size_target = std::numeric_limits<double>::infinity();
  double size_weight = 1.0;
};
/// TreeSA-style annealing: at each internal node, try one of its (up to four) rotations and accept with probability
/// 2^(-beta * dE), dE the change of log2(local flops) of the two nodes involved (plus the size penalty). Returns the
/// tree of lowest energy seen (checked after every sweep); without a size target never a costlier tree than `start`.
ContractionTree anneal(const Network& network, const ContractionTree& start, const AnnealOptions& options,
                       const Deadline& deadline = {});

struct SearchOptions {
  double budget_s = 1.0;     // budget: work_for_budget(budget_s) units and a clock guard; <= 0: none (then `trials`
                             // must be > 0)
  Deadline deadline;         // if limited, used instead of budget_s (plan() passes its meter, set-up work charged)
  int trials = 0;            // 0 = as many as the budget allows
  uint64_t seed = 0;
  int threads = 1;           // workers; the result does not depend on it
  int subtree_size = 8;      // reconfiguration size per trial (0 = none)
  int64_t anneal_moves = -1; // per trial; -1 = derived from the budget (not from measured speed); 0 = no annealing
  ProgressCallback progress;
  // > 0: slicing-aware search for this memory limit (elements). A trial's greedy start is sliced to fit
  // (SliceFinder.h's slice_tree), then in a few rounds reconfigured and annealed on the network with its sliced
  // labels at extent 1 (a size penalty in the energy and a cap on reconfiguration keep every intermediate at the
  // limit) and sliced again from there; trials are scored by their total sliced flops, so trees are chosen for the
  // sliced network. SearchResult::flops is then the sliced total and SearchResult::sliced its labels.
  double slice_limit = 0;
};

struct SearchResult {
  ContractionTree tree;
  double flops = 0;
  int trials_done = 0;          // trials that count (the prefix within the allowance)
  int64_t work_units = 0;       // their work
  bool stopped_by_budget = false;  // the clock guard ended the search: the tree depends on timing
  std::vector<int> sliced;      // with slice_limit: the labels (dense ids) `tree` is sliced on to fit, so that
                                // `flops` is their sliced total
};

/// Multi-trial search: trial t starts from the best of 16 Gumbel-randomised greedy runs (alpha, temperature and noise
/// from the trial's stream; trial 0 also considers `baseline`); each start is reconfigured, annealed and reconfigured again.
/// `baseline` is always a candidate, so the result is never costlier. Trials run in index order (several at once with
/// threads > 1); trial t counts when the work of trials 0..t stays below the allowance (trial 0 always counts, cut by
/// its meter if it alone exceeds it). A trial cut by the clock guard still offers the best tree it reached: the only
/// place where timing can change the answer, and stopped_by_budget says so.
SearchResult search(const Network& network, const ContractionTree& baseline, const SearchOptions& options);

}  // namespace einstage::einsum
