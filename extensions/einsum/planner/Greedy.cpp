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

// Queue key, compared lexicographically: (score, result size, smaller id, larger id); a < b.
struct Candidate {
  double score;
  double size;
  int a, b;
  bool operator>(const Candidate& o) const {
    if (score != o.score) return score > o.score;
    if (size != o.size) return size > o.size;
    if (a != o.a) return a > o.a;
    return b > o.b;
  }
};

// One run. Storage is flat and sized up front so the loop allocates nothing but heap growth: the label sets of all
// 2n-1 ids live in one pool (an intermediate never has more labels than its two operands together), and each label's
// live carriers live in a fixed slice of one array (a label never has more live carriers than inputs carrying it,
// since a step removes one or two carriers and adds at most one).
class GreedyRun {
 public:
  GreedyRun(const Network& net, const GreedyOptions& opt, bool abandon) : net_(net), opt_(opt), rng_(opt.seed) {
    abandon_ = abandon;
    const int n = net.num_inputs;
    const size_t ids = std::max(0, 2 * n - 1);
    begin_.assign(ids + 1, 0);
    size_.assign(ids, 0.0);
    kept_size_.assign(ids, 0.0);
    mark_.assign(net.num_labels, 0);
    alive_.assign(ids, 0);
    stamp_.assign(ids, 0);
    live_ = net.num_carriers;
    extent_.resize(net.num_labels);
    for (int l = 0; l < net.num_labels; ++l) extent_[l] = std::exp2(net.log2_extent[l]);
    carrier_begin_.assign(net.num_labels + 1, 0);
    for (int l = 0; l < net.num_labels; ++l) carrier_begin_[l + 1] = carrier_begin_[l] + net.num_carriers[l];
    carriers_.assign(carrier_begin_.back(), 0);
    carrier_count_.assign(net.num_labels, 0);
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += net.inputs[i].size();
    pool_.reserve(2 * total + 1);
    for (int i = 0; i < n; ++i) {
      begin_[i] = static_cast<int>(pool_.size());
      double size = 1, kept = 1;
      for (int l : net.inputs[i]) {
        pool_.push_back(l);
        size *= extent_[l];
        if (net.in_output[l] || net.num_carriers[l] > 1) kept *= extent_[l];
        carriers_[carrier_begin_[l] + carrier_count_[l]++] = i;
      }
      size_[i] = size;
      kept_size_[i] = kept;
      alive_[i] = 1;
    }
    begin_[n] = static_cast<int>(pool_.size());
    queue_.reserve(4 * total + 16);
  }

  std::optional<ContractionTree> run() {
    const int n = net_.num_inputs;
    if (n <= 1) return ContractionTree(n, {});
    steps_.reserve(n - 1);
    // Initial candidates: every pair sharing a label, once (the lower id proposes).
    int next_id = n;
    for (int i = 0; i < n; ++i) {
      if ((i & 255) == 255 && out_of_budget()) return std::nullopt;
      push_neighbours(i, /*only_lower=*/true);
    }
    uint32_t pops = 0;
    while (!queue_.empty()) {
      if ((++pops & 255) == 0 && out_of_budget()) return std::nullopt;
      ++ops_;
      std::pop_heap(queue_.begin(), queue_.end(), std::greater<Candidate>());
      const Candidate c = queue_.back();
      queue_.pop_back();
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
      // The two smallest first (ties: smaller id).
      using Item = std::pair<double, int>;
      std::priority_queue<Item, std::vector<Item>, std::greater<Item>> by_size;
      for (int id : rest) by_size.emplace(size_[id], id);
      while (by_size.size() > 1) {
        int a = by_size.top().second;
        by_size.pop();
        int b = by_size.top().second;
        by_size.pop();
        contract(std::min(a, b), std::max(a, b), next_id);
        by_size.emplace(size_[next_id], next_id);
        ++next_id;
      }
    }
    out_of_budget();  // charges the rest
    return ContractionTree(n, std::move(steps_));
  }

