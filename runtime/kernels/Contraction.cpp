#include "runtime/kernels/Contraction.h"

#include "ir/Size.h"
#include "ir/Tensor.h"

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

void ContractionProblem::check(std::string_view op) const {
  check_sizes(op);
  auto check_pointer = [&](const void* data, std::string_view what, std::string_view field,
                           const std::vector<int64_t>& extents) {
    if (data != nullptr) return;
    const int64_t size = checked_product(extents, what);  // fits: check_sizes passed
    if (size > 0)
      fail(ErrorKind::invalid_argument,
           "{}: {} {} has {} element{} but ContractionProblem::{} is null; point it at the {}'s first element", op,
           what, shape_to_string(extents), size, size == 1 ? "" : "s", field, field == "c" ? "output" : "operand");
  };
  if (a == nullptr) check_pointer(a, "operand A (m, k, batch axes)", "a", extents_of({&m, &k, &batch}));
  if (b == nullptr) check_pointer(b, "operand B (k, n, batch axes)", "b", extents_of({&k, &n, &batch}));
  if (c == nullptr) check_pointer(c, "output C (m, n, batch axes)", "c", extents_of({&m, &n, &batch}));
}

int64_t ContractionProblem::flops() const {
  const std::vector<int64_t> extents = extents_of({&m, &n, &k, &batch});
  for (int64_t e : extents)
    if (e == 0) return 0;
  return checked_mul(2, checked_product(extents, "contraction flops (m, n, k, batch axes)"), "contraction flops");
}

}  // namespace einstage
