// The svd of a matrix that is block diagonal up to a permutation of its rows and columns (private to
// extensions/linalg/, included by Lapack.cpp only): finding the blocks (block_components) and decomposing block by
// block (BlockSvd), for svd's driver in Lapack.cpp. Stage: runtime kernels of the linalg extension; depends on
// LapackCalls.h and Staged.h.
#pragma once

#include "extensions/linalg/LapackCalls.h"
#include "extensions/linalg/Staged.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace einstage::linalg::detail {

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

// One call's block-wise svd: `a` is the batch (m x n matrices, column-major, one after another), U has `ucols`
// columns and Vh `vrows` rows (thin or full), `ws` the call's workspace sizes (Workspace::carve gives each matrix's
// buffers), `hook` the context's test-only status hook.
template <typename T> struct BlockSvd {
  using R = real_t<T>;
  const T* a;
  int64_t m, n, k, ucols, vrows;  // k = min(m, n)
  LapackStatusHook hook;
  const Workspace<T>& ws;
  static constexpr bool kReal = std::is_same_v<T, R>;

  // The svd of a matrix with several blocks (block_components): each block's full svd by ?gesdd (?gesvd if it does
  // not converge), its triplets merged in descending order of the singular values (a stable sort: ties keep the
  // order of the blocks, then LAPACK's), and the factors scattered to the blocks' rows and columns with exact zeros
  // elsewhere. The K − (number of block triplets) further zero singular values take the blocks' remaining left and
  // right singular vectors and the unit vectors of zero rows and columns, in that order (any orthonormal completion
  // is an svd; LAPACK picks one too); full factors take all of them. Block by block the cost is Σ |rows| |cols|
  // min(|rows|, |cols|) instead of M N K: a quarter for two equal square blocks. The factors are an svd of the same
  // matrix, equal to the dense ones to rounding up to the signs and the bases of (exactly) equal singular values.
  void run(int64_t b, const Components& c, T* u, R* s, T* vt, const typename Workspace<T>::Buffers& w,
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
    std::fill(u, u + m * ucols, T(0));
    std::fill(vt, vt + vrows * n, T(0));
    auto put_u = [&](int64_t col, int32_t p, int32_t t) {
      const std::vector<int64_t>& rp = rows[static_cast<size_t>(p)];
      const auto r = static_cast<int64_t>(rp.size());
      if (cols[static_cast<size_t>(p)].empty()) return void(u[col * m + rp[0]] = T(1));
      const T* from = factors + at[static_cast<size_t>(p)] + static_cast<int64_t>(t) * r;
      for (int64_t i = 0; i < r; ++i) u[col * m + rp[static_cast<size_t>(i)]] = from[i];
    };
    // Vh's row of each part's right vector t, -1 where it has none (thin factors): Vh is written column by column
    // below, since one of its rows is strided by vrows (row by row was 1% of an Ising TRG evaluation).
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
    for (int64_t i = col; i < ucols; ++i) put_u(i, left[static_cast<size_t>(i - col)].first, left[static_cast<size_t>(i - col)].second);
    for (int64_t i = col; i < vrows; ++i) put_vt(i, right[static_cast<size_t>(i - col)].first, right[static_cast<size_t>(i - col)].second);
    for (int32_t p = 0; p < c.count; ++p) {
      const std::vector<int64_t>& cp = cols[static_cast<size_t>(p)];
      const std::vector<int64_t>& to = vt_row[static_cast<size_t>(p)];
      const auto r = static_cast<int64_t>(rows[static_cast<size_t>(p)].size()), q = static_cast<int64_t>(cp.size());
      if (q == 0) continue;
      if (r == 0) {  // a zero column: its unit vector
        if (to[0] >= 0) vt[cp[0] * vrows + to[0]] = T(1);
        continue;
      }
      const T* from = factors + at[static_cast<size_t>(p)] + r * r;  // the part's Vh, q x q
      for (int64_t j = 0; j < q; ++j) {
        T* column = vt + cp[static_cast<size_t>(j)] * vrows;
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
          return gesvd_into(hook, b, 'A', lr, lq, w.copy, s, u, lr, vt, lq);
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
    gesvd_into(hook, b, 'A', lr, lq, w.copy, s, u, lr, vt, lq);
  }
};

}  // namespace einstage::linalg::detail
