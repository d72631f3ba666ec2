// The runtime half of `einstage.linalg.v1`: each decomposition of a batch [M, N, B...] computed by LAPACK, one
// matrix per task on the execution context's pool. Stage: runtime kernels of the linalg extension; depends on the
// public kernel API (extensions/api/Kernels.h), LinalgOp.h and LAPACKE (Debian's liblapacke-dev, whose liblapack.so.3
// is OpenBLAS's LAPACK when libopenblas0 is installed, else the reference LAPACK; docs/linalg.md).
//
// - svd: ?gesdd (divide and conquer, jobz 'S' or 'A'); a matrix on which it does not converge is recomputed with
//   ?gesvd, and only if that fails too is it an error (naming the op, the matrix's batch index and LAPACK's info).
// - qr: ?geqrf, then ?orgqr / ?ungqr for Q; R is the upper triangle of the first K rows.
// - eigh: ?syevd / ?heevd on the lower triangle.
// - inv_upper: ?trtri on the upper triangle (a zero diagonal entry is an error naming the matrix).
// Before LAPACK sees anything the operand is checked to be finite (an error naming the op and operand 0 otherwise).
// Each matrix is one LAPACK call by one task whatever the thread count. Unlike the einsum kernels, the results are
// not promised bitwise equal across runs: OpenBLAS's rounding may depend on the alignment of a matrix in memory and
// on its own threads; they agree to rounding (tests/linalg checks 1 against 3 threads).
#pragma once

#include "extensions/api/Kernels.h"
#include "extensions/linalg/LinalgOp.h"

#include <span>
#include <vector>

namespace einstage::linalg {

/// The factors of `payload`'s decomposition of `a` (of dtype f32, f64, c64 or c128, rank >= 2, any strides), in the
/// order and with the types of infer_linalg_types: svd U, S, Vh; qr Q, R; eigh W, V; inv_upper R⁻¹.
std::vector<Tensor> decompose(const LinalgPayload& payload, const Tensor& a, ExecutionContext& context);

}  // namespace einstage::linalg
