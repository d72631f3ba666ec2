// A matrix product whose operands' exact zeros split it into independent blocks, run block by block. Stage: runtime.
// Depends on runtime/kernels/Contraction.h only; the dense products of the blocks run on a caller's function (the
// dot_general kernel passes contract() on gathered copies; the JIT runs them in place through offset tables), so
// this file needs no JIT header.
//
// C = A B splits when the bipartite graph of the nonzeros of A (rows i – contracted k) and of B (k – columns j) has
// several components: component c has rows I_c, contracted indices K_c and columns J_c, and C[I_c, J_c] =
// A[I_c, K_c] B[K_c, J_c], with exact zeros everywhere else. The merged matrices of a model with a conserved charge
// (the Ising tensor's Z2 parity: two 128 × 128 blocks per 256 × 256 matrix, up to a permutation that depends on the
// data) and the factors of their block-wise SVDs (every singular vector inside one block) are like that, and so are
// the products the SVD's derivative rule forms of them: their flops fall by the number of blocks squared or more.
// The test costs one pass over A and B (a bit per entry, vector compares where the entries are contiguous, gathers
// on AVX-512 where they are not), after
// an O(M + N) look at A's first column and B's first row, which ends it for dense operands (a column of A without
// zeros joins every row).
//
// Values: each block's product sums its k in ascending order, like the dense product; the dense product's other
// terms are exact zeros times finite values, which change no sum but the sign of a zero, so the result is the dense
// product's, bitwise when the dense kernel sums k in one pass (the JIT's, for K within one KC block) and otherwise
// to rounding. Operands with a nan or an infinity (anywhere in A or B, found by the test) are never split (0 · inf
// must stay nan). Threads: the blocks run
// one after the other, each on the pool given to `dense`, so the bits do not depend on the thread count.
#pragma once

#include "runtime/kernels/Contraction.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace einstage::kernels {

/// Fewest multiply-adds of a product worth testing for blocks: below it the test and the gathers cost about what
/// the blocks save.
inline constexpr double kMinBlockProductMacs = 2.0 * 1024 * 1024;
/// Multiply-adds the dense JIT product does in the time a split spends per element of A, B and C it reads or writes
/// (the test, the gathers, C's zeroing and the scatter; measured in the Ising TRG, where the operands come cold: about
/// 35 multiply-adds per ns against about 1 ns per element). A product splits only when the multiply-adds it saves are
/// at least this many times M K + K N + M N: 256^3 at a quarter of the work does (~480 -> ~280 us), 256 x 256 x 32
/// and 256 x 16 x 240 do not (they ran slower split).
inline constexpr double kBlockSplitMacsPerElement = 32;

/// Runs p block by block when it is a product without a batch axis (any number of m, n and k axes, each group fused
/// into one index: k in the JIT's order, by B's strides then A's, so a block sums its k in the dense GETT's order;
/// overwrite; dtype f32, f64, c64 or c128; at least kMinBlockProductMacs multiply-adds) whose nonzeros split it into
/// at least two blocks holding at most half of its multiply-adds, saving at least kBlockSplitMacsPerElement per
/// element of A, B and C: each block's A and B are gathered into dense
/// column-major matrices, `dense` computes their product (a plain ContractionProblem over those buffers), C is
/// zeroed after the first block's product (so C is untouched if that call throws) and each product is scattered to
/// C. Returns false, having written nothing, for any other problem (the caller runs it densely). The JIT's
/// contract_jit and GettPlan::run call block_product_in_place (below) themselves (Gett.h), so einsum steps split too:
/// the Ising TRG's plaquette steps (16^4 tensors with a Z2 charge, fused rows interleaving the two parities) do a
/// quarter of the work.
bool block_product(const ContractionProblem& p, const std::function<void(const ContractionProblem&)>& dense);

/// One block of a split product as offset tables into the product's own A, B and C (elements): C[mc[i] + nc[j]] =
/// sum over s of A[ma[i] + ka[s]] B[kb[s] + nb[j]], the contracted indices s in the dense product's order.
struct BlockTables {
  std::vector<int64_t> ma, mc;  // the block's rows in A and C
  std::vector<int64_t> nb, nc;  // its columns in B and C
  std::vector<int64_t> ka, kb;  // its contracted indices in A and B
};
/// Runs the blocks of a split product in place: it must first make everything that may fail (kernels), then call
/// `zero_c` (C = 0 at every row and column of the product; nothing has been written before), then overwrite each
/// block's rows and columns of C.
using BlockRunner = std::function<void(std::span<const BlockTables> blocks, const std::function<void()>& zero_c)>;
/// block_product for a caller whose products read strided operands through offset tables (the JIT's GETT, Gett.h):
/// the same rules and the same blocks, nothing gathered or scattered (a 256^3 Ising plaquette step: A and B no longer
/// copied out, C no longer written back). False, having written nothing, when p does not split.
bool block_product_in_place(const ContractionProblem& p, const BlockRunner& run);

}  // namespace einstage::kernels
