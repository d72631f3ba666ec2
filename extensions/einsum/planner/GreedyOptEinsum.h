// The opt_einsum greedy rule (GreedyCost::opt_einsum), planner-internal: Greedy.cpp dispatches to it.
//
// Planning stage. A faithful reproduction of opt_einsum's greedy (paths.py, ssa_greedy_optimize with the default
// "memory-removed" cost), because "never worse than opt_einsum's greedy" is a goal we measure against and the
// reproduction must make the same choices. What it does, step by step:
//   * "output" is the output labels plus every label that all inputs carry (it cannot be summed before the end);
//   * operands are keyed by their label set: inputs with an identical set are multiplied first (Hadamard products),
//     and whenever a step produces a set that a live operand already has, the two are multiplied at once; the
//     product takes over that key, so queued candidates naming the key stay valid (as in opt_einsum, where
//     candidates name keys, not ids);
//   * candidates are only pairs sharing a non-output label; cost = |result| - |left| - |right| computed in *exact*
//     integers (sizes are products of extents; double precision changes the answer on large lattices: 155-156
//     instead of 152 on the 100x100 grid), queued with the key (cost, larger id, smaller id), ids being the SSA ids
//     when the candidate was queued;
//   * at the start, per label (carriers in id order), each carrier queues its best pair with a later carrier; after a
//     step, the new operand queues only its best pair with its neighbours; obsolete entries are skipped on pop;
//   * when no pair shares a label, outer products join the two operands whose output part is smallest (ties: id).
// Exact integers saturate at 2^512 (far beyond any tensor that could exist); only then do ties fall back to ids.
// Depends on Network.h and ContractionTree.h only.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Deadline.h"

#include <optional>

namespace einstage::einsum {

/// nullopt when `deadline` (if given) expires before the run finishes (checked every 256 queue pops).
std::optional<ContractionTree> greedy_opt_einsum(const Network& network, const Deadline* deadline = nullptr);

}  // namespace einstage::einsum
