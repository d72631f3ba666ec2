// PlanSpec: the shape-independent request for a contraction order, and resolve() that turns it into a tree.
//
// Planning stage. A traced einsum op carries a PlanSpec (printed in the IR, parsed back, compared and hashed); when
// the shapes are known, resolve() makes the ContractionTree. Kinds:
//   auto           exact when cheap (chains: interval DP; n <= exact limit: subset DP), otherwise greedy refined by
//                  subtree reconfiguration; quality=high adds a multi-trial annealing search within the budget.
//                  Never costlier than greedy (both greedy rules are always candidates).
//   greedy         one greedy run (Greedy.h), option cost=memory_removed|smallest_result
//   optimal        exact subset DP (Exact.h); interval DP on chains of any length
//   anneal         multi-trial search (Search.h) within the budget
//   left_to_right  (0,1), (n,2), (n+1,3), ...
//   path[...]      opt_einsum / JAX positional path
//   tree[...]      explicit steps over ids (this is also how the nested string's order arrives)
// Text form: kind, then "(key=value,...)" with only the non-default options in the fixed order
// budget, seed, quality, cost, trials, moves, max_memory, then "[(a,b),...]" for path and tree. Examples: `auto`,
// `auto(quality=high)`, `greedy(cost=smallest_result)`, `anneal(budget=10,seed=3)`, `left_to_right`,
// `path[(0,1),(0,1)]`, `tree[(0,1),(3,2)]`, `auto(max_memory=256MiB)`. parse(to_string(s)) == s for every spec.
// max_memory (any kind) asks for a sliced contraction whose every intermediate fits that many bytes (Slicing.h);
// plan() and resolve() ignore it; the executors that know the dtype slice (SlicedEinsum.h: one-shot einsum() and a
// traced einsum op's runtime executor). Lowering to standard ops and the AD plans still use the unsliced tree.
// The types (PlanKind, PlanQuality, PlanSpec) are in PlanKind.h, for headers that carry a spec without planning.
// Depends on the other planner headers; no IR or runtime headers.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Greedy.h"
#include "extensions/einsum/planner/PlanKind.h"
#include "extensions/einsum/planner/Search.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::einsum {

/// Per-call settings that never change the chosen tree (clock_guard only when the guard fires: see Deadline.h).
struct PlanOptions {
  int threads = 1;            // workers for multi-trial searches
  ProgressCallback progress;  // called after each finished trial of long searches
  bool clock_guard = true;    // false: a budget is a work allowance only; the tree is then the same on any machine,
                              // however slow or busy, but planning may take longer than the budget there
};

struct PlanResult {
  ContractionTree tree;
  TreeCost cost;
  std::string method;         // what produced the tree, e.g. "interval_dp", "greedy(memory_removed)+reconfigure"
  bool stopped_by_budget = false;  // the clock guard (Deadline.h) ended work the allowance had room for: this tree
                                   // depends on timing (a machine much slower or busier than the calibration)
  bool budget_raised = false; // the budget ran out before the first greedy run finished: the result is that run
  int trials_done = 0;
  int64_t work_units = 0;     // work charged against the budget's allowance (budgeted kinds only)
  double seconds = 0;         // wall time of planning
};

/// Plans one network. Explicit kinds are validated against its input count (errors name the step and position).
PlanResult plan(const PlanSpec& spec, const Network& network, const PlanOptions& options = {});
/// Plans a contraction on its planning form (fuse_cotravelling, Network.h): what resolve() and the CLI's `plan` use.
/// The tree names operand positions, so it applies to `subscripts` unchanged, with the same cost.
PlanResult plan_contraction(const PlanSpec& spec, const Subscripts& subscripts, const Extents& extents,
                            const PlanOptions& options = {});
ContractionTree resolve(const PlanSpec& spec, const Subscripts& subscripts, const Extents& extents,
                        const PlanOptions& options = {});

/// Grouped dialect: each label of `grouped` stands for the expanded labels listed in `groups` (a label missing from
/// `groups` stands for itself; an empty list is an empty group). The order is planned on the grouped subscripts, with
/// a group's extent = the product of its expanded labels' extents (1 for an empty group), and the same tree, which
/// only names operand positions, is returned for the expanded subscripts. Its cost on the expanded contraction is the
/// same as on the grouped one, step by step.
Extents grouped_extents(const Subscripts& grouped, const std::map<Label, std::vector<Label>>& groups,
                        const Extents& expanded_extents);
ContractionTree resolve_grouped(const PlanSpec& spec, const Subscripts& grouped,
                                const std::map<Label, std::vector<Label>>& groups, const Subscripts& expanded,
                                const Extents& expanded_extents, const PlanOptions& options = {});

}  // namespace einstage::einsum
