#include "extensions/einsum/planner/Slicing.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>

namespace einstage::einsum {

namespace {

struct Unit {
  std::string_view name;
  int shift;
};
constexpr Unit kUnits[] = {{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}};

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
    const int64_t bytes = static_cast<int64_t>(elements) * element_bytes;
    // Round up to a whole MiB / KiB so the suggestion is a size the parser takes and that fits.
    for (const Unit& u : kUnits) {
      const int64_t unit = int64_t{1} << u.shift;
      if (bytes >= unit) return format_memory_size((bytes + unit - 1) / unit * unit);
    }
    return format_memory_size(bytes);
  }
  return fmt::format("{:.0f} elements", elements);
}

std::string term_text(const Subscripts& s, int input) {
  std::string t;
  for (Label l : s.inputs[static_cast<size_t>(input)]) t += label_name(s, l);
  return t;
}

struct Work {
  Network net;               // the sliced network: sliced labels at extent 1
  std::vector<char> sliced;  // dense id -> sliced
};

void set_sliced(Work& w, const Network& full, int label, bool on) {
  w.sliced[label] = on;
  w.net.extent[label] = on ? 1 : full.extent[label];
  w.net.log2_extent[label] = on ? 0.0 : full.log2_extent[label];
}

// The label to slice next, among the unsliced summed labels of the intermediates above the limit: the one that
// costs the fewest bits of total flops (slices x one slice's flops) per bit of excess it removes, the excess being the
// sum over the intermediates above the limit of log2(size / limit), of which slicing a label of extent d removes
// min(log2 d, that intermediate's excess) where the intermediate carries it (ties: more excess removed, then the lower
// dense id). Computed from one per-step evaluation: fixing a label multiplies the slice count by its extent and
// divides the flops of the steps that contain it by the same.
int choose_label(const Work& w, const ContractionTree& tree, double limit, const std::map<Label, int>& dense) {
  const TreeCost cost = evaluate(w.net, tree, true);
  const int L = w.net.num_labels;
  std::vector<double> flops_without(L, 0.0);  // sum of flops of the steps that do not contain the label
  std::vector<double> gain(L, 0.0);           // bits of excess removed
  std::vector<char> in_joint(L, 0);
  for (const StepCost& st : cost.steps) {
    for (Label l : st.left_labels) in_joint[dense.at(l)] = 1;
    for (Label l : st.right_labels) in_joint[dense.at(l)] = 1;
    for (int l = 0; l < L; ++l)
      if (!in_joint[l]) flops_without[l] += st.flops;
    if (st.result_size > limit) {
      const double excess = std::log2(st.result_size / limit);
      for (Label label : st.result_labels) {
        const int l = dense.at(label);
        if (!w.net.in_output[l] && !w.sliced[l] && w.net.extent[l] > 1)
          gain[l] += std::min(w.net.log2_extent[l], excess);
      }
    }
    for (Label l : st.left_labels) in_joint[dense.at(l)] = 0;
    for (Label l : st.right_labels) in_joint[dense.at(l)] = 0;
  }
  int best = -1;
  double best_score = 0;
  for (int l = 0; l < L; ++l) {
    if (!(gain[l] > 0)) continue;
    const double d = static_cast<double>(w.net.extent[l]);
    // slices grow by d; every step without l keeps its flops per slice, a step with l loses the factor d.
    const double total = (cost.flops - flops_without[l]) + flops_without[l] * d;
    const double score = std::max(0.0, std::log2(total / cost.flops)) / gain[l];
    if (best < 0 || score < best_score || (score == best_score && gain[l] > gain[best])) best = l, best_score = score;
  }
  return best;
}

}  // namespace

