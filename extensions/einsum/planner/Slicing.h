// Slicing: a contraction tree whose every intermediate fits a memory limit, by fixing the values of a few labels.
//
// Planning stage. Slicing label l means contracting the network once per value of l (with l fixed, so of extent 1)
// and adding the results; the slices are independent, so they also spread over threads and processes (SlicedEinsum.h
// runs them). plan_sliced() is cotengra's "slice then reconfigure" loop, made deterministic: plan the unsliced tree
// (the spec's planner), then, while the largest intermediate of one slice exceeds the limit, slice the label of an
// intermediate above the limit that costs the fewest bits of total sliced flops (number of slices x flops of one
// slice) per bit it removes from the intermediates' excess over the limit (ties: more removed, then the label seen
// first), and reconfigure the tree on the sliced extents (ContractionTree.h's cost model with the sliced labels at
// extent 1), keeping a reconfigured tree only if it is cheaper and its largest intermediate grows no further above
// the limit. Every sliced label whose slicing the fitted tree no longer needs is then un-sliced, last first; a fresh
// greedy tree on the sliced extents is sliced the same way from there, and the cheaper result is kept. With a budget
// (auto and anneal specs), slicing then also runs inside a tree search (Search.h, SearchOptions::slice_limit): every
// trial's tree is scored by its sliced total, and annealed on the network with its sliced labels at extent 1 under a
// size penalty, so the tree is chosen for the sliced network rather than sliced after the fact; the cheaper of that
// and the loop above is kept (method "+sliced_search"). The label rule is SliceFinder.h's, shared by both. Only summed
// labels are sliced: a label of the output stays whole, so the output itself must fit the limit. Explicit orders
// (path, tree, left_to_right) are sliced as given, never reconfigured. The work is fixed by the inputs; with a budget (the spec's, in work units:
// Deadline.h) reconfiguration stops when it is spent, slicing never does (the result must fit).
// Memory sizes: the planner counts elements; the text forms (`auto(max_memory=256MiB)`, `--max-memory`) are bytes
// with a unit, parsed and printed by MemorySize.h (included here for the callers), and divided by the element size
// of the dtype. Depends on PlanSpec.h (and through it the other planner headers) and MemorySize.h; no IR or runtime
// headers.
#pragma once

#include "extensions/einsum/planner/MemorySize.h"
#include "extensions/einsum/planner/PlanSpec.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::einsum {

struct SliceLimit {
  double max_elements = 0;  // the largest intermediate of one slice, elements (> 0)
  int element_bytes = 0;    // > 0: messages also show bytes (the limit was given in bytes of this element size)
};

struct SlicedPlan {
  ContractionTree tree;                 // the tree every slice runs (over the same inputs as the unsliced one)
  std::vector<Label> sliced;            // sliced labels; slice s gives sliced[k] the value (s / stride_k) % extent_k,
  std::vector<int64_t> sliced_extents;  // stride_0 = 1 and stride_{k+1} = stride_k * extent_k (first label fastest)
  double num_slices = 1;                // product of sliced_extents
  TreeCost slice_cost;                  // one slice: evaluate() with the sliced labels at extent 1
  double total_flops = 0;               // num_slices * slice_cost.flops
  ContractionTree unsliced_tree;        // what the spec plans without a limit
  TreeCost unsliced_cost;
  double overhead = 1;                  // total_flops / unsliced_cost.flops (1 when both are 0)
  double same_tree_overhead = 1;        // total_flops / `tree`'s flops on the unsliced extents (>= 1): what slicing
                                        // that tree costs; below `overhead` when the sliced search found a tree
                                        // cheaper than the unsliced plan, then overhead < 1 is possible
  double max_elements = 0;              // the limit
  std::string method;                   // the unsliced plan's method, "+slice(k)" and "+reconfigure" when used
  int rounds = 0;                       // labels sliced before the un-slicing pass
  bool stopped_by_budget = false;       // the clock guard cut planning or reconfiguration: depends on timing
  double seconds = 0;
};

/// The extents of one slice: the sliced labels at extent 1.
Extents slice_extents(const Extents& extents, const std::vector<Label>& sliced);

/// Plans `subscripts` so that every intermediate of one slice has at most limit.max_elements elements. The spec's
/// max_memory is ignored (the caller turned it into `limit`). Errors (kind invalid_argument): an operand or the
/// output larger than the limit (naming it and both sizes: every operand is read whole and the output is written
/// whole), a limit below 1 element.
SlicedPlan plan_sliced(const PlanSpec& spec, const Subscripts& subscripts, const Extents& extents,
                       const SliceLimit& limit, const PlanOptions& options = {});

}  // namespace einstage::einsum
