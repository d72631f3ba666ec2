#include "extensions/einsum/planner/Greedy.h"

#include "extensions/einsum/planner/GreedyOptEinsum.h"
#include "extensions/einsum/planner/Random.h"
#include "ir/Error.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <tuple>

namespace einstage::einsum {

std::string_view to_string(GreedyCost cost) {
  switch (cost) {
    case GreedyCost::memory_removed: return "memory_removed";
    case GreedyCost::smallest_result: return "smallest_result";
    case GreedyCost::opt_einsum: return "opt_einsum";
  }
  return "?";
}

std::optional<GreedyCost> parse_greedy_cost(std::string_view text) {
  for (GreedyCost c : {GreedyCost::memory_removed, GreedyCost::smallest_result, GreedyCost::opt_einsum})
    if (to_string(c) == text) return c;
  return std::nullopt;
}

namespace {

// Queue key, compared lexicographically: (score, result size, smaller id, larger id).
struct Candidate {
  double score;
  double size;
  int first, second;
  int a, b;  // a < b
  bool operator>(const Candidate& o) const {
    return std::tie(score, size, first, second) > std::tie(o.score, o.size, o.first, o.second);
  }
};

class GreedyRun {
 public:
  GreedyRun(const Network& net, const GreedyOptions& opt) : net_(net), opt_(opt), rng_(opt.seed) {
    const int n = net.num_inputs;
    const size_t ids = std::max(0, 2 * n - 1);
    labels_.resize(ids);
    size_.assign(ids, 0.0);
    alive_.assign(ids, 0);
    carriers_.resize(net.num_labels);
    live_ = net.num_carriers;
    mark_.assign(net.num_labels, 0);
    stamp_.assign(ids, 0);
    extent_.resize(net.num_labels);
    for (int l = 0; l < net.num_labels; ++l) extent_[l] = std::exp2(net.log2_extent[l]);
    for (int i = 0; i < n; ++i) {
      labels_[i] = net.inputs[i];
      size_[i] = std::exp2(net.log2_size(labels_[i]));
      alive_[i] = 1;
      for (int l : labels_[i]) carriers_[l].push_back(i);
    }
  }

  ContractionTree run() {
    const int n = net_.num_inputs;
    if (n <= 1) return ContractionTree(n, {});
    // Initial candidates: every pair of carriers of every label (deduplicated by the heap's lazy check is not
    // enough, so dedupe per tensor with stamps).
    int next_id = n;
    for (int i = 0; i < n; ++i) push_neighbours(i, /*only_lower=*/true);
    while (!queue_.empty()) {
      Candidate c = queue_.top();
      queue_.pop();
      if (!alive_[c.a] || !alive_[c.b]) continue;
      contract(c.a, c.b, next_id);
      push_neighbours(next_id++, false);
    }
    // No pair shares a label any more: outer products.
    std::vector<int> rest;
    for (int id = 0; id < next_id; ++id)
      if (alive_[id]) rest.push_back(id);
    if (opt_.cost == GreedyCost::smallest_result) {
      while (rest.size() > 1) {  // the two smallest ids; the result gets the largest id, so it goes last
        int a = rest[0], b = rest[1];
        rest.erase(rest.begin(), rest.begin() + 2);
        contract(a, b, next_id);
        rest.push_back(next_id++);
      }
    } else {
      // The two smallest first.
      auto key = [&](int id) { return size_[id]; };
      using Item = std::pair<double, int>;
      std::priority_queue<Item, std::vector<Item>, std::greater<Item>> by_size;
      for (int id : rest) by_size.emplace(key(id), id);
      while (by_size.size() > 1) {
        int a = by_size.top().second;
        by_size.pop();
        int b = by_size.top().second;
        by_size.pop();
        contract(std::min(a, b), std::max(a, b), next_id);
        by_size.emplace(key(next_id), next_id);
        ++next_id;
      }
    }
    return ContractionTree(n, std::move(steps_));
  }

