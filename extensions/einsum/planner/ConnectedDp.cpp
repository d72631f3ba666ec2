#include "extensions/einsum/planner/ConnectedDp.h"

#include "ir/Error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <queue>
#include <unordered_map>

namespace einstage::einsum {

namespace {

// The DP of one connected component: local inputs 0..m-1 (global ids in `inputs`), subsets as bit masks.
class ComponentDp {
 public:
  ComponentDp(const Network& net, const std::vector<int>& inputs, const ConnectedDpOptions& opt)
      : net_(net), inputs_(inputs), opt_(opt), m_(static_cast<int>(inputs.size())) {
    carriers_.assign(net.num_labels, 0);
    for (int i = 0; i < m_; ++i)
      for (int l : net.inputs[inputs_[i]]) carriers_[l] |= uint64_t{1} << i;
    nbr_.assign(m_, 0);
    for (int i = 0; i < m_; ++i)
      for (int l : net.inputs[inputs_[i]]) nbr_[i] |= carriers_[l];
    for (int i = 0; i < m_; ++i) nbr_[i] &= ~(uint64_t{1} << i);
  }

  // The costliest pairwise step between adjacent inputs: a small first cap.
  double smallest_cap() const {
    double cap = 1;
    for (int i = 0; i < m_; ++i)
      for (int j = i + 1; j < m_; ++j)
        if (nbr_[i] >> j & 1) {
          std::vector<int> u;
          const auto& a = net_.inputs[inputs_[i]];
          const auto& b = net_.inputs[inputs_[j]];
          std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(u));
          cap = std::max(cap, std::exp2(net_.log2_size(u)));
        }
    return cap;
  }

  // One pass with `cap`: true when the whole component fits (the table then holds its optimum); false when it does
  // not fit; `stopped` when the deadline or the subset limit ended the pass.
  bool pass(double cap, bool& stopped) {
    entries_.clear();
    index_.clear();
    legs_.clear();
    levels_.assign(m_ + 1, {});
    for (int i = 0; i < m_; ++i) {
      Entry e;
      e.mask = uint64_t{1} << i;
      e.nbr = nbr_[i];
      e.legs_begin = static_cast<uint32_t>(legs_.size());
      for (int l : net_.inputs[inputs_[i]]) legs_.push_back(l);  // an input enters its first step with all labels
      e.legs_end = static_cast<uint32_t>(legs_.size());
      index_.emplace(e.mask, static_cast<int>(entries_.size()));
      levels_[1].push_back(static_cast<int>(entries_.size()));
      entries_.push_back(e);
    }
    const uint64_t full = m_ == 64 ? ~uint64_t{0} : (uint64_t{1} << m_) - 1;
    int64_t checked = 0;
    for (int k = 2; k <= m_; ++k) {
      for (int k1 = 1; k1 <= k / 2; ++k1) {
        const int k2 = k - k1;
        for (size_t ia = 0; ia < levels_[k1].size(); ++ia) {
          const int a = levels_[k1][ia];
          const size_t ib0 = k1 == k2 ? ia + 1 : 0;
          // Work per row: every pair visited, and each joinable one (costed, compared, maybe stored) much more;
          // the allowance is checked per row, the clock every 4096 joinable pairs.
          if (opt_.deadline.work_spent()) return stopped = true, false;
          if (levels_[k2].size() > ib0)
            opt_.deadline.charge(kConnectedDpUnitsPerVisit * static_cast<int64_t>(levels_[k2].size() - ib0) / 2);
          const int64_t joined_before = checked;
          for (size_t ib = ib0; ib < levels_[k2].size(); ++ib) {
            const int b = levels_[k2][ib];
            const Entry& ea = entries_[a];
            const Entry& eb = entries_[b];
            if ((ea.mask & eb.mask) || !(ea.nbr & eb.mask)) continue;
            if ((++checked & 4095) == 0 && opt_.deadline.expired()) return stopped = true, false;
            const double cost = ea.cost + eb.cost + std::exp2(union_weight(ea, eb));
            if (cost > cap) continue;
            const uint64_t s = ea.mask | eb.mask;
            auto [it, fresh] = index_.emplace(s, static_cast<int>(entries_.size()));
            if (!fresh) {
              Entry& es = entries_[it->second];
              if (cost < es.cost) es.cost = cost, es.split = ea.mask;
              continue;
            }
            if (opt_.max_subsets > 0 && static_cast<int64_t>(entries_.size()) >= opt_.max_subsets)
              return stopped = true, false;
            Entry e;
            e.mask = s;
            e.split = ea.mask;
            e.cost = cost;
            e.nbr = (ea.nbr | eb.nbr) & ~s;
            e.legs_begin = static_cast<uint32_t>(legs_.size());
            append_legs(a, b, s);
            e.legs_end = static_cast<uint32_t>(legs_.size());
            levels_[k].push_back(static_cast<int>(entries_.size()));
            entries_.push_back(e);
          }
          opt_.deadline.charge(kConnectedDpUnitsPerJoin * (checked - joined_before));
        }
      }
    }
    return index_.count(full) > 0;
  }

  int64_t subsets() const { return static_cast<int64_t>(entries_.size()); }

  // Emits the steps of the best tree of the whole component; returns the global id of its result.
  int emit(std::vector<Step>& steps, int n) const {
    const uint64_t full = m_ == 64 ? ~uint64_t{0} : (uint64_t{1} << m_) - 1;
    return emit_mask(full, steps, n);
  }

