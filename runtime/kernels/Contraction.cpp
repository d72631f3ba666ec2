#include "runtime/kernels/Contraction.h"

#include "ir/Size.h"

#include <fmt/format.h>

namespace einstage {

namespace {

std::vector<int64_t> extents_of(std::initializer_list<const std::vector<ContractionProblem::Axis>*> groups) {
  std::vector<int64_t> extents;
  for (const auto* group : groups)
    for (const ContractionProblem::Axis& ax : *group) extents.push_back(ax.extent);
  return extents;
}

}  // namespace

int64_t ContractionProblem::group_size(const std::vector<Axis>& group, std::string_view what) {
  return checked_product(extents_of({&group}), what);
}

void ContractionProblem::check_sizes(std::string_view op) const {
  checked_product(extents_of({&m, &k, &batch}), fmt::format("{}: operand A (m, k, batch axes)", op));
  checked_product(extents_of({&k, &n, &batch}), fmt::format("{}: operand B (k, n, batch axes)", op));
  checked_product(extents_of({&m, &n, &batch}), fmt::format("{}: output C (m, n, batch axes)", op));
}

int64_t ContractionProblem::flops() const {
  const std::vector<int64_t> extents = extents_of({&m, &n, &k, &batch});
  for (int64_t e : extents)
    if (e == 0) return 0;
  return checked_mul(2, checked_product(extents, "contraction flops (m, n, k, batch axes)"), "contraction flops");
}

}  // namespace einstage
