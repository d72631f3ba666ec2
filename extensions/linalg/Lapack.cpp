// Batched LAPACK calls for svd, qr and eigh (see Lapack.h).
#include "extensions/linalg/Lapack.h"
#include "extensions/linalg/Staged.h"

#include <complex>
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>

namespace einstage::linalg {

// OpenBLAS's process-wide thread count, when the LAPACK in use is OpenBLAS's (found at run time in the already loaded
// libopenblas.so.0: nothing here links OpenBLAS itself, and with the reference LAPACK there is nothing to set). A batch
// needs it at 1, and so does a small single matrix; a large one needs OpenBLAS's own count (read when first seen:
// OPENBLAS_NUM_THREADS or every CPU).
// Calls that need the same count run together; the other kind waits until they are done, so no call ever sees a
// count it did not ask for (its bits do not depend on what runs beside it). The last call to leave restores the own
// count. The object's lifetime is its shares' (share_openblas_threads below).
class OpenBlasThreads {
 public:
  OpenBlasThreads() {
    lib_ = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);  // loaded as liblapack.so.3's dependency
    if (!lib_) return;
    set_ = reinterpret_cast<void (*)(int)>(::dlsym(lib_, "openblas_set_num_threads"));
    auto get = reinterpret_cast<int (*)()>(::dlsym(lib_, "openblas_get_num_threads"));
    if (!set_ || !get) {
      set_ = nullptr;
      return;
    }
    own_ = current_ = std::max(1, get());
  }
  ~OpenBlasThreads() {
    if (lib_) ::dlclose(lib_);  // drops only this reference: OpenBLAS stays loaded as a dependency
  }
  OpenBlasThreads(const OpenBlasThreads&) = delete;
  OpenBlasThreads& operator=(const OpenBlasThreads&) = delete;
  int own() const { return own_; }

