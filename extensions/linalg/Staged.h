// The staged LAPACK drivers of real svd and eigh: the same three stages as LAPACK's ?gesdd (near-square path) and
// ?syevd, called one by one so that einstage picks their block sizes and runs the third stage on the execution
// context's threads. Stage: runtime kernels of the linalg extension (only Lapack.cpp and BlockSvd.h include this);
// depends on LAPACK and BLAS (OpenBLAS's, or the reference ones) through their Fortran entry points.
//
// - svd of an M x N matrix, K = min(M, N): (1) the reduction to bidiagonal form B = Qᵀ A P, ?gebrd's algorithm
//   (panels of ?labrd, trailing updates by two GEMMs, ?gebd2 for the last columns) with panels of 8 below K = 512
//   and 16 from there (?gebrd's are 32, and it crosses over to its unblocked ?gebd2 below 128, so at K = 128 LAPACK
//   does it all as BLAS-2 calls, two rank-1 updates per column); (2) ?bdsdc ('I'), the divide-and-conquer svd of B;
//   (3) U = Q U_B and Vᴴ = V_Bᴴ Pᵀ, ?ormbr's algorithm (?larft + ?larfb over blocks of reflectors) with blocks of 16
//   below K = 256, 32 below 512 and 96 from there (LAPACK: 32), as two independent tasks, U and Vᴴ. That is
//   ?gesdd's path for a matrix it reduces directly (M < 11 N / 6 and N < 11 M / 6); thinner matrices and full factors
//   of non-square ones keep ?gesdd, which first factors out a QR. A matrix whose largest |entry| is outside ?gesdd's
//   unscaled range [√safmin / ε, its inverse] (or 0 < it below) is also left to ?gesdd, which scales it.
// - eigh of an N x N symmetric matrix (lower triangle): (1) ?sytrd's algorithm (panels of 16 by ?latrd, ?syr2k
//   updates, ?sytd2 for the last 32 columns; LAPACK's panels are 32); (2) ?stedc ('I'), divide and conquer on the
//   tridiagonal; (3) Z = Q Z_T (?ormtr's algorithm, blocks as for svd) as tasks on column ranges of Z: two halves
//   from N = 512 on, else one. eigh with keep back-transforms only the kept columns: at N = 486 and 54 of them the
//   third stage is a ninth of the full one, and ?stedc on a spectrum that decays like a corner transfer matrix's
//   deflates most of its work away, so it costs no more than MRRR (?stemr) or inverse iteration (?stein) for the
//   54 vectors alone (docs/linalg.md). A matrix whose largest |entry| is outside ?syevd's unscaled range [√(safmin / ε), its
//   inverse] is left to ?syevd.
// The stages are LAPACK's own routines with the same arithmetic; only the block sizes and the order of independent
// work differ, so the factors agree with ?gesdd's / ?syevd's to rounding (tests/linalg compares them). The tasks and
// their split depend on the shape alone, so the results do not depend on how many threads run them.
#pragma once

#include <cstdint>

namespace einstage::linalg::staged {

/// Element counts of one staged decomposition's workspace: `work` of T (LAPACK's arrays d, e, tau and the stages'
/// workspace), `iwork` of LAPACK's int, and per third-stage task `task` of T.
struct Sizes {
  int64_t work = 1, iwork = 1, task = 1;
};

/// The staged svd of real M x N matrices (T float or double), thin factors: U M x K (leading dimension M), S (K),
/// Vᴴ K x N (leading dimension K).
template <typename T> class Svd {
 public:
  /// Whether the staged driver applies to this shape: K >= 2, M < 11 N / 6 and N < 11 M / 6, and thin factors or a
  /// square matrix.
  static bool takes(int64_t m, int64_t n, bool full);
  Svd(int64_t m, int64_t n);
  const Sizes& sizes() const { return sizes_; }
  /// Whether ?gesdd would leave the matrix unscaled (else the caller uses ?gesdd).
  bool in_range(const T* a) const;
  /// Stages 1 and 2: `a` (overwritten by the reflectors), then S, and U_B, V_Bᴴ in the top K x K corners of u and vt
  /// (the rest of u and vt zero). Returns ?bdsdc's info.
  int reduce_and_solve(T* a, T* s, T* u, T* vt, T* work, int* iwork) const;
  /// Stage 3: the number of tasks (a function of the shape alone) and task `t` of them, with a buffer of
  /// sizes().task elements of its own; `a` and `work` as reduce_and_solve left them.
  int64_t tasks() const;
  void back_transform(int64_t t, const T* a, const T* work, T* u, T* vt, T* task_buffer) const;

 private:
  int64_t m_, n_, k_, nb_;
  Sizes sizes_;
};

/// The staged eigh of real symmetric N x N matrices (lower triangle read): W ascending, Z N x N; or, with `columns`
/// below N, only that many eigenvectors back-transformed (eigh with keep: the caller picks the tridiagonal's
/// eigenvectors it wants into the first columns of Z).
template <typename T> class Eigh {
 public:
  static bool takes(int64_t n);
  /// `columns`: how many columns the third stage transforms (0: N).
  explicit Eigh(int64_t n, int64_t columns = 0);
  const Sizes& sizes() const { return sizes_; }
  bool in_range(const T* a) const;
  /// Stages 1 and 2: `a` overwritten by the reflectors, W and the tridiagonal's eigenvectors in z (N x N). Returns
  /// ?stedc's info.
  int reduce_and_solve(T* a, T* w, T* z, T* work, int* iwork) const;
  int64_t tasks() const;
  /// Stage 3, task t: Z = Q Z_T on its range of the first `columns` columns of z (leading dimension N).
  void back_transform(int64_t t, const T* a, const T* work, T* z, T* task_buffer) const;

 private:
  int64_t n_, columns_, nb_;
  Sizes sizes_;
};

}  // namespace einstage::linalg::staged