 private:
  // Charges the deadline's meter with the work since the last call; true when the run should be abandoned.
  bool out_of_budget() {
    if (!opt_.deadline) return false;
    opt_.deadline->charge((ops_ - charged_) * kGreedyUnitsPerOp);
    charged_ = ops_;
    return abandon_ && opt_.deadline->expired();
  }

  const int* labels_begin(int id) const { return pool_.data() + begin_[id]; }
  const int* labels_end(int id) const { return pool_.data() + begin_[id + 1]; }

  // Appends the labels that contracting a with b keeps (the kept rule of ContractionTree.h) to the pool, sorted,
  // walking both sorted label sets; returns the result size.
  double append_result(int a, int b) {
    double size = 1;
    const int *x = labels_begin(a), *xe = labels_end(a), *y = labels_begin(b), *ye = labels_end(b);
    while (x != xe || y != ye) {
      int l, inside;
      if (y == ye || (x != xe && *x < *y)) l = *x++, inside = 1;
      else if (x == xe || *y < *x) l = *y++, inside = 1;
      else l = *x, ++x, ++y, inside = 2;
      if (net_.in_output[l] || live_[l] > inside) {
        size *= extent_[l];
        pool_.push_back(l);
      }
    }
    return size;
  }

  // Result size of contracting `id` (its labels marked with epoch_) with `other`, from the shared labels only:
  // every label of a live operand is an output label, or carried by another live operand, or (inputs only) private
  // to it (see the class comment of the kept rule). So an unshared label is kept unless private, and a shared label
  // is kept iff the output or a third operand has it: |result| = kept(id) * kept(other) / prod over shared labels of
  // (e if kept, e^2 if summed). O(|other|) instead of a merge of both label sets.
  double result_size_marked(int id, int other) const {
    double div = 1;
    for (const int* p = labels_begin(other); p != labels_end(other); ++p) {
      const int l = *p;
      if (mark_[l] != epoch_) continue;
      div *= (net_.in_output[l] || live_[l] > 2) ? extent_[l] : extent_[l] * extent_[l];
    }
    return kept_size_[id] * kept_size_[other] / div;
  }

  Candidate candidate(int a, int b, double r) {
    double s = opt_.cost == GreedyCost::smallest_result ? r : r - opt_.alpha * (size_[a] + size_[b]);
    if (opt_.temperature > 0) {
      s = (s >= 0 ? 1.0 : -1.0) * std::log2(1.0 + std::fabs(s));
      s -= opt_.temperature * rng_.gumbel();
    }
    return {s, r, a, b};
  }

  // Candidates of `id` with every live operand sharing a label (each neighbour once).
  void push_neighbours(int id, bool only_lower) {
    ++epoch_;
    stamp_[id] = epoch_;
    for (const int* p = labels_begin(id); p != labels_end(id); ++p) mark_[*p] = epoch_;
    for (const int* p = labels_begin(id); p != labels_end(id); ++p) {
      const int l = *p;
      const int* cs = carriers_.data() + carrier_begin_[l];
      for (int k = 0, m = carrier_count_[l]; k < m; ++k) {
        const int other = cs[k];
        if (stamp_[other] == epoch_) continue;
        if (only_lower && other > id) continue;
        stamp_[other] = epoch_;
        ++ops_;
        queue_.push_back(candidate(std::min(id, other), std::max(id, other), result_size_marked(id, other)));
        std::push_heap(queue_.begin(), queue_.end(), std::greater<Candidate>());
      }
    }
  }

  void remove_carrier(int l, int id) {
    int* cs = carriers_.data() + carrier_begin_[l];
    int& m = carrier_count_[l];
    for (int k = 0; k < m; ++k)
      if (cs[k] == id) {
        cs[k] = cs[--m];  // order is irrelevant: candidates are ordered by their full key
        return;
      }
  }

