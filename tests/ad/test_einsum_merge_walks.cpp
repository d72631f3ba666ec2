// The merged walks (extensions/einsum/op/MergeWalks.cpp): merge_vjp_jvp (an HVP program's gradient and its tangent
// from one walk) and merge_value_vjp (the value and the cotangents from one walk), bit for bit against the unmerged
// programs on one and two threads, with finite differences and the dot-product test; and that the public AD
// transformations apply them by default (the unmerged programs come from a registry whose rewrite_derivative is
// cleared).
#include "TreeAdTestUtil.h"

#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "compiler/Lower.h"
#include "ir/Parser.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::ad_test;

TEST_CASE("merge_vjp_jvp: the HVP program jvp(grad(f)) walks the tree once; the Hessian is symmetric (dot-product "
          "test), matches finite differences of the gradient, and the bits are the unmerged program's at 1 and 2 "
          "threads") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
  };
  const std::vector<Row> rows = {{"ij,jk,kl,l->i", {{6, 5}, {5, 7}, {7, 4}, {4}}},
                                 {"xwu,yxl,yzd,wzr->uldr", {{3, 4, 2}, {3, 3, 2}, {3, 2, 4}, {4, 2, 3}}},
                                 {"ab,bc,cd,da->", {{4, 5}, {5, 6}, {6, 3}, {3, 4}}}};
  Rng rng{4242};
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    TraceContext ctx("loss", registry());
    auto [params, x, wrt] = trace_operands(ctx, DType::f64, r.shapes, rng);
    TracedTensor y = einsum::einsum(ctx, r.subscripts, std::span<const TracedTensor>(params));
    const Program loss = ctx.finish({y.rank() == 0 ? y : sum(y)});
    const Program g = ad::grad(loss, wrt, registry());
    const Program h = ad::jvp(g, wrt, unmerged_registry());
    const Program hm = einsum::merge_vjp_jvp(h, registry());
    const std::string text = print_program(hm);
    CHECK(print_program(ad::jvp(g, wrt, registry())) == text);  // the default HVP program
    INFO("merged:\n" << text);
    CHECK(text.find("mode = vjp_with_jvp") != std::string::npos);
    CHECK(text.find("mode = vjp,") == std::string::npos);
    CHECK(text.find("mode = vjp_jvp,") == std::string::npos);
    CHECK(print_program(parse_program(text, registry())) == text);
    const size_t n = r.shapes.size();
    auto hvp = [&](const std::vector<Tensor>& t, int threads) {
      std::vector<Tensor> in = x;
      in.insert(in.end(), t.begin(), t.end());
      return run_on(threads, hm, in);  // the gradient, then H t
    };
    std::vector<Tensor> s, t;
    for (const Shape& sh : r.shapes) {
      s.push_back(random_tensor(DType::f64, sh, rng));
      t.push_back(random_tensor(DType::f64, sh, rng));
    }
    const std::vector<Tensor> ht = hvp(t, 1), hs = hvp(s, 1), ht2 = hvp(t, 2);
    std::vector<Tensor> in = x;
    in.insert(in.end(), t.begin(), t.end());
    const std::vector<Tensor> unmerged = run_on(1, h, in);
    REQUIRE(ht.size() == 2 * n);
    REQUIRE(unmerged.size() == ht.size());
    for (size_t o = 0; o < ht.size(); ++o) {
      CHECK_MESSAGE(same_bits(ht[o], unmerged[o]), "merged vs unmerged, output " << o);
      CHECK_MESSAGE(same_bits(ht[o], ht2[o]), "one and two threads differ, output " << o);
    }
    // Dot-product test: <s, H t> = <H s, t> (the Hessian of a real scalar is symmetric).
    double st = 0, hst = 0, scale = 0;
    for (size_t k = 0; k < n; ++k) {
      st += inner(s[k], ht[n + k]);
      hst += inner(hs[n + k], t[k]);
      scale += norm(s[k]) * norm(ht[n + k]) + norm(hs[n + k]) * norm(t[k]);
    }
    CHECK_MESSAGE(std::abs(st - hst) <= 1e-12 * scale, "<s, Ht> = " << st << " but <Hs, t> = " << hst);
    // Finite differences of the gradient along t.
    const Tolerance tol = tolerance_for(DType::f64);
    std::vector<Tensor> plus = x, minus = x;
    for (size_t k = 0; k < n; ++k) {
      plus[k] = axpy(x[k], tol.h, t[k]);
      minus[k] = axpy(x[k], -tol.h, t[k]);
    }
    const std::vector<Tensor> gp = run_on(1, g, plus), gm = run_on(1, g, minus);
    for (size_t k = 0; k < n; ++k) {
      Tensor fd = axpy(Tensor::zeros(DType::f64, r.shapes[k]), 1 / (2 * tol.h), axpy(gp[k], -1, gm[k]));
      std::string why;
      CHECK_MESSAGE(close(ht[n + k], fd, tol.fd, &why), "H t vs finite differences, operand " << k << ": " << why);
    }
    // Lowering: vjp's reverse einsums, then vjp_jvp's.
    check_lowered(hm, in, ht);
    // --print-stages names the merged walk.
    CHECK(runtime().prepare(hm).describe_prepared(in).find("the cotangents and the tangent of the walk") !=
          std::string::npos);
  }
}

