// svd of matrices that are block diagonal up to a permutation of rows and columns (exact zeros elsewhere, as the
// merged tensors of a model with a conserved charge are): BlockSvd.h decomposes each block on its own and merges the
// triplets. Checked on seeded random block structures (uneven and rectangular blocks, zero rows and columns, thin
// and full, every dtype, batches mixing block and dense matrices): reconstruction, orthonormal factors, descending
// values, singular vectors with exact zeros outside their block, and singular values equal to those of the dense path
// (the same matrix with one tiny entry joining the blocks); then derivatives of svd {keep = k} at a block matrix
// against finite differences (whose perturbed matrices take the dense path), and the ?gesvd fallback per block.
#include "LinalgTestUtil.h"

#include "extensions/linalg/Lapack.h"
#include "extensions/linalg/Module.h"
#include "runtime/Context.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace einstage;
using namespace einstage::linalg_test;
using einstage::test::error_of;

namespace {

std::vector<Tensor> svd_of(const Tensor& a, bool full, int64_t keep = 0) {
  Builder b("op", registry());
  Value x = b.parameter("a", {a.dtype(), std::vector<Dim>(a.shape().begin(), a.shape().end())});
  auto p = std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::svd, full, linalg::kDefaultEps, keep);
  return run(b.finish(b.extension_results(p, {x})), {a});
}

// A random [m, n] matrix whose rows and columns are dealt to `blocks` blocks (and, with `zeros`, one zero row and
// one zero column), entries zero wherever row and column are in different blocks; then its rows are shuffled. block_of[i] for row i, m + j for
// column j (-1: the zero row or column).
struct BlockMatrix {
  Tensor a;  // [m, n, batch]
  std::vector<int> block_of;
};
BlockMatrix block_matrix(DType dtype, int64_t m, int64_t n, int blocks, bool zeros, int64_t batch, Rng& rng,
                         bool square = false) {
  std::vector<int> of(static_cast<size_t>(m + n));
  for (int64_t x = 0; x < m + n; ++x) of[static_cast<size_t>(x)] = static_cast<int>(rng.below(static_cast<uint64_t>(blocks)));
  for (int b = 0; b < blocks; ++b) of[static_cast<size_t>(b)] = b, of[static_cast<size_t>(m + b)] = b;  // none empty
  if (square)  // columns dealt like the rows: square blocks (m = n), full rank, no zero singular values
    for (int64_t j = 0; j < n; ++j) of[static_cast<size_t>(m + j)] = of[static_cast<size_t>(j)];
  if (zeros) of[static_cast<size_t>(m - 1)] = -1, of[static_cast<size_t>(m + n - 1)] = -1;
  std::vector<int> perm(static_cast<size_t>(m));  // shuffle the rows so the blocks interleave
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = m - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[rng.below(static_cast<uint64_t>(i + 1))]);
  std::vector<int> shuffled(of);
  for (int64_t i = 0; i < m; ++i) shuffled[static_cast<size_t>(perm[static_cast<size_t>(i)])] = of[static_cast<size_t>(i)];
  Tensor a = random_tensor(dtype, {m, n, batch}, rng);
  std::vector<c128> v = values(a);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        const int r = shuffled[static_cast<size_t>(i)], c = shuffled[static_cast<size_t>(m + j)];
        if (r < 0 || c < 0 || r != c) v[static_cast<size_t>((b * n + j) * m + i)] = 0;
      }
  return {tensor_of(dtype, {m, n, batch}, v), shuffled};
}

// The same matrices with blocks 0 and 1 joined by a tiny entry at a row of one and a column of the other,
// so the decomposition takes the dense path.
Tensor joined(const BlockMatrix& bm, int64_t m, int64_t n) {
  std::vector<c128> v = values(bm.a);
  int64_t row = 0, col = 0;
  while (bm.block_of[static_cast<size_t>(row)] != 0) ++row;
  while (bm.block_of[static_cast<size_t>(m + col)] != 1) ++col;
  const int64_t batch = bm.a.numel() / (m * n);
  for (int64_t b = 0; b < batch; ++b) v[static_cast<size_t>((b * n + col) * m + row)] = 1e-30;
  return tensor_of(bm.a.dtype(), bm.a.shape(), v);
}

}  // namespace

