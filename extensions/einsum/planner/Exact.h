// Exact contraction ordering: dynamic programming over subsets (small n) and over intervals (chains).
//
// Planning stage. Both minimise the total flops of ContractionTree.h's cost model exactly:
//   * optimal(): DP over all subsets of the inputs (Pfeifer et al.'s recursion, without their connected-subgraph
//     enumeration: every subset gets an entry, so it costs O(3^n) time and O(2^n) memory). Outer products are
//     allowed, so the result is optimal over all binary trees; ties keep the first split in submask order. Limited to
//     ExactOptions::max_inputs inputs (default 16, hard limit 22).
//   * interval_optimal(): O(n^3) DP over contiguous ranges of inputs (matrix-chain order). Exact for chains
//     (is_chain(): every label is carried by one input or by two neighbouring inputs); on other networks it is the
//     best tree whose subtrees are contiguous ranges, a useful candidate but not the optimum.
// The subset DP is also the engine of subtree reconfiguration: solve_small() re-solves a set of up to ~12 operands
// with given label sets and a given set of labels to keep. Costs are compared in double precision; the chosen tree is
// re-evaluated by the one evaluator. Depends on Network.h and ContractionTree.h only.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"

#include <vector>

namespace einstage::einsum {

struct ExactOptions {
  int max_inputs = 16;  // refuse larger networks (error naming the limit)
};

ContractionTree optimal(const Network& network, const ExactOptions& options = {});

bool is_chain(const Network& network);
ContractionTree interval_optimal(const Network& network);

/// One small sub-problem: operands with (dense) label sets, the labels the combined result must keep, and the log2
/// extents of all labels. Returns steps over local ids (operands 0..k-1, step j's result k+j) minimising total flops,
/// and the minimal flops through *total_flops if given. Labels are summed as soon as no operand outside the current
/// subset carries them and `keep` does not list them; an operand's own labels all take part in its first step.
std::vector<Step> solve_small(const std::vector<std::vector<int>>& operands, const std::vector<int>& keep,
                              const std::vector<double>& log2_extent, double* total_flops = nullptr);

}  // namespace einstage::einsum
