// The staged drivers of real svd and eigh (see Staged.h).
#include "extensions/linalg/Staged.h"

#include <lapack.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

// LAPACK's auxiliary routines that lapack.h does not declare, and the two BLAS-3 routines of the trailing updates
// (gfortran's calling convention: character lengths last).
extern "C" {
void slabrd_(const lapack_int*, const lapack_int*, const lapack_int*, float*, const lapack_int*, float*, float*,
             float*, float*, float*, const lapack_int*, float*, const lapack_int*);
void dlabrd_(const lapack_int*, const lapack_int*, const lapack_int*, double*, const lapack_int*, double*, double*,
             double*, double*, double*, const lapack_int*, double*, const lapack_int*);
void sgebd2_(const lapack_int*, const lapack_int*, float*, const lapack_int*, float*, float*, float*, float*, float*,
             lapack_int*);
void dgebd2_(const lapack_int*, const lapack_int*, double*, const lapack_int*, double*, double*, double*, double*,
             double*, lapack_int*);
void slatrd_(const char*, const lapack_int*, const lapack_int*, float*, const lapack_int*, float*, float*, float*,
             const lapack_int*, size_t);
void dlatrd_(const char*, const lapack_int*, const lapack_int*, double*, const lapack_int*, double*, double*, double*,
             const lapack_int*, size_t);
void ssytd2_(const char*, const lapack_int*, float*, const lapack_int*, float*, float*, float*, lapack_int*, size_t);
void dsytd2_(const char*, const lapack_int*, double*, const lapack_int*, double*, double*, double*, lapack_int*,
             size_t);
void sgemm_(const char*, const char*, const lapack_int*, const lapack_int*, const lapack_int*, const float*,
            const float*, const lapack_int*, const float*, const lapack_int*, const float*, float*, const lapack_int*,
            size_t, size_t);
void dgemm_(const char*, const char*, const lapack_int*, const lapack_int*, const lapack_int*, const double*,
            const double*, const lapack_int*, const double*, const lapack_int*, const double*, double*,
            const lapack_int*, size_t, size_t);
void ssyr2k_(const char*, const char*, const lapack_int*, const lapack_int*, const float*, const float*,
             const lapack_int*, const float*, const lapack_int*, const float*, float*, const lapack_int*, size_t,
             size_t);
void dsyr2k_(const char*, const char*, const lapack_int*, const lapack_int*, const double*, const double*,
             const lapack_int*, const double*, const lapack_int*, const double*, double*, const lapack_int*, size_t,
             size_t);
}

