#include "extensions/einsum/planner/Report.h"

#include "extensions/einsum/notation/Notation.h"
#include "ir/Error.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace einstage::einsum {

namespace {

std::string labels_text(const Subscripts& s, const std::vector<Label>& labels) {
  std::string out;
  for (Label l : labels) out += label_name(s, l);
  return out;
}

std::string step_text(const Subscripts& s, const StepCost& step) {
  return labels_text(s, step.left_labels) + "," + labels_text(s, step.right_labels) + "->" +
         labels_text(s, step.result_labels);
}

}  // namespace

std::string report_text(const Subscripts& s, const ContractionTree& tree, const TreeCost& cost,
                        std::string_view method) {
  std::string out;
  out += fmt::format("  contraction: {}\n", to_string(s));
  if (!method.empty()) out += fmt::format("       method: {}\n", method);
  out += fmt::format("         tree: {}\n", tree.to_string());
  out += fmt::format("  naive flops: {:.4e}\n", cost.naive_flops);
  out += fmt::format("planned flops: {:.4e}  (tc {:.2f}, sc {:.2f}, rw {:.2f})\n", cost.flops, cost.tc, cost.sc,
                     cost.rw);
  const double speedup = cost.flops > 0 ? cost.naive_flops / cost.flops : 1.0;
  out += fmt::format("     speed-up: {:.3g}x\n", speedup);
  out += fmt::format(" largest intermediate: {:.4g} elements, peak memory {:.4g} elements\n", cost.max_intermediate,
                     cost.peak_memory);
  out += fmt::format("{:>4}  {:<12}  {:<24}  {:>11}  {:>11}\n", "step", "ids", "contraction", "flops", "result size");
  for (size_t k = 0; k < cost.steps.size(); ++k) {
    const StepCost& st = cost.steps[k];
    out += fmt::format("{:>4}  {:<12}  {:<24}  {:>11.4e}  {:>11.4e}\n", k,
                       fmt::format("({},{})->{}", st.left, st.right, st.result), step_text(s, st), st.flops,
                       st.result_size);
  }
  return out;
}

std::string report_text(const Subscripts& s, const PlanResult& r) { return report_text(s, r.tree, r.cost, r.method); }

std::string report_json(const Subscripts& s, const ContractionTree& tree, const TreeCost& cost,
                        std::string_view method, int indent) {
  nlohmann::json j;
  j["contraction"] = to_string(s);
  j["method"] = std::string(method);
  j["num_inputs"] = tree.num_inputs();
  nlohmann::json steps = nlohmann::json::array(), path = nlohmann::json::array();
  for (auto [a, b] : tree.steps()) steps.push_back({a, b});
  for (auto [a, b] : tree.to_positional_path()) path.push_back({a, b});
  j["steps"] = steps;
  j["path"] = path;
  j["flops"] = cost.flops;
  j["tc"] = cost.tc;
  j["sc"] = cost.sc;
  j["rw"] = cost.rw;
  j["write"] = cost.write;
  j["peak_memory"] = cost.peak_memory;
  j["naive_flops"] = cost.naive_flops;
  j["speedup"] = cost.flops > 0 ? cost.naive_flops / cost.flops : 1.0;
  nlohmann::json details = nlohmann::json::array();
  for (const StepCost& st : cost.steps)
    details.push_back({{"left", st.left},
                       {"right", st.right},
                       {"result", st.result},
                       {"contraction", step_text(s, st)},
                       {"flops", st.flops},
                       {"result_size", st.result_size}});
  j["details"] = details;
  return j.dump(indent);
}

namespace {

std::string sliced_labels_text(const Subscripts& s, const SlicedPlan& plan) {
  std::string out;
  for (size_t k = 0; k < plan.sliced.size(); ++k)
    out += fmt::format("{}{}({})", k ? " " : "", label_name(s, plan.sliced[k]), plan.sliced_extents[k]);
  return out.empty() ? "none" : out;
}

double log2_or_0(double x) { return x > 0 ? std::log2(x) : 0.0; }

}  // namespace

std::string sliced_report_text(const Subscripts& s, const SlicedPlan& plan) {
  std::string out;
  out += fmt::format(" memory limit: {:.0f} elements per intermediate\n", plan.max_elements);
  out += fmt::format("       sliced: {}\n", sliced_labels_text(s, plan));
  out += fmt::format("       slices: {:.0f}\n", plan.num_slices);
  out += fmt::format("    per slice: {:.4e} flops (tc {:.2f}, sc {:.2f})\n", plan.slice_cost.flops, plan.slice_cost.tc,
                     plan.slice_cost.sc);
  out += fmt::format("  total flops: {:.4e} (tc {:.2f}); unsliced {:.4e} (tc {:.2f}, sc {:.2f})\n", plan.total_flops,
                     log2_or_0(plan.total_flops), plan.unsliced_cost.flops, plan.unsliced_cost.tc,
                     plan.unsliced_cost.sc);
  out += fmt::format("     overhead: {:.4f}x (over the same tree unsliced: {:.4f}x)\n", plan.overhead,
                     plan.same_tree_overhead);
  return out + report_text(s, plan.tree, plan.slice_cost, plan.method);
}

std::string sliced_report_json(const Subscripts& s, const SlicedPlan& plan, int indent) {
  nlohmann::json j = nlohmann::json::parse(report_json(s, plan.tree, plan.slice_cost, plan.method));
  j["max_elements"] = plan.max_elements;
  nlohmann::json names = nlohmann::json::array();
  for (Label l : plan.sliced) names.push_back(label_name(s, l));
  j["sliced"] = names;
  j["sliced_extents"] = plan.sliced_extents;
  j["num_slices"] = plan.num_slices;
  j["slice_flops"] = plan.slice_cost.flops;
  j["total_flops"] = plan.total_flops;
  j["total_tc"] = log2_or_0(plan.total_flops);
  j["unsliced_flops"] = plan.unsliced_cost.flops;
  j["unsliced_tc"] = plan.unsliced_cost.tc;
  j["unsliced_sc"] = plan.unsliced_cost.sc;
  j["overhead"] = plan.overhead;
  j["same_tree_overhead"] = plan.same_tree_overhead;
  j["rounds"] = plan.rounds;
  return j.dump(indent);
}

ContractionTree tree_from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(ErrorKind::parse, "contraction tree JSON does not parse: {}", e.what());
  }
  if (!j.is_object() || !j.contains("num_inputs") || !j["num_inputs"].is_number_integer())
    fail(ErrorKind::parse, "contraction tree JSON needs an integer field \"num_inputs\"");
  if (!j.contains("steps") || !j["steps"].is_array())
    fail(ErrorKind::parse, "contraction tree JSON needs an array field \"steps\" of [left, right] pairs");
  std::vector<Step> steps;
  for (size_t k = 0; k < j["steps"].size(); ++k) {
    const auto& p = j["steps"][k];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
      fail(ErrorKind::parse, "contraction tree JSON: steps[{}] is {}; expected [left, right] with integer ids", k,
           p.dump());
    steps.emplace_back(p[0].get<int>(), p[1].get<int>());
  }
  return ContractionTree(j["num_inputs"].get<int>(), std::move(steps));
}

}  // namespace einstage::einsum
