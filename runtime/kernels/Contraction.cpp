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

// The product of the groups' non-zero extents (0 when one is 0) in `product`, or false when an extent is negative or
// the product does not fit: the allocation-free common case; callers then redo the check through checked_product,
// whose error names what failed. (Contractions run this on every call: a vector and three formatted names per call
// had been a tenth of a small einsum step.)
bool product_fits(std::initializer_list<const std::vector<ContractionProblem::Axis>*> groups, int64_t& product) {
  int64_t n = 1;
  bool zero = false;
  for (const auto* group : groups)
    for (const ContractionProblem::Axis& ax : *group) {
      if (ax.extent < 0) return false;
      if (ax.extent == 0) zero = true;
      else if (__builtin_mul_overflow(n, ax.extent, &n)) return false;
    }
  product = zero ? 0 : n;
  return true;
}

}  // namespace

int64_t ContractionProblem::group_size(const std::vector<Axis>& group, std::string_view what) {
  if (int64_t n = 0; product_fits({&group}, n)) return n;
  return checked_product(extents_of({&group}), what);
}

void ContractionProblem::check_sizes(std::string_view op) const {
  int64_t count = 0;
  if (!product_fits({&m, &k, &batch}, count))
    checked_product(extents_of({&m, &k, &batch}), fmt::format("{}: operand A (m, k, batch axes)", op));
  if (!product_fits({&k, &n, &batch}, count))
    checked_product(extents_of({&k, &n, &batch}), fmt::format("{}: operand B (k, n, batch axes)", op));
  if (!product_fits({&m, &n, &batch}, count))
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