  // Holds OpenBLAS at `threads` (1 or own()) until the returned guard is destroyed.
  class Scope {
   public:
    Scope(OpenBlasThreads& blas, int threads) : blas_(blas) { blas_.enter(threads); }
    ~Scope() { blas_.leave(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpenBlasThreads& blas_;
  };

 private:
  void enter(int threads) {
    if (!set_) return;
    std::unique_lock lock(mutex_);
    turn_.wait(lock, [&] { return active_ == 0 || current_ == threads; });
    if (current_ != threads) set_(current_ = threads);
    ++active_;
  }
  void leave() {
    if (!set_) return;
    std::lock_guard lock(mutex_);
    if (--active_ > 0) return;
    if (current_ != own_) set_(current_ = own_);
    turn_.notify_all();
  }

  void* lib_ = nullptr;
  void (*set_)(int) = nullptr;
  int own_ = 1, current_ = 1;
  std::mutex mutex_;
  std::condition_variable turn_;
  int active_ = 0;
};

namespace {

// The process's one OpenBlasThreads and the number of its shares, under a mutex. All three are plain data (a POSIX
// mutex, not std::mutex, whose destructor is not trivial everywhere), so exit() destroys none of them: a thread still
// decomposing while the process exits finds them intact, and the object itself lives as long as its shares.
pthread_mutex_t g_blas_mutex = PTHREAD_MUTEX_INITIALIZER;
OpenBlasThreads* g_blas = nullptr;
int64_t g_blas_shares = 0;

struct BlasLock {
  BlasLock() { pthread_mutex_lock(&g_blas_mutex); }
  ~BlasLock() { pthread_mutex_unlock(&g_blas_mutex); }
  BlasLock(const BlasLock&) = delete;
  BlasLock& operator=(const BlasLock&) = delete;
};

}  // namespace

std::shared_ptr<OpenBlasThreads> share_openblas_threads() {
  BlasLock lock;
  if (!g_blas) g_blas = new OpenBlasThreads();
  ++g_blas_shares;
  return std::shared_ptr<OpenBlasThreads>(g_blas, [](OpenBlasThreads* blas) {
    BlasLock lock;
    if (--g_blas_shares > 0) return;
    delete blas;
    g_blas = nullptr;
  });
}

namespace {

template <typename T> struct Real { using type = T; };
template <typename T> struct Real<std::complex<T>> { using type = T; };
template <typename T> using real_t = typename Real<T>::type;

lapack_int ld(int64_t rows) { return static_cast<lapack_int>(std::max<int64_t>(1, rows)); }

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

// Whether r[0, n) holds a nan or inf: x * 0 is 0 for a finite x and nan otherwise, summed in independent lanes so
// that the loop vectorises (without them, floating-point sums are not reordered).
template <typename R> bool has_non_finite(const R* r, int64_t n) {
  constexpr int kLanes = 32 / sizeof(R);
  R lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += r[i + l] * R(0);
  R sum = 0;
  for (; i < n; ++i) sum += r[i] * R(0);
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum != sum;
}

// The flat index of the first element of data[0, count) with a nan or inf part, or -1. Blocks are tested by
// has_non_finite, and only a block that has one is searched: the scan runs at memory speed.
template <typename T> int64_t first_non_finite(const T* data, int64_t count) {
  using R = real_t<T>;
  constexpr int64_t kParts = sizeof(T) / sizeof(R), kBlock = 4096;
  const R* r = reinterpret_cast<const R*>(data);  // std::complex<R> is an array of two R
  const int64_t parts = count * kParts;
  for (int64_t start = 0; start < parts; start += kBlock) {
    const int64_t end = std::min(parts, start + kBlock);
    if (!has_non_finite(r + start, end - start)) continue;
    for (int64_t i = start; i < end; ++i)
      if (!std::isfinite(r[i])) return i / kParts;
  }
  return -1;
}

// A size LAPACK's workspace query returned in a floating-point slot; single precision may round it below the exact
// count, so it is rounded up with a margin.
template <typename T> lapack_int queried(const T& value) {
  const double v = static_cast<double>(std::real(value));
  return static_cast<lapack_int>(std::max(1.0, std::ceil(v * (1 + 1e-6)) + 1));
}

// Sets a cols x cols column-major block to the identity.
template <typename T> void identity(T* out, int64_t n) {
  std::fill(out, out + n * n, T(0));
  for (int64_t i = 0; i < n; ++i) out[i * n + i] = T(1);
}

// The rows and columns of one matrix joined into components by its nonzero entries (exact zeros only): a matrix
// that is block diagonal up to a permutation of its rows and columns, as the merged tensors of a model with a
// conserved charge are (the Ising tensor's Z2 parity), has one component per block, and a zero row or column is a
// component of its own. `of` numbers row i's component at i and column j's at m + j. Nothing when the matrix has at
// most one block with both rows and columns (the common dense case costs one pass over its first row and column).
struct Components {
  std::vector<int32_t> of;
  int32_t count = 0;
};

template <typename T> std::optional<Components> block_components(const T* a, int64_t m, int64_t n) {
  bool dense_edges = true;  // a nonzero first column and first row join every row and column
  for (int64_t i = 0; i < m && dense_edges; ++i) dense_edges = a[i] != T(0);
  for (int64_t j = 0; j < n && dense_edges; ++j) dense_edges = a[j * m] != T(0);
  if (dense_edges) return std::nullopt;
  std::vector<int32_t> parent(static_cast<size_t>(m + n));
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  for (int64_t j = 0; j < n; ++j) {
    int32_t col = find(static_cast<int32_t>(m + j));
    for (int64_t i = 0; i < m; ++i) {
      if (a[j * m + i] == T(0)) continue;
      const int32_t row = find(static_cast<int32_t>(i));
      if (row != col) parent[static_cast<size_t>(row)] = col;
    }
  }
  Components c;
  c.of.assign(static_cast<size_t>(m + n), -1);
  std::vector<int32_t> label(static_cast<size_t>(m + n), -1);
  std::vector<char> has_row, has_col;
  for (int64_t x = 0; x < m + n; ++x) {
    int32_t& l = label[static_cast<size_t>(find(static_cast<int32_t>(x)))];
    if (l < 0) l = c.count++, has_row.push_back(0), has_col.push_back(0);
    c.of[static_cast<size_t>(x)] = l;
    (x < m ? has_row : has_col)[static_cast<size_t>(l)] = 1;
  }
  int32_t blocks = 0;
  for (int32_t l = 0; l < c.count; ++l) blocks += has_row[static_cast<size_t>(l)] && has_col[static_cast<size_t>(l)];
  if (blocks < 2) return std::nullopt;
  return c;
}

// What a context keeps for this family (ExecutionContext::extension_state): the test-only status hook.
struct ContextState {
  std::atomic<LapackStatusHook> hook{nullptr};
};

ContextState& context_state(ExecutionContext& context) {
  std::shared_ptr<void> state =
      context.extension_state(kLinalgFamily, [] { return std::make_shared<ContextState>(); });
  return *static_cast<ContextState*>(state.get());  // the context keeps it alive as long as itself
}

// LAPACK's status of `routine`, or what the context's test-only hook makes of it.
lapack_int status(LapackStatusHook hook, std::string_view routine, lapack_int info) {
  return hook ? static_cast<lapack_int>(hook(routine, info)) : info;
}

[[noreturn]] void fail_converge(LinalgKind kind, std::string_view routine, int64_t batch, lapack_int info) {
  fail(ErrorKind::runtime, "{}: LAPACK {} did not converge on matrix {} of the batch (info {}); the input may be "
       "badly scaled or nearly singular in a way LAPACK cannot resolve", name(kind), routine, batch, info);
}

// Element counts of one matrix's LAPACK workspace (queried once per call) and its carving out of one scratch buffer:
// a copy of the operand (svd, and eigh by the staged driver), tau (qr only), work, rwork (complex svd and eigh), iwork
// (svd and eigh), and a third-stage task's buffer (the staged drivers).
template <typename T> struct Workspace {
  int64_t copy = 0, tau = 0, work = 1, rwork = 1, iwork = 1, task = 0;

  static constexpr size_t align(size_t bytes) { return (bytes + 63) / 64 * 64; }
  size_t bytes() const {
    return align(sizeof(T) * copy) + align(sizeof(T) * tau) + align(sizeof(T) * work) +
           align(sizeof(real_t<T>) * rwork) + align(sizeof(lapack_int) * iwork) + align(sizeof(T) * task);
  }
  struct Buffers {
    T* copy;
    T* tau;
    T* work;
    real_t<T>* rwork;
    lapack_int* iwork;
    T* task;
  };
  Buffers carve(std::byte* base) const {
    Buffers b{};
    b.copy = reinterpret_cast<T*>(base), base += align(sizeof(T) * copy);
    b.tau = reinterpret_cast<T*>(base), base += align(sizeof(T) * tau);
    b.work = reinterpret_cast<T*>(base), base += align(sizeof(T) * work);
    b.rwork = reinterpret_cast<real_t<T>*>(base), base += align(sizeof(real_t<T>) * rwork);
    b.iwork = reinterpret_cast<lapack_int*>(base), base += align(sizeof(lapack_int) * iwork);
    b.task = reinterpret_cast<T*>(base);
    return b;
  }
};

template <typename T> struct Job {
  using R = real_t<T>;
  const LinalgPayload& p;
  int64_t m, n, k;
  const T* a;                // the operand, column-major, batch after batch
  std::vector<Tensor>& out;  // the results, column-major
  LapackStatusHook hook;     // the context's test-only hook (nullptr: LAPACK's status as it is)
  Workspace<T> ws;
  // The staged drivers of real svd and eigh (Staged.h), when they take this shape.
  std::optional<staged::Svd<R>> staged_svd;
  std::optional<staged::Eigh<R>> staged_eigh;
  // Runs a staged driver's third-stage tasks task(t, buffer of `elements` T), t in [0, count): null, inline on
  // this thread with the matrix's workspace; else as decompose() set it (a large single matrix: on the pool).
  std::function<void(int64_t count, int64_t elements, const std::function<void(int64_t, T*)>& task)> spread;
  static constexpr bool kReal = std::is_same_v<T, R>;

  char jobz() const { return p.full() ? 'A' : 'S'; }
  int64_t ucols() const { return p.full() ? m : k; }
  int64_t vrows() const { return p.full() ? n : k; }
  lapack_int lm() const { return static_cast<lapack_int>(m); }
  lapack_int ln() const { return static_cast<lapack_int>(n); }
  lapack_int lk() const { return static_cast<lapack_int>(k); }

  template <typename U> U* result(size_t r, int64_t batch, int64_t size) const {
    return out[r].data<U>() + batch * size;
  }

  // The workspace sizes of this call's shape (LAPACK's queries with lwork = -1 touch only the size slots).
  void query() {
    T work{}, tau{}, x{};
    R rwork{}, s{};
    lapack_int iwork = 0;
    switch (p.kind()) {
      case LinalgKind::svd: {
        if (k == 0) return;
        ws.copy = m * n;
        lapack_int info = Lapack<T>::gesdd(jobz(), lm(), ln(), &x, &s, &x, lm(), &x, ld(vrows()), &work, -1, &rwork,
                                           &iwork);
        EIN_ASSERT(info == 0, "svd: ?gesdd workspace query returned info {}", info);
        ws.work = queried(work);
        ws.iwork = 8 * k;
        // LAPACKE's own rwork size for ?gesdd with U and V (the larger of LAPACK's two bounds)
        if constexpr (!kReal) ws.rwork = k * std::max(5 * k + 7, 2 * std::max(m, n) + 2 * k + 1);
        if constexpr (kReal) {
          if (staged::Svd<R>::takes(m, n, p.full())) {
            const staged::Sizes& z = staged_svd.emplace(m, n).sizes();
            ws.work = std::max(ws.work, z.work), ws.iwork = std::max(ws.iwork, z.iwork), ws.task = z.task;
          }
        }
        return;
      }
      case LinalgKind::qr: {
        if (k == 0) return;
        ws.tau = k;
        lapack_int info = Lapack<T>::geqrf(lm(), ln(), &x, &tau, &work, -1);
        EIN_ASSERT(info == 0, "qr: ?geqrf workspace query returned info {}", info);
        ws.work = queried(work);
        info = Lapack<T>::orgqr(lm(), lk(), lk(), &x, &tau, &work, -1);
        EIN_ASSERT(info == 0, "qr: ?orgqr/?ungqr workspace query returned info {}", info);
        ws.work = std::max<int64_t>(ws.work, queried(work));
        return;
      }
      case LinalgKind::eigh: {
        if (n == 0) return;
        lapack_int info = Lapack<T>::evd(ln(), &x, &s, &work, -1, &rwork, -1, &iwork, -1);
        EIN_ASSERT(info == 0, "eigh: ?syevd/?heevd workspace query returned info {}", info);
        ws.work = queried(work);
        ws.rwork = queried(rwork);
        ws.iwork = std::max<lapack_int>(1, iwork);
        if constexpr (kReal) {
          if (staged::Eigh<R>::takes(n)) {
            const staged::Sizes& z = staged_eigh.emplace(n).sizes();
            ws.copy = n * n, ws.task = z.task;
            ws.work = std::max(ws.work, z.work), ws.iwork = std::max(ws.iwork, z.iwork);
          }
        }
        return;
      }
      case LinalgKind::inv_upper:
      case LinalgKind::gap_factors: return;
    }
  }

  void svd(int64_t b, const typename Workspace<T>::Buffers& w, ScratchAllocator::Lease& lease) const {
    const bool full = p.full();
    T* u = result<T>(0, b, m * ucols());
    R* s = result<R>(1, b, k);
    T* vt = result<T>(2, b, vrows() * n);
    if (k == 0) {  // no singular values; a full factor is the identity
      if (full) identity(u, m), identity(vt, n);
      return;
    }
    const T* ab = a + b * m * n;
    if (const std::optional<Components> c = block_components(ab, m, n)) return svd_blocks(b, *c, u, s, vt, w, lease);
    if constexpr (kReal) {
      if (staged_svd && staged_svd->in_range(ab)) {
        std::copy(ab, ab + m * n, w.copy);
        lapack_int info = status(hook, "gesdd", staged_svd->reduce_and_solve(w.copy, s, u, vt, w.work, w.iwork));
        EIN_ASSERT(info >= 0, "svd: ?bdsdc argument {} is illegal", -info);
        if (info > 0) return gesvd_fallback(b, u, s, vt, w.copy);
        return third_stage(staged_svd->tasks(), staged_svd->sizes().task, w, [&](int64_t t, T* buffer) {
          staged_svd->back_transform(t, w.copy, w.work, u, vt, buffer);
        });
      }
    }
    std::copy(ab, ab + m * n, w.copy);
    lapack_int info = status(hook, "gesdd", Lapack<T>::gesdd(jobz(), lm(), ln(), w.copy, s, u, lm(), vt,
                                                             ld(vrows()), w.work, static_cast<lapack_int>(ws.work),
                                                             w.rwork, w.iwork));
    EIN_ASSERT(info >= 0, "svd: ?gesdd argument {} is illegal", -info);
    if (info == 0) return;
    gesvd_fallback(b, u, s, vt, w.copy);
  }

  // The svd of a matrix with several blocks (block_components): each block's full svd by ?gesdd (?gesvd if it does
  // not converge), its triplets merged in descending order of the singular values (a stable sort: ties keep the
  // order of the blocks, then LAPACK's), and the factors scattered to the blocks' rows and columns with exact zeros
  // elsewhere. The K − (number of block triplets) further zero singular values take the blocks' remaining left and
  // right singular vectors and the unit vectors of zero rows and columns, in that order (any orthonormal completion
  // is an svd; LAPACK picks one too); full factors take all of them. Block by block the cost is Σ |rows| |cols|
  // min(|rows|, |cols|) instead of M N K: a quarter for two equal square blocks. The factors are an svd of the same
  // matrix, equal to the dense ones to rounding up to the signs and the bases of (exactly) equal singular values.
  void svd_blocks(int64_t b, const Components& c, T* u, R* s, T* vt, const typename Workspace<T>::Buffers& w,
                  ScratchAllocator::Lease& lease) const {
    std::vector<std::vector<int64_t>> rows(static_cast<size_t>(c.count)), cols(static_cast<size_t>(c.count));
    for (int64_t i = 0; i < m; ++i) rows[static_cast<size_t>(c.of[static_cast<size_t>(i)])].push_back(i);
    for (int64_t j = 0; j < n; ++j) cols[static_cast<size_t>(c.of[static_cast<size_t>(m + j)])].push_back(j);
    // Each block's U (|rows|²), Vh (|cols|²) and S in two of the lease's buffers, kept for the next call.
    std::vector<int64_t> at(static_cast<size_t>(c.count) + 1, 0), s_at(static_cast<size_t>(c.count) + 1, 0);
    for (int32_t p = 0; p < c.count; ++p) {
      const auto r = static_cast<int64_t>(rows[static_cast<size_t>(p)].size());
      const auto q = static_cast<int64_t>(cols[static_cast<size_t>(p)].size());
      at[static_cast<size_t>(p) + 1] = at[static_cast<size_t>(p)] + r * r + q * q;
      s_at[static_cast<size_t>(p) + 1] = s_at[static_cast<size_t>(p)] + std::min(r, q);
    }
    T* factors = reinterpret_cast<T*>(lease.buffer(1, sizeof(T) * static_cast<size_t>(std::max<int64_t>(1, at.back()))));
    R* values = reinterpret_cast<R*>(lease.buffer(2, sizeof(R) * static_cast<size_t>(std::max<int64_t>(1, s_at.back()))));
    struct Triplet {
      R s;
      int32_t part, t;
    };
    std::vector<Triplet> triplets;
    std::vector<std::pair<int32_t, int32_t>> left, right;  // (part, column of its U or row of its Vh) of zero values
    for (int32_t p = 0; p < c.count; ++p) {
      const std::vector<int64_t> &rp = rows[static_cast<size_t>(p)], &cp = cols[static_cast<size_t>(p)];
      const auto r = static_cast<int64_t>(rp.size()), q = static_cast<int64_t>(cp.size()), kb = std::min(r, q);
      if (kb == 0) {  // a zero row (r = 1) or a zero column (q = 1): a unit vector
        (r ? left : right).emplace_back(p, 0);
        continue;
      }
      T* up = factors + at[static_cast<size_t>(p)];
      R* sp = values + s_at[static_cast<size_t>(p)];
      decompose_block(b, rp, cp, up, sp, up + r * r, w);
      for (int64_t t = 0; t < kb; ++t) triplets.push_back({sp[t], p, static_cast<int32_t>(t)});
      for (int64_t t = kb; t < r; ++t) left.emplace_back(p, static_cast<int32_t>(t));
      for (int64_t t = kb; t < q; ++t) right.emplace_back(p, static_cast<int32_t>(t));
    }
    std::stable_sort(triplets.begin(), triplets.end(), [](const Triplet& x, const Triplet& y) { return x.s > y.s; });
    std::fill(u, u + m * ucols(), T(0));
    std::fill(vt, vt + vrows() * n, T(0));
    auto put_u = [&](int64_t col, int32_t p, int32_t t) {
      const std::vector<int64_t>& rp = rows[static_cast<size_t>(p)];
      const auto r = static_cast<int64_t>(rp.size());
      if (cols[static_cast<size_t>(p)].empty()) return void(u[col * m + rp[0]] = T(1));
      const T* from = factors + at[static_cast<size_t>(p)] + static_cast<int64_t>(t) * r;
      for (int64_t i = 0; i < r; ++i) u[col * m + rp[static_cast<size_t>(i)]] = from[i];
    };
    // Vh's row of each part's right vector t, -1 where it has none (thin factors): Vh is written column by column
    // below, since one of its rows is strided by vrows() (row by row was 1% of an Ising TRG evaluation).
    std::vector<std::vector<int64_t>> vt_row(static_cast<size_t>(c.count));
    for (int32_t p = 0; p < c.count; ++p) vt_row[static_cast<size_t>(p)].assign(cols[static_cast<size_t>(p)].size(), -1);
    auto put_vt = [&](int64_t row, int32_t p, int32_t t) {
      vt_row[static_cast<size_t>(p)][static_cast<size_t>(t)] = row;
    };
    int64_t col = 0;
    for (const Triplet& x : triplets) {
      s[col] = x.s;
      put_u(col, x.part, x.t), put_vt(col, x.part, x.t);
      ++col;
    }
    for (int64_t i = col; i < k; ++i) s[i] = R(0);
    for (int64_t i = col; i < ucols(); ++i) put_u(i, left[static_cast<size_t>(i - col)].first, left[static_cast<size_t>(i - col)].second);
    for (int64_t i = col; i < vrows(); ++i) put_vt(i, right[static_cast<size_t>(i - col)].first, right[static_cast<size_t>(i - col)].second);
    for (int32_t p = 0; p < c.count; ++p) {
      const std::vector<int64_t>& cp = cols[static_cast<size_t>(p)];
      const std::vector<int64_t>& to = vt_row[static_cast<size_t>(p)];
      const auto r = static_cast<int64_t>(rows[static_cast<size_t>(p)].size()), q = static_cast<int64_t>(cp.size());
      if (q == 0) continue;
      if (r == 0) {  // a zero column: its unit vector
        if (to[0] >= 0) vt[cp[0] * vrows() + to[0]] = T(1);
        continue;
      }
      const T* from = factors + at[static_cast<size_t>(p)] + r * r;  // the part's Vh, q x q
      for (int64_t j = 0; j < q; ++j) {
        T* column = vt + cp[static_cast<size_t>(j)] * vrows();
        for (int64_t t = 0; t < q; ++t)
          if (to[static_cast<size_t>(t)] >= 0) column[to[static_cast<size_t>(t)]] = from[j * q + t];
      }
    }
  }

  // The full svd of the block of matrix b on rows `rp` and columns `cp` into u, s, vt: a square real block by the
  // staged driver (Staged.h; ?gesdd would reduce a block below 128 columns by its unblocked BLAS-2 ?gebd2, the
  // Ising tensor's two 128 x 128 parity blocks included), else ?gesdd with jobz 'A' in the call's workspace (a block
  // needs no more than the whole matrix); ?gesvd with a workspace of its own if either does not converge.
  void decompose_block(int64_t b, const std::vector<int64_t>& rp, const std::vector<int64_t>& cp, T* u, R* s, T* vt,
                       const typename Workspace<T>::Buffers& w) const {
    const T* ab = a + b * m * n;
    const auto r = static_cast<int64_t>(rp.size()), q = static_cast<int64_t>(cp.size());
    const auto lr = static_cast<lapack_int>(r), lq = static_cast<lapack_int>(q);
    auto gather = [&](T* block) {
      for (int64_t j = 0; j < q; ++j) {
        const T* column = ab + cp[static_cast<size_t>(j)] * m;
        for (int64_t i = 0; i < r; ++i) block[j * r + i] = column[rp[static_cast<size_t>(i)]];
      }
    };
    gather(w.copy);
    if constexpr (kReal) {
      if (staged::Svd<R>::takes(r, q, true)) {
        const staged::Svd<R> block(r, q);
        if (block.in_range(w.copy)) {
          const staged::Sizes& z = block.sizes();
          std::vector<T> own_work, own_task;
          std::vector<lapack_int> own_iwork;
          T* work = w.work;
          T* task = w.task;
          lapack_int* iwork = w.iwork;
          if (z.work > ws.work) own_work.resize(static_cast<size_t>(z.work)), work = own_work.data();
          if (z.task > ws.task) own_task.resize(static_cast<size_t>(z.task)), task = own_task.data();
          if (z.iwork > ws.iwork) own_iwork.resize(static_cast<size_t>(z.iwork)), iwork = own_iwork.data();
          const lapack_int info = status(hook, "gesdd", block.reduce_and_solve(w.copy, s, u, vt, work, iwork));
          EIN_ASSERT(info >= 0, "svd: ?bdsdc argument {} is illegal", -info);
          if (info == 0) {
            for (int64_t t = 0; t < block.tasks(); ++t) block.back_transform(t, w.copy, work, u, vt, task);
            return;
          }
          gather(w.copy);
          return gesvd_into(b, 'A', lr, lq, w.copy, s, u, lr, vt, lq);
        }
      }
    }
    T query{}, x{};
    R rx{};
    lapack_int ix = 0;
    lapack_int info = Lapack<T>::gesdd('A', lr, lq, &x, &rx, &x, lr, &x, lq, &query, -1, &rx, &ix);
    EIN_ASSERT(info == 0, "svd: ?gesdd workspace query returned info {}", info);
    std::vector<T> own;
    T* work = w.work;
    lapack_int lwork = queried(query);
    if (lwork <= ws.work) lwork = static_cast<lapack_int>(ws.work);
    else own.resize(static_cast<size_t>(lwork)), work = own.data();
    info = status(hook, "gesdd", Lapack<T>::gesdd('A', lr, lq, w.copy, s, u, lr, vt, lq, work, lwork, w.rwork,
                                                  w.iwork));
    EIN_ASSERT(info >= 0, "svd: ?gesdd argument {} is illegal", -info);
    if (info == 0) return;
    gather(w.copy);
    gesvd_into(b, 'A', lr, lq, w.copy, s, u, lr, vt, lq);
  }

  // The rare matrix ?gesdd does not converge on: ?gesvd with a workspace of its own.
  void gesvd_fallback(int64_t b, T* u, R* s, T* vt, T* copy) const {
    const T* ab = a + b * m * n;
    std::copy(ab, ab + m * n, copy);
    gesvd_into(b, jobz(), lm(), ln(), copy, s, u, lm(), vt, ld(vrows()));
  }

  // ?gesvd of the rows x cols matrix in `copy` (overwritten) with a workspace of its own, after ?gesdd failed to
  // converge on matrix b (or one of its blocks); an error naming both drivers if ?gesvd does not converge either.
  void gesvd_into(int64_t b, char job, lapack_int rows, lapack_int cols, T* copy, R* s, T* u, lapack_int ldu, T* vt,
                  lapack_int ldvt) const {
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

  // A is factored in place in whichever result has its shape: Q [M, K] when M >= N, else R [K, N] (K = M).
  void qr(int64_t b, const typename Workspace<T>::Buffers& w) const {
    T* q = result<T>(0, b, m * k);
    T* r = result<T>(1, b, k * n);
    if (k == 0) return;
    const T* ab = a + b * m * n;
    T* x = m >= n ? q : r;
    std::copy(ab, ab + m * n, x);
    const auto lwork = static_cast<lapack_int>(ws.work);
    lapack_int info = Lapack<T>::geqrf(lm(), ln(), x, w.tau, w.work, lwork);
    EIN_ASSERT(info == 0, "qr: ?geqrf returned info {}", info);
    if (m >= n) {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < k; ++i) r[j * k + i] = i <= j ? q[j * m + i] : T(0);
    } else {
      std::copy(r, r + m * m, q);
      for (int64_t j = 0; j < m; ++j) std::fill(r + j * m + j + 1, r + (j + 1) * m, T(0));
    }
    info = Lapack<T>::orgqr(lm(), lk(), lk(), q, w.tau, w.work, lwork);
    EIN_ASSERT(info == 0, "qr: ?orgqr/?ungqr returned info {}", info);
  }

  void inv_upper(int64_t b) const {
    T* r = result<T>(0, b, n * n);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) r[j * n + i] = i <= j ? a[b * n * n + j * n + i] : T(0);
    if (n == 0) return;
    lapack_int info = Lapack<T>::trtri(ln(), r);
    EIN_ASSERT(info >= 0, "inv_upper: ?trtri argument {} is illegal", -info);
    if (info > 0)
      fail(ErrorKind::invalid_argument, "inv_upper: matrix {} of the batch is singular (its diagonal entry {} is "
           "zero; LAPACK ?trtri info {}); a qr of a rank-deficient matrix has no derivative", b, info - 1, info);
  }