 private:
  // Result labels and size of contracting a with b now (the kept rule of ContractionTree.h).
  double result_size(int a, int b, std::vector<int>* out) {
    double size = 1;
    for (int l : labels_[a]) mark_[l] = 1;
    for (int l : labels_[b]) mark_[l] |= 2;
    auto visit = [&](int l) {
      const int inside = (mark_[l] & 1) + ((mark_[l] >> 1) & 1);
      if (net_.in_output[l] || live_[l] - inside > 0) {
        size *= extent_[l];
        if (out) out->push_back(l);
      }
    };
    for (int l : labels_[a]) visit(l);
    for (int l : labels_[b])
      if (!(mark_[l] & 1)) visit(l);
    for (int l : labels_[a]) mark_[l] = 0;
    for (int l : labels_[b]) mark_[l] = 0;
    return size;
  }

  Candidate candidate(int a, int b) {
    const double r = result_size(a, b, nullptr);
    double s = opt_.cost == GreedyCost::smallest_result ? r : r - opt_.alpha * (size_[a] + size_[b]);
    if (opt_.temperature > 0) {
      s = (s >= 0 ? 1.0 : -1.0) * std::log2(1.0 + std::fabs(s));
      s -= opt_.temperature * rng_.gumbel();
    }
    return {s, r, a, b, a, b};
  }

  // Candidates of `id` with every live operand sharing a label.
  void push_neighbours(int id, bool only_lower) {
    ++epoch_;
    stamp_[id] = epoch_;
    for (int l : labels_[id]) {
      for (int other : carriers_[l]) {
        if (stamp_[other] == epoch_ || !alive_[other]) continue;
        if (only_lower && other > id) continue;
        stamp_[other] = epoch_;
        const int a = std::min(id, other), b = std::max(id, other);
        queue_.push(candidate(a, b));
      }
    }
  }

  void contract(int a, int b, int r) {
    std::vector<int> out;
    result_size(a, b, &out);
    for (int l : labels_[a]) --live_[l];
    for (int l : labels_[b]) --live_[l];
    std::sort(out.begin(), out.end());
    for (int l : out) ++live_[l];
    // Carrier lists: drop a and b, add r for kept labels.
    for (int x : {a, b})
      for (int l : labels_[x]) {
        auto& cs = carriers_[l];
        cs.erase(std::find(cs.begin(), cs.end(), x));
      }
    for (int l : out) carriers_[l].push_back(r);
    size_[r] = std::exp2(net_.log2_size(out));
    labels_[r] = std::move(out);
    alive_[a] = alive_[b] = 0;
    alive_[r] = 1;
    steps_.emplace_back(a, b);
  }

  const Network& net_;
  GreedyOptions opt_;
  SplitMix64 rng_;
  std::vector<std::vector<int>> labels_;
  std::vector<double> size_;
  std::vector<char> alive_;
  std::vector<std::vector<int>> carriers_;
  std::vector<int> live_;
  std::vector<uint8_t> mark_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue_;
  std::vector<Step> steps_;
  std::vector<double> extent_;  // max(extent, 1) as double
};

}  // namespace

ContractionTree greedy(const Network& network, const GreedyOptions& options) {
  if (!(options.temperature >= 0))
    fail(ErrorKind::invalid_argument, "greedy temperature is {}; it must be >= 0", options.temperature);
  if (options.cost == GreedyCost::opt_einsum) {
    if (options.temperature != 0 || options.alpha != 1)
      fail(ErrorKind::invalid_argument, "greedy rule opt_einsum takes no alpha or temperature (it reproduces "
           "opt_einsum's deterministic rule); use memory_removed for a randomised greedy");
    return greedy_opt_einsum(network);
  }
  return GreedyRun(network, options).run();
}

ContractionTree best_greedy(const Network& network, GreedyCost* rule) {
  ContractionTree best;
  double best_flops = 0;
  bool first = true;
  for (GreedyCost c : {GreedyCost::memory_removed, GreedyCost::opt_einsum, GreedyCost::smallest_result}) {
    ContractionTree t = greedy(network, {c});
    const double f = evaluate(network, t).flops;
    if (first || f < best_flops) {
      best = std::move(t), best_flops = f, first = false;
      if (rule) *rule = c;
    }
  }
  return best;
}

}  // namespace einstage::einsum