namespace einstage::linalg::staged {
namespace {

using I = lapack_int;
I li(int64_t x) { return static_cast<I>(x); }

// The routines of one real type, arguments by value.
template <typename T> struct F;
#define EINSTAGE_STAGED_ROUTINES(T, P)                                                                            \
  template <> struct F<T> {                                                                                       \
    static void labrd(I m, I n, I nb, T* a, I lda, T* d, T* e, T* tq, T* tp, T* x, I ldx, T* y, I ldy) {          \
      P##labrd_(&m, &n, &nb, a, &lda, d, e, tq, tp, x, &ldx, y, &ldy);                                           \
    }                                                                                                             \
    static void gebd2(I m, I n, T* a, I lda, T* d, T* e, T* tq, T* tp, T* work) {                                 \
      I info = 0;                                                                                                 \
      P##gebd2_(&m, &n, a, &lda, d, e, tq, tp, work, &info);                                                      \
    }                                                                                                             \
    static void gemm(char ta, char tb, I m, I n, I k, T alpha, const T* a, I lda, const T* b, I ldb, T beta,      \
                     T* c, I ldc) {                                                                               \
      P##gemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);                             \
    }                                                                                                             \
    static I bdsdc(char uplo, I n, T* d, T* e, T* u, I ldu, T* vt, I ldvt, T* work, I* iwork) {                   \
      I info = 0, iq = 0;                                                                                         \
      T q{};                                                                                                      \
      LAPACK_##P##bdsdc(&uplo, "I", &n, d, e, u, &ldu, vt, &ldvt, &q, &iq, work, iwork, &info);                   \
      return info;                                                                                                \
    }                                                                                                             \
    static void latrd(I n, I nb, T* a, I lda, T* e, T* tau, T* w, I ldw) {                                        \
      P##latrd_("L", &n, &nb, a, &lda, e, tau, w, &ldw, 1);                                                       \
    }                                                                                                             \
    static void sytd2(I n, T* a, I lda, T* d, T* e, T* tau) {                                                     \
      I info = 0;                                                                                                 \
      P##sytd2_("L", &n, a, &lda, d, e, tau, &info, 1);                                                           \
    }                                                                                                             \
    static void syr2k(I n, I k, T alpha, const T* a, I lda, const T* b, I ldb, T beta, T* c, I ldc) {             \
      P##syr2k_("L", "N", &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);                                \
    }                                                                                                             \
    static I stedc(I n, T* d, T* e, T* z, I ldz, T* work, I lwork, I* iwork, I liwork) {                          \
      I info = 0;                                                                                                 \
      LAPACK_##P##stedc("I", &n, d, e, z, &ldz, work, &lwork, iwork, &liwork, &info);                            \
      return info;                                                                                                \
    }                                                                                                             \
    static void larft(char storev, I n, I k, const T* v, I ldv, const T* tau, T* t, I ldt) {                      \
      LAPACK_##P##larft("F", &storev, &n, &k, v, &ldv, tau, t, &ldt);                                             \
    }                                                                                                             \
    static void larfb(char side, char trans, char storev, I m, I n, I k, const T* v, I ldv, const T* t, I ldt,    \
                      T* c, I ldc, T* work, I ldwork) {                                                           \
      LAPACK_##P##larfb(&side, &trans, "F", &storev, &m, &n, &k, v, &ldv, t, &ldt, c, &ldc, work, &ldwork);       \
    }                                                                                                             \
  };
EINSTAGE_STAGED_ROUTINES(float, s)
EINSTAGE_STAGED_ROUTINES(double, d)
#undef EINSTAGE_STAGED_ROUTINES

// Block sizes, measured at 128 and 1024 on a two-core AVX-512 Xeon with OpenBLAS 0.3.21 (docs/performance.md).
// ?labrd panels: 8 below kLarge, 16 from there (LAPACK: unblocked below 128, else 32; at 1024 16 is 3% faster on one
// thread and even on two).
int64_t brd_panel(int64_t k);
constexpr int64_t kTrdPanel = 16;      // ?latrd panels (LAPACK: 32)
constexpr int64_t kTrdUnblocked = 32;  // the last columns by ?sytd2 (LAPACK's crossover)
constexpr int64_t kLarge = 512;        // from here ?labrd panels of 16, and eigh's third stage in two column halves

int64_t brd_panel(int64_t k) { return k < kLarge ? 8 : 16; }

int64_t apply_block(int64_t k) { return k < 256 ? 16 : k < kLarge ? 32 : 96; }
int64_t parts(int64_t k) { return k >= kLarge ? 2 : 1; }
std::pair<int64_t, int64_t> range(int64_t count, int64_t part, int64_t of) {
  return {count * part / of, count * (part + 1) / of};
}

// Q C for Q = H_0 ... H_{k-1}, the reflectors in the columns of v below its diagonal (?ormqr 'L', 'N'): C is rows x
// cols, blocks of nb from the last. `buffer`: nb² + cols * nb elements.
template <typename T>
void apply_q_left(int64_t rows, int64_t cols, int64_t k, const T* v, int64_t ldv, const T* tau, T* c, int64_t ldc,
                  int64_t nb, T* buffer) {
  if (k <= 0 || cols <= 0) return;
  T* t = buffer;
  T* work = buffer + nb * nb;
  for (int64_t i = (k - 1) / nb * nb; i >= 0; i -= nb) {
    const int64_t ib = std::min(nb, k - i);
    const T* vi = v + i + i * ldv;
    F<T>::larft('C', li(rows - i), li(ib), vi, li(ldv), tau + i, t, li(nb));
    F<T>::larfb('L', 'N', 'C', li(rows - i), li(cols), li(ib), vi, li(ldv), t, li(nb), c + i, li(ldc), work,
                li(cols));
  }
}

// C Pᵀ for P = G_0 ... G_{k-1}, the reflectors in the rows of v right of its diagonal (?ormlq 'R', 'N' as ?ormbr
// 'P', 'R', 'T' calls it): C is rows x cols, blocks of nb from the last. `buffer`: nb² + rows * nb elements.
template <typename T>
void apply_p_right(int64_t rows, int64_t cols, int64_t k, const T* v, int64_t ldv, const T* tau, T* c, int64_t ldc,
                   int64_t nb, T* buffer) {
  if (k <= 0 || rows <= 0) return;
  T* t = buffer;
  T* work = buffer + nb * nb;
  for (int64_t i = (k - 1) / nb * nb; i >= 0; i -= nb) {
    const int64_t ib = std::min(nb, k - i);
    const T* vi = v + i + i * ldv;
    F<T>::larft('R', li(cols - i), li(ib), vi, li(ldv), tau + i, t, li(nb));
    F<T>::larfb('R', 'T', 'R', li(rows), li(cols - i), li(ib), vi, li(ldv), t, li(nb), c + i * ldc, li(ldc), work,
                li(rows));
  }
}

// The largest |entry| (finite input: the caller checked), written so that the compiler vectorises it.
template <typename T> T max_abs(const T* a, int64_t count) {
  T r = 0;
  for (int64_t i = 0; i < count; ++i) {
    const T v = std::abs(a[i]);
    r = v > r ? v : r;
  }
  return r;
}

}  // namespace

// Workspace: e, tauq, taup (K each), then the larger of the reduction's ((M + N) x panel, and ?gebd2's max(M, N))
// and ?bdsdc's 3K² + 4K.
template <typename T> bool Svd<T>::takes(int64_t m, int64_t n, bool full) {
  const int64_t k = std::min(m, n), bound = k * 11 / 6;  // ?gesdd's MNTHR
  return k >= 2 && std::max(m, n) < bound && (!full || m == n);
}

template <typename T> Svd<T>::Svd(int64_t m, int64_t n) : m_(m), n_(n), k_(std::min(m, n)), nb_(apply_block(k_)) {
  const int64_t reduce = (m + n) * brd_panel(k_) + std::max(m, n);
  sizes_.work = 3 * k_ + std::max(reduce, 3 * k_ * k_ + 4 * k_);
  sizes_.iwork = 8 * k_;
  sizes_.task = nb_ * (nb_ + std::max(m, n));
}

template <typename T> bool Svd<T>::in_range(const T* a) const {
  const T eps = std::numeric_limits<T>::epsilon(), safmin = std::numeric_limits<T>::min();
  const T small = std::sqrt(safmin) / eps, big = T(1) / small, anrm = max_abs(a, m_ * n_);
  return !(anrm > 0 && anrm < small) && !(anrm > big);
}

template <typename T> int Svd<T>::reduce_and_solve(T* a, T* s, T* u, T* vt, T* work, int* iwork) const {
  const int64_t m = m_, n = n_, k = k_;
  T* e = work;
  T* tauq = work + k;
  T* taup = work + 2 * k;
  T* rest = work + 3 * k;
  // Stage 1: ?gebrd's loop with its crossover at the panel size (S holds the diagonal).
  const int64_t nb = brd_panel(k);
  int64_t i = 0;
  for (; i < k - nb; i += nb) {
    T* x = rest;
    T* y = rest + m * nb;
    const int64_t mi = m - i, ni = n - i;
    F<T>::labrd(li(mi), li(ni), li(nb), a + i + i * m, li(m), s + i, e + i, tauq + i, taup + i, x, li(m), y, li(n));
    F<T>::gemm('N', 'T', li(mi - nb), li(ni - nb), li(nb), T(-1), a + i + nb + i * m, li(m), y + nb, li(n), T(1),
               a + i + nb + (i + nb) * m, li(m));
    F<T>::gemm('N', 'N', li(mi - nb), li(ni - nb), li(nb), T(-1), x + nb, li(m), a + i + (i + nb) * m, li(m), T(1),
               a + i + nb + (i + nb) * m, li(m));
    for (int64_t j = i; j < i + nb; ++j) {
      a[j + j * m] = s[j];
      if (m >= n) a[j + (j + 1) * m] = e[j];
      else a[j + 1 + j * m] = e[j];
    }
  }
  if (i < k) F<T>::gebd2(li(m - i), li(n - i), a + i + i * m, li(m), s + i, e + i, tauq + i, taup + i, rest);
  // Stage 2: the bidiagonal's svd in the top K x K corners of U (ld M) and Vᴴ (ld K; ?bdsdc writes all of both
  // corners), zeros elsewhere.
  for (int64_t j = 0; j < k && m > k; ++j) std::fill(u + j * m + k, u + (j + 1) * m, T(0));
  std::fill(vt + k * k, vt + k * n, T(0));
  return F<T>::bdsdc(m >= n ? 'U' : 'L', li(k), s, e, u, li(m), vt, li(k), rest, iwork);
}

// Two tasks, U and Vᴴ whole: a range of Vᴴ's rows is a strided half-height panel for ?larfb, and at 1024 two such
// halves take a third longer than the whole.
template <typename T> int64_t Svd<T>::tasks() const { return 2; }

template <typename T>
void Svd<T>::back_transform(int64_t t, const T* a, const T* work, T* u, T* vt, T* task_buffer) const {
  const int64_t m = m_, n = n_, k = k_;
  const T* tauq = work + k;
  const T* taup = work + 2 * k;
  if (t == 0) {  // U = Q U_B
    if (m >= n) apply_q_left(m, k, k, a, m, tauq, u, m, nb_, task_buffer);
    else apply_q_left(m - 1, k, m - 1, a + 1, m, tauq, u + 1, m, nb_, task_buffer);
  } else {  // Vᴴ = V_Bᴴ Pᵀ
    if (m >= n) apply_p_right(k, n - 1, n - 1, a + m, m, taup, vt + k, k, nb_, task_buffer);
    else apply_p_right(k, n, m, a, m, taup, vt, k, nb_, task_buffer);
  }
}

// Workspace: e, tau (N each), then the larger of ?latrd's N x panel and ?stedc's query; iwork ?stedc's query.
template <typename T> bool Eigh<T>::takes(int64_t n) { return n >= 2; }

template <typename T>
Eigh<T>::Eigh(int64_t n, int64_t columns) : n_(n), columns_(columns > 0 ? columns : n), nb_(apply_block(n)) {
  T query{}, x{};
  I iquery = 0;
  F<T>::stedc(li(n), &x, &x, &x, li(n), &query, -1, &iquery, -1);
  sizes_.work = 2 * n + std::max(n * kTrdPanel, static_cast<int64_t>(query));
  sizes_.iwork = std::max<int64_t>(1, iquery);
  sizes_.task = nb_ * (nb_ + n);
}

template <typename T> bool Eigh<T>::in_range(const T* a) const {
  const T eps = std::numeric_limits<T>::epsilon(), safmin = std::numeric_limits<T>::min();
  const T small = std::sqrt(safmin / eps), big = T(1) / small;
  T anrm = 0;
  for (int64_t j = 0; j < n_; ++j) anrm = std::max(anrm, max_abs(a + j + j * n_, n_ - j));
  return !(anrm > 0 && anrm < small) && !(anrm > big);
}

template <typename T> int Eigh<T>::reduce_and_solve(T* a, T* w, T* z, T* work, int* iwork) const {
  const int64_t n = n_;
  T* e = work;
  T* tau = work + n;
  T* rest = work + 2 * n;
  // Stage 1: ?sytrd's loop (lower) with panels of kTrdPanel (W holds the diagonal).
  const int64_t nb = kTrdPanel;
  int64_t i = 0;
  for (; i < n - kTrdUnblocked; i += nb) {
    F<T>::latrd(li(n - i), li(nb), a + i + i * n, li(n), e + i, tau + i, rest, li(n));
    F<T>::syr2k(li(n - i - nb), li(nb), T(-1), a + i + nb + i * n, li(n), rest + nb, li(n), T(1),
                a + i + nb + (i + nb) * n, li(n));
    for (int64_t j = i; j < i + nb; ++j) a[j + 1 + j * n] = e[j], w[j] = a[j + j * n];
  }
  F<T>::sytd2(li(n - i), a + i + i * n, li(n), w + i, e + i, tau + i);
  // Stage 2: the tridiagonal's eigenvectors in Z.
  return F<T>::stedc(li(n), w, e, z, li(n), rest, li(sizes_.work - 2 * n), iwork, li(sizes_.iwork));
}

template <typename T> int64_t Eigh<T>::tasks() const { return parts(n_); }

template <typename T> void Eigh<T>::back_transform(int64_t t, const T* a, const T* work, T* z, T* task_buffer) const {
  const int64_t n = n_;
  const auto [c0, c1] = range(columns_, t, parts(n));
  apply_q_left(n - 1, c1 - c0, n - 1, a + 1, n, work + n, z + 1 + c0 * n, n, nb_, task_buffer);
}

template class Svd<float>;
template class Svd<double>;
template class Eigh<float>;
template class Eigh<double>;

}  // namespace einstage::linalg::staged
