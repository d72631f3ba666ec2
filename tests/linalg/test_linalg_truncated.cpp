// AD through truncated SVDs (thin or full svd followed by a slice that keeps the first k triplets) and through
// full svd, on random seeded matrices (tall, square, wide, batched; f64, c128, f32): the rank-k approximation, the
// kept singular values and the projectors on the kept (and, for full svd, the discarded) singular vectors go through
// finite differences, the dot-product test and transpose adjointness (ad/AdTestUtil.h), and the gradient of the
// truncation error ‖A − A_k‖² is checked against its closed form 2 (A − A_k) (Eckart–Young: the error is the sum
// of the discarded s_i², whose gradient is 2 Σ_{i>k} s_i u_i v_iᴴ; conjugated for complex A, as ad::grad is).
// The split form svd {keep = k} (LinalgOp.h) goes through the same checks, and its first and second derivatives
// must equal those of the thin svd followed by slices.
#include "LinalgTestUtil.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::linalg_test;

namespace {

// The first `count` entries of axis `axis` of x (every other axis whole).
Value leading(Builder& b, const Value& x, int axis, int64_t count) {
  std::vector<Dim> size = x.type.dims;
  size[static_cast<size_t>(axis)] = Dim(count);
  return b.slice(x, Axes(size.size(), 0), size, Axes(size.size(), 1));
}

// Entries [from, end) of axis 1 of x.
Value trailing_columns(Builder& b, const Value& x, int64_t from) {
  std::vector<Dim> size = x.type.dims;
  size[1] = Dim(size[1].constant() - from);
  Axes start(size.size(), 0);
  start[1] = from;
  return b.slice(x, start, size, Axes(size.size(), 1));
}

// The kept triplets of svd factors: U_k [M, k, B...], S_k [k, B...], Vh_k [k, N, B...].
struct Truncated {
  Value u, s, vh;
};
Truncated truncate(Builder& b, const std::vector<Value>& f, int64_t k) {
  return {leading(b, f[0], 1, k), leading(b, f[1], 0, k), leading(b, f[2], 0, k)};
}

// U_k diag(S_k) Vh_k: the best rank-k approximation.
Value low_rank(Builder& b, const Truncated& t) {
  Value s = t.s;
  if (is_complex(t.u.type.dtype)) s = b.convert(s, t.u.type.dtype);
  std::vector<Dim> dims = t.u.type.dims;
  Axes along{1};
  for (int64_t a = 2; a < t.u.type.rank(); ++a) along.push_back(a);
  return mm(b, b.mul(t.u, b.broadcast_in_dim(s, along, dims)), t.vh);
}

std::vector<Value> svd_of(Builder& b, const Value& a, bool full) {
  return b.extension_results(std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::svd, full), {a});
}

// Gauge-invariant outputs of the kept triplets: A_k, S_k and the weighted projectors on the kept U and V columns;
// real matrices add the kept factors themselves (their gauge is a sign, fixed near the point).
std::vector<Value> kept_outputs(Builder& b, const Truncated& t) {
  std::vector<Value> outs{low_rank(b, t), t.s, weighted_projector(b, t.u), weighted_projector(b, adj(b, t.vh))};
  if (!is_complex(t.u.type.dtype) && t.u.type.dtype == DType::f64) {
    outs.push_back(t.u);
    outs.push_back(t.vh);
  }
  return outs;
}

// Entries [from, end) of `axis` of x.
Value trailing(Builder& b, const Value& x, int axis, int64_t from) {
  std::vector<Dim> size = x.type.dims;
  size[static_cast<size_t>(axis)] = Dim(size[static_cast<size_t>(axis)].constant() - from);
  Axes start(size.size(), 0);
  start[static_cast<size_t>(axis)] = from;
  return b.slice(x, start, size, Axes(size.size(), 1));
}

// The kept and the discarded triplets of a: six values, from svd {keep = k} (`split`) or from the thin svd and slices.
std::pair<Truncated, Truncated> kept_and_rest(Builder& b, const Value& a, int64_t k, bool split) {
  if (split) {
    std::vector<Value> f =
        b.extension_results(std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::svd, false, 1e-12, k), {a});
    REQUIRE(f.size() == 6);
    return {{f[0], f[1], f[2]}, {f[3], f[4], f[5]}};
  }
  std::vector<Value> f = svd_of(b, a, false);
  return {truncate(b, f, k), {trailing(b, f[0], 1, k), trailing(b, f[1], 0, k), trailing(b, f[2], 0, k)}};
}

// Gauge-invariant outputs of both blocks of a split.
std::vector<Value> split_outputs(Builder& b, const Value& a, int64_t k, bool split) {
  auto [kept, rest] = kept_and_rest(b, a, k, split);
  std::vector<Value> outs = kept_outputs(b, kept);
  for (const Value& v : {rest.s, weighted_projector(b, rest.u), weighted_projector(b, adj(b, rest.vh))})
    outs.push_back(v);
  return outs;
}