  // A staged driver's third stage: its tasks inline with the matrix's task buffer, or through `spread`.
  void third_stage(int64_t count, int64_t elements, const typename Workspace<T>::Buffers& w,
                   const std::function<void(int64_t, T*)>& task) const {
    if (spread) return spread(count, elements, task);
    for (int64_t t = 0; t < count; ++t) task(t, w.task);
  }

  void eigh(int64_t b, const typename Workspace<T>::Buffers& w) const {
    T* v = result<T>(1, b, n * n);
    const bool herm = is_complex(dtype_v<T>);
    if constexpr (kReal) {
      const T* ab = a + b * n * n;
      if (staged_eigh && staged_eigh->in_range(ab)) {
        std::copy(ab, ab + n * n, w.copy);
        lapack_int info = status(hook, "syevd", staged_eigh->reduce_and_solve(w.copy, result<R>(0, b, n), v, w.work,
                                                                              w.iwork));
        EIN_ASSERT(info >= 0, "eigh: ?stedc argument {} is illegal", -info);
        if (info > 0) fail_converge(LinalgKind::eigh, "?syevd", b, info);
        return third_stage(staged_eigh->tasks(), staged_eigh->sizes().task, w, [&](int64_t t, T* buffer) {
          staged_eigh->back_transform(t, w.copy, w.work, v, buffer);
        });
      }
    }
    std::copy(a + b * n * n, a + (b + 1) * n * n, v);  // one call; per-column copies of the lower triangle were slower
    if (n == 0) return;
    lapack_int info = status(hook, herm ? "heevd" : "syevd",
                             Lapack<T>::evd(ln(), v, result<R>(0, b, n), w.work, static_cast<lapack_int>(ws.work),
                                            w.rwork, static_cast<lapack_int>(ws.rwork), w.iwork,
                                            static_cast<lapack_int>(ws.iwork)));
    EIN_ASSERT(info >= 0, "eigh: ?syevd/?heevd argument {} is illegal", -info);
    if (info > 0) fail_converge(LinalgKind::eigh, herm ? "?heevd" : "?syevd", b, info);
  }