TEST_CASE("merge_value_vjp: the einsum and its vjp become one value_vjp walk when the cotangent does not read the "
          "value; readers of the value move after it; jvp of the merged program and its lowering stay exact") {
  TraceContext ctx("loss", registry());
  Rng rng{91};
  const std::vector<Shape> shapes = {{3, 4}, {4, 5}, {5, 3}};
  auto [params, inputs, all] = trace_operands(ctx, DType::f64, shapes, rng);
  TracedTensor y = einsum::einsum(ctx, "ij,jk,kl->il", std::span<const TracedTensor>(params));
  const Program loss = ctx.finish({sum(y)});
  const std::vector<int> wrt = {0, 1, 2};
  const Program vg = ad::value_and_grad(loss, wrt, unmerged_registry());
  const Program m = einsum::merge_value_vjp(vg, registry());
  CHECK(print_program(ad::value_and_grad(loss, wrt, registry())) == print_program(m));  // the default
  INFO("value_and_grad:\n" << print_program(vg) << "merged:\n" << print_program(m));
  REQUIRE(uses_tree_walk(vg));
  CHECK(merged(m));
  CHECK(print_program(m).find("einstage.einsum.v1(") == std::string::npos);  // the forward einsum is gone
  CHECK(print_program(parse_program(print_program(m), registry())) == print_program(m));
  const std::vector<Tensor> want = run_on(1, vg, inputs), got = run_on(1, m, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) CHECK(same_bits(got[o], want[o]));

  // A loss whose cotangent reads the value (sum(y * y): ct = 2y) keeps the einsum and the vjp apart.
  TraceContext sq("square", registry());
  std::vector<TracedTensor> sp;
  for (size_t k = 0; k < shapes.size(); ++k)
    sp.push_back(sq.parameter(fmt::format("a{}", k), DType::f64, std::vector<Dim>(shapes[k].begin(), shapes[k].end())));
  TracedTensor ys = einsum::einsum(sq, "ij,jk,kl->il", std::span<const TracedTensor>(sp));
  const Program square_vg = ad::value_and_grad(sq.finish({sum(ys * ys)}), wrt, registry());
  REQUIRE(uses_tree_walk(square_vg));
  CHECK(print_program(einsum::merge_value_vjp(square_vg, registry())) == print_program(square_vg));

  // Higher order through value_vjp's linearize rule: the jvp of the merged program equals the unmerged one's.
  std::vector<Tensor> jin = inputs;
  for (const Shape& s : shapes) jin.push_back(random_tensor(DType::f64, s, rng));
  const Program jm = ad::jvp(m, wrt, registry()), ju = ad::jvp(vg, wrt, registry());
  const std::vector<Tensor> jgot = run_on(1, jm, jin), jwant = run_on(1, ju, jin);
  REQUIRE(jgot.size() == jwant.size());
  for (size_t o = 0; o < jgot.size(); ++o) {
    std::string why;
    CHECK_MESSAGE(close(jgot[o], jwant[o], 1e-12, &why), "jvp output " << o << ": " << why);
  }
  // Lowering: the einsum, then each slot's reverse einsum.
  check_lowered(m, inputs, want);
}