  void contract(int a, int b, int r) {
    // append_result appends while reading a's and b's labels from the pool: make room first so nothing moves.
    const size_t need = pool_.size() + (begin_[a + 1] - begin_[a]) + (begin_[b + 1] - begin_[b]);
    if (pool_.capacity() < need) pool_.reserve(std::max(need, 2 * pool_.capacity()));
    begin_[r] = static_cast<int>(pool_.size());
    size_[r] = kept_size_[r] = append_result(a, b);
    begin_[r + 1] = static_cast<int>(pool_.size());
    for (const int* p = labels_begin(a); p != labels_end(a); ++p) --live_[*p], remove_carrier(*p, a);
    for (const int* p = labels_begin(b); p != labels_end(b); ++p) --live_[*p], remove_carrier(*p, b);
    for (const int* p = labels_begin(r); p != labels_end(r); ++p) {
      ++live_[*p];
      carriers_[carrier_begin_[*p] + carrier_count_[*p]++] = r;
    }
    alive_[a] = alive_[b] = 0;
    alive_[r] = 1;
    steps_.emplace_back(a, b);
  }

  const Network& net_;
  GreedyOptions opt_;
  SplitMix64 rng_;
  std::vector<int> pool_;              // label sets of all ids, back to back
  std::vector<int> begin_;             // id -> start in pool_ (begin_[id + 1] is its end once id exists)
  std::vector<double> size_;            // elements of each operand
  std::vector<double> kept_size_;       // the same without an input's private labels (summed in its first step)
  std::vector<uint32_t> mark_;          // label -> epoch_ when it is a label of the operand proposing pairs
  std::vector<char> alive_;
  std::vector<int> carriers_;          // per label a slice [carrier_begin_[l], + carrier_count_[l]) of live ids
  std::vector<int> carrier_begin_, carrier_count_;
  std::vector<int> live_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  std::vector<Candidate> queue_;       // binary min-heap
  std::vector<Step> steps_;
  std::vector<double> extent_;  // max(extent, 1) as double
  int64_t ops_ = 0, charged_ = 0;  // queue pushes and pops (the work units' count), and how many were charged
  bool abandon_ = true;
};

}  // namespace

namespace {

std::optional<ContractionTree> run_greedy(const Network& network, const GreedyOptions& options, bool abandon) {
  if (!(options.temperature >= 0))
    fail(ErrorKind::invalid_argument, "greedy temperature is {}; it must be >= 0", options.temperature);
  if (options.cost == GreedyCost::opt_einsum) {
    if (options.temperature != 0 || options.alpha != 1)
      fail(ErrorKind::invalid_argument, "greedy rule opt_einsum takes no alpha or temperature (it reproduces "
           "opt_einsum's deterministic rule); use memory_removed for a randomised greedy");
    return greedy_opt_einsum(network, options.deadline);
  }
  return GreedyRun(network, options, abandon).run();
}

}  // namespace

std::optional<ContractionTree> greedy_until(const Network& network, const GreedyOptions& options) {
  return run_greedy(network, options, true);
}

ContractionTree greedy(const Network& network, const GreedyOptions& options) {
  if (options.cost == GreedyCost::opt_einsum) {  // its run has no "never abandon" mode: it charges nothing here
    GreedyOptions o = options;
    o.deadline = nullptr;
    return *run_greedy(network, o, false);
  }
  return *run_greedy(network, options, false);
}

ContractionTree best_greedy(const Network& network, GreedyCost* rule, const Deadline& deadline, bool* complete,
                            bool* first_overran) {
  GreedyOptions first{GreedyCost::memory_removed};
  first.deadline = &deadline;  // charged, never abandoned
  ContractionTree best = greedy(network, first);
  if (first_overran) *first_overran = deadline.expired();
  double best_flops = evaluate(network, best, false).flops;
  deadline.charge(evaluate_units(network));
  if (rule) *rule = GreedyCost::memory_removed;
  if (complete) *complete = true;
  for (GreedyCost c : {GreedyCost::opt_einsum, GreedyCost::smallest_result}) {
    GreedyOptions o{c};
    o.deadline = &deadline;
    std::optional<ContractionTree> t = deadline.expired() ? std::nullopt : greedy_until(network, o);
    if (!t) {
      if (complete) *complete = false;
      break;
    }
    const double f = evaluate(network, *t, false).flops;
    deadline.charge(evaluate_units(network));
    if (f < best_flops) {
      best = std::move(*t), best_flops = f;
      if (rule) *rule = c;
    }
  }
  return best;
}

}  // namespace einstage::einsum