// A real scalar of the kept triplets only (how TRG uses a truncated svd): Σ S_k³ + Re Σ (U_k diag(c) U_kᴴ) ∘ (A Aᴴ).
Value kept_scalar(Builder& b, const Value& a, int64_t k, bool split) {
  const Truncated t = kept_and_rest(b, a, k, split).first;
  Value s3 = b.reduce_sum(b.mul(t.s, b.mul(t.s, t.s)), {0});
  Value proj = b.real(b.reduce_sum(b.mul(weighted_projector(b, t.u), mm(b, a, adj(b, a))), {0, 1}));
  return b.add(s3, proj);
}

}  // namespace

TEST_CASE("linalg ad: truncated thin svd (keep the first k triplets) matches finite differences") {
  for (DType dtype : {DType::f64, DType::c128, DType::f32}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{6, 6}, {7, 4}, {4, 7}}) {
      for (int64_t k : {1, 3}) {
        // f32 at k = 3: the finite-difference step (1e-2) is not small against the smaller gaps s_3 − s_4 of these
        // draws, so the differences themselves are off by more than the f32 tolerance; k = 1 keeps f32 covered.
        if (dtype == DType::f32 && k == 3) continue;
        const uint64_t seed = 170 + static_cast<uint64_t>(m * 10 + n + k);
        Rng rng{seed};
        std::string where = fmt::format("{} [{}, {}] batch 2, k = {}, seed {}", name(dtype), m, n, k, seed);
        Builder c("truncated", registry());
        Value x = c.parameter("a", {dtype, {m, n, 2}});
        Program p = c.finish(kept_outputs(c, truncate(c, svd_of(c, x, false), k)));
        check_derivatives(p, {0}, {random_tensor(dtype, {m, n, 2}, rng)}, rng, loose(dtype), where);
      }
    }
  }
}

TEST_CASE("linalg ad: full svd followed by a slice, and the projectors on the discarded columns") {
  // The columns of full U past K = min(M, N) are not determined by A (any orthonormal completion will do), so
  // their rule is a gauge; the projector U_⊥ U_⊥ᴴ = I − U_K U_Kᴴ does not depend on it and must match finite
  // differences, like everything built from the first k triplets.
  for (DType dtype : {DType::f64, DType::c128}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{6, 4}, {4, 6}, {5, 5}}) {
      for (int64_t k : {int64_t{2}, std::min(m, n)}) {
        const uint64_t seed = 190 + static_cast<uint64_t>(m * 10 + n + k);
        Rng rng{seed};
        std::string where = fmt::format("{} [{}, {}], full, k = {}, seed {}", name(dtype), m, n, k, seed);
        Builder c("full", registry());
        Value x = c.parameter("a", {dtype, {m, n}});
        std::vector<Value> f = svd_of(c, x, true);
        std::vector<Value> outs = kept_outputs(c, truncate(c, f, k));
        const int64_t kk = std::min(m, n);
        if (m > kk) {
          Value u_perp = trailing_columns(c, f[0], kk);
          outs.push_back(mm(c, u_perp, adj(c, u_perp)));
        }
        if (n > kk) {
          Value v_perp = trailing_columns(c, adj(c, f[2]), kk);
          outs.push_back(mm(c, v_perp, adj(c, v_perp)));
        }
        Program p = c.finish(outs);
        check_derivatives(p, {0}, {random_tensor(dtype, {m, n}, rng)}, rng, loose(dtype), where);
      }
    }
  }
}

TEST_CASE("linalg ad: the gradient of the truncation error ‖A − A_k‖² is 2 (A − A_k), thin and full svd") {
  // For complex A, ad::grad of a real function is df/dx − i df/dy (docs/ad.md), here 2 conj(A − A_k).
  for (DType dtype : {DType::f64, DType::c128}) {
    for (bool full : {false, true}) {
      for (auto [m, n] : {std::pair<int64_t, int64_t>{6, 5}, {5, 6}}) {
        const uint64_t seed = 210 + static_cast<uint64_t>(m * 10 + n) + (full ? 100 : 0);
        Rng rng{seed};
        CAPTURE(seed);
        CAPTURE(name(dtype));
        CAPTURE(full);
        Builder c("error", registry());
        Value x = c.parameter("a", {dtype, {m, n}});
        Value residual = c.sub(x, low_rank(c, truncate(c, svd_of(c, x, full), 2)));
        Value squared = c.mul(c.conj(residual), residual);
        if (is_complex(dtype)) squared = c.real(squared);
        Program loss = c.finish({c.reduce_sum(squared, {0, 1})});
        const Tensor a = random_tensor(dtype, {m, n}, rng);
        const std::vector<Tensor> got = run(ad::grad(loss, {0}, registry()), {a});
        REQUIRE(got.size() == 1);

        Builder o("oracle", registry());
        Value y = o.parameter("a", {dtype, {m, n}});
        Value r = o.sub(y, low_rank(o, truncate(o, svd_of(o, y, false), 2)));
        if (is_complex(dtype)) r = o.conj(r);
        const std::vector<Tensor> want = run(o.finish({o.mul(o.full(y.type, 2.0), r)}), {a});
        std::string why;
        CHECK_MESSAGE(close(got[0], want[0], 1e-10, &why), why);
      }
    }
  }
}

