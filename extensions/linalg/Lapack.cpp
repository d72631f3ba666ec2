// Batched LAPACK calls for svd, qr and eigh (see Lapack.h).
#include "extensions/linalg/Lapack.h"

#include <complex>
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace einstage::linalg {

namespace {

template <typename T> struct Real { using type = T; };
template <typename T> struct Real<std::complex<T>> { using type = T; };
template <typename T> using real_t = typename Real<T>::type;

// The LAPACKE routines of one element type (column-major layout throughout).
template <typename T> struct Lapack;
#define EINSTAGE_LAPACK_TRAITS(T, P, ORGQR, EVD)                                                                \
  template <> struct Lapack<T> {                                                                                \
    static lapack_int gesdd(char jobz, lapack_int m, lapack_int n, T* a, real_t<T>* s, T* u, lapack_int ldu,   \
                            T* vt, lapack_int ldvt) {                                                          \
      return LAPACKE_##P##gesdd(LAPACK_COL_MAJOR, jobz, m, n, a, std::max<lapack_int>(1, m), s, u, ldu, vt,     \
                                ldvt);                                                                          \
    }                                                                                                           \
    static lapack_int gesvd(char job, lapack_int m, lapack_int n, T* a, real_t<T>* s, T* u, lapack_int ldu,    \
                            T* vt, lapack_int ldvt, real_t<T>* superb) {                                       \
      return LAPACKE_##P##gesvd(LAPACK_COL_MAJOR, job, job, m, n, a, std::max<lapack_int>(1, m), s, u, ldu, vt, \
                                ldvt, superb);                                                                  \
    }                                                                                                           \
    static lapack_int geqrf(lapack_int m, lapack_int n, T* a, T* tau) {                                         \
      return LAPACKE_##P##geqrf(LAPACK_COL_MAJOR, m, n, a, std::max<lapack_int>(1, m), tau);                    \
    }                                                                                                           \
    static lapack_int orgqr(lapack_int m, lapack_int k, T* a, const T* tau) {                                   \
      return LAPACKE_##P##ORGQR(LAPACK_COL_MAJOR, m, k, k, a, std::max<lapack_int>(1, m), tau);                 \
    }                                                                                                           \
    static lapack_int evd(lapack_int n, T* a, real_t<T>* w) {                                                   \
      return LAPACKE_##P##EVD(LAPACK_COL_MAJOR, 'V', 'L', n, a, std::max<lapack_int>(1, n), w);                 \
    }                                                                                                           \
    static lapack_int trtri(lapack_int n, T* a) {                                                               \
      return LAPACKE_##P##trtri(LAPACK_COL_MAJOR, 'U', 'N', n, a, std::max<lapack_int>(1, n));                  \
    }                                                                                                           \
  };
EINSTAGE_LAPACK_TRAITS(float, s, orgqr, syevd)
EINSTAGE_LAPACK_TRAITS(double, d, orgqr, syevd)
EINSTAGE_LAPACK_TRAITS(std::complex<float>, c, ungqr, heevd)
EINSTAGE_LAPACK_TRAITS(std::complex<double>, z, ungqr, heevd)
#undef EINSTAGE_LAPACK_TRAITS

template <typename T> bool finite(const T& x) {
  if constexpr (std::is_same_v<T, real_t<T>>) return std::isfinite(x);
  else return std::isfinite(x.real()) && std::isfinite(x.imag());
}

// Sets a cols x cols column-major block to the identity.
template <typename T> void identity(T* out, int64_t n) {
  std::fill(out, out + n * n, T(0));
  for (int64_t i = 0; i < n; ++i) out[i * n + i] = T(1);
}

[[noreturn]] void fail_converge(LinalgKind kind, std::string_view routine, int64_t batch, lapack_int info) {
  fail(ErrorKind::runtime, "{}: LAPACK {} did not converge on matrix {} of the batch (info {}); the input may be "
       "badly scaled or nearly singular in a way LAPACK cannot resolve", name(kind), routine, batch, info);
}

