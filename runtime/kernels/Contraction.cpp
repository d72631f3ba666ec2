#include "runtime/kernels/Contraction.h"

namespace einstage {

int64_t ContractionProblem::flops() const {
  int64_t f = 2;
  for (const auto* group : {&m, &n, &k, &batch})
    for (const Axis& ax : *group) f *= ax.extent;
  return f;
}

}  // namespace einstage
