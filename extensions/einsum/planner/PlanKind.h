// PlanKind, PlanQuality, GreedyCost and PlanSpec, the shape-independent request for a contraction order: the types
// alone, without the planners. PlanSpec.h (which includes this header) declares resolve() and plan(), which turn a
// spec into a tree; headers that only carry a spec (exec/Executor.h's EinsumOptions, op/EinsumOp.h's payload)
// include this one, so a consumer of <einstage/einstage.h> does not compile the planners' headers (Deadline.h with
// <chrono>, Search.h with <functional>). The text form and the kinds are described in PlanSpec.h.
// Planning stage; depends on ContractionTree.h (Step) only.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::einsum {

/// The greedy rules (Greedy.h describes each).
enum class GreedyCost { memory_removed, smallest_result, opt_einsum };

enum class PlanKind : uint8_t { automatic, greedy, optimal, anneal, left_to_right, path, tree };
enum class PlanQuality : uint8_t { fast, normal, high };

std::string_view to_string(PlanKind kind);        // "auto", "greedy", ...
std::string_view to_string(PlanQuality quality);  // "fast", "normal", "high"

struct PlanSpec {
  PlanKind kind = PlanKind::automatic;
  double budget_s = 0;                        // 0 = the kind's default (auto fast/normal: none, their work is fixed; auto high, anneal: 1 s)
  uint64_t seed = 0;
  PlanQuality quality = PlanQuality::normal;  // auto only
  GreedyCost greedy_cost = GreedyCost::memory_removed;  // greedy only
  int trials = 0;                             // anneal / auto(high): 0 = as many as the budget allows
  int64_t moves = 0;                          // anneal / auto(high): rotations per trial, 0 = from the budget
  std::vector<Step> steps;                    // path: positions; tree: ids
  int64_t max_memory = 0;                     // bytes per slice's intermediates (Slicing.h); 0 = no limit

  static PlanSpec automatic_plan(PlanQuality quality = PlanQuality::normal);
  static PlanSpec greedy_plan(GreedyCost cost = GreedyCost::memory_removed);
  static PlanSpec optimal_plan();
  static PlanSpec anneal_plan(double budget_s = 0, uint64_t seed = 0, int trials = 0);
  static PlanSpec left_to_right_plan();
  static PlanSpec path_plan(std::vector<Step> positions);
  static PlanSpec tree_plan(std::vector<Step> ids);

  std::string to_string() const;
  /// Parses the text form; errors (kind parse) show the text and the position of the problem.
  static PlanSpec parse(std::string_view text);

  bool operator==(const PlanSpec& other) const = default;
  /// FNV-1a of the text form: stable across processes and builds.
  uint64_t hash() const;
};

struct PlanSpecHash {
  size_t operator()(const PlanSpec& spec) const { return static_cast<size_t>(spec.hash()); }
};

}  // namespace einstage::einsum
