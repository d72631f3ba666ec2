// Network: the dense, planner-internal form of one contraction (Subscripts + extents per label).
//
// Planning stage, shape-dependent. Labels are renumbered densely 0..L-1 in first-appearance order (inputs left to
// right, then output), each input keeps its *distinct* labels sorted by dense id, and every label knows its extent,
// log2 extent, how many inputs carry it and whether the output keeps it. Every optimiser and the one cost evaluator
// (ContractionTree.h) read this form, so the "which labels does an intermediate keep" rule exists once, here.
// Depends on Subscripts.h (label_name) and ir/Error.h only; nothing here knows about tensors, kernels or
// the IR.
#pragma once

#include "extensions/einsum/notation/Subscripts.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace einstage::einsum {

/// The extent of every label (inputs and output). Labels that appear only in the output may be missing; they never
/// take part in a pairwise step (the executor broadcasts them at the end).
using Extents = std::map<Label, int64_t>;

/// Extents from per-input shapes (shape[k] is the extent of subscripts.inputs[i][k]). Strict: a label seen with two
/// different extents is an error naming both operands (broadcasting rules belong to the notation layer).
Extents extents_from_shapes(const Subscripts& subscripts, const std::vector<std::vector<int64_t>>& shapes);

struct Network {
  int num_inputs = 0;
  int num_labels = 0;
  std::vector<std::vector<int>> inputs;  // distinct dense label ids per input, sorted ascending
  std::vector<std::vector<int>> terms;   // distinct dense label ids per input, in first-appearance order of its term
  std::vector<Label> label;              // dense id -> Label
  std::vector<int64_t> extent;           // dense id -> extent as given (may be 0)
  std::vector<double> log2_extent;       // dense id -> log2(max(extent, 1)); optimisers work in this space
  std::vector<char> in_output;           // dense id -> the output keeps it
  std::vector<int> num_carriers;         // dense id -> number of inputs that carry it (a hyperedge has >= 3)
  std::vector<int> output;               // output labels that appear in some input, dense ids, output order
  std::vector<double> input_size;        // elements stored per input (product over its axes, repeats included)

  /// log2 of the product of extents of a set of dense labels.
  double log2_size(const std::vector<int>& labels) const;
};

/// Builds the dense form. Errors (kind invalid_argument): a label of an input without an extent, a negative extent.
Network make_network(const Subscripts& subscripts, const Extents& extents);

/// The form the optimisers plan on (resolve(), the CLI's `plan`): labels that travel together -- the same number
/// of times on every input and in the output -- become one label whose extent is the product of theirs, and labels
/// of extent 1 are dropped. Every tree has the same flops, sizes and memory on both forms, step by step, so this
/// changes nothing but what the planner has to look at: one symbol per co-travelling run, however many axes it has.
/// That is why an expanded grouped-dialect einsum (a traced one stores the expansion) plans like its grouped string
/// (docs/behaviour.md §2.6). A run whose product would pass 2^62 is split. Labels only in the output are dropped (they
/// never take part in a pairwise step). Errors: as make_network.
struct PlanningForm {
  Subscripts subscripts;
  Extents extents;
};
PlanningForm fuse_cotravelling(const Subscripts& subscripts, const Extents& extents);

}  // namespace einstage::einsum
