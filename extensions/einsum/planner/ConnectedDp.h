// Exact ordering by dynamic programming over connected subsets with a rising cost cap (Pfeifer, Haegeman and
// Verstraete 2014, "Faster identification of optimal contraction sequences for tensor networks").
//
// Planning stage. Minimises total flops (ContractionTree.h's cost model) over every tree that never multiplies two
// operands sharing no label (no outer products between disconnected pieces): the table holds only subsets whose
// inputs are connected through shared labels, and a subset is kept only if its best cost is <= the cap. The cap starts
// at `start_cap` (the caller passes the greedy tree's cost: then the first pass finds the optimum whenever it is no
// costlier than that tree, which is the usual case) or, without one, at the costliest single pairwise step; when no
// full solution fits, the cap is multiplied by `cap_factor` and the DP runs again. On sparse networks far fewer subsets
// are connected and cheap than 2^n, so it solves 4x5 grids and 3-regular graphs of ~24-30 vertices in well under a
// second, where the all-subsets DP (Exact.h) stops at 22 inputs. It is not the optimum over *all* trees: when an outer
// product pays (e.g. A_i, B_j, C_ijk with i < k: (A B) C is cheaper than (A C) B), the all-subsets DP is better; the
// tests pin equality with a brute force restricted to the same trees. A network whose inputs fall into several
// connected components is solved per component and the components are joined by outer products, smallest first.
// Inputs are bit masks: at most 64 inputs per component. Depends on ContractionTree.h and Search.h (Deadline).
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Search.h"

#include <cstdint>
#include <optional>

namespace einstage::einsum {

struct ConnectedDpOptions {
  double start_cap = 0;         // flops; <= 0: the costliest single pairwise step of the network
  double cap_factor = 16;       // cap growth when no solution fits
  int64_t max_subsets = 0;      // give up (nullopt) when the table exceeds this many subsets; 0 = no limit
  Deadline deadline;            // give up (nullopt) when it expires
};

struct ConnectedDpStats {
  int passes = 0;               // DP runs (one per cap)
  int64_t subsets = 0;          // subsets stored in the last pass
  double final_cap = 0;
};

/// The optimal outer-product-free tree, or nullopt when max_subsets or the deadline stopped it. Errors
/// (invalid_argument) when a connected component has more than 64 inputs.
std::optional<ContractionTree> optimal_connected(const Network& network, const ConnectedDpOptions& options = {},
                                                 ConnectedDpStats* stats = nullptr);

}  // namespace einstage::einsum