template <typename T> struct Job {
  const LinalgPayload& p;
  int64_t m, n, k;
  const T* a;                // the operand, column-major, batch after batch
  std::vector<Tensor>& out;  // the results, column-major

  template <typename U> U* result(size_t r, int64_t batch, int64_t size) const {
    return out[r].data<U>() + batch * size;
  }

  void svd(int64_t b) const {
    const bool full = p.full();
    const int64_t ucols = full ? m : k, vrows = full ? n : k;
    std::vector<T> work(a + b * m * n, a + (b + 1) * m * n);
    T* u = result<T>(0, b, m * ucols);
    real_t<T>* s = result<real_t<T>>(1, b, k);
    T* vt = result<T>(2, b, vrows * n);
    if (k == 0) {  // no singular values; a full factor is the identity
      if (full) identity(u, m), identity(vt, n);
      return;
    }
    const char jobz = full ? 'A' : 'S';
    const auto lm = static_cast<lapack_int>(m), ln = static_cast<lapack_int>(n);
    lapack_int info = Lapack<T>::gesdd(jobz, lm, ln, work.data(), s, u, lm, vt, static_cast<lapack_int>(vrows));
    EIN_ASSERT(info >= 0, "svd: ?gesdd argument {} is illegal", -info);
    if (info == 0) return;
    std::copy(a + b * m * n, a + (b + 1) * m * n, work.begin());
    std::vector<real_t<T>> superb(static_cast<size_t>(std::max<int64_t>(1, k)));
    info = Lapack<T>::gesvd(jobz, lm, ln, work.data(), s, u, lm, vt, static_cast<lapack_int>(vrows), superb.data());
    EIN_ASSERT(info >= 0, "svd: ?gesvd argument {} is illegal", -info);
    if (info > 0) fail_converge(LinalgKind::svd, "?gesdd and then ?gesvd", b, info);
  }

  void qr(int64_t b) const {
    std::vector<T> work(a + b * m * n, a + (b + 1) * m * n);
    T* q = result<T>(0, b, m * k);
    T* r = result<T>(1, b, k * n);
    if (k == 0) {
      std::fill(r, r + k * n, T(0));
      return;
    }
    std::vector<T> tau(static_cast<size_t>(k));
    lapack_int info = Lapack<T>::geqrf(static_cast<lapack_int>(m), static_cast<lapack_int>(n), work.data(), tau.data());
    EIN_ASSERT(info == 0, "qr: ?geqrf returned info {}", info);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) r[j * k + i] = i <= j ? work[static_cast<size_t>(j * m + i)] : T(0);
    info = Lapack<T>::orgqr(static_cast<lapack_int>(m), static_cast<lapack_int>(k), work.data(), tau.data());
    EIN_ASSERT(info == 0, "qr: ?orgqr/?ungqr returned info {}", info);
    std::copy(work.begin(), work.begin() + m * k, q);
  }

  void inv_upper(int64_t b) const {
    T* r = result<T>(0, b, n * n);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) r[j * n + i] = i <= j ? a[b * n * n + j * n + i] : T(0);
    if (n == 0) return;
    lapack_int info = Lapack<T>::trtri(static_cast<lapack_int>(n), r);
    EIN_ASSERT(info >= 0, "inv_upper: ?trtri argument {} is illegal", -info);
    if (info > 0)
      fail(ErrorKind::invalid_argument, "inv_upper: matrix {} of the batch is singular (its diagonal entry {} is "
           "zero; LAPACK ?trtri info {}); a qr of a rank-deficient matrix has no derivative", b, info - 1, info);
  }

  void eigh(int64_t b) const {
    T* v = result<T>(1, b, n * n);
    std::copy(a + b * n * n, a + (b + 1) * n * n, v);
    if (n == 0) return;
    lapack_int info = Lapack<T>::evd(static_cast<lapack_int>(n), v, result<real_t<T>>(0, b, n));
    EIN_ASSERT(info >= 0, "eigh: ?syevd/?heevd argument {} is illegal", -info);
    if (info > 0) fail_converge(LinalgKind::eigh, is_complex(dtype_v<T>) ? "?heevd" : "?syevd", b, info);
  }
};

}  // namespace

std::vector<Tensor> decompose(const LinalgPayload& payload, const Tensor& a_in, ExecutionContext& context) {
  const Tensor a = a_in.is_col_major() ? a_in : a_in.contiguous();
  const int64_t m = a.extent(0), n = a.extent(1), k = std::min(m, n);
  Shape rest(a.shape().begin() + 2, a.shape().end());
  const int64_t batches = element_count(rest);
  auto shaped = [&](std::initializer_list<int64_t> head) {
    Shape s(head);
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  };
  const DType real = real_part_type(a.dtype());
  std::vector<Tensor> out;
  switch (payload.kind()) {
    case LinalgKind::svd: {
      const bool full = payload.full();
      out = {Tensor::empty(a.dtype(), shaped({m, full ? m : k})), Tensor::empty(real, shaped({k})),
             Tensor::empty(a.dtype(), shaped({full ? n : k, n}))};
      break;
    }
    case LinalgKind::qr:
      out = {Tensor::empty(a.dtype(), shaped({m, k})), Tensor::empty(a.dtype(), shaped({k, n}))};
      break;
    case LinalgKind::eigh:
      out = {Tensor::empty(real, shaped({n})), Tensor::empty(a.dtype(), shaped({n, n}))};
      break;
    case LinalgKind::inv_upper:
      out = {Tensor::empty(a.dtype(), shaped({n, n}))};
      break;
  }
  dispatch_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, int64_t>) {
      fail(ErrorKind::dtype, "{}: operand 0 has dtype i64; expected f32, f64, c64 or c128", name(payload.kind()));
    } else {
      const T* data = a.data<T>();
      const int64_t total = a.numel();
      for (int64_t i = 0; i < total; ++i)
        if (!finite(data[i]))
          fail(ErrorKind::invalid_argument, "{}: operand 0 has a non-finite element (nan or inf) at flat index {} "
               "(column-major); LAPACK was not called; check the input for nan or inf", name(payload.kind()), i);
      Job<T> job{payload, m, n, k, data, out};
      context.pool().parallel_for(batches, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          switch (payload.kind()) {
            case LinalgKind::svd: job.svd(b); break;
            case LinalgKind::qr: job.qr(b); break;
            case LinalgKind::eigh: job.eigh(b); break;
            case LinalgKind::inv_upper: job.inv_upper(b); break;
          }
        }
      });
    }
  });
  return out;
}

}  // namespace einstage::linalg
