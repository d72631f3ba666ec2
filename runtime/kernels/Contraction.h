// The pairwise contraction kernel interface: C[m..., n..., batch...] (+)= sum_k A[m..., k..., batch...] * B[k..., n..., batch...]
// over arbitrary element strides (a GETT problem).
//
// Every pairwise einsum step, after diagonals and one-sided sums have been taken, is one ContractionProblem: the
// einsum executor builds it from a StepPlan and the operands' strides; the portable kernel (PortableContraction.cpp)
// and the JIT kernels (runtime/jit/) both execute it, so they are interchangeable and tests compare them. An outer
// product is a problem with no k axes; a batched matmul has batch axes. Strides are in elements and may be any value
// (views, permutations, slices); an axis of extent 1 may be listed or dropped. Sizes are multiplied through ir/Size.h
// only: check(), run first by both kernels, refuses a problem whose A, B or C would have more elements than fit in
// 64 bits before any offset table is built, or whose A, B or C pointer is null while that tensor has elements.
// Depends on ir only.
#pragma once

#include "ir/DType.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace einstage {

class ThreadPool;

struct ContractionProblem {
  /// One axis of the iteration space: its extent and its stride (elements) in each tensor it appears in.
  /// A stride of a tensor the axis does not appear in is ignored.
  struct Axis {
    int64_t extent = 1;
    int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  };
  DType dtype = DType::f64;
  std::vector<Axis> m;      // left free: in A and C
  std::vector<Axis> n;      // right free: in B and C
  std::vector<Axis> k;      // contracted: in A and B
  std::vector<Axis> batch;  // in A, B and C
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  bool accumulate = false;  // false: C = A·B; true: C += A·B
  /// The caller's promise that C is not read again soon (a gradient walk's operand cotangents): a kernel may then
  /// store C past the caches (the JIT's large outer products, runtime/jit/GettOuter.h) instead of evicting what they
  /// hold. A hint only: the same bits either way, and no part of the problem's geometry.
  bool stream_c = false;

  /// Multiply-adds × 2 (× 4 more for complex is not counted); 0 when an extent is 0. Fails (kind shape) when the
  /// count does not fit in 64 bits.
  int64_t flops() const;
  /// The element count of one group of axes (checked_product of their extents; `what` names it in the error).
  static int64_t group_size(const std::vector<Axis>& group, std::string_view what);
  /// Fails (kind shape, "<op>: operand A [...] has more elements than fit in 64 bits") when an extent is negative
  /// or the elements of A (m, k, batch), B (k, n, batch) or C (m, n, batch) do not fit in 64 bits, counting
  /// non-zero extents as NumPy does. Every group size and every product of group sizes within one tensor fits after
  /// it.
  void check_sizes(std::string_view op) const;
  /// check_sizes(op), then fails (kind invalid_argument, "<op>: operand A (m, k, batch axes) [2,3] has 6 elements
  /// but ContractionProblem::a is null; ...") when a, b or c is null while its tensor has elements (a pointer of an
  /// empty tensor is never read). Both kernels run it first, before anything is written.
  void check(std::string_view op) const;
};

/// p with A and B exchanged, C^T = B^T A^T: the same C, with the m and n groups swapped and every axis's A and B
/// strides exchanged. Applying it twice restores p. The einsum executor orients steps with it
/// (extensions/einsum/exec/StepOrientation.h) and the JIT runs its transposed shapes with it (runtime/jit/GettSetup.cpp).
inline void exchange_operands(ContractionProblem& p) {
  std::swap(p.a, p.b);
  std::swap(p.m, p.n);
  for (auto* group : {&p.m, &p.n, &p.k, &p.batch})
    for (ContractionProblem::Axis& ax : *group) std::swap(ax.stride_a, ax.stride_b);
}

/// Executes p with the portable C++ kernel (the reference and fallback). Results are bitwise identical for any
/// number of threads: each output element's sum over k is accumulated in one fixed order.
void contract_portable(const ContractionProblem& p, ThreadPool* pool = nullptr);

}  // namespace einstage
