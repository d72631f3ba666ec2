// The reverse steps' layout cost model and candidates (see ReverseLayout.h).
#include "extensions/einsum/exec/ReverseLayout.h"

#include <algorithm>
#include <cstdint>

namespace einstage::einsum {

namespace {

// Column-major stride of label l's first axis of extent > 1 in t, or -1 when t has no such axis.
int64_t stride_of(LaidOutTerm t, Label l) {
  int64_t stride = 1;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (t.labels[i] == l && t.shape[i] > 1) return stride;
    stride *= t.shape[i];
  }
  return -1;
}

// The label of t's unit-stride axis (its first axis of extent > 1), or -1 when it has none (a scalar).
Label unit_label(LaidOutTerm t) {
  for (size_t i = 0; i < t.labels.size(); ++i)
    if (t.shape[i] > 1) return t.labels[i];
  return -1;
}

}  // namespace

double gett_stride_penalty(LaidOutTerm a, LaidOutTerm b, LaidOutTerm c) {
  enum Group { m, n, k, batch, none };
  // Per label: its group and the stride that orders it within the group (C's for m, n and batch; B's for k).
  std::vector<std::pair<Label, Group>> labels;
  auto group_of = [&](Label l) {
    const bool in_a = stride_of(a, l) >= 0, in_b = stride_of(b, l) >= 0, in_c = stride_of(c, l) >= 0;
    if (in_a && in_b && in_c) return batch;
    if (in_a && in_c) return m;
    if (in_b && in_c) return n;
    if (in_a && in_b) return k;
    return none;
  };
  auto key = [&](Label l, Group g) { return g == k ? stride_of(b, l) : stride_of(c, l); };
  // The first label of group g in the kernel's traversal order.
  auto first_of = [&](Group g) {
    Label best = -1;
    int64_t best_key = 0;
    for (LaidOutTerm t : {a, b, c})
      for (size_t i = 0; i < t.labels.size(); ++i) {
        const Label l = t.labels[i];
        if (t.shape[i] <= 1 || group_of(l) != g) continue;
        const int64_t s = key(l, g);
        if (best < 0 || s < best_key) best = l, best_key = s;
      }
    return best;
  };
  double penalty = 0;
  for (LaidOutTerm t : {a, b, c}) {
    const Label u = unit_label(t);
    if (u < 0) continue;
    const Group g = group_of(u);
    if (g != none && first_of(g) != u) penalty += static_cast<double>(element_count(t.shape));
  }
  const Label uc = unit_label(c);
  if (uc >= 0 && group_of(uc) != m) penalty += static_cast<double>(element_count(c.shape));
  return penalty;
}

std::vector<ReverseLayout> reverse_layout_candidates(const std::vector<Label>& ct, const std::vector<Label>& sibling,
                                                     const std::vector<Label>& node) {
  auto has = [](const std::vector<Label>& v, Label l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  auto position = [&](Label l) { return static_cast<int>(std::find(node.begin(), node.end(), l) - node.begin()); };
  std::vector<ReverseLayout> out;
  auto add = [&](ReverseLayout r) {
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(std::move(r));
  };
  std::vector<int> identity(node.size());
  for (size_t i = 0; i < node.size(); ++i) identity[i] = static_cast<int>(i);
  add({identity, false});
  add({identity, true});
  for (bool sibling_first : {false, true}) {
    const std::vector<Label>& lhs = sibling_first ? sibling : ct;
    const std::vector<Label>& rhs = sibling_first ? ct : sibling;
    std::vector<int> perm;
    auto take = [&](Label l) {
      const int p = position(l);
      if (p < static_cast<int>(node.size()) && std::find(perm.begin(), perm.end(), p) == perm.end()) perm.push_back(p);
    };
    for (Label l : lhs)
      if (!has(rhs, l)) take(l);
    for (Label l : rhs)
      if (!has(lhs, l)) take(l);
    for (Label l : lhs)
      if (has(rhs, l)) take(l);
    for (Label l : node) take(l);  // labels in neither operand (summed inside the node), in the node's order
    add({perm, sibling_first});
  }
  return out;
}

}  // namespace einstage::einsum
