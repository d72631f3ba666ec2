#include "extensions/einsum/planner/GreedyOptEinsum.h"

#include "ir/Hash.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <queue>
#include <tuple>

namespace einstage::einsum {

namespace {

// Exact non-negative integer below 2^(64 * kLimbs); saturates at the maximum instead of wrapping.
constexpr int kLimbs = 8;
struct Wide {
  std::array<uint64_t, kLimbs> w{};
  int top = 0;  // limbs in use: w[top..] are zero

  static Wide one() {
    Wide x;
    x.w[0] = 1, x.top = 1;
    return x;
  }
  void saturate() {
    w.fill(~uint64_t{0});
    top = kLimbs;
  }
  void mul(uint64_t f) {
    if (top == 0) return;
    if (f == 0) {
      *this = Wide{};
      return;
    }
    unsigned __int128 carry = 0;
    for (int i = 0; i < top; ++i) {
      const unsigned __int128 p = static_cast<unsigned __int128>(w[i]) * f + carry;
      w[i] = static_cast<uint64_t>(p);
      carry = p >> 64;
    }
    if (carry) {
      if (top == kLimbs) return saturate();
      w[top++] = static_cast<uint64_t>(carry);
    }
  }
  friend int compare(const Wide& a, const Wide& b) {
    if (a.top != b.top) return a.top < b.top ? -1 : 1;
    for (int i = a.top - 1; i >= 0; --i)
      if (a.w[i] != b.w[i]) return a.w[i] < b.w[i] ? -1 : 1;
    return 0;
  }
  friend Wide add(const Wide& a, const Wide& b) {
    Wide r;
    const int m = std::max(a.top, b.top);
    uint64_t carry = 0;
    for (int i = 0; i < m; ++i) {
      const unsigned __int128 s = static_cast<unsigned __int128>(a.w[i]) + b.w[i] + carry;
      r.w[i] = static_cast<uint64_t>(s);
      carry = static_cast<uint64_t>(s >> 64);
    }
    r.top = m;
    if (carry) {
      if (m == kLimbs) r.saturate();
      else r.w[r.top++] = carry;
    }
    return r;
  }
  friend Wide sub(const Wide& a, const Wide& b) {  // requires a >= b
    Wide r;
    uint64_t borrow = 0;
    for (int i = 0; i < a.top; ++i) {
      const uint64_t bi = b.w[i];
      const uint64_t d = a.w[i] - bi - borrow;
      borrow = (a.w[i] < bi || (a.w[i] == bi && borrow)) ? 1 : 0;
      r.w[i] = d;
    }
    r.top = a.top;
    while (r.top > 0 && r.w[r.top - 1] == 0) --r.top;
    return r;
  }
};

// |result| - |left| - |right| as sign and magnitude (zero is non-negative).
struct Score {
  bool negative = false;
  Wide magnitude;
  friend int compare(const Score& a, const Score& b) {
    if (a.negative != b.negative) return a.negative ? -1 : 1;
    const int c = compare(a.magnitude, b.magnitude);
    return a.negative ? -c : c;
  }
};

struct Candidate {
  Score score;
  int id2, id1;  // SSA ids when queued, id1 < id2
  int s1, s2;    // slots (keys); s1 is the one with id1
  bool operator>(const Candidate& o) const {
    if (const int c = compare(score, o.score)) return c > 0;
    return std::tie(id2, id1, s1, s2) > std::tie(o.id2, o.id1, o.s1, o.s2);
  }
};

class OptEinsumGreedy {
 public:
  OptEinsumGreedy(const Network& net, const Deadline* deadline) : net_(net), deadline_(deadline) {
    const int n = net.num_inputs;
    in_output_.assign(net.num_labels, 0);
    for (int l = 0; l < net.num_labels; ++l)
      in_output_[l] = net.in_output[l] || (n > 1 && net.num_carriers[l] == n);
    carriers_.resize(net.num_labels);
  }

