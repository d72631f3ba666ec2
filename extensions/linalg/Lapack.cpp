// Batched LAPACK calls for svd, qr, eigh and inv_upper (see Lapack.h): decompose() (the operand check, the results,
// the batch over the pool and OpenBLAS's thread count) and Job, one call's driver of each kind per matrix.
#include "extensions/linalg/Lapack.h"
#include "extensions/linalg/BlockSvd.h"
#include "extensions/linalg/LapackCalls.h"
#include "extensions/linalg/OpenBlasThreads.h"
#include "extensions/linalg/Staged.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <optional>

namespace einstage::linalg {

using namespace detail;

namespace {

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

// Sets a cols x cols column-major block to the identity.
template <typename T> void identity(T* out, int64_t n) {
  std::fill(out, out + n * n, T(0));
  for (int64_t i = 0; i < n; ++i) out[i * n + i] = T(1);
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
        if (p.keep() > 0) ws.vectors = n * n;
        if constexpr (kReal) {
          if (staged::Eigh<R>::takes(n)) {
            const staged::Sizes& z = staged_eigh.emplace(n, p.keep()).sizes();
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
    if (const std::optional<Components> c = block_components(ab, m, n))
      return BlockSvd<T>{a, m, n, k, ucols(), vrows(), hook, ws}.run(b, *c, u, s, vt, w, lease);
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

  // The rare matrix ?gesdd does not converge on: ?gesvd with a workspace of its own.
  void gesvd_fallback(int64_t b, T* u, R* s, T* vt, T* copy) const {
    const T* ab = a + b * m * n;
    std::copy(ab, ab + m * n, copy);
    gesvd_into(hook, b, jobz(), lm(), ln(), copy, s, u, lm(), vt, ld(vrows()));
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

  // eigh with keep: the columns of the `keep` eigenvalues of largest modulus, W's first `lower` and last
  // keep - lower (LinalgOp.h), from all N eigenvectors in `all` to V [N, keep].
  void pick_kept(const R* eigenvalues, const T* all, T* v) const {
    int64_t lower = 0, upper = n - 1;
    for (int64_t c = 0; c < p.keep(); ++c) {
      if (std::abs(eigenvalues[lower]) >= std::abs(eigenvalues[upper])) ++lower;
      else --upper;
    }
    std::copy(all, all + lower * n, v);
    std::copy(all + (upper + 1) * n, all + n * n, v + lower * n);
  }

  // All N eigenvectors, or with keep only the kept ones: the staged driver back-transforms just those (the
  // tridiagonal's eigenvectors in w.vectors first), ?syevd / ?heevd computes all of them into w.vectors.
  void eigh(int64_t b, const typename Workspace<T>::Buffers& w) const {
    const bool kept = p.keep() > 0;
    T* v = result<T>(1, b, n * (kept ? p.keep() : n));
    R* eigenvalues = result<R>(0, b, n);
    const bool herm = is_complex(dtype_v<T>);
    if constexpr (kReal) {
      const T* ab = a + b * n * n;
      if (staged_eigh && staged_eigh->in_range(ab)) {
        std::copy(ab, ab + n * n, w.copy);
        lapack_int info = status(hook, "syevd", staged_eigh->reduce_and_solve(w.copy, eigenvalues,
                                                                              kept ? w.vectors : v, w.work, w.iwork));
        EIN_ASSERT(info >= 0, "eigh: ?stedc argument {} is illegal", -info);
        if (info > 0) fail_converge(LinalgKind::eigh, "?syevd", b, info);
        if (kept) pick_kept(eigenvalues, w.vectors, v);
        return third_stage(staged_eigh->tasks(), staged_eigh->sizes().task, w, [&](int64_t t, T* buffer) {
          staged_eigh->back_transform(t, w.copy, w.work, v, buffer);
        });
      }
    }
    T* all = kept ? w.vectors : v;
    std::copy(a + b * n * n, a + (b + 1) * n * n, all);  // one call; per-column copies of the lower triangle were slower
    if (n == 0) return;
    lapack_int info = status(hook, herm ? "heevd" : "syevd",
                             Lapack<T>::evd(ln(), all, eigenvalues, w.work, static_cast<lapack_int>(ws.work),
                                            w.rwork, static_cast<lapack_int>(ws.rwork), w.iwork,
                                            static_cast<lapack_int>(ws.iwork)));
    EIN_ASSERT(info >= 0, "eigh: ?syevd/?heevd argument {} is illegal", -info);
    if (info > 0) fail_converge(LinalgKind::eigh, herm ? "?heevd" : "?syevd", b, info);
    if (kept) pick_kept(eigenvalues, all, v);
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
    case LinalgKind::eigh:
      out = {empty(real, {n}), empty(a.dtype(), {n, payload.keep() > 0 ? payload.keep() : n})};
      break;
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
