// How the linalg runtime calls LAPACK (private to extensions/linalg/, included by Lapack.cpp and BlockSvd.h only):
// LAPACKE's `_work` routines of each element type behind one typed name, the workspace of one call (sizes queried
// once per call, carved out of one 64-byte-aligned scratch buffer), LAPACK's status as the context's test-only hook
// makes of it, the error for a driver that does not converge, and the ?gesvd fallback for a matrix ?gesdd does not
// converge on. Stage: runtime kernels of the linalg extension; the one place besides Staged.cpp that names LAPACK
// (this is the header that includes lapacke.h).
#pragma once

#include "extensions/api/Kernels.h"
#include "extensions/linalg/Lapack.h"

#include <complex>
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string_view>
#include <vector>

namespace einstage::linalg::detail {

template <typename T> struct Real { using type = T; };
template <typename T> struct Real<std::complex<T>> { using type = T; };
template <typename T> using real_t = typename Real<T>::type;

inline lapack_int ld(int64_t rows) { return static_cast<lapack_int>(std::max<int64_t>(1, rows)); }

// The LAPACKE `_work` routines of one element type (column-major throughout). Every routine takes the real workspace
// `rwork` of the complex routines; the real ones ignore it.
template <typename T> struct Lapack;
#define EINSTAGE_LAPACK_COMMON(T, P, ORGQR)                                                                      \
  static lapack_int geqrf(lapack_int m, lapack_int n, T* a, T* tau, T* work, lapack_int lwork) {                 \
    return LAPACKE_##P##geqrf_work(LAPACK_COL_MAJOR, m, n, a, ld(m), tau, work, lwork);                          \
  }                                                                                                              \
  static lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, T* a, const T* tau, T* work,                 \
                          lapack_int lwork) {                                                                    \
    return LAPACKE_##P##ORGQR##_work(LAPACK_COL_MAJOR, m, n, k, a, ld(m), tau, work, lwork);                     \
  }                                                                                                              \
  static lapack_int trtri(lapack_int n, T* a) {                                                                  \
    return LAPACKE_##P##trtri_work(LAPACK_COL_MAJOR, 'U', 'N', n, a, ld(n));                                     \
  }
#define EINSTAGE_LAPACK_REAL(T, P)                                                                               \
  template <> struct Lapack<T> {                                                                                 \
    EINSTAGE_LAPACK_COMMON(T, P, orgqr)                                                                          \
    static lapack_int gesdd(char jobz, lapack_int m, lapack_int n, T* a, T* s, T* u, lapack_int ldu, T* vt,      \
                            lapack_int ldvt, T* work, lapack_int lwork, T*, lapack_int* iwork) {                 \
      return LAPACKE_##P##gesdd_work(LAPACK_COL_MAJOR, jobz, m, n, a, ld(m), s, u, ldu, vt, ldvt, work, lwork,   \
                                     iwork);                                                                     \
    }                                                                                                            \
    static lapack_int gesvd(char job, lapack_int m, lapack_int n, T* a, T* s, T* u, lapack_int ldu, T* vt,       \
                            lapack_int ldvt, T* work, lapack_int lwork, T*) {                                    \
      return LAPACKE_##P##gesvd_work(LAPACK_COL_MAJOR, job, job, m, n, a, ld(m), s, u, ldu, vt, ldvt, work,      \
                                     lwork);                                                                     \
    }                                                                                                            \
    static lapack_int evd(lapack_int n, T* a, T* w, T* work, lapack_int lwork, T*, lapack_int,                   \
                          lapack_int* iwork, lapack_int liwork) {                                                \
      return LAPACKE_##P##syevd_work(LAPACK_COL_MAJOR, 'V', 'L', n, a, ld(n), w, work, lwork, iwork, liwork);    \
    }                                                                                                            \
  };
#define EINSTAGE_LAPACK_COMPLEX(T, P)                                                                            \
  template <> struct Lapack<T> {                                                                                 \
    using R = real_t<T>;                                                                                         \
    EINSTAGE_LAPACK_COMMON(T, P, ungqr)                                                                          \
    static lapack_int gesdd(char jobz, lapack_int m, lapack_int n, T* a, R* s, T* u, lapack_int ldu, T* vt,      \
                            lapack_int ldvt, T* work, lapack_int lwork, R* rwork, lapack_int* iwork) {           \
      return LAPACKE_##P##gesdd_work(LAPACK_COL_MAJOR, jobz, m, n, a, ld(m), s, u, ldu, vt, ldvt, work, lwork,   \
                                     rwork, iwork);                                                              \
    }                                                                                                            \
    static lapack_int gesvd(char job, lapack_int m, lapack_int n, T* a, R* s, T* u, lapack_int ldu, T* vt,       \
                            lapack_int ldvt, T* work, lapack_int lwork, R* rwork) {                              \
      return LAPACKE_##P##gesvd_work(LAPACK_COL_MAJOR, job, job, m, n, a, ld(m), s, u, ldu, vt, ldvt, work,      \
                                     lwork, rwork);                                                              \
    }                                                                                                            \
    static lapack_int evd(lapack_int n, T* a, R* w, T* work, lapack_int lwork, R* rwork, lapack_int lrwork,      \
                          lapack_int* iwork, lapack_int liwork) {                                                \
      return LAPACKE_##P##heevd_work(LAPACK_COL_MAJOR, 'V', 'L', n, a, ld(n), w, work, lwork, rwork, lrwork,     \
                                     iwork, liwork);                                                             \
    }                                                                                                            \
  };
