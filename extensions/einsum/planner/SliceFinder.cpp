#include "extensions/einsum/planner/SliceFinder.h"

#include <algorithm>
#include <cmath>

namespace einstage::einsum {

SlicedNetwork::SlicedNetwork(const Network& network)
    : full(&network), net(network), sliced(static_cast<size_t>(network.num_labels), 0) {
  for (int l = 0; l < network.num_labels; ++l) dense[network.label[l]] = l;
}

void SlicedNetwork::set(int label, bool on) {
  sliced[label] = on;
  net.extent[label] = on ? 1 : full->extent[label];
  net.log2_extent[label] = on ? 0.0 : full->log2_extent[label];
}

double SlicedNetwork::num_slices() const {
  double s = 1;
  for (int l = 0; l < full->num_labels; ++l)
    if (sliced[l]) s *= static_cast<double>(full->extent[l]);
  return s;
}

// The excess of an intermediate above the limit is log2(size / limit); slicing a label of extent d that it carries
// removes min(log2 d, excess) of it. Fixing a label multiplies the slice count by its extent and divides the flops of
// the steps that contain it by the same, so one per-step evaluation prices every candidate.
int choose_slice_label(const SlicedNetwork& w, const ContractionTree& tree, double limit) {
  const TreeCost cost = evaluate(w.net, tree, true);
  const int L = w.net.num_labels;
  std::vector<double> flops_without(L, 0.0);  // sum of flops of the steps that do not contain the label
  std::vector<double> gain(L, 0.0);           // bits of excess removed
  std::vector<char> in_joint(L, 0);
  for (const StepCost& st : cost.steps) {
    for (Label l : st.left_labels) in_joint[w.dense.at(l)] = 1;
    for (Label l : st.right_labels) in_joint[w.dense.at(l)] = 1;
    for (int l = 0; l < L; ++l)
      if (!in_joint[l]) flops_without[l] += st.flops;
    if (st.result_size > limit) {
      const double excess = std::log2(st.result_size / limit);
      for (Label label : st.result_labels) {
        const int l = w.dense.at(label);
        if (!w.net.in_output[l] && !w.sliced[l] && w.net.extent[l] > 1)
          gain[l] += std::min(w.net.log2_extent[l], excess);
      }
    }
    for (Label l : st.left_labels) in_joint[w.dense.at(l)] = 0;
    for (Label l : st.right_labels) in_joint[w.dense.at(l)] = 0;
  }
  int best = -1;
  double best_score = 0;
  for (int l = 0; l < L; ++l) {
    if (!(gain[l] > 0)) continue;
    const double d = static_cast<double>(w.net.extent[l]);
    const double total = (cost.flops - flops_without[l]) + flops_without[l] * d;
    const double score = std::max(0.0, std::log2(total / cost.flops)) / gain[l];
    if (best < 0 || score < best_score || (score == best_score && gain[l] > gain[best])) best = l, best_score = score;
  }
  return best;
}

void unslice_unneeded(SlicedNetwork& w, const ContractionTree& tree, double limit, std::vector<int>& order) {
  for (size_t k = order.size(); k-- > 0;) {
    w.set(order[k], false);
    if (evaluate(w.net, tree, false).max_intermediate <= limit) order.erase(order.begin() + static_cast<std::ptrdiff_t>(k));
    else w.set(order[k], true);
  }
}

SliceChoice slice_tree(const Network& network, const ContractionTree& tree, double limit, const Deadline& deadline,
                       const std::vector<int>& initial) {
  SliceChoice out;
  SlicedNetwork w(network);
  for (int l : initial) w.set(l, true);
  out.labels = initial;
  const int64_t units = evaluate_units(network);
  double size = evaluate(w.net, tree, false).max_intermediate;
  deadline.charge(units);
  while (size > limit) {
    const int l = choose_slice_label(w, tree, limit);
    deadline.charge(2 * units);
    if (l < 0) {
      out.fits = false;
      break;
    }
    w.set(l, true);
    out.labels.push_back(l);
    size = evaluate(w.net, tree, false).max_intermediate;
    deadline.charge(units);
  }
  unslice_unneeded(w, tree, limit, out.labels);
  deadline.charge(units * static_cast<int64_t>(out.labels.size()));
  out.num_slices = w.num_slices();
  out.total_flops = out.num_slices * evaluate(w.net, tree, false).flops;
  deadline.charge(units);
  return out;
}

}  // namespace einstage::einsum
