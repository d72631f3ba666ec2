// SlicePairs: the first choice of the sliced planner made exhaustively -- which labels to slice first.
//
// For one network and one memory limit, every unordered pair of summed labels (then, for the best pairs, every third
// label) is fixed to extent 1 up front and the rest is planned under the same limit with plan_sliced(), which may
// slice further labels. The total is counted exactly: (product of the fixed extents) x plan_sliced's total (its own
// slices x one slice's flops), against the unsliced flops of the whole network. All pairs are screened with a cheap
// deterministic spec, the best are re-planned with the benchmark's spec; sets run on `threads` std::threads, set i on
// thread i % threads, each result stored at its index, so the output is the same at any thread count.
// Used by slicing.cpp (--slice-pairs); header-only because every tools/bench/*.cpp is a program of its own.
// Depends on the planner's Slicing.h and Networks.h.
#pragma once

#include "extensions/einsum/planner/Slicing.h"
#include "tools/bench/Networks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <numeric>
#include <set>
#include <thread>

namespace einstage::bench {

struct FixedChoice {
  std::vector<Label> fixed;  // labels fixed to extent 1 before planning
  double total_flops = 0;    // product of the fixed extents x plan_sliced's total flops on the rest
  double overhead = 0;       // total_flops / the unsliced flops of the whole network
  double slices = 1;         // all slices: fixed and further sliced
  size_t more = 0;           // labels plan_sliced sliced on top of the fixed ones
  double slice_tc = 0, slice_sc = 0;
};

/// The summed labels of a network with extent > 1, in first-appearance order: the labels slicing may fix.
inline std::vector<Label> summed_labels(const Instance& inst) {
  const einsum::Network net = einsum::make_network(inst.subscripts, inst.extents);
  std::vector<Label> out;
  for (int l = 0; l < net.num_labels; ++l)
    if (!net.in_output[l] && net.extent[l] > 1) out.push_back(net.label[l]);
  return out;
}

/// `fixed` at extent 1, the rest planned with plan_sliced under `limit` elements.
inline FixedChoice plan_fixed(const einsum::PlanSpec& spec, const Instance& inst, const std::vector<Label>& fixed,
                              double limit, double unsliced_flops, const einsum::PlanOptions& options) {
  FixedChoice c;
  c.fixed = fixed;
  double fixed_slices = 1;
  for (Label l : fixed) fixed_slices *= static_cast<double>(inst.extents.at(l));
  const einsum::SlicedPlan p =
      einsum::plan_sliced(spec, inst.subscripts, einsum::slice_extents(inst.extents, fixed), {limit}, options);
  c.total_flops = fixed_slices * p.total_flops;
  c.overhead = c.total_flops / unsliced_flops;
  c.slices = fixed_slices * p.num_slices;
  c.more = p.sliced.size();
  c.slice_tc = p.slice_cost.tc, c.slice_sc = p.slice_cost.sc;
  return c;
}

/// plan_fixed for every set, on `threads` threads; result i belongs to sets[i] whatever the thread count.
inline std::vector<FixedChoice> plan_all_fixed(const einsum::PlanSpec& spec, const Instance& inst,
                                               const std::vector<std::vector<Label>>& sets, double limit,
                                               double unsliced_flops, int threads) {
  std::vector<FixedChoice> out(sets.size());
  einsum::PlanOptions options;
  options.clock_guard = false;  // budgets are work only: the same trees on any machine
  // An error (e.g. an operand above the limit) stops that thread's sets and is rethrown once every thread has
  // joined: the first set's error in set order, so the message does not depend on the thread count.
  std::vector<std::exception_ptr> errors(sets.size());
  auto run = [&](size_t first) {
    for (size_t i = first; i < sets.size(); i += static_cast<size_t>(threads)) {
      try {
        out[i] = plan_fixed(spec, inst, sets[i], limit, unsliced_flops, options);
      } catch (...) {
        errors[i] = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run, static_cast<size_t>(t));
  run(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

/// Indices of `choices` by total flops, cheapest first (ties: lower index).
inline std::vector<size_t> ranked(const std::vector<FixedChoice>& choices) {
  std::vector<size_t> order(choices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return choices[a].total_flops < choices[b].total_flops; });
  return order;
}

/// The `n` cheapest of `sets`, whose plans are `choices` (in ranked() order).
inline std::vector<std::vector<Label>> cheapest(const std::vector<FixedChoice>& choices,
                                                const std::vector<std::vector<Label>>& sets, int n) {
  std::vector<std::vector<Label>> out;
  for (size_t k : ranked(choices))
    if (out.size() < static_cast<size_t>(std::max(n, 0))) out.push_back(sets[k]);
  return out;
}

/// "i23 (t5-t13)": a label and the inputs that carry it, so a grid bond can be placed.
inline std::string label_place(const Instance& inst, Label l) {
  std::string carriers;
  for (size_t i = 0; i < inst.subscripts.inputs.size(); ++i) {
    const auto& term = inst.subscripts.inputs[i];
    if (std::find(term.begin(), term.end(), l) != term.end())
      carriers += fmt::format("{}t{}", carriers.empty() ? "" : "-", i);
  }
  return fmt::format("{} ({})", einsum::label_name(inst.subscripts, l), carriers);
}

inline std::string set_text(const Instance& inst, const std::vector<Label>& set) {
  std::string s;
  for (Label l : set) s += fmt::format("{}{}", s.empty() ? "" : ", ", label_place(inst, l));
  return s;
}

/// Counts of overheads per bin: <= 2, (2, 2.5], (2.5, 3], (3, 3.5], (3.5, 4], (4, 6], (6, 10], > 10.
inline std::vector<std::pair<std::string, size_t>> overhead_histogram(const std::vector<FixedChoice>& choices) {
  static constexpr double kEdges[] = {2, 2.5, 3, 3.5, 4, 6, 10};
  std::vector<std::pair<std::string, size_t>> bins;
  double low = 0;
  for (double e : kEdges) {
    bins.push_back({low == 0 ? fmt::format("<= {}x", e) : fmt::format("{}-{}x", low, e), 0});
    low = e;
  }
  bins.push_back({fmt::format("> {}x", low), 0});
  for (const FixedChoice& c : choices) {
    size_t b = 0;
    while (b < std::size(kEdges) && c.overhead > kEdges[b]) ++b;
    ++bins[b].second;
  }
  return bins;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct PairStudyArgs {
  std::string screen_spec = "greedy";  // cheap, deterministic
  int replan = 32;                     // best pairs re-planned with the table's spec
  int triple_pairs = 0;                // best re-planned pairs extended by every third label (0: none)
  int triple_replan = 8;               // best triples re-planned with the table's spec
  int threads = 2;
  int sample = 0;                      // pairs spread over the rest of the screen's ranking, re-planned as a check
  int max_pairs = 0;                   // > 0: only the first pairs (a quick look at the cost of the specs)
};

/// Summary of one stage as a table row and JSON.
inline nlohmann::json stage_report(const std::string& stage, const Instance& inst,
                                   const std::vector<FixedChoice>& choices, double seconds) {
  const std::vector<size_t> order = ranked(choices);
  size_t fit = 0;
  for (const FixedChoice& c : choices) fit += c.more == 0;
  const FixedChoice& best = choices[order.front()];
  fmt::print("{}: {} sets in {:.1f} s; {} fit without slicing more; best total tc {:.2f} = {:.3f}x ({} slices, "
             "slice tc {:.2f} sc {:.2f}, {} more): {}\n", stage, choices.size(), seconds, fit,
             std::log2(best.total_flops), best.overhead, best.slices, best.slice_tc, best.slice_sc, best.more,
             set_text(inst, best.fixed));
  std::string hist;
  nlohmann::json bins = nlohmann::json::object();
  for (const auto& [name, count] : overhead_histogram(choices)) {
    hist += fmt::format("  {}: {}", name, count);
    bins[name] = count;
  }
  fmt::print("  overheads:{}\n", hist);
  nlohmann::json top = nlohmann::json::array();
  for (size_t k = 0; k < std::min<size_t>(order.size(), 5); ++k) {
    const FixedChoice& c = choices[order[k]];
    fmt::print("  #{}: total tc {:.2f} ({:.3f}x), slice tc {:.2f} sc {:.2f}, {} more: {}\n", k + 1,
               std::log2(c.total_flops), c.overhead, c.slice_tc, c.slice_sc, c.more, set_text(inst, c.fixed));
    top.push_back({{"fixed", set_text(inst, c.fixed)}, {"total_tc", std::log2(c.total_flops)},
                   {"overhead", c.overhead}, {"slice_tc", c.slice_tc}, {"slice_sc", c.slice_sc}, {"more", c.more}});
  }
  std::fflush(stdout);
  nlohmann::json all = nlohmann::json::array();  // every set's labels and overhead, in set order
  for (const FixedChoice& c : choices) {
    nlohmann::json names = nlohmann::json::array();
    for (Label l : c.fixed) names.push_back(einsum::label_name(inst.subscripts, l));
    all.push_back({{"fixed", names}, {"overhead", c.overhead}, {"more", c.more}});
  }
  return {{"stage", stage}, {"sets", choices.size()}, {"seconds", seconds}, {"fit_without_more", fit},
          {"best_total_tc", std::log2(best.total_flops)}, {"best_overhead", best.overhead},
          {"best_fixed", set_text(inst, best.fixed)}, {"histogram", bins}, {"top", top}, {"all", all}};
}

/// The whole study for one instance and limit: screen all pairs, re-plan the best, then (optionally) triples.
inline nlohmann::json pair_study(const Instance& inst, const einsum::PlanSpec& table_spec, double limit,
                                 double unsliced_flops, const PairStudyArgs& a) {
  const einsum::PlanSpec screen = einsum::PlanSpec::parse(a.screen_spec);
  const std::vector<Label> labels = summed_labels(inst);
  std::vector<std::vector<Label>> pairs;
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t j = i + 1; j < labels.size(); ++j)
      if (a.max_pairs == 0 || pairs.size() < static_cast<size_t>(a.max_pairs)) pairs.push_back({labels[i], labels[j]});
  fmt::print("\n{}: every pair of its {} summed labels fixed, the rest planned under 2^{:.0f} elements\n", inst.name,
             labels.size(), std::log2(limit));
  nlohmann::json out{{"instance", inst.name}, {"limit_log2", std::log2(limit)}, {"labels", labels.size()},
                     {"screen_spec", screen.to_string()}, {"replan_spec", table_spec.to_string()}};
  nlohmann::json stages = nlohmann::json::array();

  auto t0 = std::chrono::steady_clock::now();
  const std::vector<FixedChoice> screened = plan_all_fixed(screen, inst, pairs, limit, unsliced_flops, a.threads);
  stages.push_back(stage_report(fmt::format("pairs, {}", screen.to_string()), inst, screened, seconds_since(t0)));

  const std::vector<std::vector<Label>> best_pairs = cheapest(screened, pairs, a.replan);
  t0 = std::chrono::steady_clock::now();
  const std::vector<FixedChoice> replanned =
      plan_all_fixed(table_spec, inst, best_pairs, limit, unsliced_flops, a.threads);
  stages.push_back(stage_report(fmt::format("best {} pairs, {}", best_pairs.size(), table_spec.to_string()), inst,
                                replanned, seconds_since(t0)));

  if (a.sample > 0 && pairs.size() > best_pairs.size()) {
    // A check of the screen's ranking: pairs spread evenly over the rest of it, re-planned with the table's spec.
    const std::vector<size_t> order = ranked(screened);
    const size_t rest = pairs.size() - best_pairs.size();
    const size_t count = std::min(rest, static_cast<size_t>(a.sample));
    std::vector<std::vector<Label>> spread;
    std::vector<size_t> index;
    for (size_t k = 0; k < count; ++k) {
      index.push_back(order[best_pairs.size() + k * rest / count]);
      spread.push_back(pairs[index.back()]);
    }
    t0 = std::chrono::steady_clock::now();
    const std::vector<FixedChoice> again = plan_all_fixed(table_spec, inst, spread, limit, unsliced_flops, a.threads);
    nlohmann::json stage = stage_report(
        fmt::format("{} pairs spread over screen ranks {}-{}, {}", count, best_pairs.size() + 1, pairs.size(),
                    table_spec.to_string()), inst, again, seconds_since(t0));
    size_t lower = 0;
    double gain = 1;
    for (size_t k = 0; k < count; ++k) {
      lower += again[k].total_flops < screened[index[k]].total_flops;
      gain = std::max(gain, screened[index[k]].total_flops / again[k].total_flops);
    }
    fmt::print("  {} of {} cheaper than screened, by at most {:.2f}x\n", lower, count, gain);
    stage["cheaper_than_screened"] = lower;
    stage["largest_gain_over_screened"] = gain;
    stages.push_back(stage);
  }

  if (a.triple_pairs > 0) {
    // Every third label on the best re-planned pairs; a triple reached from two of its pairs is planned once.
    std::set<std::vector<Label>> seen;
    std::vector<std::vector<Label>> triples;
    const std::vector<size_t> order = ranked(replanned);
    for (size_t k = 0; k < std::min<size_t>(order.size(), static_cast<size_t>(a.triple_pairs)); ++k)
      for (Label l : labels) {
        std::vector<Label> t = best_pairs[order[k]];
        if (std::find(t.begin(), t.end(), l) != t.end()) continue;
        t.push_back(l);
        std::vector<Label> key = t;
        std::sort(key.begin(), key.end());
        if (seen.insert(key).second) triples.push_back(t);
      }
    t0 = std::chrono::steady_clock::now();
    const std::vector<FixedChoice> screened3 =
        plan_all_fixed(screen, inst, triples, limit, unsliced_flops, a.threads);
    stages.push_back(stage_report(fmt::format("triples on the best {} pairs, {}", a.triple_pairs, screen.to_string()),
                                  inst, screened3, seconds_since(t0)));
    const std::vector<std::vector<Label>> best_triples = cheapest(screened3, triples, a.triple_replan);
    t0 = std::chrono::steady_clock::now();
    const std::vector<FixedChoice> replanned3 =
        plan_all_fixed(table_spec, inst, best_triples, limit, unsliced_flops, a.threads);
    stages.push_back(stage_report(fmt::format("best {} triples, {}", best_triples.size(), table_spec.to_string()),
                                  inst, replanned3, seconds_since(t0)));
  }
  out["stages"] = stages;
  return out;
}

}  // namespace einstage::bench