  // Matrices [begin, end) with one workspace, leased from the context's scratch (kept there for the next call).
  void run(int64_t begin, int64_t end, ScratchAllocator& scratch) const {
    ScratchAllocator::Lease lease = scratch.lease();
    const auto w = ws.carve(lease.buffer(0, ws.bytes()));
    for (int64_t b = begin; b < end; ++b) {
      switch (p.kind()) {
        case LinalgKind::svd: svd(b, w, lease); break;
        case LinalgKind::qr: qr(b, w); break;
        case LinalgKind::eigh: eigh(b, w); break;
        case LinalgKind::inv_upper: inv_upper(b); break;
        case LinalgKind::gap_factors: break;  // not a decomposition (GapFactors.h)
      }
    }
  }
};

// svd with keep = k: the thin factors split into the k kept triplets and the others (LinalgOp.h), as views of the
// thin factors (results may have any strides; U's and S's parts of a single matrix are even dense): copies of the
// six parts cost 2% of an Ising TRG evaluation at chi 16.
std::vector<Tensor> split_kept(const std::vector<Tensor>& thin, int64_t keep) {
  const int64_t k = thin[1].extent(0);
  return {thin[0].slice(1, 0, keep), thin[1].slice(0, 0, keep), thin[2].slice(0, 0, keep),
          thin[0].slice(1, keep, k), thin[1].slice(0, keep, k), thin[2].slice(0, keep, k)};
}

}  // namespace

void set_lapack_status_hook_for_testing(ExecutionContext& context, LapackStatusHook hook) {
  context_state(context).hook.store(hook, std::memory_order_release);
}

// A single matrix whose smaller extent is below this runs on one OpenBLAS thread, like a batch's matrices: threads
// gain little there, its bits then do not depend on OPENBLAS_NUM_THREADS, and callers that decompose small matrices
// concurrently (the Ising sweep runs its temperatures on every thread of the context) do not oversubscribe the CPUs
// with OpenBLAS threads that spin while they wait.
constexpr int64_t kThreadedExtent = 512;

std::vector<Tensor> decompose(const LinalgPayload& payload, const Tensor& a_in, ExecutionContext& context,
                              OpenBlasThreads& blas) {
  const Tensor a = a_in.is_col_major() ? a_in : a_in.contiguous();
  const int64_t m = a.extent(0), n = a.extent(1), k = std::min(m, n);
  Shape rest(a.shape().begin() + 2, a.shape().end());
  const int64_t batches = element_count(rest);
  auto shaped = [&](std::initializer_list<int64_t> head) {
    Shape s(head);
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  };
  ScratchAllocator& scratch = context.scratch();
  auto empty = [&](DType dtype, std::initializer_list<int64_t> head) {
    return Tensor::empty(dtype, shaped(head), scratch);
  };
  const DType real = real_part_type(a.dtype());
  std::vector<Tensor> out;
  switch (payload.kind()) {
    case LinalgKind::svd: {
      const bool full = payload.full();
      out = {empty(a.dtype(), {m, full ? m : k}), empty(real, {k}), empty(a.dtype(), {full ? n : k, n})};
      break;
    }
    case LinalgKind::qr: out = {empty(a.dtype(), {m, k}), empty(a.dtype(), {k, n})}; break;
    case LinalgKind::eigh: out = {empty(real, {n}), empty(a.dtype(), {n, n})}; break;
    case LinalgKind::inv_upper: out = {empty(a.dtype(), {n, n})}; break;
    case LinalgKind::gap_factors: EIN_ASSERT(false, "gap_factors is not a decomposition (GapFactors.h)");
  }
  dispatch_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, int64_t>) {
      fail(ErrorKind::dtype, "{}: operand 0 has dtype i64; expected f32, f64, c64 or c128", name(payload.kind()));
    } else {
      const T* data = a.data<T>();
      if (const int64_t i = first_non_finite(data, a.numel()); i >= 0)
        fail(ErrorKind::invalid_argument, "{}: operand 0 has a non-finite element (nan or inf) at flat index {} "
             "(column-major); LAPACK was not called; check the input for nan or inf", name(payload.kind()), i);
      if (batches == 0) return;
      Job<T> job{payload, m, n, k, data, out, context_state(context).hook.load(std::memory_order_acquire), {}, {}, {}, {}};
      job.query();
      if (batches > 1) {  // whole matrices per pool thread (or all inline), each on one OpenBLAS thread
        OpenBlasThreads::Scope one(blas, 1);
        context.pool().parallel_for(batches, [&](int64_t begin, int64_t end) { job.run(begin, end, scratch); });
      } else {  // one matrix on this thread: a large one with OpenBLAS's own threads, a small one on one
        const bool large = std::min(m, n) >= kThreadedExtent;
        std::optional<OpenBlasThreads::Scope> scope(std::in_place, blas, large ? blas.own() : 1);
        // A large one's third stage (staged drivers) as tasks on the pool, each on one OpenBLAS thread: two
        // single-threaded halves of the reflectors' GEMMs beat one call on two OpenBLAS threads by a third.
        if (large)
          job.spread = [&](int64_t count, int64_t elements, const std::function<void(int64_t, T*)>& task) {
            scope.reset();
            scope.emplace(blas, 1);
            context.pool().parallel_for(count, [&](int64_t begin, int64_t end) {
              ScratchAllocator::Lease lease = scratch.lease();
              T* buffer = reinterpret_cast<T*>(lease.buffer(0, sizeof(T) * static_cast<size_t>(elements)));
              for (int64_t t = begin; t < end; ++t) task(t, buffer);
            });
          };
        job.run(0, 1, scratch);
      }
    }
  });
  if (payload.kind() == LinalgKind::svd && payload.keep() > 0) return split_kept(out, payload.keep());
  return out;
}

}  // namespace einstage::linalg