int64_t parse_memory_size(std::string_view text, std::string_view what) {
  auto bad = [&]() -> int64_t {
    fail(ErrorKind::parse, "{} {} is not a memory size; write a whole number followed by B, KiB, MiB or GiB, "
         "e.g. 256MiB", what, quote_for_message(text));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return bad();
  const std::string_view unit = text.substr(digits);
  int shift = -1;
  for (const Unit& u : kUnits)
    if (unit == u.name) shift = u.shift;
  if (shift < 0) return bad();
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec != std::errc() || n > (std::numeric_limits<int64_t>::max() >> shift))
    fail(ErrorKind::parse, "{} {} is too large; the largest memory size is 8191PiB", what, quote_for_message(text));
  if (n == 0)
    fail(ErrorKind::parse, "{} {} is zero; give a positive memory size, e.g. 256MiB", what, quote_for_message(text));
  return n << shift;
}

std::string format_memory_size(int64_t bytes) {
  for (const Unit& u : kUnits)
    if (bytes != 0 && bytes % (int64_t{1} << u.shift) == 0) return fmt::format("{}{}", bytes >> u.shift, u.name);
  return fmt::format("{}B", bytes);
}

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
  std::map<Label, int> dense;
  for (int l = 0; l < full.num_labels; ++l) dense[full.label[l]] = l;

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
    Work w{full, std::vector<char>(full.num_labels, 0)};
    for (int l : order) set_sliced(w, full, l, true);
    TreeCost cost = evaluate(w.net, tree, false);
    while (cost.max_intermediate > cap) {
      const int l = choose_label(w, tree, cap, dense);
      // A candidate always exists: an intermediate above the limit that kept only output labels would be no larger
      // than the output, which fits.
      EIN_ASSERT(l >= 0, "no label to slice with an intermediate of {} elements above the limit {}",
                 cost.max_intermediate, cap);
      set_sliced(w, full, l, true);
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
    // Un-slice what the final tree no longer needs, last sliced first.
    for (size_t k = order.size(); k-- > 0;) {
      set_sliced(w, full, order[k], false);
      if (evaluate(w.net, tree, false).max_intermediate <= cap) order.erase(order.begin() + static_cast<std::ptrdiff_t>(k));
      else set_sliced(w, full, order[k], true);
    }
    double slices = 1;
    for (int l : order) slices *= static_cast<double>(full.extent[l]);
    pass.total = slices * evaluate(w.net, tree, false).flops;
    pass.tree = std::move(tree);
    pass.order = std::move(order);
    return pass;
  };
  Pass best = slice_pass(base.tree, {});
  if (may_reconfigure && !best.order.empty() && !deadline.expired()) {
    // A fresh tree for the sliced extents can route around the sliced labels where local changes cannot: plan one
    // (the greedy rules, reconfigured) and slice it further if needed; keep the cheaper result.
    Work w{full, std::vector<char>(full.num_labels, 0)};
    for (int l : best.order) set_sliced(w, full, l, true);
    ContractionTree fresh = best_greedy(w.net, nullptr, deadline);
    if (full.num_inputs <= 2000 && !deadline.expired()) fresh = reconfigure(w.net, fresh, 8, 4, deadline);
    Pass again = slice_pass(std::move(fresh), best.order);
    if (again.total < best.total) {
      again.reconfigured = true;
      again.rounds += best.rounds;
      best = std::move(again);
    }
  }
  if (deadline.clock_expired() && !deadline.work_spent()) out.stopped_by_budget = true;
  ContractionTree tree = std::move(best.tree);
  const std::vector<int>& order = best.order;
  const bool reconfigured = best.reconfigured;
  out.rounds = best.rounds;
  Work w{full, std::vector<char>(full.num_labels, 0)};
  for (int l : order) set_sliced(w, full, l, true);
  out.tree = std::move(tree);
  for (int l : order) {
    out.sliced.push_back(full.label[l]);
    out.sliced_extents.push_back(full.extent[l]);
    out.num_slices *= static_cast<double>(full.extent[l]);
  }
  out.slice_cost = evaluate(w.net, out.tree);
  out.total_flops = out.num_slices * out.slice_cost.flops;
  out.overhead = out.unsliced_cost.flops > 0 ? out.total_flops / out.unsliced_cost.flops : 1.0;
  if (!order.empty()) out.method += fmt::format("+slice({})", order.size());
  if (reconfigured) out.method += "+reconfigure";
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace einstage::einsum
