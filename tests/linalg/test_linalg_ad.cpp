// The linalg family's AD rules against finite differences, the dot-product test and transpose adjointness
// (ad/AdTestUtil.h's check_derivatives) on random, well-separated spectra: svd of square, tall, wide and batched
// matrices (real: every factor; complex and f32: gauge-invariant functions of the factors), eigh of the Hermitian
// part, qr (tall, square and wide) and inv_upper, second order (the jvp of a gradient through svd and qr), and a nearly
// degenerate spectrum (gauge-invariant functions only). Truncated and full svd: test_linalg_truncated.cpp.
#include "LinalgTestUtil.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::linalg_test;

using linalg::LinalgKind;

TEST_CASE("linalg ad: svd of real matrices, every factor") {
  // f64 only: in f32 the finite-difference step (1e-2) is large enough that LAPACK flips the sign of some singular
  // vectors between the two evaluations; f32 is checked on gauge-invariant functions below.
  Rng rng{160};
  for (DType dtype : {DType::f64}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{4, 4}, {5, 3}, {3, 5}}) {
      for (const Shape& batch : {Shape{}, Shape{2}}) {
        std::string where = fmt::format("{} [{}, {}] batch {}, seed 160", name(dtype), m, n, batch.size());
        Builder c("svd", registry());
        Shape shape = with_batch({m, n}, batch);
        Value x = c.parameter("a", {dtype, std::vector<Dim>(shape.begin(), shape.end())});
        std::vector<Value> f = decompose(c, LinalgKind::svd, x);
        Program p = c.finish({f[0], f[1], f[2]});
        check_derivatives(p, {0}, {random_tensor(dtype, shape, rng)}, rng, loose(dtype), where);
      }
    }
  }
}

TEST_CASE("linalg ad: svd, gauge-invariant functions of the factors, complex and single precision") {
  Rng rng{161};
  for (DType dtype : {DType::c128, DType::c64, DType::f32}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{4, 4}, {5, 3}, {3, 5}}) {
      std::string where = fmt::format("{} [{}, {}] batch 2, seed 161", name(dtype), m, n);
      Builder c("svd", registry());
      Shape shape{m, n, 2};
      Value x = c.parameter("a", {dtype, {m, n, 2}});
      std::vector<Value> f = decompose(c, LinalgKind::svd, x);
      // S, U diag(c) Uᴴ, V diag(c) Vᴴ and U diag(S²) Vh: none depends on the phases of the singular vectors.
      Value s2 = c.mul(f[1], f[1]);
      if (is_complex(dtype)) s2 = c.convert(s2, dtype);
      Value us2 = c.mul(f[0], c.broadcast_in_dim(s2, {1, 2}, f[0].type.dims));
      Program p = c.finish({f[1], weighted_projector(c, f[0]), weighted_projector(c, adj(c, f[2])), mm(c, us2, f[2])});
      check_derivatives(p, {0}, {random_tensor(dtype, shape, rng)}, rng, loose(dtype), where);
    }
  }
}

TEST_CASE("linalg ad: eigh of the Hermitian part, real and complex") {
  Rng rng{162};
  for (DType dtype : {DType::f64, DType::c128, DType::f32, DType::c64}) {
    std::string where = fmt::format("{} [4, 4] batch 3, seed 162", name(dtype));
    Builder c("eigh", registry());
    Value x = c.parameter("a", {dtype, {4, 4, 3}});
    Value h = c.mul(c.add(x, adj(c, x)), c.full(x.type, 0.5));
    std::vector<Value> f = decompose(c, LinalgKind::eigh, h);
    std::vector<Value> outs{f[0], weighted_projector(c, f[1])};
    // Real eigenvectors themselves (only a sign is free, fixed near the point) in f64 only. In f32 the step of the
    // finite differences (1e-2) can flip LAPACK's sign between the two evaluations: under clang-19 (seed 162) output
    // 2 then differs by 76.0 against a scale of 76.6, the difference of v and -v over 2h; jvp itself still passes
    // the dot-product and adjointness checks. As for svd, single precision is checked on gauge-invariant outputs.
    if (dtype == DType::f64) outs.push_back(f[1]);
    Program p = c.finish(outs);
    check_derivatives(p, {0}, {random_tensor(dtype, {4, 4, 3}, rng)}, rng, loose(dtype), where);
  }
}