  std::optional<ContractionTree> run() {
    const int n = net_.num_inputs;
    if (n <= 1) return ContractionTree(n, {});
    next_id_ = n;
    // Hadamard products of identical inputs, in input order.
    for (int i = 0; i < n; ++i) {
      const int s = slot_of(net_.inputs[i]);
      if (slots_[s].alive) {
        steps_.emplace_back(slots_[s].id, i);
        slots_[s].id = next_id_++;
      } else {
        revive(s, i);
      }
    }
    // Per label, carriers in id order: each proposes its best pair with a later carrier.
    for (int l = 0; l < net_.num_labels; ++l) {
      if ((l & 255) == 255 && out_of_budget()) return std::nullopt;
      std::vector<int> cs = carriers_[l];
      std::sort(cs.begin(), cs.end(), [&](int a, int b) { return slots_[a].id < slots_[b].id; });
      for (size_t i = 0; i + 1 < cs.size(); ++i) {
        Candidate best = candidate(cs[i], cs[i + 1]);
        for (size_t j = i + 2; j < cs.size(); ++j) {
          Candidate c = candidate(cs[i], cs[j]);
          if (best > c) best = c;
        }
        queue_.push(best);
      }
    }
    std::vector<int> k12;
    uint32_t pops = 0;
    while (!queue_.empty()) {
      if ((++pops & 255) == 0 && out_of_budget()) return std::nullopt;
      ++ops_;
      const Candidate c = queue_.top();
      queue_.pop();
      if (!slots_[c.s1].alive || !slots_[c.s2].alive) continue;
      result_labels(c.s1, c.s2, k12);
      steps_.emplace_back(slots_[c.s1].id, slots_[c.s2].id);
      kill(c.s1), kill(c.s2);
      const int r = next_id_++;
      const int s = slot_of(k12);
      if (slots_[s].alive) {  // the product already exists: multiply the two now, it keeps the key
        steps_.emplace_back(slots_[s].id, r);
        slots_[s].id = next_id_++;
      } else {
        revive(s, r);
      }
      push_best(s);
    }
    // Outer products: smallest output part first (ties: smaller id).
    using Item = std::tuple<Wide, int, std::vector<int>>;
    auto greater = [](const Item& a, const Item& b) {
      if (const int c = compare(std::get<0>(a), std::get<0>(b))) return c > 0;
      return std::get<1>(a) > std::get<1>(b);
    };
    std::priority_queue<Item, std::vector<Item>, decltype(greater)> rest(greater);
    auto output_part = [&](const std::vector<int>& labels) {
      std::vector<int> out;
      for (int l : labels)
        if (in_output_[l]) out.push_back(l);
      return out;
    };
    for (const auto& slot : slots_)
      if (slot.alive) {
        std::vector<int> o = output_part(slot.labels);
        rest.emplace(size_of(o), slot.id, std::move(o));
      }
    while (rest.size() > 1) {
      Item a = rest.top();
      rest.pop();
      Item b = rest.top();
      rest.pop();
      const int ia = std::get<1>(a), ib = std::get<1>(b);
      steps_.emplace_back(std::min(ia, ib), std::max(ia, ib));
      std::vector<int> u;
      std::set_union(std::get<2>(a).begin(), std::get<2>(a).end(), std::get<2>(b).begin(), std::get<2>(b).end(),
                     std::back_inserter(u));
      rest.emplace(size_of(u), next_id_++, std::move(u));
    }
    out_of_budget();  // charges the rest
    return ContractionTree(n, std::move(steps_));
  }

 private:
  struct Slot {
    std::vector<int> labels;  // the key: sorted dense labels
    Wide size;
    int id = -1;
    bool alive = false;
  };

  Wide size_of(const std::vector<int>& labels) const {
    Wide x = Wide::one();
    for (int l : labels) x.mul(static_cast<uint64_t>(std::max<int64_t>(net_.extent[l], 1)));
    return x;
  }

  // The slot of a key; a key keeps its slot forever (a candidate naming it is valid whenever the key is live).
  int slot_of(const std::vector<int>& key) {
    auto [it, fresh] = key_slot_.emplace(key, static_cast<int>(slots_.size()));
    if (fresh) {
      Slot s;
      s.labels = key;
      s.size = size_of(key);
      slots_.push_back(std::move(s));
    }
    return it->second;
  }

