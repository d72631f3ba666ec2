#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Deadline.h"

#include "ir/Error.h"

#include <algorithm>
#include <cmath>

namespace einstage::einsum {

ContractionTree::ContractionTree(int num_inputs, std::vector<Step> steps) : num_inputs_(num_inputs) {
  if (num_inputs < 0) fail(ErrorKind::invalid_argument, "contraction tree: number of inputs is {}; need >= 0", num_inputs);
  const size_t expected = num_inputs >= 2 ? static_cast<size_t>(num_inputs - 1) : 0;
  if (steps.size() != expected)
    fail(ErrorKind::invalid_argument,
         "contraction tree for {} input(s) needs exactly {} step(s), got {}; every step joins two live operands",
         num_inputs, expected, steps.size());
  std::vector<int> consumed_by(2 * static_cast<size_t>(num_inputs), -1);
  for (size_t k = 0; k < steps.size(); ++k) {
    auto [a, b] = steps[k];
    const int limit = num_inputs + static_cast<int>(k);  // ids 0..limit-1 exist before step k
    for (int id : {a, b}) {
      if (id < 0 || id >= limit)
        fail(ErrorKind::invalid_argument,
             "contraction tree step {} ({},{}): id {} does not exist yet; step {} may use inputs 0..{} and the "
             "results of earlier steps (ids {}..{})",
             k, a, b, id, k, num_inputs - 1, num_inputs, limit - 1);
    }
    if (a == b)
      fail(ErrorKind::invalid_argument, "contraction tree step {} ({},{}): both sides are id {}; a step joins two "
           "different operands", k, a, b, a);
    for (int id : {a, b}) {
      if (consumed_by[id] >= 0)
        fail(ErrorKind::invalid_argument,
             "contraction tree step {} ({},{}): id {} was already consumed by step {}; each id is used once", k, a, b,
             id, consumed_by[id]);
      consumed_by[id] = static_cast<int>(k);
    }
  }
  steps_ = std::move(steps);
}

ContractionTree ContractionTree::left_to_right(int num_inputs) {
  std::vector<Step> steps;
  for (int k = 1; k < num_inputs; ++k) steps.emplace_back(k == 1 ? 0 : num_inputs + k - 2, k);
  return ContractionTree(num_inputs, std::move(steps));
}

ContractionTree ContractionTree::from_positional_path(int num_inputs, const std::vector<Step>& path) {
  std::vector<int> current(std::max(num_inputs, 0));
  for (int i = 0; i < num_inputs; ++i) current[i] = i;
  std::vector<Step> steps;
  for (size_t k = 0; k < path.size(); ++k) {
    auto [p, q] = path[k];
    const int len = static_cast<int>(current.size());
    for (int pos : {p, q})
      if (pos < 0 || pos >= len)
        fail(ErrorKind::invalid_argument,
             "contraction path step {} ({},{}): position {} is out of range; the list has {} operand(s) before this "
             "step (positions 0..{})",
             k, p, q, pos, len, len - 1);
    if (p == q)
      fail(ErrorKind::invalid_argument, "contraction path step {} ({},{}): position {} is named twice; name two "
           "different positions", k, p, q, p);
    steps.emplace_back(current[p], current[q]);
    current.erase(current.begin() + std::max(p, q));
    current.erase(current.begin() + std::min(p, q));
    current.push_back(num_inputs + static_cast<int>(k));
  }
  const size_t expected = num_inputs >= 2 ? static_cast<size_t>(num_inputs - 1) : 0;
  if (path.size() != expected)
    fail(ErrorKind::invalid_argument, "contraction path for {} input(s) needs exactly {} step(s), got {}", num_inputs,
         expected, path.size());
  return ContractionTree(num_inputs, std::move(steps));
}

std::vector<Step> ContractionTree::to_positional_path() const {
  std::vector<int> current(num_inputs_);
  for (int i = 0; i < num_inputs_; ++i) current[i] = i;
  std::vector<Step> path;
  for (size_t k = 0; k < steps_.size(); ++k) {
    int p = static_cast<int>(std::find(current.begin(), current.end(), steps_[k].first) - current.begin());
    int q = static_cast<int>(std::find(current.begin(), current.end(), steps_[k].second) - current.begin());
    path.emplace_back(std::min(p, q), std::max(p, q));
    current.erase(current.begin() + std::max(p, q));
    current.erase(current.begin() + std::min(p, q));
    current.push_back(num_inputs_ + static_cast<int>(k));
  }
  return path;
}

int ContractionTree::root() const {
  if (num_inputs_ == 0) return -1;
  return num_inputs_ == 1 ? 0 : 2 * num_inputs_ - 2;
}

std::string ContractionTree::steps_text(const std::vector<Step>& steps) {
  std::string s = "[";
  for (size_t k = 0; k < steps.size(); ++k) {
    if (k) s += ',';
    s += fmt::format("({},{})", steps[k].first, steps[k].second);
  }
  return s + "]";
}

TreeCost evaluate(const Network& net, const ContractionTree& tree, bool per_step) {
  EIN_ASSERT(tree.num_inputs() == net.num_inputs, "tree has {} inputs, network {}", tree.num_inputs(),
             net.num_inputs);
  const int n = net.num_inputs;
  TreeCost cost;
  // labels[id] in the order documented on StepCost; live[l] = live operands carrying label l.
  std::vector<std::vector<int>> labels(net.terms);
  labels.resize(std::max(0, 2 * n - 1));
  std::vector<int> live(net.num_carriers);
  if (per_step) cost.steps.reserve(tree.steps().size());
  std::vector<double> size(labels.size(), 0.0);
  auto product = [&](const std::vector<int>& ls) {
    double s = 1;
    for (int l : ls) s *= static_cast<double>(net.extent[l]);
    return s;
  };
  for (int i = 0; i < n; ++i) size[i] = product(labels[i]);
  double live_memory = 0;
  for (int i = 0; i < n; ++i) live_memory += net.input_size[i];
  cost.peak_memory = live_memory;
  std::vector<char> in_left(net.num_labels, 0), in_right(net.num_labels, 0);
  double rw_sum = 0;
  for (size_t k = 0; k < tree.steps().size(); ++k) {
    auto [a, b] = tree.steps()[k];
    const int r = n + static_cast<int>(k);
    StepCost step;
    step.left = a;
    step.right = b;
    step.result = r;
    std::vector<int> joint;
    for (int l : labels[a]) in_left[l] = 1, joint.push_back(l);
    for (int l : labels[b]) {
      in_right[l] = 1;
      if (!in_left[l]) joint.push_back(l);
    }
    std::vector<int>& out = labels[r];
    for (int l : joint) {
      const int remaining = live[l] - in_left[l] - in_right[l];
      if (net.in_output[l] || remaining > 0) {
        out.push_back(l);
        live[l] = remaining + 1;
      } else {
        live[l] = remaining;
        if (per_step) step.summed.push_back(net.label[l]);
      }
    }
    for (int l : labels[a]) in_left[l] = 0;
    for (int l : labels[b]) in_right[l] = 0;
    size[r] = product(out);
    step.flops = product(joint);
    step.left_size = size[a];
    step.right_size = size[b];
    step.result_size = size[r];
    if (per_step) {
      for (int l : labels[a]) step.left_labels.push_back(net.label[l]);
      for (int l : labels[b]) step.right_labels.push_back(net.label[l]);
      for (int l : out) step.result_labels.push_back(net.label[l]);
    }
    cost.flops += step.flops;
    cost.max_intermediate = std::max(cost.max_intermediate, step.result_size);
    cost.write += step.result_size;
    rw_sum += step.left_size + step.right_size + step.result_size;
    cost.peak_memory = std::max(cost.peak_memory, live_memory + step.result_size);
    live_memory += step.result_size;
    live_memory -= a < n ? net.input_size[a] : size[a];
    live_memory -= b < n ? net.input_size[b] : size[b];
    if (per_step) cost.steps.push_back(std::move(step));
    if (a >= n) std::vector<int>().swap(labels[a]);  // a consumed intermediate's labels are never read again
    if (b >= n) std::vector<int>().swap(labels[b]);
  }
  auto lg = [](double x) { return x > 0 ? std::log2(x) : 0.0; };
  cost.tc = lg(cost.flops);
  cost.sc = lg(cost.max_intermediate);
  cost.rw = lg(rw_sum);
  double all = 1;
  for (int l = 0; l < net.num_labels; ++l) all *= static_cast<double>(net.extent[l]);
  cost.naive_flops = std::max(n - 1, 1) * all;
  return cost;
}

TreeCost evaluate(const Subscripts& subscripts, const Extents& extents, const ContractionTree& tree) {
  if (static_cast<size_t>(tree.num_inputs()) != subscripts.inputs.size())
    fail(ErrorKind::invalid_argument, "contraction tree has {} input(s) but the subscripts have {}", tree.num_inputs(),
         subscripts.inputs.size());
  return evaluate(make_network(subscripts, extents), tree);
}

int64_t evaluate_units(const Network& network) {
  int64_t labels = 0;
  for (const auto& in : network.inputs) labels += static_cast<int64_t>(in.size());
  return kEvaluateUnitsPerLabel * (labels + network.num_inputs);
}

}  // namespace einstage::einsum