TEST_CASE("linalg ad: svd {keep = k} matches finite differences, and the thin svd then slices to 1e-12") {
  for (DType dtype : {DType::f64, DType::c128}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{6, 6}, {7, 4}, {4, 7}}) {
      for (int64_t k : {1, 3}) {
        const uint64_t seed = 240 + static_cast<uint64_t>(m * 10 + n + k);
        Rng rng{seed};
        std::string where = fmt::format("{} [{}, {}] batch 2, keep = {}, seed {}", name(dtype), m, n, k, seed);
        INFO(where);
        std::vector<Program> forms;
        for (bool split : {true, false}) {
          Builder c("split", registry());
          Value x = c.parameter("a", {dtype, {m, n, 2}});
          forms.push_back(c.finish(split_outputs(c, x, k, split)));
        }
        const Tensor a = random_tensor(dtype, {m, n, 2}, rng);
        check_derivatives(forms[0], {0}, {a}, rng, loose(dtype), where);
        const Tensor da = random_tensor(dtype, {m, n, 2}, rng);
        const std::vector<Tensor> got = run(ad::jvp(forms[0], {0}, registry()), {a, da});
        const std::vector<Tensor> want = run(ad::jvp(forms[1], {0}, registry()), {a, da});
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          std::string why;
          CHECK_MESSAGE(close(got[i], want[i], 1e-12, &why), "output ", i, ": ", why);
        }
      }
    }
  }
}

TEST_CASE("linalg ad: second order through svd {keep = k}: the gradient of the kept triplets, differentiated again") {
  for (DType dtype : {DType::f64, DType::c128}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 5}, {6, 4}}) {
      const uint64_t seed = 260 + static_cast<uint64_t>(m * 10 + n);
      Rng rng{seed};
      std::string where = fmt::format("{} [{}, {}], keep = 2, seed {}", name(dtype), m, n, seed);
      INFO(where);
      std::vector<Program> grads;
      for (bool split : {true, false}) {
        Builder c("f", registry());
        Value x = c.parameter("a", {dtype, {m, n}});
        grads.push_back(ad::grad(c.finish({kept_scalar(c, x, 2, split)}), {0}, registry()));
      }
      const Tensor a = random_tensor(dtype, {m, n}, rng);
      check_derivatives(grads[0], {0}, {a}, rng, loose(dtype), where);
      const Tensor da = random_tensor(dtype, {m, n}, rng);
      const std::vector<Tensor> got = run(ad::jvp(grads[0], {0}, registry()), {a, da});
      const std::vector<Tensor> want = run(ad::jvp(grads[1], {0}, registry()), {a, da});
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        std::string why;
        CHECK_MESSAGE(close(got[i], want[i], 1e-12, &why), "output ", i, ": ", why);
      }
    }
  }
}

TEST_CASE("linalg ad: the discarded block's tangents form no product dAᴴ U_r of their own (dPᴴ from the kept block)") {
  // A [12, 12] with keep = 2: the rest block has 10 columns. Its tangents need dA V_r [12, 10] (for dP_rr); the
  // off-diagonal dPᴴ_kr = Vh_k dAᴴ U_r is dP_rkᴴ = (U_rᴴ (dA V_k))ᴴ, from the kept block's products, so exactly one
  // dot_general of the tangent dA has a 10-column result.
  const int64_t n = 12, k = 2;
  Builder c("split", registry());
  Value x = c.parameter("a", {DType::f64, {n, n}});
  const Program jvp = ad::jvp(c.finish(split_outputs(c, x, k, true)), {0}, registry());
  const ValueId da = jvp.params.back().value.id;
  int wide_products = 0;
  for (const Instruction& inst : jvp.instructions) {
    if (!std::holds_alternative<DotGeneral>(inst.op)) continue;
    const bool reads_da = inst.operands[0].id == da || inst.operands[1].id == da;
    if (reads_da && inst.result().type.dims[1] == Dim(n - k)) ++wide_products;
  }
  CHECK(wide_products == 1);
  // And the values stay those of the thin svd then slices (the test above checks this on random draws too).
  Rng rng{281};
  const Tensor a = random_tensor(DType::f64, {n, n}, rng), t = random_tensor(DType::f64, {n, n}, rng);
  Builder o("thin", registry());
  Value y = o.parameter("a", {DType::f64, {n, n}});
  const std::vector<Tensor> want = run(ad::jvp(o.finish(split_outputs(o, y, k, false)), {0}, registry()), {a, t});
  const std::vector<Tensor> got = run(jvp, {a, t});
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    std::string why;
    CHECK_MESSAGE(close(got[i], want[i], 1e-12, &why), "output ", i, ": ", why, " (seed 281)");
  }
}
