// The reference cases of issue 5 with their numbers, the step-plan goldens of docs/behaviour.md §4.8, the shortcut,
// promotion, the plan cache, the arena prediction and pinned error messages.
#include "EinsumTestUtil.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/planner/ContractionTree.h"
#include "runtime/ThreadPool.h"

#include <doctest/doctest.h>

#include <thread>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

template <typename T>
Tensor rm(Shape shape, std::initializer_list<T> values) {
  return Tensor::from_row_major<T>(std::move(shape), values);
}

std::vector<es::TensorMeta> metas_of(const std::vector<Tensor>& ops) {
  std::vector<es::TensorMeta> m;
  for (const Tensor& t : ops) m.push_back(es::TensorMeta::of(t));
  return m;
}

es::EinsumOptions broadcasting() {
  es::EinsumOptions o;
  o.allow_broadcast = true;
  return o;
}

// The einsum's value through the definitional loop, as doubles in column-major order.
std::vector<double> oracle(const std::vector<std::string>& terms, const std::string& out, const std::vector<Tensor>& ops) {
  std::map<char, int64_t> ext;
  for (size_t k = 0; k < terms.size(); ++k)
    for (size_t a = 0; a < terms[k].size(); ++a) ext[terms[k][a]] = std::max(ext[terms[k][a]], ops[k].shape()[a]);
  auto w = et::definitional<double>(terms, out, ops, ext);
  return std::vector<double>(w.begin(), w.end());
}

}  // namespace

TEST_CASE("broadcast permission: a[2,1], b[3,2] ij,jk->ik with 2 and 3 operands") {
  Tensor a = rm<double>({2, 1}, {1, 2});
  Tensor b = rm<double>({3, 2}, {1, 2, 3, 4, 5, 6});
  // j broadcasts: out[i,k] = a[i,0] * (sum_j b[j,k]) = a[i] * [9, 12].
  Tensor c = es::einsum("ij,jk->ik", {a, b}, broadcasting());
  CHECK(c.to_row_major<double>() == std::vector<double>{9, 12, 18, 24});
  // Without the permission: the error names the label, both extents and both operands.
  try {
    es::einsum("ij,jk->ik", {a, b});
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("'j'") != std::string::npos);
    CHECK(msg.find("allow_broadcast") != std::string::npos);
  }
  // Three operands: the broadcast operand first, in the middle, and last.
  Tensor id = rm<double>({2, 2}, {1, 0, 0, 1});
  CHECK(es::einsum("ij,jk,kl->il", {a, b, id}, broadcasting()).to_row_major<double>() ==
        std::vector<double>{9, 12, 18, 24});
  Tensor m = rm<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = rm<double>({1, 2}, {10, 20});  // j broadcasts against m's 3
  Tensor v = rm<double>({2, 2}, {1, 1, 0, 1});
  // out[i,l] = (sum_j m[i,j]) * sum_k row[0,k] v[k,l] = rowsum(m)[i] * [10, 30]
  CHECK(es::einsum("ij,jk,kl->il", {m, row, v}, broadcasting()).to_row_major<double>() ==
        std::vector<double>{60, 180, 150, 450});
  CHECK(es::einsum("kl,ij,jk->il", {v, m, row}, broadcasting()).to_row_major<double>() ==
        std::vector<double>{60, 180, 150, 450});
  // Prepared plans follow the same rule.
  std::vector<Tensor> ops{m, row, v};
  es::EinsumPlan p = es::EinsumPlan::prepare("ij,jk,kl->il", metas_of(ops), broadcasting());
  CHECK(p.execute(ops).to_row_major<double>() == std::vector<double>{60, 180, 150, 450});
  CHECK_THROWS_AS(es::EinsumPlan::prepare("ij,jk,kl->il", metas_of(ops)), Error);
}