  void revive(int s, int id) {
    slots_[s].alive = true;
    slots_[s].id = id;
    for (int l : slots_[s].labels)
      if (!in_output_[l]) carriers_[l].push_back(s);
  }

  void kill(int s) {
    slots_[s].alive = false;
    for (int l : slots_[s].labels)
      if (!in_output_[l]) {
        auto& cs = carriers_[l];
        cs.erase(std::find(cs.begin(), cs.end(), s));
      }
  }

  // Labels of the product of slots a and b: output labels, shared labels another operand carries, and unshared
  // labels some other operand carries (opt_einsum's reference counts = carriers_ sizes).
  void result_labels(int a, int b, std::vector<int>& out) const {
    out.clear();
    const auto& x = slots_[a].labels;
    const auto& y = slots_[b].labels;
    size_t i = 0, j = 0;
    while (i < x.size() || j < y.size()) {
      int l;
      bool both = false;
      if (j == y.size() || (i < x.size() && x[i] < y[j])) l = x[i++];
      else if (i == x.size() || y[j] < x[i]) l = y[j++];
      else l = x[i], both = true, ++i, ++j;
      if (in_output_[l] || carriers_[l].size() >= (both ? 3u : 2u)) out.push_back(l);
    }
  }

  // Charges the deadline's meter with the work since the last call; true when the run should be abandoned.
  bool out_of_budget() {
    if (!deadline_) return false;
    deadline_->charge((ops_ - charged_) * kOptEinsumGreedyUnitsPerOp);
    charged_ = ops_;
    return deadline_->expired();
  }

  Candidate candidate(int a, int b) {
    ++ops_;
    result_labels(a, b, scratch_);
    Candidate c;
    const Wide r = size_of(scratch_);
    const Wide ab = add(slots_[a].size, slots_[b].size);
    if (compare(r, ab) >= 0) c.score = {false, sub(r, ab)};
    else c.score = {true, sub(ab, r)};
    if (slots_[a].id > slots_[b].id) std::swap(a, b);
    c.id1 = slots_[a].id, c.id2 = slots_[b].id, c.s1 = a, c.s2 = b;
    return c;
  }

  // The new operand's best pair with any live operand sharing a non-output label.
  void push_best(int s) {
    bool any = false;
    Candidate best;
    ++epoch_;
    if (stamp_.size() < slots_.size()) stamp_.resize(slots_.size() * 2, 0);
    stamp_[s] = epoch_;
    for (int l : slots_[s].labels) {
      if (in_output_[l]) continue;
      for (int o : carriers_[l]) {
        if (stamp_[o] == epoch_) continue;
        stamp_[o] = epoch_;
        Candidate c = candidate(s, o);
        if (!any || best > c) best = c, any = true;
      }
    }
    if (any) queue_.push(best);
  }

  const Network& net_;
  const Deadline* deadline_;
  std::vector<char> in_output_;
  std::vector<std::vector<int>> carriers_;  // live slots per non-output label
  std::vector<Slot> slots_;
  // Lookups only (never iterated), so the hash map's order cannot reach the result.
  struct KeyHash {
    size_t operator()(const std::vector<int>& key) const {
      Fnv1a h;
      for (int l : key) h.word(static_cast<uint32_t>(l));
      return static_cast<size_t>(h.value());
    }
  };
  std::unordered_map<std::vector<int>, int, KeyHash> key_slot_;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue_;
  std::vector<Step> steps_;
  std::vector<int> scratch_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  int next_id_ = 0;
  int64_t ops_ = 0, charged_ = 0;  // candidates scored and queue pops (the work units' count), and how many charged
};

}  // namespace

std::optional<ContractionTree> greedy_opt_einsum(const Network& network, const Deadline* deadline) {
  return OptEinsumGreedy(network, deadline).run();
}

}  // namespace einstage::einsum