TEST_CASE("the default: ad::value_and_grad, grad and jvp of grad walk each tree once (the einsum_ad family's "
          "rewrite_derivative), with the explicit merges' programs and the unmerged programs' bits; the gradients "
          "match finite differences") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
    DType dtype;
  };
  const std::vector<Row> rows = {{"ij,jk,kl,l->", {{5, 4}, {4, 6}, {6, 3}, {3}}, DType::f64},
                                 {"xwu,yxl,yzd,wzr->uldr", {{3, 4, 2}, {3, 3, 2}, {3, 2, 4}, {4, 2, 3}}, DType::f64},
                                 {"ab,bc,cd->ad", {{3, 4}, {4, 5}, {5, 3}}, DType::f32}};
  auto scalar_of = [](const Tensor& t) {
    return t.dtype() == DType::f32 ? inner(t, Tensor::scalar(1.0f)) : inner(t, Tensor::scalar(1.0));
  };
  Rng rng{1515};
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    TraceContext ctx("loss", registry());
    auto [params, x, wrt] = trace_operands(ctx, r.dtype, r.shapes, rng);
    TracedTensor y = einsum::einsum(ctx, r.subscripts, std::span<const TracedTensor>(params));
    const Program loss = ctx.finish({y.rank() == 0 ? y : sum(y)});
    const size_t n = r.shapes.size();

    // value_and_grad: one value_vjp walk, exactly merge_value_vjp of the unmerged program, with its bits.
    const Program vg = ad::value_and_grad(loss, wrt, registry());
    const Program vg_unmerged = ad::value_and_grad(loss, wrt, unmerged_registry());
    INFO("value_and_grad:\n" << print_program(vg));
    CHECK(merged(vg));
    CHECK(print_program(vg).find("einstage.einsum.v1(") == std::string::npos);
    CHECK(print_program(vg) == print_program(einsum::merge_value_vjp(vg_unmerged, registry())));
    const std::vector<Tensor> want = run_on(1, vg_unmerged, x);
    REQUIRE(want.size() == n + 1);
    for (int threads : {1, 2}) {
      const std::vector<Tensor> got = run_on(threads, vg, x);
      REQUIRE(got.size() == want.size());
      for (size_t o = 0; o < got.size(); ++o)
        CHECK_MESSAGE(same_bits(got[o], want[o]), "default vs unmerged, output " << o << ", " << threads << " threads");
    }
    // grad: the value is not returned, so there is no forward einsum to merge: one vjp walk, the same gradient bits.
    const Program g = ad::grad(loss, wrt, registry());
    CHECK(uses_tree_walk(g));
    CHECK(std::count_if(g.instructions.begin(), g.instructions.end(), [](const Instruction& i) {
            return std::holds_alternative<ExtensionOp>(i.op);
          }) == 1);
    const std::vector<Tensor> gr = run_on(1, g, x);
    for (size_t k = 0; k < n; ++k) CHECK_MESSAGE(same_bits(gr[k], want[1 + k]), "grad vs value_and_grad, operand " << k);
    // Finite differences of the loss along a random direction: <grad, t>.
    const Tolerance tol = tolerance_for(r.dtype);
    std::vector<Tensor> t, plus = x, minus = x;
    double directional = 0, scale = 0;
    for (size_t k = 0; k < n; ++k) {
      t.push_back(random_tensor(r.dtype, r.shapes[k], rng));
      plus[k] = axpy(x[k], tol.h, t[k]);
      minus[k] = axpy(x[k], -tol.h, t[k]);
      directional += inner(gr[k], t[k]);
      scale += norm(gr[k]) * norm(t[k]);
    }
    const double fd = (scalar_of(run_on(1, loss, plus)[0]) - scalar_of(run_on(1, loss, minus)[0])) / (2 * tol.h);
    CHECK_MESSAGE(std::abs(fd - directional) <= tol.fd * scale, "finite differences " << fd << " vs <grad, t> "
                                                                                        << directional);
    // jvp of grad (an HVP): one vjp_with_jvp walk, the unmerged program's bits.
    const Program h = ad::jvp(g, wrt, registry());
    const Program h_unmerged = ad::jvp(g, wrt, unmerged_registry());
    const std::string text = print_program(h);
    INFO("hvp:\n" << text);
    CHECK(text.find("mode = vjp_with_jvp") != std::string::npos);
    CHECK(text.find("mode = vjp,") == std::string::npos);
    CHECK(text.find("mode = vjp_jvp,") == std::string::npos);
    std::vector<Tensor> hin = x;
    hin.insert(hin.end(), t.begin(), t.end());
    const std::vector<Tensor> hu = run_on(1, h_unmerged, hin);
    for (int threads : {1, 2}) {
      const std::vector<Tensor> hg = run_on(threads, h, hin);
      REQUIRE(hg.size() == hu.size());
      for (size_t o = 0; o < hg.size(); ++o)
        CHECK_MESSAGE(same_bits(hg[o], hu[o]), "default vs unmerged HVP, output " << o << ", " << threads << " threads");
    }
  }
}

