// The runtime kernel of `gap_factors` (LinalgOp.h): the two elementwise factors of svd's AD rule, H⁺ = (F + G)/2 and
// H⁻ = (F − G)/2 over singular values s_I and s_J, in one pass over the [I, J] grid instead of the eleven passes of
// the same arithmetic as standard ops. Stage: runtime kernels of the linalg extension; depends on the public kernel
// API (extensions/api/Kernels.h) and LinalgOp.h. Single-threaded per call (a grid is at most a few hundred squared),
// so the bits do not depend on the context's threads.
#pragma once

#include "extensions/api/Kernels.h"
#include "extensions/linalg/LinalgOp.h"

#include <vector>

namespace einstage::linalg {

/// H⁺ and H⁻ [I, J, B...] of s_I [I, B...] and s_J [J, B...] (f32 or f64, any strides): with D = s_J,j − s_I,i and
/// P = s_J,j + s_I,i, F = D / (D² + eps) (0 on the diagonal when payload.diagonal()) and G = P / (P² + eps).
std::vector<Tensor> gap_factors(const LinalgPayload& payload, const Tensor& si, const Tensor& sj,
                                ExecutionContext& context);

}  // namespace einstage::linalg
