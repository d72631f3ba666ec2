#include "extensions/einsum/planner/Slicing.h"

#include "extensions/einsum/planner/Search.h"
#include "extensions/einsum/planner/SliceFinder.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace einstage::einsum {

namespace {

// "N elements" and, when the limit was given in bytes, " (X)" with the bytes of that element size.
std::string elements_text(double elements, int element_bytes) {
  std::string s = fmt::format("{:.0f} elements", elements);
  if (element_bytes > 0 && elements * element_bytes < 9.2e18)
    s += fmt::format(" ({})", format_memory_size(static_cast<int64_t>(elements) * element_bytes));
  return s;
}

// The rounding of a limit in elements back to a byte figure the user can pass ("at least ...").
std::string at_least_text(double elements, int element_bytes) {
  if (element_bytes > 0 && elements * element_bytes < 9.2e18) {
    // Round up to a whole MiB / KiB so the suggestion is a size the parser takes and that fits.
    return format_memory_size(round_up_memory_size(static_cast<int64_t>(elements) * element_bytes));
  }
  return fmt::format("{:.0f} elements", elements);
}

std::string term_text(const Subscripts& s, int input) {
  std::string t;
  for (Label l : s.inputs[static_cast<size_t>(input)]) t += label_name(s, l);
  return t;
}

}  // namespace

Extents slice_extents(const Extents& extents, const std::vector<Label>& sliced) {
  Extents out = extents;
  for (Label l : sliced) out[l] = 1;
  return out;
}

