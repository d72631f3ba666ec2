// The runtime half of `einstage.linalg.v1`: each decomposition of a batch [M, N, B...] computed by LAPACK, whole
// matrices per thread of the execution context's pool. Stage: runtime kernels of the linalg extension; depends on the
// public kernel API (extensions/api/Kernels.h), LinalgOp.h and LAPACKE (Debian's liblapacke-dev, whose liblapack.so.3
// is OpenBLAS's LAPACK when libopenblas0 is installed, else the reference LAPACK; docs/linalg.md).
//
// - svd: ?gesdd (divide and conquer, jobz 'S' or 'A'), or for real matrices that ?gesdd reduces directly (near
//   square, thin factors) its three stages one by one with einstage's block sizes (Staged.h: reduction, ?bdsdc,
//   back-transformation); a matrix on which either does not converge is recomputed with ?gesvd, and only if that
//   fails too is it an error (naming the op, the matrix's batch index and LAPACK's info).
//   A matrix that is block diagonal up to a permutation of its rows and columns, with exact zeros outside the blocks
//   (the merged tensors of a model with a conserved charge, such as the Ising TRG's Z2 parity), is decomposed block
//   by block (each block's full ?gesdd, the triplets merged in descending order, zero rows and columns and the
//   blocks' null vectors completing the factors): an svd of the same matrix, with exact zeros outside each singular
//   vector's block, at a quarter of the cost for two equal blocks. Finding the blocks is one pass over the first row
//   and column for a dense matrix, else one union-find pass over the entries.
// - qr: ?geqrf, then ?orgqr / ?ungqr for Q; R is the upper triangle of the first K rows.
// - eigh: ?syevd / ?heevd on the lower triangle; real matrices by ?syevd's three stages one by one (Staged.h:
//   ?sytrd's reduction, ?stedc, back-transformation). With keep (LinalgOp.h) the kept eigenvectors are picked from
//   the tridiagonal's (or, without the staged driver, from ?syevd's / ?heevd's) and only they are back-transformed,
//   so W is the full eigh's bit for bit and the kept columns are its columns to rounding: the same tridiagonal
//   eigenvectors and reflectors, but GEMMs over fewer columns may round differently (at N = 486, k = 54 they
//   gave the same bits, at N = 200 and 520 differences of 6e-17; tests/linalg).
// - inv_upper: ?trtri on the upper triangle (a zero diagonal entry is an error naming the matrix).
// These are NumPy's drivers too (np.linalg svd, qr 'reduced', eigh). Before LAPACK sees anything the operand is
// checked to be finite (an error naming the op and operand 0 otherwise). The routines are called through LAPACKE's
// `_work` entry points: the workspace sizes are queried once per call (one shape), and each thread of the pool takes
// a contiguous range of the batch with one workspace from a lease of the context's scratch, so a matrix costs no
// allocation and no second finiteness check. Threads: a batch of two or more matrices is split over the pool in
// whole matrices, each one LAPACK call with OpenBLAS held to one thread of its own, so the two levels never
// oversubscribe the CPUs or queue on OpenBLAS's lock; a single matrix runs on the calling thread, with OpenBLAS's own
// threads (OPENBLAS_NUM_THREADS, else every CPU) when its smaller extent is 512 or more (the staged drivers' third
// stage then runs as tasks on the pool, each on one OpenBLAS thread), else on one OpenBLAS thread
// (threads gain little there, and concurrent callers of small decompositions would oversubscribe the CPUs with
// OpenBLAS threads that spin while they wait). OpenBLAS's count is process-wide: batch calls and single-matrix
// calls take turns (calls of one kind run together), and it is restored when the last leaves; it is found with dlopen
// at run time, and with another LAPACK nothing is set. So results are bitwise the same at any thread count of the
// context, like einsum's: a batch's matrices are single-threaded LAPACK calls on 64-byte-aligned buffers wherever they
// run, and a single matrix never depends on the context's threads (a large one's bits may depend on
// OPENBLAS_NUM_THREADS, which einstage leaves alone; a matrix alone and the same matrix in a batch agree to rounding).
#pragma once

#include "extensions/api/Kernels.h"
#include "extensions/linalg/LinalgOp.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace einstage::linalg {

/// OpenBLAS's process-wide thread count, shared by every Runtime and context of the process (see OpenBlasThreads.h). One
/// object exists while anything holds a share: each linalg executor (one per Runtime that added the module) and each
/// op it prepared, so the object outlives every decomposition that uses it, and the last share to go destroys it.
/// Nothing of it is a static with a destructor, so exit() from any thread tears nothing down under a running
/// decomposition.
class OpenBlasThreads;
std::shared_ptr<OpenBlasThreads> share_openblas_threads();

/// The factors of `payload`'s decomposition of `a` (of dtype f32, f64, c64 or c128, rank >= 2, any strides), in the
/// order and with the types of infer_linalg_types: svd U, S, Vh; qr Q, R; eigh W, V; inv_upper R⁻¹.
std::vector<Tensor> decompose(const LinalgPayload& payload, const Tensor& a, ExecutionContext& context,
                              OpenBlasThreads& blas);

/// Test-only seam, per execution context: while `context` has a hook, the status (info) of every ?gesdd, ?gesvd and
/// ?syevd / ?heevd call that runs on it passes through hook(routine, info) ("gesdd", "gesvd", "syevd", "heevd"; the
/// staged drivers' ?bdsdc and ?stedc report as "gesdd" and "syevd", the drivers whose stages they are) and
/// the decomposition acts on what it returns; other contexts are untouched. No finite input is known to make these
/// routines fail to converge reliably, so this is how tests/linalg drives the fallback from ?gesdd to ?gesvd and the
/// errors carrying LAPACK's info code. nullptr (the default) removes the hook. It lives in the context's extension
/// state (ExecutionContext::extension_state, key "einstage.linalg.v1") and is read once per decomposition.
using LapackStatusHook = int64_t (*)(std::string_view routine, int64_t info);
void set_lapack_status_hook_for_testing(ExecutionContext& context, LapackStatusHook hook);

}  // namespace einstage::linalg
