#include "extensions/einsum/planner/PlanSpec.h"

#include "extensions/einsum/planner/ConnectedDp.h"
#include "extensions/einsum/planner/Exact.h"
#include "extensions/einsum/planner/MemorySize.h"
#include "ir/Error.h"
#include "ir/Hash.h"
#include "ir/Quote.h"
#include "ir/Size.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <optional>

namespace einstage::einsum {

namespace {

constexpr PlanKind kKinds[] = {PlanKind::automatic,     PlanKind::greedy, PlanKind::optimal, PlanKind::anneal,
                               PlanKind::left_to_right, PlanKind::path,   PlanKind::tree};
constexpr PlanQuality kQualities[] = {PlanQuality::fast, PlanQuality::normal, PlanQuality::high};

// Which options a kind accepts in its text form.
bool accepts(PlanKind kind, std::string_view key) {
  if (key == "max_memory") return true;
  if (key == "budget" || key == "seed" || key == "trials" || key == "moves") return kind == PlanKind::automatic || kind == PlanKind::anneal;
  if (key == "quality") return kind == PlanKind::automatic;
  if (key == "cost") return kind == PlanKind::greedy;
  return false;
}

class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  PlanSpec parse() {
    PlanSpec spec;
    skip_space();
    const size_t kind_pos = pos_;
    std::string_view word = identifier();
    std::optional<PlanKind> kind;
    for (PlanKind k : kKinds)
      if (to_string(k) == word) kind = k;
    if (!kind)
      error(kind_pos, fmt::format("unknown plan kind '{}'; expected auto, greedy, optimal, anneal, left_to_right, "
                                  "path[...] or tree[...]", word));
    spec.kind = *kind;
    skip_space();
    if (peek() == '(') {
      ++pos_;
      for (bool first = true;; first = false) {
        skip_space();
        if (peek() == ')' && first) break;
        const size_t key_pos = pos_;
        std::string_view key = identifier();
        if (!accepts(spec.kind, key))
          error(key_pos, fmt::format("option '{}' does not apply to plan kind '{}'", key, to_string(spec.kind)));
        expect('=');
        const size_t value_pos = pos_;
        std::string_view value = token();
        set_option(spec, key, value, value_pos);
        skip_space();
        if (peek() == ',') { ++pos_; continue; }
        break;
      }
      expect(')');
    }
    skip_space();
    const bool wants_steps = spec.kind == PlanKind::path || spec.kind == PlanKind::tree;
    if (wants_steps) {
      expect('[');
      skip_space();
      if (peek() != ']') {
        for (;;) {
          expect('(');
          const int a = integer();
          expect(',');
          const int b = integer();
          expect(')');
          spec.steps.emplace_back(a, b);
          skip_space();
          if (peek() == ',') { ++pos_; continue; }
          break;
        }
      }
      expect(']');
    }
    skip_space();
    if (pos_ != text_.size())
      error(pos_, wants_steps ? "unexpected text after the step list" : "unexpected text after the plan kind");
    return spec;
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& what) {
    fail(ErrorKind::parse, "plan spec {} at column {}: {}", quote_for_message(text_), at + 1, what);
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) error(pos_, fmt::format("expected '{}'", c));
    ++pos_;
    skip_space();
  }
  std::string_view identifier() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_) error(start, "expected a name");
    return text_.substr(start, pos_ - start);
  }
  std::string_view token() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')' && text_[pos_] != ' ') ++pos_;
    if (start == pos_) error(start, "expected a value");
    return text_.substr(start, pos_ - start);
  }
  int integer() {
    skip_space();
    int v = 0;
    auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), v);
    if (ec != std::errc() || end == text_.data() + pos_ || v < 0) error(pos_, "expected a non-negative integer");
    pos_ = end - text_.data();
    skip_space();
    return v;
  }
  void set_option(PlanSpec& spec, std::string_view key, std::string_view value, size_t at) {
    auto whole = [&](auto& out) {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
      return ec == std::errc() && end == value.data() + value.size();
    };
    const std::string shown = escape_for_message(value, '\'');  // only errors use it; plan specs are short
    if (key == "budget") {
      if (!whole(spec.budget_s) || !(spec.budget_s > 0))
        error(at, fmt::format("budget '{}' is not a positive number of seconds", shown));
    } else if (key == "seed") {
      if (!whole(spec.seed)) error(at, fmt::format("seed '{}' is not an unsigned 64-bit integer", shown));
    } else if (key == "trials") {
      if (!whole(spec.trials) || spec.trials <= 0)
        error(at, fmt::format("trials '{}' is not a positive integer", shown));
    } else if (key == "moves") {
      if (!whole(spec.moves) || spec.moves <= 0) error(at, fmt::format("moves '{}' is not a positive integer", shown));
    } else if (key == "max_memory") {
      try {
        spec.max_memory = parse_memory_size(value, "max_memory");
      } catch (const Error& e) {
        error(at, e.what());
      }
    } else if (key == "quality") {
      bool ok = false;
      for (PlanQuality q : kQualities)
        if (to_string(q) == value) spec.quality = q, ok = true;
      if (!ok) error(at, fmt::format("quality '{}' is not one of fast, normal, high", shown));
    } else if (key == "cost") {
      auto c = parse_greedy_cost(value);
      if (!c) error(at, fmt::format("greedy cost '{}' is not one of memory_removed, smallest_result", shown));
      spec.greedy_cost = *c;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view to_string(PlanKind kind) {
  switch (kind) {
    case PlanKind::automatic: return "auto";
    case PlanKind::greedy: return "greedy";
    case PlanKind::optimal: return "optimal";
    case PlanKind::anneal: return "anneal";
    case PlanKind::left_to_right: return "left_to_right";
    case PlanKind::path: return "path";
    case PlanKind::tree: return "tree";
  }
  return "?";
}

std::string_view to_string(PlanQuality quality) {
  switch (quality) {
    case PlanQuality::fast: return "fast";
    case PlanQuality::normal: return "normal";
    case PlanQuality::high: return "high";
  }
  return "?";
}

PlanSpec PlanSpec::automatic_plan(PlanQuality quality) {
  PlanSpec s;
  s.quality = quality;
  return s;
}
PlanSpec PlanSpec::greedy_plan(GreedyCost cost) {
  PlanSpec s;
  s.kind = PlanKind::greedy;
  s.greedy_cost = cost;
  return s;
}
PlanSpec PlanSpec::optimal_plan() {
  PlanSpec s;
  s.kind = PlanKind::optimal;
  return s;
}
PlanSpec PlanSpec::anneal_plan(double budget_s, uint64_t seed, int trials) {
  PlanSpec s;
  s.kind = PlanKind::anneal;
  s.budget_s = budget_s;
  s.seed = seed;
  s.trials = trials;
  return s;
}
PlanSpec PlanSpec::left_to_right_plan() {
  PlanSpec s;
  s.kind = PlanKind::left_to_right;
  return s;
}
PlanSpec PlanSpec::path_plan(std::vector<Step> positions) {
  PlanSpec s;
  s.kind = PlanKind::path;
  s.steps = std::move(positions);
  return s;
}
PlanSpec PlanSpec::tree_plan(std::vector<Step> ids) {
  PlanSpec s;
  s.kind = PlanKind::tree;
  s.steps = std::move(ids);
  return s;
}

std::string PlanSpec::to_string() const {
  std::string s(einsum::to_string(kind));
  std::vector<std::string> opts;
  if (budget_s != 0) opts.push_back(fmt::format("budget={}", budget_s));
  if (seed != 0) opts.push_back(fmt::format("seed={}", seed));
  if (quality != PlanQuality::normal) opts.push_back(fmt::format("quality={}", einsum::to_string(quality)));
  if (greedy_cost != GreedyCost::memory_removed) opts.push_back(fmt::format("cost={}", einsum::to_string(greedy_cost)));
  if (trials != 0) opts.push_back(fmt::format("trials={}", trials));
  if (moves != 0) opts.push_back(fmt::format("moves={}", moves));
  if (max_memory != 0) opts.push_back(fmt::format("max_memory={}", format_memory_size(max_memory)));
  for (size_t i = 0; i < opts.size(); ++i) s += (i == 0 ? "(" : ",") + opts[i] + (i + 1 == opts.size() ? ")" : "");
  if (kind == PlanKind::path || kind == PlanKind::tree) s += ContractionTree::steps_text(steps);
  return s;
}

PlanSpec PlanSpec::parse(std::string_view text) { return SpecParser(text).parse(); }

uint64_t PlanSpec::hash() const { return hash_bytes(to_string()); }

PlanResult plan(const PlanSpec& spec, const Network& net, const PlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = net.num_inputs;
  PlanResult result;
  auto finish = [&](ContractionTree tree, std::string method) {
    result.cost = evaluate(net, tree);
    result.tree = std::move(tree);
    result.method = std::move(method);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  };
  switch (spec.kind) {
    case PlanKind::left_to_right: return finish(ContractionTree::left_to_right(n), "left_to_right");
    case PlanKind::path: return finish(ContractionTree::from_positional_path(n, spec.steps), "path");
    case PlanKind::tree: return finish(ContractionTree(n, spec.steps), "tree");
    case PlanKind::greedy:
      return finish(greedy(net, {spec.greedy_cost}), fmt::format("greedy({})", to_string(spec.greedy_cost)));
    default: break;
  }
  if (n <= 1) return finish(ContractionTree(n, {}), "trivial");
  if (n == 2) return finish(ContractionTree(2, {{0, 1}}), "trivial");
  if (spec.kind == PlanKind::optimal) {
    if (is_chain(net)) return finish(interval_optimal(net), "interval_dp");
    if (n <= ExactOptions{}.max_inputs) return finish(optimal(net), "subset_dp");
    // Larger: the connected-subset DP (optimal over outer-product-free trees), its cap starting at the greedy cost.
    ConnectedDpOptions co;
    co.start_cap = evaluate(net, best_greedy(net), false).flops;
    return finish(*optimal_connected(net, co), "connected_dp");
  }
  // auto and anneal: every greedy rule is a candidate, so the result is never costlier than greedy.
  const double default_budget = spec.kind == PlanKind::anneal || spec.quality == PlanQuality::high ? 1.0 : 0.0;
  const double budget = spec.budget_s > 0 ? spec.budget_s : (spec.trials > 0 ? 0.0 : default_budget);
  // The budget is a work allowance (deterministic) with a clock guard that counts from here (Deadline.h).
  const Deadline budget_end(options.clock_guard ? budget : 0.0, work_for_budget(budget, n));
  GreedyCost rule = GreedyCost::memory_removed;
  // A budget smaller than one greedy run is raised to one greedy run: the first rule always completes.
  bool all_rules = true;
  ContractionTree base = best_greedy(net, &rule, budget_end, &all_rules, &result.budget_raised);
  std::string method = fmt::format("greedy({})", to_string(rule));
  // The last act of plan() is a full evaluation of the chosen tree (0.01-0.02 s at 10 000 inputs); time one now
  // and stop the rest of the work twice that much before the budget ends, so the answer arrives on time.
  const auto eval_start = std::chrono::steady_clock::now();
  double base_flops = evaluate(net, base).flops;
  const double eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
  budget_end.charge(evaluate_units(net));
  const Deadline deadline = budget_end.earlier_by(2 * eval_s);
  // Set when the clock guard ends a phase the work allowance would have let finish: the tree depends on timing.
  auto out_of_budget = [&]() {
    if (!deadline.expired()) return false;
    if (!deadline.work_spent()) result.stopped_by_budget = true;
    return true;
  };
  auto finish_budgeted = [&](ContractionTree tree, std::string name) {
    if (deadline.clock_expired() && !deadline.work_spent()) result.stopped_by_budget = true;
    result.work_units = deadline.used();
    return finish(std::move(tree), std::move(name));
  };
  if (out_of_budget()) return finish_budgeted(std::move(base), method);
  auto consider = [&](ContractionTree t, std::string name) {
    const double f = evaluate(net, t, false).flops;
    deadline.charge(evaluate_units(net));
    if (f < base_flops) base = std::move(t), base_flops = f, method = std::move(name);
  };
  auto run_search = [&]() {
    SearchOptions so;
    so.deadline = deadline;
    so.budget_s = budget;
    so.trials = spec.trials;
    so.anneal_moves = spec.moves > 0 ? spec.moves : -1;
    so.seed = spec.seed;
    so.threads = options.threads;
    so.progress = options.progress;
    SearchResult sr = search(net, base, so);
    result.stopped_by_budget |= sr.stopped_by_budget;
    result.trials_done = sr.trials_done;
    consider(std::move(sr.tree), "anneal");
  };
  if (spec.kind == PlanKind::anneal) {
    run_search();
    return finish_budgeted(std::move(base), method);
  }
  const bool chain = is_chain(net);
  const int exact_limit = spec.quality == PlanQuality::fast ? 10 : spec.quality == PlanQuality::normal ? 12 : 14;
  if (chain) {
    consider(interval_optimal(net), "interval_dp");
    return finish_budgeted(std::move(base), method);
  }
  if (n <= exact_limit) {
    consider(optimal(net), "subset_dp");
    return finish_budgeted(std::move(base), method);
  }
  if (spec.quality == PlanQuality::fast) return finish_budgeted(std::move(base), method);
  // Sparse networks just above the all-subsets limit: the connected-subset DP, bounded by a subset count (so the
  // work, and the answer, do not depend on the clock unless a budget expires first); it gives up quietly.
  const bool high = spec.quality == PlanQuality::high;
  auto try_connected = [&](const Deadline& until) -> std::optional<ContractionTree> {
    ConnectedDpOptions co;
    co.start_cap = base_flops;
    co.max_subsets = high ? 60000 : 10000;
    co.deadline = until;
    std::optional<ContractionTree> t = optimal_connected(net, co);
    if (t) consider(*t, "connected_dp");
    return t;
  };
  if (!high && n <= 30) try_connected(deadline);
  // Fixed work (deterministic unless a budget cuts it): the best contiguous-range tree for moderate n, then
  // reconfiguration of 8-operand subtrees (at most 4 passes) while it is cheap.
  if (n <= 200) {
    consider(interval_optimal(net), "interval_dp");
    deadline.charge(kIntervalDpUnitsPerSplit * int64_t{n} * n * n / 6);
  }
  // The input-order sweep (absorb inputs one by one into a running product): O(n) to build, one evaluation, and on
  // lattices listed in geometric order it is the boundary sweep greedy rules miss (2^115.3 on the 100x100 grid, where
  // every greedy rule is >= 2^152).
  if (!out_of_budget()) {
    consider(ContractionTree::left_to_right(n), "sweep(input order)");
  }
  if (n <= 2000 && !out_of_budget()) {
    const std::string before = method;
    consider(reconfigure(net, base, 8, 4, deadline), "");
    if (method.empty()) method = before + "+reconfigure";
  }
  if (high) {
    // After the cheap fixed work, so a budget the DP cannot fit in still gets normal's answer (a 32-input PEPS
    // spent all of 1 s in the DP and came back with the greedy tree): the DP may use half of what is left, the
    // search the rest.
    if (n <= 40 && !out_of_budget()) {
      const Deadline half = deadline.with_allowance(deadline.allowance_left() / 2);
      std::optional<ContractionTree> dp = try_connected(half);
      deadline.charge(half.used());
      // normal reconfigures its DP tree (its reconfiguration runs after its DP); so does high, so that with an
      // allowance that covers normal's work twice over it is never costlier than normal (tested).
      if (dp && n <= 2000 && !out_of_budget()) consider(reconfigure(net, *dp, 8, 4, deadline), "connected_dp+reconfigure");
    }
    if (!out_of_budget()) run_search();
  }
  return finish_budgeted(std::move(base), method);
}

PlanResult plan_contraction(const PlanSpec& spec, const Subscripts& subscripts, const Extents& extents,
                            const PlanOptions& options) {
  const PlanningForm form = fuse_cotravelling(subscripts, extents);
  PlanResult result = plan(spec, make_network(form.subscripts, form.extents), options);
  // Same totals; re-evaluated so the per-step labels are the caller's, not the fused ones.
  result.cost = evaluate(make_network(subscripts, extents), result.tree);
  return result;
}

ContractionTree resolve(const PlanSpec& spec, const Subscripts& subscripts, const Extents& extents,
                        const PlanOptions& options) {
  return plan_contraction(spec, subscripts, extents, options).tree;
}

Extents grouped_extents(const Subscripts& grouped, const std::map<Label, std::vector<Label>>& groups,
                        const Extents& expanded_extents) {
  Extents out;
  auto add = [&](Label g) {
    if (out.count(g)) return;
    auto it = groups.find(g);
    if (it == groups.end()) {
      auto e = expanded_extents.find(g);
      if (e == expanded_extents.end())
        fail(ErrorKind::invalid_argument, "label '{}' has no extent; give an extent for every expanded label",
             label_name(grouped, g));
      out[g] = e->second;
      return;
    }
    std::vector<int64_t> members;
    for (Label l : it->second) {
      auto e = expanded_extents.find(l);
      if (e == expanded_extents.end())
        fail(ErrorKind::invalid_argument, "axis #{} of group '{}' has no extent; give an extent for every expanded "
             "label", l, label_name(grouped, g));
      members.push_back(e->second);
    }
    out[g] = checked_product(members, "the extents of a group");
  };
  for (const auto& term : grouped.inputs)
    for (Label g : term) add(g);
  for (Label g : grouped.output)
    if (groups.count(g) || expanded_extents.count(g)) add(g);
  return out;
}

ContractionTree resolve_grouped(const PlanSpec& spec, const Subscripts& grouped,
                                const std::map<Label, std::vector<Label>>& groups, const Subscripts& expanded,
                                const Extents& expanded_extents, const PlanOptions& options) {
  if (grouped.inputs.size() != expanded.inputs.size())
    fail(ErrorKind::invalid_argument, "grouped subscripts have {} operand(s) but the expansion has {}",
         grouped.inputs.size(), expanded.inputs.size());
  ContractionTree tree = resolve(spec, grouped, grouped_extents(grouped, groups, expanded_extents), options);
  // The tree names operand positions only, so it applies unchanged; check it against the expansion's extents.
  (void)make_network(expanded, expanded_extents);
  return tree;
}

}  // namespace einstage::einsum
