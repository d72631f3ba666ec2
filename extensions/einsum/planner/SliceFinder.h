// SliceFinder: which labels of one given contraction tree to slice so that every intermediate fits a memory limit.
//
// Planning stage. Slicing label l means contracting once per value of l (l at extent 1) and adding the results, so a
// sliced network is the network with those labels at extent 1 (SlicedNetwork). The rule that picks the next label
// (choose_slice_label) is the one both the sliced planner (Slicing.h, which reconfigures the tree between labels) and
// the tree search (Search.h, which scores every trial's tree by its sliced cost) use: among the unsliced summed labels
// of the intermediates above the limit, the label that costs the fewest bits of total sliced flops (slices x one
// slice's flops) per bit it removes from the intermediates' excess over the limit. Only summed labels are sliced: an
// output label stays whole. Deterministic: ties go to more excess removed, then to the lower dense id.
// Depends on ContractionTree.h, Network.h and Deadline.h only.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Deadline.h"

#include <map>
#include <vector>

namespace einstage::einsum {

/// A network with some of its labels sliced (at extent 1).
struct SlicedNetwork {
  const Network* full = nullptr;
  Network net;               // the sliced network
  std::vector<char> sliced;  // dense id -> sliced
  std::map<Label, int> dense;

  explicit SlicedNetwork(const Network& network);
  void set(int label, bool on);
  /// Product of the sliced labels' extents.
  double num_slices() const;
};

/// The next label to slice for `tree` under `limit` elements (dense id), or -1 when no intermediate above the limit
/// has an unsliced summed label.
int choose_slice_label(const SlicedNetwork& network, const ContractionTree& tree, double limit);

/// Un-slices, last sliced first, every label of `order` that `tree` no longer needs to fit `limit`.
void unslice_unneeded(SlicedNetwork& network, const ContractionTree& tree, double limit, std::vector<int>& order);

struct SliceChoice {
  std::vector<int> labels;  // dense ids, in the order they were sliced
  double num_slices = 1;
  double total_flops = 0;   // num_slices x one slice's flops
  bool fits = true;         // false: the tree has an intermediate above the limit that no slicing removes
};

/// Slices `tree` as given (no reconfiguration), starting from the labels `initial` (dense ids), with
/// choose_slice_label until it fits, then un-slices what it no longer needs. Charges its evaluations to `deadline` but
/// never stops early (the answer must fit).
SliceChoice slice_tree(const Network& network, const ContractionTree& tree, double limit,
                       const Deadline& deadline = {}, const std::vector<int>& initial = {});

}  // namespace einstage::einsum