TEST_CASE("iij,jk,kl->il takes the diagonal of the first operand") {
  kt::Rng r(3);
  std::vector<Tensor> ops{et::random_tensor<double>(r, {2, 2, 3}, true), et::random_tensor<double>(r, {3, 4}, false),
                          et::random_tensor<double>(r, {4, 2}, true)};
  Tensor got = es::einsum("iij,jk,kl->il", ops);
  std::vector<double> want = oracle({"iij", "jk", "kl"}, "il", ops);
  std::vector<double> g = got.to_col_major<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-12));
  // Exact numbers on integers: A[i,i,j] = 1 + i + j, B = ones, C = [[1,2],[3,4],[5,6],[7,8]].
  Tensor A = Tensor::zeros(DType::i64, {2, 2, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) A.at<int64_t>({i, i, j}) = 1 + i + j;
  Tensor B = Tensor::from_col_major<int64_t>({3, 4}, std::vector<int64_t>(12, 1));
  Tensor C = rm<int64_t>({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  // sum_j A[i,i,j] = 6 (i=0), 9 (i=1); sum_k C[k,l] = [16, 20]
  CHECK(es::einsum("iij,jk,kl->il", {A, B, C}).to_row_major<int64_t>() == std::vector<int64_t>{96, 120, 144, 180});
}

TEST_CASE("repeated output labels at any operand count: i->ii, i,i->ii, i,i,i->ii") {
  Tensor x = rm<double>({3}, {1, 2, 3});
  CHECK(es::einsum("i->ii", {x}).to_row_major<double>() == std::vector<double>{1, 0, 0, 0, 2, 0, 0, 0, 3});
  CHECK(es::einsum("i,i->ii", {x, x}).to_row_major<double>() == std::vector<double>{1, 0, 0, 0, 4, 0, 0, 0, 9});
  CHECK(es::einsum("i,i,i->ii", {x, x, x}).to_row_major<double>() == std::vector<double>{1, 0, 0, 0, 8, 0, 0, 0, 27});
  Tensor xi = rm<int64_t>({3}, {1, 2, 3});
  CHECK(es::einsum("i,i,i->ii", {xi, xi, xi}).to_row_major<int64_t>() ==
        std::vector<int64_t>{1, 0, 0, 0, 8, 0, 0, 0, 27});
  // Into a strided output that holds garbage: the off-diagonal is zeroed.
  Tensor big = Tensor::from_col_major<double>({6, 3}, std::vector<double>(18, 7.0));
  Tensor out = big.slice(0, 0, 6, 2);
  std::vector<Tensor> ops{x, x};
  es::EinsumPlan::prepare("i,i->ii", metas_of(ops)).execute_into(ops, out);
  CHECK(out.to_row_major<double>() == std::vector<double>{1, 0, 0, 0, 4, 0, 0, 0, 9});
  CHECK(big.at<double>({1, 0}) == 7.0);  // untouched between the strided rows
  // Single-operand forms.
  Tensor m = rm<double>({2, 2}, {1, 2, 3, 4});
  CHECK(es::einsum("ii->i", {m}).to_row_major<double>() == std::vector<double>{1, 4});
  CHECK(es::einsum("ii->", {m}).to_row_major<double>() == std::vector<double>{5});
  CHECK(es::einsum("ij->j", {m}).to_row_major<double>() == std::vector<double>{4, 6});
  CHECK(es::einsum("ij->ji", {m}).to_row_major<double>() == std::vector<double>{1, 3, 2, 4});
  CHECK(es::einsum("ij->jii", {m}).shape() == Shape{2, 2, 2});
}

TEST_CASE("...ij,...jk->...ik with batch 1 against batch 4") {
  kt::Rng r(8);
  Tensor a = et::random_tensor<double>(r, {1, 2, 3}, false);
  Tensor b = et::random_tensor<double>(r, {4, 3, 2}, true);
  // Ellipsis axes broadcast without the permission.
  Tensor c = es::einsum("...ij,...jk->...ik", {a, b});
  CHECK(c.shape() == Shape{4, 2, 2});
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 2; ++k) {
        double s = 0;
        for (int64_t j = 0; j < 3; ++j) s += a.at<double>({0, i, j}) * b.at<double>({t, j, k});
        CHECK(c.at<double>({t, i, k}) == doctest::Approx(s).epsilon(1e-14));
      }
  // And the other way round, with three operands.
  Tensor d = et::random_tensor<double>(r, {1, 2, 2}, false);
  Tensor e = es::einsum("...ij,...jk,...kl->...il", {b, d, d});
  CHECK(e.shape() == Shape{4, 3, 2});
}

TEST_CASE("i64 chains are exact") {
  // Values around 2^20: products of four reach 2^80 in a float and would round; i64 wraps exactly like NumPy.
  kt::Rng r(21);
  auto big = [&](Shape s) {
    std::vector<int64_t> v(static_cast<size_t>(element_count(s)));
    for (auto& x : v) x = r.uniform(-(1 << 20), 1 << 20);
    return Tensor::from_col_major<int64_t>(s, v);
  };
  std::vector<Tensor> ops{big({3, 4}), big({4, 5}), big({5, 2}), big({2, 3})};
  Tensor got = es::einsum("ij,jk,kl,lm->im", ops);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t m = 0; m < 3; ++m) {
      uint64_t s = 0;  // wrap-around arithmetic, the definition for i64
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 5; ++k)
          for (int64_t l = 0; l < 2; ++l)
            s += static_cast<uint64_t>(ops[0].at<int64_t>({i, j})) * static_cast<uint64_t>(ops[1].at<int64_t>({j, k})) *
                 static_cast<uint64_t>(ops[2].at<int64_t>({k, l})) * static_cast<uint64_t>(ops[3].at<int64_t>({l, m}));
      CHECK(got.at<int64_t>({i, m}) == static_cast<int64_t>(s));
    }
  // Small values: exact integers as the naive product gives them.
  Tensor a = rm<int64_t>({2, 2}, {1, 2, 3, 4});
  CHECK(es::einsum("ij,jk,kl->il", {a, a, a}).to_row_major<int64_t>() == std::vector<int64_t>{37, 54, 81, 118});
}

