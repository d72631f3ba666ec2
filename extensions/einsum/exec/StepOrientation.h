// Which operand of a pairwise step the GEMM takes as its left one, chosen per call from the strides the step's output
// has in that call. The JIT's GETT (runtime/jit/Gett.h) writes C in register tiles that run down C's m axes, so a C
// whose contiguous axis is an n axis (a row-major result of a row-major product: NumPy's `ij,jk->ik` on C-ordered
// arrays, or a C-ordered .npy) is stored through a tile buffer one element per cache line; C^T = B^T A^T, the same
// products with the operands' roles exchanged, writes the same C down its contiguous axis and packs both operands
// along their contiguous axes. The executor (ExecutorRun.cpp) orients every binary step this way before it runs it,
// so every caller of an EinsumPlan -- the Python package, the command line on C-ordered files, C++ code with strided
// views, the tree walks -- gets it from the one rule here. The choice depends on the call's strides only: the same
// operands and output give the same bits in every process and at every thread count (real dtypes: the same
// products summed over k in the same order whichever operand is left). Stage: einsum extension, runtime side;
// depends on the kernel API (extensions/api/Kernels.h: ContractionProblem, exchange_operands) only.
#pragma once

#include "extensions/api/Kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

namespace einstage::einsum {

/// True when p should run as C^T = B^T A^T: both p.m and p.n have an axis of extent > 1 and C's smallest stride
/// (in absolute value) over those axes belongs to an n axis. Matrix-vector shapes (no m or no n axis of extent > 1)
/// and a C contiguous along a batch axis keep their roles: the kernel has paths of its own for them.
inline bool should_exchange_operands(const ContractionProblem& p) {
  constexpr int64_t none = std::numeric_limits<int64_t>::max();
  auto smallest = [](const std::vector<ContractionProblem::Axis>& axes) {
    int64_t s = none;
    for (const ContractionProblem::Axis& ax : axes)
      if (ax.extent > 1) s = std::min(s, std::abs(ax.stride_c));
    return s;
  };
  const int64_t in_m = smallest(p.m), in_n = smallest(p.n);
  return in_m != none && in_n != none && in_n < in_m;
}

/// Exchanges p's operands when should_exchange_operands(p) says so; returns whether it did (the caller exchanges
/// them back, with exchange_operands, when it keeps p for another call).
inline bool orient_for_output(ContractionProblem& p) {
  if (!should_exchange_operands(p)) return false;
  exchange_operands(p);
  return true;
}

}  // namespace einstage::einsum
