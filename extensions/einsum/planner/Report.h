// Plan reports: what a contraction tree does, step by step, in text (for people) and JSON (for the CLI and tests).
//
// Planning stage, presentation only: every number comes from evaluate() (ContractionTree.h); labels print as the
// user wrote them (Subscripts::names, else the code point). The text form mirrors opt_einsum's einsum_path: per step
// the pairwise contraction, its flops and result size; totals (tc, sc, rw, peak memory) and the speed-up over a naive
// single loop nest. JSON is produced and read with nlohmann_json inside Report.cpp only.
// Depends on ContractionTree.h, PlanSpec.h (for PlanResult), Slicing.h (for SlicedPlan) and Notation.h (label_name and the subscripts printer).
#pragma once

#include "extensions/einsum/planner/PlanSpec.h"
#include "extensions/einsum/planner/Slicing.h"

#include <string>
#include <string_view>

namespace einstage::einsum {

/// Text report. `method` names the planner (PlanResult::method); may be empty.
std::string report_text(const Subscripts& subscripts, const ContractionTree& tree, const TreeCost& cost,
                        std::string_view method = {});
std::string report_text(const Subscripts& subscripts, const PlanResult& result);

/// JSON report: {"contraction", "method", "num_inputs", "steps" (ids), "path" (positions), "flops", "tc", "sc",
/// "rw", "write", "peak_memory", "naive_flops", "speedup", "details": [{"left","right","result","contraction",
/// "flops","result_size"}]}. Numbers are doubles; indent < 0 gives one line.
std::string report_json(const Subscripts& subscripts, const ContractionTree& tree, const TreeCost& cost,
                        std::string_view method = {}, int indent = -1);

/// Sliced plan (Slicing.h), text: the limit, the sliced labels and their extents, the number of slices, one slice's
/// flops / tc / sc, the total flops and the overhead over the unsliced tree, then the per-slice tree's report.
std::string sliced_report_text(const Subscripts& subscripts, const SlicedPlan& plan);
/// JSON: report_json()'s fields for the per-slice tree, plus "max_elements", "sliced" (label names),
/// "sliced_extents", "num_slices", "slice_flops", "total_flops", "total_tc", "unsliced_flops", "unsliced_tc",
/// "unsliced_sc", "overhead", "rounds".
std::string sliced_report_json(const Subscripts& subscripts, const SlicedPlan& plan, int indent = -1);

/// Reads a tree back from a JSON report (or any object with "num_inputs" and "steps"); validates it.
/// Errors (kind parse / invalid_argument) say which field is wrong.
ContractionTree tree_from_json(std::string_view json);

}  // namespace einstage::einsum