TEST_CASE("linalg: svd of a block-diagonal matrix (up to permutations) per block: an svd with exact zeros outside") {
  const uint64_t seed = 31;
  INFO("seed ", seed);
  Rng rng{seed};
  for (DType dtype : {DType::f64, DType::c128, DType::f32, DType::c64}) {
    for (auto [m, n, blocks, zeros] : {std::tuple<int64_t, int64_t, int, bool>{9, 9, 2, false}, {10, 7, 3, true},
                                       {6, 11, 2, true}, {12, 12, 4, true}}) {
      for (bool full : {false, true}) {
        CAPTURE(name(dtype));
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(blocks);
        CAPTURE(full);
        const BlockMatrix bm = block_matrix(dtype, m, n, blocks, zeros, 2, rng);
        const std::vector<Tensor> f = svd_of(bm.a, full), dense = svd_of(joined(bm, m, n), full);
        const int64_t k = std::min(m, n);
        const double tol = decomposition_tolerance(dtype);
        for (int64_t b = 0; b < 2; ++b) {
          Mat am = matrix(bm.a, b), u = matrix(f[0], b), vh = matrix(f[2], b);
          std::vector<c128> s = vector_of(f[1], b), sd = vector_of(dense[1], b);
          for (size_t i = 0; i + 1 < s.size(); ++i) CHECK(s[i].real() >= s[i + 1].real());
          for (size_t i = 0; i < s.size(); ++i) CHECK(std::abs(s[i] - sd[i]) <= tol * std::abs(sd[0]));
          Mat ut(u.size()), vt(static_cast<size_t>(k));
          for (size_t i = 0; i < u.size(); ++i) ut[i].assign(u[i].begin(), u[i].begin() + k);
          for (int64_t i = 0; i < k; ++i) vt[static_cast<size_t>(i)] = vh[static_cast<size_t>(i)];
          CHECK(frobenius(minus(am, product(scale_columns(ut, s), vt))) <= tol * frobenius(am));
          CHECK(orthonormality_error(u) <= tol * static_cast<double>(m));
          CHECK(orthonormality_error(adjoint(vh)) <= tol * static_cast<double>(n));
          // A singular vector of a nonzero value lies in one block: exact zeros in every other block's rows.
          for (int64_t t = 0; t < k; ++t) {
            if (s[static_cast<size_t>(t)].real() == 0) continue;
            std::vector<int> seen;
            for (int64_t i = 0; i < m; ++i)
              if (u[static_cast<size_t>(i)][static_cast<size_t>(t)] != c128(0)) seen.push_back(bm.block_of[static_cast<size_t>(i)]);
            for (int64_t j = 0; j < n; ++j)
              if (vh[static_cast<size_t>(t)][static_cast<size_t>(j)] != c128(0)) seen.push_back(bm.block_of[static_cast<size_t>(m + j)]);
            REQUIRE(!seen.empty());
            CHECK(std::count(seen.begin(), seen.end(), seen[0]) == static_cast<int64_t>(seen.size()));
          }
        }
      }
    }
  }
}

TEST_CASE("linalg ad: svd {keep = k} at a block-diagonal matrix matches finite differences and the dense path") {
  const uint64_t seed = 37;
  INFO("seed ", seed);
  Rng rng{seed};
  for (DType dtype : {DType::f64, DType::c128}) {
    const int64_t m = 8, n = 8, k = 3;
    // Square blocks: the singular values are distinct and nonzero (a zero one has no derivative).
    const BlockMatrix bm = block_matrix(dtype, m, n, 2, false, 1, rng, true);
    const Tensor a = bm.a.reshape({m, n});
    Builder c("f", registry());
    Value x = c.parameter("a", {dtype, {m, n}});
    auto p = std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::svd, false, linalg::kDefaultEps, k);
    std::vector<Value> f = c.extension_results(p, {x});
    // Gauge-invariant: the kept and discarded values and the weighted projectors on the kept vectors.
    const Program prog = c.finish({f[1], f[4], weighted_projector(c, f[0]), weighted_projector(c, adj(c, f[2]))});
    check_derivatives(prog, {0}, {a}, rng, loose(dtype), fmt::format("{} [8, 8], two blocks, keep = 3", name(dtype)));
    const Tensor da = random_tensor(dtype, {m, n}, rng);
    const Program jvp = ad::jvp(prog, {0}, registry());
    const std::vector<Tensor> got = run(jvp, {a, da});
    const std::vector<Tensor> want = run(jvp, {joined(bm, m, n).reshape({m, n}), da});
    for (size_t i = 0; i < got.size(); ++i) {
      std::string why;
      CHECK_MESSAGE(close(got[i], want[i], 1e-9, &why), "output ", i, ": ", why);
    }
  }
}

TEST_CASE("linalg: a block whose ?gesdd does not converge is recomputed by ?gesvd; if that fails too, an error") {
  auto context = std::make_shared<ExecutionContext>(ConfigOptions{.threads = 1});
  Runtime hooked(RuntimeOptions{.context = context});
  hooked.add_module(linalg::module_descriptor());
  Rng rng{41};
  const BlockMatrix bm = block_matrix(DType::f64, 7, 6, 2, true, 2, rng);
  auto run_hooked = [&] {
    Builder b("op", &hooked.registry());
    Value x = b.parameter("a", {DType::f64, {7, 6, 2}});
    auto p = std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::svd);
    return hooked.prepare(b.finish(b.extension_results(p, {x}))).run({bm.a});
  };
  linalg::set_lapack_status_hook_for_testing(
      *context, [](std::string_view routine, int64_t info) -> int64_t { return routine == "gesdd" ? 4 : info; });
  std::vector<Tensor> f = run_hooked();
  for (int64_t b = 0; b < 2; ++b) {
    Mat am = matrix(bm.a, b), usv = product(scale_columns(matrix(f[0], b), vector_of(f[1], b)), matrix(f[2], b));
    CHECK(frobenius(minus(am, usv)) <= decomposition_tolerance(DType::f64) * frobenius(am));
  }
  linalg::set_lapack_status_hook_for_testing(*context, [](std::string_view routine, int64_t info) -> int64_t {
    return routine == "gesdd" ? 4 : routine == "gesvd" ? 3 : info;
  });
  CHECK(error_of(run_hooked) ==
        "svd: LAPACK ?gesdd and then ?gesvd did not converge on matrix 0 of the batch (info 3); the input may be "
        "badly scaled or nearly singular in a way LAPACK cannot resolve");
}