 private:
  struct Entry {
    uint64_t mask = 0, split = 0, nbr = 0;
    double cost = 0;
    uint32_t legs_begin = 0, legs_end = 0;
  };

  double union_weight(const Entry& a, const Entry& b) const {
    const int *x = legs_.data() + a.legs_begin, *xe = legs_.data() + a.legs_end;
    const int *y = legs_.data() + b.legs_begin, *ye = legs_.data() + b.legs_end;
    double w = 0;
    while (x != xe && y != ye) {
      if (*x < *y) w += net_.log2_extent[*x++];
      else if (*y < *x) w += net_.log2_extent[*y++];
      else w += net_.log2_extent[*x], ++x, ++y;
    }
    while (x != xe) w += net_.log2_extent[*x++];
    while (y != ye) w += net_.log2_extent[*y++];
    return w;
  }

  // The labels the product over subset s keeps: those of either operand that the output or an input outside s needs.
  void append_legs(int a, int b, uint64_t s) {
    const size_t xa = entries_[a].legs_begin, xe = entries_[a].legs_end;
    const size_t ya = entries_[b].legs_begin, ye = entries_[b].legs_end;
    size_t x = xa, y = ya;
    auto keep = [&](int l) {
      if (net_.in_output[l] || (carriers_[l] & ~s)) legs_.push_back(l);
    };
    while (x != xe || y != ye) {
      int l;
      if (y == ye || (x != xe && legs_[x] < legs_[y])) l = legs_[x++];
      else if (x == xe || legs_[y] < legs_[x]) l = legs_[y++];
      else l = legs_[x], ++x, ++y;
      keep(l);  // push_back may grow legs_, so indices (not pointers) walk it
    }
  }

  int emit_mask(uint64_t s, std::vector<Step>& steps, int n) const {
    if (std::has_single_bit(s)) return inputs_[std::countr_zero(s)];
    const Entry& e = entries_[index_.at(s)];
    const int left = emit_mask(e.split, steps, n);
    const int right = emit_mask(s ^ e.split, steps, n);
    steps.emplace_back(left, right);
    return n + static_cast<int>(steps.size()) - 1;
  }

  const Network& net_;
  const std::vector<int>& inputs_;
  const ConnectedDpOptions& opt_;
  const int m_;
  std::vector<uint64_t> carriers_;  // label -> local carrier mask
  std::vector<uint64_t> nbr_;       // input -> inputs sharing a label with it
  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, int> index_;  // lookups only; iteration order never reaches the result
  std::vector<std::vector<int>> levels_;     // subset size -> entries in insertion order
  std::vector<int> legs_;
};

}  // namespace

std::optional<ContractionTree> optimal_connected(const Network& net, const ConnectedDpOptions& options,
                                                 ConnectedDpStats* stats) {
  const int n = net.num_inputs;
  if (n <= 1) return ContractionTree(n, {});
  // Components: inputs joined by any shared label (union-find over the first carrier of each label).
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::vector<int> first(net.num_labels, -1);
  for (int i = 0; i < n; ++i)
    for (int l : net.inputs[i]) {
      if (first[l] < 0) first[l] = i;
      else parent[find(i)] = find(first[l]);
    }
  std::vector<std::vector<int>> components;
  std::vector<int> slot(n, -1);
  for (int i = 0; i < n; ++i) {
    const int r = find(i);
    if (slot[r] < 0) slot[r] = static_cast<int>(components.size()), components.emplace_back();
    components[slot[r]].push_back(i);
  }
  for (const auto& c : components)
    if (c.size() > 64)
      fail(ErrorKind::invalid_argument,
           "connected-subset DP supports at most 64 inputs per connected component, this network has one of {}; use "
           "'auto' or 'anneal' for it",
           c.size());
  std::vector<Step> steps;
  std::vector<int> roots;
  if (stats) *stats = {};
  for (const auto& c : components) {
    if (c.size() == 1) {
      roots.push_back(c[0]);
      continue;
    }
    ComponentDp dp(net, c, options);
    double cap = options.start_cap > 0 ? options.start_cap : dp.smallest_cap();
    for (;;) {
      bool stopped = false;
      const bool found = dp.pass(cap, stopped);
      if (stats) ++stats->passes, stats->subsets = std::max(stats->subsets, dp.subsets()), stats->final_cap = cap;
      if (stopped) return std::nullopt;
      if (found) break;
      cap *= std::max(options.cap_factor, 1.5);
    }
    roots.push_back(dp.emit(steps, n));
  }
  // Components meet only through outer products: smallest first by the part each keeps (its output labels),
  // ties by the smaller id; sizes are products of extents as double.
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (size_t k = 0; k < components.size(); ++k) {
    std::vector<int> labels;
    for (int i : components[k])
      for (int l : net.inputs[i])
        if (net.in_output[l]) labels.push_back(l);
    std::sort(labels.begin(), labels.end());
    labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
    queue.emplace(std::exp2(net.log2_size(labels)), roots[k]);
  }
  int next = n + static_cast<int>(steps.size());
  while (queue.size() > 1) {
    auto [sa, a] = queue.top();
    queue.pop();
    auto [sb, b] = queue.top();
    queue.pop();
    steps.emplace_back(std::min(a, b), std::max(a, b));
    queue.emplace(sa * sb, next++);
  }
  return ContractionTree(n, std::move(steps));
}

}  // namespace einstage::einsum
