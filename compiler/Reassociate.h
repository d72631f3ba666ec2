// Reassociation of matrix products: a product whose large intermediate is only ever multiplied by thin matrices is
// not formed. With V = A B (or a sum of such products, V = A₁ B₁ + A₂ B₂ + ...) read only by products V W or W V
// (either possibly transposed), each such product becomes Σ A_i (B_i W) or Σ (W A_i) B_i, when that takes fewer
// multiply-adds than forming V and then the products. Stage: compiler pass (Program -> Program); depends on ir only.
//
// Where it pays: second-order AD through a truncated svd (examples/ising). The tangent of the discarded block's
// singular vectors, dU_R = U_K X_KR + U_R X_RR, is a [256, 240] matrix formed by a 256 x 240 x 240 product, and every
// reader multiplies it by a [240, 16] or [256, 16] matrix, so U_R (X_RR Z) costs a fifteenth of (U_R X_RR) Z.
//
// First, a transpose (perm [1, 0]) that is the only reader of a product becomes the product with its operands
// swapped, (A B)ᵀ = Bᵀ Aᵀ. Only plain matrix products take part: dot_general of two rank-2 operands with one contracting axis each, no batch
// axes and constant extents, and add of two such terms (recursively), each intermediate read by nothing else and
// not an output. A candidate whose readers are not all such products is left alone, and so is one that would not
// get at least a third cheaper. Post: the same parameters, outputs and results up to rounding (the sums are
// associated differently); the rewritten readers keep their value ids, and the dead intermediates are removed.
// Tests: tests/compiler/test_reassociate.cpp.
#pragma once

#include "ir/Program.h"

namespace einstage {

/// See the header comment. Takes the program by value, like the other passes.
Program reassociate_products(Program program);

}  // namespace einstage