EINSTAGE_LAPACK_REAL(float, s)
EINSTAGE_LAPACK_REAL(double, d)
EINSTAGE_LAPACK_COMPLEX(std::complex<float>, c)
EINSTAGE_LAPACK_COMPLEX(std::complex<double>, z)
#undef EINSTAGE_LAPACK_REAL
#undef EINSTAGE_LAPACK_COMPLEX
#undef EINSTAGE_LAPACK_COMMON

// A size LAPACK's workspace query returned in a floating-point slot; single precision may round it below the exact
// count, so it is rounded up with a margin.
template <typename T> lapack_int queried(const T& value) {
  const double v = static_cast<double>(std::real(value));
  return static_cast<lapack_int>(std::max(1.0, std::ceil(v * (1 + 1e-6)) + 1));
}

// LAPACK's status of `routine`, or what the context's test-only hook makes of it.
inline lapack_int status(LapackStatusHook hook, std::string_view routine, lapack_int info) {
  return hook ? static_cast<lapack_int>(hook(routine, info)) : info;
}

[[noreturn]] inline void fail_converge(LinalgKind kind, std::string_view routine, int64_t batch, lapack_int info) {
  fail(ErrorKind::runtime, "{}: LAPACK {} did not converge on matrix {} of the batch (info {}); the input may be "
       "badly scaled or nearly singular in a way LAPACK cannot resolve", name(kind), routine, batch, info);
}

// Element counts of one matrix's LAPACK workspace (queried once per call) and its carving out of one scratch buffer:
// a copy of the operand (svd, and eigh by the staged driver), tau (qr only), work, rwork (complex svd and eigh), iwork
// (svd and eigh), a third-stage task's buffer (the staged drivers), and all N eigenvectors before the kept ones are
// picked (eigh with keep).
template <typename T> struct Workspace {
  int64_t copy = 0, tau = 0, work = 1, rwork = 1, iwork = 1, task = 0, vectors = 0;

  static constexpr size_t align(size_t bytes) { return (bytes + 63) / 64 * 64; }
  size_t bytes() const {
    return align(sizeof(T) * copy) + align(sizeof(T) * tau) + align(sizeof(T) * work) +
           align(sizeof(real_t<T>) * rwork) + align(sizeof(lapack_int) * iwork) + align(sizeof(T) * task) +
           align(sizeof(T) * vectors);
  }
  struct Buffers {
    T* copy;
    T* tau;
    T* work;
    real_t<T>* rwork;
    lapack_int* iwork;
    T* task;
    T* vectors;
  };
  Buffers carve(std::byte* base) const {
    Buffers b{};
    b.copy = reinterpret_cast<T*>(base), base += align(sizeof(T) * copy);
    b.tau = reinterpret_cast<T*>(base), base += align(sizeof(T) * tau);
    b.work = reinterpret_cast<T*>(base), base += align(sizeof(T) * work);
    b.rwork = reinterpret_cast<real_t<T>*>(base), base += align(sizeof(real_t<T>) * rwork);
    b.iwork = reinterpret_cast<lapack_int*>(base), base += align(sizeof(lapack_int) * iwork);
    b.task = reinterpret_cast<T*>(base), base += align(sizeof(T) * task);
    b.vectors = reinterpret_cast<T*>(base);
    return b;
  }
};

// ?gesvd of the rows x cols matrix in `copy` (overwritten) with a workspace of its own, after ?gesdd failed to
// converge on matrix b (or one of its blocks); an error naming both drivers if ?gesvd does not converge either.
template <typename T>
void gesvd_into(LapackStatusHook hook, int64_t b, char job, lapack_int rows, lapack_int cols, T* copy, real_t<T>* s,
                T* u, lapack_int ldu, T* vt, lapack_int ldvt) {
  using R = real_t<T>;
  T query{}, x{};
  R rx{};
  lapack_int info = Lapack<T>::gesvd(job, rows, cols, &x, &rx, &x, ldu, &x, ldvt, &query, -1, &rx);
  EIN_ASSERT(info == 0, "svd: ?gesvd workspace query returned info {}", info);
  std::vector<T> work(static_cast<size_t>(queried(query)));
  std::vector<R> rwork(static_cast<size_t>(std::max<int64_t>(1, 5 * int64_t(std::min(rows, cols)))));
  info = status(hook, "gesvd", Lapack<T>::gesvd(job, rows, cols, copy, s, u, ldu, vt, ldvt, work.data(),
                                                static_cast<lapack_int>(work.size()), rwork.data()));
  EIN_ASSERT(info >= 0, "svd: ?gesvd argument {} is illegal", -info);
  if (info > 0) fail_converge(LinalgKind::svd, "?gesdd and then ?gesvd", b, info);
}

}  // namespace einstage::linalg::detail