TEST_CASE("step plans give the standard-op lowering of docs/behaviour.md §4.8") {
  auto plan_of = [](std::string_view s, std::vector<Shape> shapes) {
    std::vector<es::TensorMeta> m;
    for (auto& sh : shapes) m.push_back(es::TensorMeta{DType::f64, sh});
    es::EinsumPlan p = es::EinsumPlan::prepare(s, m);
    REQUIRE(p.steps().size() == 1);
    return p.steps()[0].to_string(p.subscripts());
  };
  CHECK(plan_of("bij,bjk->bik", {{6, 2, 3}, {6, 3, 4}}) ==
        "step bij,bjk->ikb (final, output bik)\n"
        "  dot_general lhs_contracting=[2] rhs_contracting=[1] lhs_batch=[0] rhs_batch=[0]\n"
        "  transpose result perm=[2,0,1]\n");
  CHECK(plan_of("ijb,jkb->ikb", {{2, 3, 6}, {3, 4, 6}}) ==
        "step ijb,jkb->ikb (final, output ikb)\n"
        "  dot_general lhs_contracting=[1] rhs_contracting=[0] lhs_batch=[2] rhs_batch=[2]\n");
  CHECK(plan_of("iij,jk->ik", {{2, 2, 3}, {3, 4}}) ==
        "step iij,jk->ik (final, output ik)\n"
        "  extract_diag lhs axis_a=0 axis_b=1\n"
        "  dot_general lhs_contracting=[1] rhs_contracting=[0] lhs_batch=[] rhs_batch=[]\n");
  CHECK(plan_of("ij,kl->ijkl", {{2, 3}, {4, 5}}) ==
        "step ij,kl->ijkl (final, output ijkl)\n"
        "  broadcast_in_dim lhs dims=[0,1] shape=[2,3,4,5]\n"
        "  broadcast_in_dim rhs dims=[2,3] shape=[2,3,4,5]\n"
        "  mul\n");
  // One-sided sums, broadcast axes, output diagonals.
  CHECK(plan_of("ijk,j->ii", {{2, 3, 4}, {3}}) ==
        "step ijk,j->i (final, output ii)\n"
        "  reduce_sum lhs axes=[2]\n"
        "  dot_general lhs_contracting=[1] rhs_contracting=[0] lhs_batch=[] rhs_batch=[]\n"
        "  embed_diag result axis_a=0 axis_b=1\n");
}

TEST_CASE("the two-input shortcut: one dot_general in operand order, no tree") {
  std::vector<es::TensorMeta> mm{{DType::f64, {16, 16}}, {DType::f64, {16, 16}}};
  es::EinsumPlan p = es::EinsumPlan::prepare("ij,jk->ik", mm);
  CHECK(p.is_shortcut());
  CHECK(p.tree().steps().empty());
  CHECK_FALSE(es::EinsumPlan::prepare("ij,jk->ki", mm).is_shortcut());  // needs a transpose
  CHECK_FALSE(es::EinsumPlan::prepare("ij,jk->k", mm).is_shortcut());   // one-sided sum of i
  CHECK(es::EinsumPlan::prepare("ijb,jkb->ikb", std::vector<es::TensorMeta>{{DType::f64, {2, 3, 6}}, {DType::f64, {3, 4, 6}}})
            .is_shortcut());
  CHECK_FALSE(
      es::EinsumPlan::prepare("bij,bjk->bik", std::vector<es::TensorMeta>{{DType::f64, {6, 2, 3}}, {DType::f64, {6, 3, 4}}})
          .is_shortcut());
  // Both forms compute the same numbers.
  kt::Rng r(4);
  Tensor a = et::random_tensor<double>(r, {16, 16}, true), b = et::random_tensor<double>(r, {16, 16}, false);
  Tensor c1 = es::einsum("ij,jk->ik", {a, b});
  Tensor c2 = es::einsum("ij,jk->ki", {a, b});
  CHECK(bitwise_equal(c1, c2.transpose().contiguous()));
}

