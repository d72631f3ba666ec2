// Greedy contraction ordering (deterministic, optionally randomised with a seeded stream).
//
// Planning stage. Each round contracts the live pair with the lowest score among pairs that share at least one label;
// when no pair shares a label, the remaining operands are joined by outer products. What is minimised per round:
//   * GreedyCost::memory_removed (default, opt_einsum's "greedy"): score = |result| - alpha * (|left| + |right|),
//     i.e. with alpha = 1 the number of elements the step adds to live memory (negative = memory freed). Outer
//     products at the end join the two smallest operands first (ties: smaller id).
//   * GreedyCost::smallest_result (the reference system's rule): score = |result|; outer products at the end join
//     the two smallest ids.
//   * GreedyCost::opt_einsum: opt_einsum's greedy reproduced: the memory_removed score, but operands with equal label
//     sets are multiplied first (Hadamard products), only non-output labels that not every input carries connect
//     operands, each new operand queues only its single best pair, ties go by (score, larger id, smaller id), and the
//     final outer products join the operands with the smallest output part first.
// Neither minimises total flops; they are fast starting points that the other optimisers refine.
// memory_removed and smallest_result queue every pair and break ties by (score, result size, smaller id, larger id):
// the result depends only on the network and options, and the result-size key makes memory_removed start a matrix
// chain at its vector end (both ends free the same memory, the vector end makes the smaller result).
// With temperature > 0 the score becomes sgnlog2(score) - temperature * g, g a Gumbel variate drawn from a
// SplitMix64 stream seeded by `seed` (the random-greedy of cotengra); temperature 0 draws nothing.
// A candidate queue (binary heap with lazy deletion) and per-label carrier lists make a run O(E log E) for E
// candidate pairs. Depends on Network.h and ContractionTree.h only.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Deadline.h"
#include "extensions/einsum/planner/PlanKind.h"  // GreedyCost

#include <cstdint>
#include <string_view>
#include <optional>

namespace einstage::einsum {

std::string_view to_string(GreedyCost cost);  // "memory_removed", "smallest_result", "opt_einsum"
std::optional<GreedyCost> parse_greedy_cost(std::string_view text);

struct GreedyOptions {
  GreedyCost cost = GreedyCost::memory_removed;
  double alpha = 1.0;        // weight of the operand sizes in memory_removed (cotengra's costmod)
  double temperature = 0.0;  // 0 = deterministic greedy, > 0 = Gumbel-perturbed scores
  uint64_t seed = 0;         // used only when temperature > 0
  const Deadline* deadline = nullptr;  // greedy_until only: checked every 256 queue pops
};

/// Greedy steps over ids (inputs 0..n-1, step k's result n+k); always a valid tree.
ContractionTree greedy(const Network& network, const GreedyOptions& options = {});

/// The same run, abandoned (nullopt) when options.deadline expires before it finishes.
std::optional<ContractionTree> greedy_until(const Network& network, const GreedyOptions& options);

/// The cheapest (by evaluate()) of the three deterministic rules; ties keep the earlier of memory_removed,
/// opt_einsum, smallest_result. `rule` receives the winner's name if given. With a deadline, the first rule
/// (memory_removed) always completes, so there is always a tree, and the other two are skipped or abandoned once it
/// expires; `complete` (if given) says whether all three ran, `first_overran` whether the deadline had already
/// expired when the first rule finished (the budget was smaller than one greedy run).
ContractionTree best_greedy(const Network& network, GreedyCost* rule = nullptr, const Deadline& deadline = {},
                            bool* complete = nullptr, bool* first_overran = nullptr);

}  // namespace einstage::einsum