TEST_CASE("linalg ad: second order: the gradient of a function of svd is differentiated again") {
  Rng rng{163};
  for (DType dtype : {DType::f64, DType::c128}) {
    std::string where = fmt::format("{} [4, 3], seed 163", name(dtype));
    Builder c("f", registry());
    Value x = c.parameter("a", {dtype, {4, 3}});
    std::vector<Value> f = decompose(c, LinalgKind::svd, x);
    // sum(S³) + Re sum(U diag(c) Uᴴ ∘ A): a real scalar that is gauge invariant.
    Value s3 = c.reduce_sum(c.mul(f[1], c.mul(f[1], f[1])), {0});
    Value proj = c.real(c.reduce_sum(c.mul(weighted_projector(c, f[0]), mm(c, x, adj(c, x))), {0, 1}));
    Program p = c.finish({c.add(s3, proj)});
    Program g = ad::grad(p, {0}, registry());
    check_derivatives(g, {0}, {random_tensor(dtype, {4, 3}, rng)}, rng, loose(dtype), where);
  }
}

TEST_CASE("linalg ad: qr of tall, square and wide matrices, both factors, real and complex") {
  // LAPACK keeps diag(R) real, the gauge of the rule, so Q and R themselves are checked in every dtype.
  Rng rng{164};
  for (DType dtype : {DType::f64, DType::c128, DType::f32, DType::c64}) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{4, 4}, {5, 3}, {3, 5}}) {
      std::string where = fmt::format("{} [{}, {}] batch 2, seed 164", name(dtype), m, n);
      Builder c("qr", registry());
      Value x = c.parameter("a", {dtype, {m, n, 2}});
      std::vector<Value> f = decompose(c, LinalgKind::qr, x);
      Program p = c.finish({f[0], f[1]});
      check_derivatives(p, {0}, {random_tensor(dtype, {m, n, 2}, rng)}, rng, loose(dtype), where);
    }
  }
}

TEST_CASE("linalg ad: inv_upper, and the second order of qr") {
  Rng rng{165};
  for (DType dtype : {DType::f64, DType::c128}) {
    std::string where = fmt::format("{} [3, 3] batch 2, seed 165", name(dtype));
    std::vector<c128> v = values(random_tensor(dtype, {3, 3, 2}, rng));
    for (size_t d : {0, 4, 8, 9, 13, 17}) v[d] += 3.0;  // diagonals away from zero
    Builder c("inv", registry());
    Value r = c.parameter("r", {dtype, {3, 3, 2}});
    Program p = c.finish({decompose(c, LinalgKind::inv_upper, r)[0]});
    check_derivatives(p, {0}, {tensor_of(dtype, {3, 3, 2}, v)}, rng, loose(dtype), where);

    Builder g("f", registry());
    Value x = g.parameter("a", {dtype, {4, 3}});
    std::vector<Value> f = decompose(g, LinalgKind::qr, x);
    Value loss = g.real(g.reduce_sum(g.mul(mm(g, f[0], f[1]), mm(g, f[0], adj(g, f[1]))), {0, 1}));
    Program grad = ad::grad(g.finish({loss}), {0}, registry());
    check_derivatives(grad, {0}, {random_tensor(dtype, {4, 3}, rng)}, rng, loose(dtype), where + ", grad of qr");
  }
}

TEST_CASE("linalg ad: nearly degenerate singular values: sum(S) and the projector on the pair's span") {
  // s = (3, 2 + 1e-9, 2, 1): the middle pair is not differentiable one by one at the finite-difference step (1e-6 is
  // far above the gap), but the nuclear norm sum(S) is, and so is the projector
  // U diag(1, 1, 1, 0) Uᴴ (onto a span that contains the whole pair) is, and the broadened rule gets it right
  // because the pair's F terms enter it with weight c_i - c_j = 0.
  Rng rng{166};
  for (DType dtype : {DType::f64, DType::c128}) {
    std::string where = fmt::format("{} [4, 4] gap 1e-9, seed 166", name(dtype));
    auto orthonormal = [&] {
      Builder q("q", registry());
      Value x = q.parameter("x", {dtype, {4, 4}});
      return run(q.finish({decompose(q, LinalgKind::qr, x)[0]}), {random_tensor(dtype, {4, 4}, rng)})[0];
    };
    Mat x = matrix(orthonormal(), 0), y = matrix(orthonormal(), 0);
    Mat a = product(scale_columns(x, {3.0, 2.0 + 1e-9, 2.0, 1.0}), adjoint(y));
    std::vector<c128> flat;
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < 4; ++i) flat.push_back(a[i][j]);
    Builder c("near", registry());
    Value in = c.parameter("a", {dtype, {4, 4}});
    std::vector<Value> f = decompose(c, LinalgKind::svd, in);
    Value mask = c.constant(Tensor::from_col_major<double>({4}, {1, 1, 1, 0}));
    if (is_complex(dtype)) mask = c.convert(mask, dtype);
    Value projector = mm(c, c.mul(f[0], c.broadcast_in_dim(mask, {1}, f[0].type.dims)), adj(c, f[0]));
    Program p = c.finish({c.reduce_sum(f[1], {0}), projector});
    check_derivatives(p, {0}, {tensor_of(dtype, {4, 4}, flat)}, rng, loose(dtype), where);
  }
}