TEST_CASE("mixed dtypes promote like NumPy") {
  Tensor f = rm<float>({2}, {1.5f, 2});
  Tensor d = rm<double>({2}, {2, 4});
  Tensor i = rm<int64_t>({2}, {3, 5});
  Tensor z = rm<c64>({2}, {c64(1, 1), c64(0, 2)});
  Tensor fd = es::einsum("i,i->", {f, d});
  CHECK(fd.dtype() == DType::f64);
  CHECK(fd.at<double>({}) == 11.0);
  Tensor fi = es::einsum("i,i->i", {f, i});
  CHECK(fi.dtype() == DType::f64);
  CHECK(fi.to_col_major<double>() == std::vector<double>{4.5, 10});
  Tensor dz = es::einsum("i,i->", {d, z});
  CHECK(dz.dtype() == DType::c128);
  CHECK(dz.at<c128>({}) == c128(2, 10));
  Tensor iz = es::einsum("i,i->", {i, z});
  CHECK(iz.dtype() == DType::c128);
}

TEST_CASE("one-shot calls reuse cached plans") {
  es::clear_einsum_cache();
  Tensor a = rm<double>({2, 2}, {1, 2, 3, 4});
  for (int k = 0; k < 5; ++k) es::einsum("ij,jk,kl->il", {a, a, a});
  auto s = es::einsum_cache_stats();
  CHECK(s.misses == 1);
  CHECK(s.hits == 4);
  es::einsum("ij,jk,kl->il", {a, a, rm<double>({2, 3}, {1, 2, 3, 4, 5, 6})});  // another shape: a new plan
  CHECK(es::einsum_cache_stats().misses == 2);
  es::set_einsum_cache_capacity(1);
  CHECK(es::einsum_cache_stats().entries == 1);
  es::set_einsum_cache_capacity(256);
}

TEST_CASE("the prepared plan's peak intermediate bytes equal the evaluator's prediction") {
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases{
      {"ij,jk,kl,lm,mn,no,o->i", {{8, 9}, {9, 10}, {10, 11}, {11, 12}, {12, 13}, {13, 14}, {14}}},
      {"ab,bc,cd,de,ea->", {{3, 4}, {4, 5}, {5, 6}, {6, 2}, {2, 3}}},
      {"ijk,kl,lmi,mj->", {{2, 3, 4}, {4, 5}, {5, 3, 2}, {3, 3}}},
      {"ab,cd,ef,ac,bd->ef", {{2, 3}, {4, 5}, {6, 7}, {2, 4}, {3, 5}}},
  };
  for (const auto& [text, shapes] : cases) {
    CAPTURE(text);
    for (DType dt : {DType::f32, DType::c128}) {
      for (const es::PlanSpec& spec : {es::PlanSpec{}, es::PlanSpec::left_to_right_plan()}) {
        std::vector<es::TensorMeta> m;
        for (auto& s : shapes) m.push_back(es::TensorMeta{dt, s});
        es::EinsumOptions o;
        o.plan = spec;
        es::EinsumPlan p = es::EinsumPlan::prepare(text, m, o);
        // The evaluator's prediction: step results (elements, its kept labels) live from their step until consumed,
        // the last step's result is the output (not in the arena).
        es::TreeCost cost = es::evaluate(p.subscripts(), p.extents(), p.tree());
        const int n = static_cast<int>(shapes.size());
        std::map<int, double> live;
        double cur = 0, peak = 0;
        for (size_t k = 0; k + 1 < cost.steps.size(); ++k) {
          const auto& st = cost.steps[k];
          peak = std::max(peak, cur + st.result_size);
          cur += st.result_size;
          live[n + static_cast<int>(k)] = st.result_size;
          for (int id : {st.left, st.right})
            if (live.count(id)) {
              cur -= live[id];
              live.erase(id);
            }
        }
        const auto predicted = static_cast<int64_t>(peak) * static_cast<int64_t>(size_of(dt));
        CHECK(p.peak_intermediate_bytes() == predicted);
        CHECK(p.arena_bytes() >= p.peak_intermediate_bytes());
      }
    }
  }
  // A chain evaluated left to right reuses the first intermediate's space: arena == peak.
  std::vector<es::TensorMeta> m{{DType::f64, {5, 6}}, {DType::f64, {6, 7}}, {DType::f64, {7, 8}}, {DType::f64, {8, 9}}};
  es::EinsumOptions o;
  o.plan = es::PlanSpec::left_to_right_plan();
  es::EinsumPlan chain = es::EinsumPlan::prepare("ij,jk,kl,lm->im", m, o);
  CHECK(chain.peak_intermediate_bytes() == (5 * 7 + 5 * 8) * 8);
  CHECK(chain.arena_bytes() == chain.peak_intermediate_bytes());
}

