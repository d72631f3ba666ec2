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

PlanningForm fuse_cotravelling(const Subscripts& subscripts, const Extents& extents) {
  const size_t n = subscripts.inputs.size();
  // Signature of a label: how many times each input and the output name it.
  std::map<Label, std::vector<int>> signature;
  std::vector<Label> order;  // input labels in first-appearance order
  for (size_t i = 0; i < n; ++i)
    for (Label l : subscripts.inputs[i]) {
      auto [it, inserted] = signature.try_emplace(l, std::vector<int>(n + 1, 0));
      if (inserted) order.push_back(l);
      ++it->second[i];
    }
  for (Label l : subscripts.output) {
    auto it = signature.find(l);
    if (it != signature.end()) ++it->second[n];
  }
  for (Label l : order) {
    auto e = extents.find(l);
    if (e == extents.end() || e->second < 0) (void)make_network(subscripts, extents);  // throws the usual error
  }
  // Classes in first-appearance order of their first member; a class closes when its product would pass 2^62.
  constexpr int64_t kMaxProduct = int64_t{1} << 62;
  struct Open {
    Label fused;
    int64_t product;
  };
  std::map<std::vector<int>, Open> open;
  std::map<Label, Label> fused_of;  // representative input label -> fused label (members map to kNone)
  constexpr Label kNone = -1;
  PlanningForm form;
  Label next = 0;
  for (Label l : order) {
    const int64_t e = extents.at(l);
    if (e == 1) {
      fused_of[l] = kNone;
      continue;
    }
    auto it = open.find(signature[l]);
    if (it != open.end() && e != 0 && it->second.product != 0 && it->second.product <= kMaxProduct / e) {
      it->second.product *= e;
      form.extents[it->second.fused] = it->second.product;
      fused_of[l] = kNone;
      continue;
    }
    const Label f = next++;
    open.insert_or_assign(signature[l], Open{f, e});
    form.extents[f] = e;
    fused_of[l] = f;
  }
  auto term_of = [&](const std::vector<Label>& term) {
    std::vector<Label> out;
    for (Label l : term) {
      auto it = fused_of.find(l);
      if (it != fused_of.end() && it->second != kNone) out.push_back(it->second);
    }
    return out;
  };
  for (const auto& term : subscripts.inputs) form.subscripts.inputs.push_back(term_of(term));
  form.subscripts.output = term_of(subscripts.output);
  return form;
}

}  // namespace einstage::einsum
