#include "extensions/einsum/planner/Network.h"

#include "ir/Error.h"

#include <algorithm>
#include <cmath>

namespace einstage::einsum {

Extents extents_from_shapes(const Subscripts& subscripts, const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.size() != subscripts.inputs.size())
    fail(ErrorKind::shape, "got {} operand shapes for {} subscript terms; pass one shape per operand", shapes.size(),
         subscripts.inputs.size());
  Extents extents;
  std::map<Label, size_t> first_operand;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& term = subscripts.inputs[i];
    if (shapes[i].size() != term.size())
      fail(ErrorKind::shape, "operand {} has rank {} but its subscript term names {} labels", i, shapes[i].size(),
           term.size());
    for (size_t k = 0; k < term.size(); ++k) {
      auto [it, inserted] = extents.emplace(term[k], shapes[i][k]);
      if (inserted) {
        first_operand[term[k]] = i;
      } else if (it->second != shapes[i][k]) {
        fail(ErrorKind::shape, "label '{}' has extent {} in operand {} but {} in operand {}; make the extents agree",
             label_name(subscripts, term[k]), it->second, first_operand[term[k]], shapes[i][k], i);
      }
    }
  }
  return extents;
}

double Network::log2_size(const std::vector<int>& labels) const {
  double s = 0;
  for (int l : labels) s += log2_extent[l];
  return s;
}

Network make_network(const Subscripts& subscripts, const Extents& extents) {
  Network net;
  net.num_inputs = static_cast<int>(subscripts.inputs.size());
  std::map<Label, int> dense;
  auto intern = [&](Label l) {
    auto [it, inserted] = dense.emplace(l, net.num_labels);
    if (inserted) {
      ++net.num_labels;
      net.label.push_back(l);
    }
    return it->second;
  };
  net.inputs.resize(net.num_inputs);
  net.terms.resize(net.num_inputs);
  for (int i = 0; i < net.num_inputs; ++i) {
    for (Label l : subscripts.inputs[i]) net.inputs[i].push_back(intern(l));
    for (int d : net.inputs[i])
      if (std::find(net.terms[i].begin(), net.terms[i].end(), d) == net.terms[i].end()) net.terms[i].push_back(d);
    std::sort(net.inputs[i].begin(), net.inputs[i].end());
    net.inputs[i].erase(std::unique(net.inputs[i].begin(), net.inputs[i].end()), net.inputs[i].end());
  }
  const int num_input_labels = net.num_labels;
  for (Label l : subscripts.output) intern(l);
  net.extent.assign(net.num_labels, 1);
  net.log2_extent.assign(net.num_labels, 0.0);
  net.in_output.assign(net.num_labels, 0);
  net.num_carriers.assign(net.num_labels, 0);
  for (int d = 0; d < net.num_labels; ++d) {
    auto it = extents.find(net.label[d]);
    if (it == extents.end()) {
      if (d < num_input_labels) {
        // Find the first operand carrying it, to name it in the message.
        int op = 0;
        while (std::find(net.inputs[op].begin(), net.inputs[op].end(), d) == net.inputs[op].end()) ++op;
        fail(ErrorKind::invalid_argument, "label '{}' of operand {} has no extent; give an extent for every label",
             label_name(subscripts, net.label[d]), op);
      }
      continue;  // output-only label: never part of a pairwise step
    }
    if (it->second < 0)
      fail(ErrorKind::invalid_argument, "label '{}' has negative extent {}; extents must be >= 0",
           label_name(subscripts, net.label[d]), it->second);
    net.extent[d] = it->second;
    net.log2_extent[d] = std::log2(static_cast<double>(std::max<int64_t>(it->second, 1)));
  }
  for (const auto& in : net.inputs)
    for (int l : in) ++net.num_carriers[l];
  std::vector<char> seen(net.num_labels, 0);
  for (Label l : subscripts.output) {
    int d = dense.at(l);
    net.in_output[d] = 1;
    if (d < num_input_labels && !seen[d]) net.output.push_back(d);
    seen[d] = 1;
  }
  net.input_size.resize(net.num_inputs);
  for (int i = 0; i < net.num_inputs; ++i) {
    double s = 1;
    for (Label l : subscripts.inputs[i]) s *= static_cast<double>(net.extent[dense.at(l)]);
    net.input_size[i] = s;
  }
  return net;
}

}  // namespace einstage::einsum