TEST_CASE("grouped einsum runs the expanded contraction") {
  kt::Rng r(12);
  Tensor a = et::random_tensor<double>(r, {2, 3, 4}, true);  // W = 2 axes (2,3), a = 4
  Tensor b = et::random_tensor<double>(r, {4, 5}, false);
  Tensor g = es::einsum_grouped("Wa,ab->Wb", std::vector<Tensor>{a, b});
  Tensor p = es::einsum("xya,ab->xyb", {a, b});
  CHECK(g.shape() == Shape{2, 3, 5});
  CHECK(bitwise_equal(g, p));
}

TEST_CASE("einsum errors are pinned") {
  Tensor a = rm<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<Tensor> ops{a, a};
  es::EinsumPlan p = es::EinsumPlan::prepare("ij,kj->ik", metas_of(ops));
  std::vector<Tensor> wrong{a, rm<double>({3, 2}, {1, 2, 3, 4, 5, 6})};
  CHECK_THROWS_WITH_AS(p.execute(wrong),
                       "einsum: operand 1 is f64[3,2] but the plan was prepared for f64[2,3]; prepare a plan for these "
                       "operands",
                       Error);
  std::vector<Tensor> one{a};
  CHECK_THROWS_WITH_AS(p.execute(one), "einsum: the plan for \"ij,kj->ik\" takes 2 operand(s) but 1 were given", Error);
  Tensor bad_out = Tensor::zeros(DType::f32, {2, 2});
  CHECK_THROWS_WITH_AS(p.execute_into(ops, bad_out), "einsum: the output tensor is f32[2,2] but the result is f64[2,2]",
                       Error);
  es::EinsumOptions o;
  o.plan = es::PlanSpec::left_to_right_plan();
  CHECK_THROWS_WITH_AS(es::einsum("(ij,jk),kl->il", {a, a.transpose(), a}, o),
                       "einsum: \"(ij,jk),kl->il\" fixes the contraction order with parentheses, and plan left_to_right "
                       "was passed too; use one of them",
                       Error);
  // A failed call leaves nothing in the cache.
  es::clear_einsum_cache();
  CHECK_THROWS_AS(es::einsum("ij,jk->ik", {a, a}), Error);
  CHECK(es::einsum_cache_stats().entries == 0);
}

TEST_CASE("integer-label subscripts and concurrent execution of one plan") {
  Tensor a = rm<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = rm<double>({3, 2}, {1, 0, 0, 1, 1, 1});
  es::Subscripts s = es::make_subscripts({{0, 1}, {1, 2}}, {0, 2});
  std::vector<Tensor> ops{a, b};
  CHECK(es::einsum(s, ops).to_row_major<double>() == std::vector<double>{4, 5, 10, 11});
  // One prepared plan run from several threads at once (each execute has its own arena).
  kt::Rng r(77);
  std::vector<Tensor> chain{et::random_tensor<double>(r, {30, 40}, true), et::random_tensor<double>(r, {40, 50}, false),
                            et::random_tensor<double>(r, {50, 20}, true)};
  es::EinsumPlan p = es::EinsumPlan::prepare("ij,jk,kl->li", metas_of(chain));
  Tensor want = p.execute(chain);
  std::vector<Tensor> got(4);
  std::vector<std::thread> workers;
  // Many calls per thread: the calls hand scratch slots to each other (ir/Scratch.cpp's spares) while others run.
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      for (int call = 0; call < 200; ++call) {
        got[t] = p.execute(chain);
        mismatches[t] += !bitwise_equal(got[t], want);
      }
    });
  for (auto& w : workers) w.join();
  for (int t = 0; t < 4; ++t) CHECK(mismatches[t] == 0);
}
