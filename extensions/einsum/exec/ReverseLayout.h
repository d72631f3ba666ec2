// How a reverse step of the tree walk (TreeAd.h) lays out its operands and result: which of its two operands (the
// parent's cotangent or the sibling's value) is the contraction's lhs, and in which axis order the cotangent of an
// intermediate node is written. Stage: einsum extension, runtime side; depends on Subscripts.h and ir only.
//
// An operand's cotangent must come out in the operand's own layout, but an intermediate node's cotangent is only
// read by the node's own reverse steps, so its axis order is free. The order the forward gave the node's value is
// often a poor one for the step that writes the cotangent: in the TRG plaquette xwu,yxl,yzd,wzr->uldr the root's
// cotangent uldr times the value ydwr gives the cotangent of wuyl, whose unit-stride axis w comes from the sibling
// while u, l come from uldr, so the GEMM's output rows are not contiguous and the kernel writes through a tile
// buffer (26.8 ms at chi = 32 against 20.6 ms for the same contraction written as ywul, Intel Xeon AVX-512). The
// choice is made once when the plan is prepared, from a cost model of the JIT's GETT (runtime/jit/Gett.h): it fuses
// m and n in the order of C's strides and k in the order of B's, so a tensor whose unit-stride axis is not the first
// of its group in that order is read or written along a large stride (packing a panel from cache lines it uses one
// element of), and C whose unit-stride axis is not an m axis is written through a scatter. The penalty counts the
// elements of each such tensor. It changes which contraction runs, never what it computes: every choice is the same
// dense reverse einsum, run as an EinsumPlan on the same executor and JIT as every step.
#pragma once

#include "extensions/einsum/notation/Subscripts.h"
#include "ir/Tensor.h"

#include <vector>

namespace einstage::einsum {

/// A tensor's axes as stored (column-major): labels and extents.
struct LaidOutTerm {
  const std::vector<Label>& labels;
  const Shape& shape;
};

/// Elements moved along a large stride by the GETT for C = A . B (all three column-major, labels shared by name:
/// m in A and C, n in B and C, k in A and B, batch in all; extent-1 axes and labels in one tensor only are left
/// out): the elements of each tensor whose unit-stride label is not the first of its group in the kernel's
/// traversal order (m, n and batch by C's strides, k by B's), plus C's when its unit-stride label is not an m
/// label. 0 for a GEMM whose three tensors are each read along their unit stride.
double gett_stride_penalty(LaidOutTerm a, LaidOutTerm b, LaidOutTerm c);

/// One way to run a reverse step: `perm` orders the result's axes (result axis i = the node's axis perm[i]; the
/// identity for an operand's cotangent) and `sibling_first` makes the sibling's value the lhs.
struct ReverseLayout {
  std::vector<int> perm;
  bool sibling_first = false;
  bool operator==(const ReverseLayout&) const = default;
};

/// The layouts considered for the cotangent of an intermediate node with labels `node` (distinct), from the parent's
/// cotangent `ct` and the sibling's value `sibling`, in order of preference on equal cost: the node's own order with
/// the cotangent first, then with the sibling first, then dot_general's order [lhs free, rhs free, batch] (then any
/// label in neither operand, in the node's order) with the cotangent as lhs, then with the sibling as lhs.
/// Duplicates are left out.
std::vector<ReverseLayout> reverse_layout_candidates(const std::vector<Label>& ct, const std::vector<Label>& sibling,
                                                     const std::vector<Label>& node);

/// `items` permuted by `perm` (result i = items[perm[i]]).
template <typename T>
std::vector<T> permuted(const std::vector<T>& items, const std::vector<int>& perm) {
  std::vector<T> out;
  out.reserve(perm.size());
  for (int i : perm) out.push_back(items[static_cast<size_t>(i)]);
  return out;
}

}  // namespace einstage::einsum