SlicedPlan plan_sliced(const PlanSpec& spec, const Subscripts& subscripts, const Extents& extents,
                       const SliceLimit& limit, const PlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cap = limit.max_elements;
  if (!(cap >= 1))
    fail(ErrorKind::invalid_argument, "memory limit of {:.0f} elements is below one element; give a positive limit",
         cap);
  const Network full = make_network(subscripts, extents);
  for (int i = 0; i < full.num_inputs; ++i)
    if (full.input_size[i] > cap)
      fail(ErrorKind::invalid_argument, "operand {} ('{}') has {} but the memory limit is {}; every operand is read "
           "whole, so raise the limit to at least {}", i, term_text(subscripts, i),
           elements_text(full.input_size[i], limit.element_bytes), elements_text(cap, limit.element_bytes),
           at_least_text(full.input_size[i], limit.element_bytes));
  double output_size = 1;
  for (int l : full.output) output_size *= static_cast<double>(full.extent[l]);
  if (full.num_inputs >= 2 && output_size > cap)
    fail(ErrorKind::invalid_argument, "the output has {} but the memory limit is {}; output labels are never "
         "sliced, so raise the limit to at least {}", elements_text(output_size, limit.element_bytes),
         elements_text(cap, limit.element_bytes), at_least_text(output_size, limit.element_bytes));

  PlanSpec unsliced_spec = spec;
  unsliced_spec.max_memory = 0;
  PlanResult base = plan_contraction(unsliced_spec, subscripts, extents, options);
  SlicedPlan out;
  out.unsliced_tree = base.tree;
  out.unsliced_cost = base.cost;
  out.max_elements = cap;
  out.method = base.method;
  out.stopped_by_budget = base.stopped_by_budget;

  const bool may_reconfigure =
      spec.kind != PlanKind::path && spec.kind != PlanKind::tree && spec.kind != PlanKind::left_to_right;
  const double budget = spec.budget_s > 0 ? spec.budget_s : 0.0;
  const Deadline deadline(options.clock_guard ? budget : 0.0, work_for_budget(budget, full.num_inputs));

  // One pass of the loop from `start` with the labels `order` already sliced: returns the fitted tree and the sliced
  // labels (after un-slicing what the tree no longer needs) and its total flops.
  struct Pass {
    ContractionTree tree;
    std::vector<int> order;
    double total = 0;
    bool reconfigured = false;
    int rounds = 0;
  };
  auto slice_pass = [&](ContractionTree tree, std::vector<int> order) {
    Pass pass;
    SlicedNetwork w(full);
    for (int l : order) w.set(l, true);
    TreeCost cost = evaluate(w.net, tree, false);
    while (cost.max_intermediate > cap) {
      const int l = choose_slice_label(w, tree, cap);
      // A candidate always exists: an intermediate above the limit that kept only output labels would be no larger
      // than the output, which fits.
      EIN_ASSERT(l >= 0, "no label to slice with an intermediate of {} elements above the limit {}",
                 cost.max_intermediate, cap);
      w.set(l, true);
      order.push_back(l);
      ++pass.rounds;
      cost = evaluate(w.net, tree, false);
      if (may_reconfigure && full.num_inputs <= 2000 && !deadline.expired()) {
        ContractionTree t = reconfigure(w.net, tree, 8, 4, deadline);
        const TreeCost c = evaluate(w.net, t, false);
        deadline.charge(evaluate_units(w.net));
        if (c.flops < cost.flops && c.max_intermediate <= std::max(cap, cost.max_intermediate)) {
          tree = std::move(t), cost = c;
          pass.reconfigured = true;
        }
      }
    }
    unslice_unneeded(w, tree, cap, order);
    pass.total = w.num_slices() * evaluate(w.net, tree, false).flops;
    pass.tree = std::move(tree);
    pass.order = std::move(order);
    return pass;
  };
  Pass best = slice_pass(base.tree, {});
  if (may_reconfigure && !best.order.empty() && !deadline.expired()) {
    // A fresh tree for the sliced extents can route around the sliced labels where local changes cannot: plan one
    // (the greedy rules, reconfigured) and slice it further if needed; keep the cheaper result.
    SlicedNetwork w(full);
    for (int l : best.order) w.set(l, true);
    ContractionTree fresh = best_greedy(w.net, nullptr, deadline);
    if (full.num_inputs <= 2000 && !deadline.expired()) fresh = reconfigure(w.net, fresh, 8, 4, deadline);
    Pass again = slice_pass(std::move(fresh), best.order);
    if (again.total < best.total) {
      again.reconfigured = true;
      again.rounds += best.rounds;
      best = std::move(again);
    }
  }
  bool searched = false;
  if (may_reconfigure && !best.order.empty() && budget > 0 && !deadline.expired()) {
    // Slicing inside the tree search: trials scored by their sliced cost, annealed towards the limit (Search.h).
    SearchOptions so;
    so.deadline = deadline;
    so.budget_s = budget;
    so.seed = spec.seed;
    so.threads = options.threads;
    so.progress = options.progress;
    so.slice_limit = cap;
    SearchResult sr = search(full, best.tree, so);
    out.stopped_by_budget |= sr.stopped_by_budget;
    if (sr.flops < best.total) {
      // The search's slices, and a fresh slicing of its tree with reconfiguration between labels: the cheaper.
      Pass again = slice_pass(sr.tree, sr.sliced);
      Pass fresh = slice_pass(std::move(sr.tree), {});
      if (fresh.total < again.total) again = std::move(fresh);
      if (again.total < best.total) {
        again.rounds += best.rounds;
        best = std::move(again);
        searched = true;
      }
    }
  }
  if (deadline.clock_expired() && !deadline.work_spent()) out.stopped_by_budget = true;
  ContractionTree tree = std::move(best.tree);
  const std::vector<int>& order = best.order;
  const bool reconfigured = best.reconfigured;
  out.rounds = best.rounds;
  SlicedNetwork w(full);
  for (int l : order) w.set(l, true);
  out.tree = std::move(tree);
  for (int l : order) {
    out.sliced.push_back(full.label[l]);
    out.sliced_extents.push_back(full.extent[l]);
    out.num_slices *= static_cast<double>(full.extent[l]);
  }
  out.slice_cost = evaluate(w.net, out.tree);
  out.total_flops = out.num_slices * out.slice_cost.flops;
  out.overhead = out.unsliced_cost.flops > 0 ? out.total_flops / out.unsliced_cost.flops : 1.0;
  const double same_tree = evaluate(full, out.tree, false).flops;
  out.same_tree_overhead = same_tree > 0 ? out.total_flops / same_tree : 1.0;
  if (!order.empty()) out.method += fmt::format("+slice({})", order.size());
  if (reconfigured) out.method += "+reconfigure";
  if (searched) out.method += "+sliced_search";
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace einstage::einsum
