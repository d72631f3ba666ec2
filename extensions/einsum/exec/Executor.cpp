// EinsumPlan's queries and dump (see Executor.h; prepare is ExecutorPrepare.cpp, the calls ExecutorRun.cpp).
#include "extensions/einsum/exec/ExecutorImpl.h"

#include "ir/Quote.h"
#include "ir/Size.h"

#include <fmt/format.h>

namespace einstage::einsum {

std::string EinsumPlan::Impl::scratch_what() const {
  std::string largest = largest_step < 0 ? std::string("no intermediate")
                                         : fmt::format("the largest intermediate is step {}'s result {} of {}",
                                                       largest_step, shape_to_string(nodes[metas.size() +
                                                       static_cast<size_t>(largest_step)].shape),
                                                       human_bytes(largest_bytes));
  return fmt::format("the scratch of einsum {} (an arena of {} for the intermediates, where {}, and a workspace "
                     "of {})", quote_for_message(einsum::to_string(subs)), human_bytes(arena), largest,
                     human_bytes(workspace));
}

int64_t EinsumPlan::scratch_bytes() const {
  const Impl& im = *impl_;
  return im.zero_operand || im.metas.size() == 1 ? 0 : im.arena + im.workspace;
}

DType EinsumPlan::dtype() const { return impl_->dtype; }
const Shape& EinsumPlan::output_shape() const { return impl_->output_shape; }
const Subscripts& EinsumPlan::subscripts() const { return impl_->subs; }
const std::map<Label, int64_t>& EinsumPlan::extents() const { return impl_->extents; }
bool EinsumPlan::is_shortcut() const { return impl_->shortcut; }
const ContractionTree& EinsumPlan::tree() const { return impl_->tree; }
const std::vector<StepPlan>& EinsumPlan::steps() const { return impl_->steps; }
int64_t EinsumPlan::peak_intermediate_bytes() const { return impl_->peak; }
int64_t EinsumPlan::arena_bytes() const { return impl_->arena; }
int64_t EinsumPlan::workspace_bytes() const { return impl_->workspace; }

int64_t EinsumPlan::specialised_calls() const {
  int64_t calls = impl_->accumulate_kernel ? impl_->accumulate_kernel->specialised_calls() : 0;
  for (const auto& k : impl_->step_kernels) calls += k->specialised_calls();
  return calls;
}

std::string EinsumPlan::to_string() const {
  const Impl& im = *impl_;
  std::string out = fmt::format("einsum {} dtype {} output {}{}\n", einsum::to_string(im.subs), name(im.dtype),
                                shape_to_string(im.output_shape), im.shortcut ? " (shortcut: one dot_general)" : "");
  if (!im.tree.steps().empty()) out += fmt::format("tree {}\n", im.tree.to_string());
  out += fmt::format("arena {} bytes (peak live {}), workspace {} bytes\n", im.arena, im.peak, im.workspace);
  const int n = static_cast<int>(im.metas.size());
  for (size_t k = 0; k < im.steps.size(); ++k) {
    out += im.steps[k].to_string(im.subs);
    if (im.steps[k].binary && !im.steps[k].final)
      out += fmt::format("  -> arena offset {}\n", im.nodes[static_cast<size_t>(n) + k].offset);
  }
  return out;
}

}  // namespace einstage::einsum
