// The reverse pass along the planned tree (`einstage.einsum_ad.v1` mode vjp, the default for einsums of three or
// more operands): on 320 seeded random einsums (a third of them with `...` axes) its cotangents equal those of the
// per-operand rule (EinsumAdPath::per_operand, the oracle) and finite differences, and are bitwise the same on one
// and two threads (and after merge_value_vjp); the same on larger contractions where two threads split the work; the
// programs it makes, the symbolic dims, the `--print-stages` report and the family's error messages; HVPs (mode
// vjp_jvp) and their jvp and vjp (third order) against the per-operand rule on 120 seeded random einsums;
// checkpointing; lowering of every mode. The merged walks have their own file, test_einsum_merge_walks.cpp.
#include "TreeAdTestUtil.h"
#include "RandomEinsum.h"

#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/einsum/exec/TreeAd.h"
#include "compiler/Lower.h"
#include "ir/Parser.h"
#include "runtime/Context.h"

#include <doctest/doctest.h>

#include <cstring>
#include <numeric>

using namespace einstage;
using namespace einstage::ad_test;

namespace {

// Checks the tree walk's vjp of `p` at `inputs` against the per-operand path, finite differences and itself on two
// threads, and the same program after merge_value_vjp (one walk for the value and the cotangents) against it bit
// for bit on one and two threads. Returns whether the program used the tree walk.
bool check_tree_vjp(const Program& p, const std::vector<int>& wrt, const std::vector<Tensor>& inputs, Rng& rng,
                    bool single, const std::string& context) {
  INFO(context);
  Program tree = ad::vjp(p, wrt, unmerged_registry());
  Program old = ad::vjp(p, wrt, per_operand_registry());
  INFO("tree vjp:\n" << print_program(tree));
  std::vector<Tensor> primal = run_on(1, p, inputs);
  std::vector<Tensor> in = inputs;
  Tensor ct = random_tensor(primal[0].dtype(), primal[0].shape(), rng);
  in.push_back(ct);
  std::vector<Tensor> g1 = run_on(1, tree, in), g2 = run_on(2, tree, in), go = run_on(1, old, in);
  const Program one_walk = einsum::merge_value_vjp(tree, registry());
  const bool one_dtype = std::all_of(inputs.begin(), inputs.end(),
                                     [&](const Tensor& x) { return x.dtype() == inputs[0].dtype(); });
  CHECK(merged(one_walk) == uses_tree_walk(tree));  // the vjp program's cotangent is a parameter: always merged
  CHECK(!uses_tree_walk(one_walk));
  CHECK(print_program(ad::vjp(p, wrt, registry())) == print_program(one_walk));  // the default is the merge
  for (int threads : {1, 2}) {
    const std::vector<Tensor> gm = run_on(threads, one_walk, in);
    REQUIRE(gm.size() == g1.size());
    // The value: the same numbers when every operand has one dtype; with real and complex operands mixed the walk
    // multiplies the promoted real operand as complex, the einsum as real, so the two round differently.
    std::string why;
    if (one_dtype) CHECK_MESSAGE(same_values(gm[0], g1[0]), "merged vs unmerged value, " << threads << " threads");
    CHECK_MESSAGE(close(gm[0], g1[0], single ? 1e-5 : 1e-13, &why), "merged vs unmerged value: " << why);
    for (size_t o = 1; o < gm.size(); ++o)
      CHECK_MESSAGE(same_bits(gm[o], g1[o]), "merged vs unmerged, output " << o << ", " << threads << " threads");
  }
  const Tolerance tol = tolerance_for(single ? DType::f32 : DType::f64);
  double lhs = 0, scale = 0;
  std::vector<Tensor> plus = inputs, minus = inputs;
  for (size_t w = 0; w < wrt.size(); ++w) {
    CAPTURE(w);
    const Tensor& g = g1[1 + w];
    const Tensor& x = inputs[static_cast<size_t>(wrt[w])];
    CHECK(g.shape() == x.shape());
    CHECK(g.dtype() == x.dtype());
    CHECK_MESSAGE(same_bits(g, g2[1 + w]), "one and two threads differ");
    std::string why;
    CHECK_MESSAGE(close(g, go[1 + w], single ? 1e-4 : 1e-12, &why), "tree walk vs per-operand rule: " << why);
    Tensor t = random_tensor(x.dtype(), x.shape(), rng);
    lhs += inner(g, t);
    scale += norm(g) * norm(t);
    plus[static_cast<size_t>(wrt[w])] = axpy(x, tol.h, t);
    minus[static_cast<size_t>(wrt[w])] = axpy(x, -tol.h, t);
  }
  Tensor diff = axpy(run_on(1, p, plus)[0], -1, run_on(1, p, minus)[0]);
  const double rhs = inner(ct, diff) / (2 * tol.h);
  CHECK_MESSAGE(std::abs(lhs - rhs) <= tol.fd * (scale + norm(ct) * norm(diff) / (2 * tol.h) + 1e-9),
                "finite differences: <vjp(c), t> = " << lhs << " but <c, (f(x+ht) - f(x-ht)) / 2h> = " << rhs);
  return uses_tree_walk(tree);
}

// Checks the jvp of `p` at `inputs` (mode jvp walks the tree when two or more operands of an einsum of three or
// more have tangents) against the per-operand rule's sum of einsums, central finite differences and itself on two
// threads. Returns whether the program used mode jvp.
bool check_tree_jvp(const Program& p, const std::vector<int>& wrt, const std::vector<Tensor>& inputs, Rng& rng,
                    bool single, const std::string& context) {
  INFO(context);
  Program tree = ad::jvp(p, wrt, registry());
  Program old = ad::jvp(p, wrt, per_operand_registry());
  INFO("tree jvp:\n" << print_program(tree));
  std::vector<Tensor> in = inputs, plus = inputs, minus = inputs;
  const Tolerance tol = tolerance_for(single ? DType::f32 : DType::f64);
  for (int k : wrt) {
    const Tensor& x = inputs[static_cast<size_t>(k)];
    Tensor t = random_tensor(x.dtype(), x.shape(), rng);
    in.push_back(t);
    plus[static_cast<size_t>(k)] = axpy(x, tol.h, t);
    minus[static_cast<size_t>(k)] = axpy(x, -tol.h, t);
  }
  std::vector<Tensor> j1 = run_on(1, tree, in), j2 = run_on(2, tree, in), jo = run_on(1, old, in);
  const Tensor& dy = j1[1];
  CHECK_MESSAGE(same_bits(dy, j2[1]), "one and two threads differ");
  std::string why;
  CHECK_MESSAGE(close(dy, jo[1], single ? 1e-4 : 1e-12, &why), "tree jvp vs per-operand rule: " << why);
  Tensor diff = axpy(run_on(1, p, plus)[0], -1, run_on(1, p, minus)[0]);
  Tensor fd = axpy(Tensor::zeros(diff.dtype(), diff.shape()), 1 / (2 * tol.h), diff);
  CHECK_MESSAGE(close(dy, fd, tol.fd, &why), "tree jvp vs finite differences: " << why);
  return print_program(tree).find("mode = jvp") != std::string::npos;
}

// One random case of the property tests: the einsum, its inputs and the operands to differentiate (operand 0 always,
// the others all at once or each with probability 0.6).
struct DrawnCase {
  EinsumCase c;
  std::string context;
  bool single = false;  // an f32 operand: single-precision tolerances
  std::vector<Tensor> inputs;
  std::vector<int> wrt;
};

DrawnCase draw_case(Rng& rng, uint64_t seed) {
  DrawnCase d;
  d.c = random_case(rng, seed % 3 == 0);
  d.context = describe(d.c, seed);
  d.single = std::find(d.c.dtypes.begin(), d.c.dtypes.end(), DType::f32) != d.c.dtypes.end();
  for (size_t k = 0; k < d.c.shapes.size(); ++k) d.inputs.push_back(random_tensor(d.c.dtypes[k], d.c.shapes[k], rng));
  const bool all = rng.chance(0.7);
  for (size_t k = 0; k < d.c.shapes.size(); ++k)
    if (all || k == 0 || rng.chance(0.6)) d.wrt.push_back(static_cast<int>(k));
  return d;
}

}  // namespace

TEST_CASE("320 random einsums: mode jvp propagates the tangents along the tree and equals the per-operand rule's sum "
          "and finite differences, bitwise the same on one and two threads") {
  int walked = 0;
  for (uint64_t seed = 1; seed <= 320; ++seed) {
    Rng rng{seed * 7919};
    const DrawnCase d = draw_case(rng, seed);
    walked += check_tree_jvp(einsum_program(d.c), d.wrt, d.inputs, rng, d.single, d.context);
  }
  MESSAGE("mode jvp in " << walked << " of 320");
  CHECK(walked >= 150);
}

TEST_CASE("320 random einsums: the tree walk's cotangents equal the per-operand rule's and finite differences, "
          "bitwise the same on one and two threads") {
  int walked = 0, with_ellipsis = 0, complex_cases = 0, single_cases = 0, broadcast_cases = 0;
  for (uint64_t seed = 1; seed <= 320; ++seed) {
    Rng rng{seed * 104729};
    const DrawnCase d = draw_case(rng, seed);
    walked += check_tree_vjp(einsum_program(d.c), d.wrt, d.inputs, rng, d.single, d.context);
    with_ellipsis += !d.c.subs.ellipsis.empty();
    complex_cases += std::find(d.c.dtypes.begin(), d.c.dtypes.end(), DType::c128) != d.c.dtypes.end();
    single_cases += d.single;
    broadcast_cases += d.c.broadcast;
  }
  MESSAGE("tree walks " << walked << ", ellipsis " << with_ellipsis << ", complex " << complex_cases << ", f32 "
                        << single_cases << ", broadcast permission " << broadcast_cases << " of 320");
  CHECK(walked >= 150);
  CHECK(with_ellipsis >= 60);
  CHECK(complex_cases >= 60);
  CHECK(single_cases >= 20);
  CHECK(broadcast_cases >= 60);
}

TEST_CASE("120 random einsums: HVPs walk the tree once (mode vjp_jvp); their jvp and vjp (third order) equal the "
          "per-operand rule's") {
  auto all_params = [](const Program& q) {
    std::vector<int> idx(q.params.size());
    std::iota(idx.begin(), idx.end(), 0);
    return idx;
  };
  auto inputs_for = [](const Program& q, Rng& rng) {
    std::vector<Tensor> in;
    for (const Parameter& prm : q.params) in.push_back(random_tensor(prm.value.type.dtype, *prm.value.type.constant_shape(), rng));
    return in;
  };
  auto compare = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol, const char* what) {
    REQUIRE(got.size() == want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      std::string why;
      CHECK_MESSAGE(close(got[o], want[o], tol, &why), what << " output " << o << ": " << why);
    }
  };
  int fused = 0, merged_walks = 0;
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    Rng rng{seed * 15485863};
    EinsumCase c = random_case(rng, seed % 3 == 0);
    INFO(describe(c, seed));
    const bool single = std::find(c.dtypes.begin(), c.dtypes.end(), DType::f32) != c.dtypes.end();
    const double tol = single ? 1e-3 : 1e-10;
    const Program p = einsum_program(c);
    std::vector<int> wrt(c.shapes.size());
    std::iota(wrt.begin(), wrt.end(), 0);
    const Program v_tree = ad::vjp(p, wrt, unmerged_registry()), v_old = ad::vjp(p, wrt, per_operand_registry());
    const Program h_tree = ad::jvp(v_tree, all_params(v_tree), unmerged_registry());
    const Program h_old = ad::jvp(v_old, all_params(v_old), per_operand_registry());
    const bool walks = print_program(h_tree).find("mode = vjp_jvp") != std::string::npos;
    fused += walks;
    INFO("hvp program:\n" << print_program(h_tree));
    const std::vector<Tensor> in = inputs_for(h_tree, rng);
    const std::vector<Tensor> got = run_on(1, h_tree, in);
    compare(got, run_on(1, h_old, in), tol, "jvp of vjp");
    const std::vector<Tensor> got2 = run_on(2, h_tree, in);
    for (size_t o = 0; o < got.size(); ++o) CHECK_MESSAGE(same_bits(got[o], got2[o]), "one and two threads differ");
    // The vjp and its tangent from one walk (merge_vjp_jvp): every output has the unmerged program's bits.
    const Program h_one = einsum::merge_vjp_jvp(h_tree, registry());
    const bool merges = print_program(h_one).find("mode = vjp_with_jvp") != std::string::npos;
    // The default (ad::jvp with the family's rewrite) is merge_walks: merge_vjp_jvp, then merge_value_vjp.
    CHECK(print_program(ad::jvp(v_tree, all_params(v_tree), registry())) ==
          print_program(einsum::merge_walks(h_tree, registry())));
    CHECK(print_program(einsum::merge_walks(h_tree, registry())) ==
          print_program(einsum::merge_value_vjp(h_one, registry())));
    CHECK(merges == (walks && uses_tree_walk(h_tree)));
    merged_walks += merges;
    for (int threads : {1, 2}) {
      const std::vector<Tensor> one = run_on(threads, h_one, in);
      REQUIRE(one.size() == got.size());
      for (size_t o = 0; o < got.size(); ++o)
        CHECK_MESSAGE(same_bits(one[o], got[o]), "merged vs unmerged, output " << o << ", " << threads << " threads");
    }
    if (!walks || seed % 2) continue;  // third order on the cases that fuse, every other one (they grow quickly)
    const Program j3_tree = ad::jvp(h_tree, all_params(h_tree), unmerged_registry());
    const Program j3_old = ad::jvp(h_old, all_params(h_old), per_operand_registry());
    const std::vector<Tensor> in3 = inputs_for(j3_tree, rng);
    compare(run_on(1, j3_tree, in3), run_on(1, j3_old, in3), tol, "jvp of jvp of vjp");
    const Program v3_tree = ad::vjp(h_tree, all_params(h_tree), unmerged_registry());
    const Program v3_old = ad::vjp(h_old, all_params(h_old), per_operand_registry());
    const std::vector<Tensor> vin3 = inputs_for(v3_tree, rng);
    compare(run_on(1, v3_tree, vin3), run_on(1, v3_old, vin3), tol, "vjp of jvp of vjp");
    if (!merges) continue;  // third order through vjp_with_jvp's linearize rule
    const Program j3_one = ad::jvp(h_one, all_params(h_one), registry());
    compare(run_on(1, j3_one, in3), run_on(1, j3_old, in3), tol, "jvp of the merged jvp of vjp");
  }
  MESSAGE("mode vjp_jvp in " << fused << " of 120 HVP programs, merged with the vjp in " << merged_walks);
  CHECK(fused >= 60);
  CHECK(merged_walks >= 60);
}

TEST_CASE("EinsumPlan::accumulate_into adds the einsum into its output (the tangent walks' second terms), also for "
          "repeated output labels and one operand, with the same bits on one and two threads") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
  };
  const std::vector<Row> rows = {{"ij,jk->ik", {{5, 4}, {4, 6}}},
                                 {"ij,jk,kl->il", {{5, 4}, {4, 6}, {6, 3}}},
                                 {"i,i->ii", {{4}, {4}}},
                                 {"ijk->kj", {{3, 4, 5}}},
                                 {"ab,b->a", {{300, 200}, {200}}}};
  Rng rng{606};
  static ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    std::vector<einsum::TensorMeta> metas;
    std::vector<Tensor> ops;
    for (const Shape& sh : r.shapes) {
      metas.push_back({DType::f64, sh});
      ops.push_back(random_tensor(DType::f64, sh, rng));
    }
    const einsum::EinsumPlan plan = einsum::EinsumPlan::prepare(r.subscripts, metas);
    const Tensor start = random_tensor(DType::f64, plan.output_shape(), rng);
    const Tensor want = axpy(start, 1, plan.execute(ops, one));
    Tensor got1 = start.clone(), got2 = start.clone();
    plan.accumulate_into(ops, got1, one);
    plan.accumulate_into(ops, got2, two);
    std::string why;
    CHECK_MESSAGE(close(got1, want, 1e-13, &why), why);
    CHECK(same_bits(got1, got2));
  }
}

TEST_CASE("stacked tangent terms: a step whose output outgrows its operands adds its two tangent terms in one "
          "contraction, and the tangents equal the sum over operands of the einsum with one operand replaced") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
    DType dtype;
  };
  const std::vector<Row> rows = {{"ij,jk,k->i", {{6, 5}, {5, 7}, {7}}, DType::f64},
                                 {"i,j,k->ijk", {{4}, {5}, {3}}, DType::c128},
                                 {"ij,j->", {{6, 5}, {5}}, DType::f64}};  // the leaf's reverse step has a ones operand
  Rng rng{515};
  static ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    const einsum::Subscripts subs = einsum::parse_subscripts(r.subscripts);
    std::vector<einsum::TensorMeta> metas;
    std::vector<Tensor> x, t;
    std::vector<int> slots;
    for (const Shape& s : r.shapes) {
      metas.push_back({r.dtype, s});
      x.push_back(random_tensor(r.dtype, s, rng));
      t.push_back(random_tensor(r.dtype, s, rng));
      slots.push_back(static_cast<int>(slots.size()));
    }
    const einsum::EinsumPlan forward = einsum::EinsumPlan::prepare(subs, metas);
    const einsum::TensorMeta ct_meta{r.dtype, forward.output_shape()};
    const Tensor ct = random_tensor(r.dtype, ct_meta.shape, rng), dct = random_tensor(r.dtype, ct_meta.shape, rng);
    const auto vjp = einsum::EinsumVjpPlan::prepare(subs, metas, ct_meta, slots, {});
    const auto jvp = einsum::EinsumJvpPlan::prepare(subs, metas, slots, {});
    INFO(vjp.to_string() << jvp.to_string());
    CHECK((vjp.to_string() + jvp.to_string()).find("stacked") != std::string::npos);
    // Each result is multilinear in the operands (and the cotangent): its tangent is the sum over the arguments of
    // the result with that one argument replaced by its tangent.
    auto replaced = [&](size_t j) {
      std::vector<Tensor> y = x;
      y[j] = t[j];
      return y;
    };
    Tensor want_jvp;
    std::vector<Tensor> want_dct = vjp.execute(x, dct);
    for (size_t j = 0; j < x.size(); ++j) {
      const Tensor term = forward.execute(replaced(j));
      want_jvp = want_jvp.defined() ? axpy(want_jvp, 1.0, term) : term;
      const std::vector<Tensor> cts = vjp.execute(replaced(j), ct);
      for (size_t k = 0; k < x.size(); ++k)
        if (k != j) want_dct[k] = axpy(want_dct[k], 1.0, cts[k]);
    }
    const std::vector<Tensor> got = vjp.execute_tangent(x, ct, t, dct, one, true);
    const std::vector<Tensor> got2 = vjp.execute_tangent(x, ct, t, dct, two, true);
    const std::vector<Tensor> cts = vjp.execute(x, ct, one);
    REQUIRE(got.size() == 2 * x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      std::string why;
      CHECK_MESSAGE(same_bits(got[k], cts[k]), "cotangent " << k << " is not execute()'s");
      CHECK_MESSAGE(close(got[x.size() + k], want_dct[k], 1e-12, &why), "tangent of cotangent " << k << ": " << why);
    }
    for (size_t o = 0; o < got.size(); ++o) CHECK_MESSAGE(same_bits(got[o], got2[o]), "one and two threads, " << o);
    std::string why;
    const Tensor dy = jvp.execute(x, t, one);
    CHECK_MESSAGE(close(dy, want_jvp, 1e-12, &why), "jvp: " << why);
    CHECK(same_bits(dy, jvp.execute(x, t, two)));
  }
}

TEST_CASE("larger contractions: two threads split the work and the bits stay the same") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
    DType dtype;
  };
  const std::vector<Row> rows = {
      {"ab,bc,cd,de,ef->af", {{48, 40}, {40, 56}, {56, 32}, {32, 64}, {64, 24}}, DType::f64},
      {"ab,bc,cd,de->ae", {{24, 32}, {32, 16}, {16, 40}, {40, 24}}, DType::c128},
      {"xwu,yxl,yzd,wzr->uldr", {{6, 6, 6}, {6, 6, 6}, {6, 6, 6}, {6, 6, 6}}, DType::f32},
      {"...ij,...jk,...kl->...il", {{4, 16, 24}, {1, 24, 8}, {4, 8, 16}}, DType::f64},
  };
  Rng rng{2026};
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    TraceContext ctx("f", registry());
    auto [params, inputs, wrt] = trace_operands(ctx, r.dtype, r.shapes, rng);
    Program p = ctx.finish({einsum::einsum(ctx, r.subscripts, std::span<const TracedTensor>(params))});
    CHECK(check_tree_vjp(p, wrt, inputs, rng, r.dtype == DType::f32, r.subscripts));
  }
}

TEST_CASE("the vjp program: one mode vjp instruction with a result per operand, also with symbolic dims") {
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {2, 3}});
  Value y = b.parameter("y", {DType::f64, {3, 4}});
  Value z = b.parameter("z", {DType::f64, {4, 5}});
  Value out = b.extension(std::make_shared<einsum::EinsumPayload>(einsum::parse_subscripts("ij,jk,kl->il"),
                                                                  einsum::PlanSpec{}, false),
                          {x, y, z});
  const Program f = b.finish({out});
  Program v = ad::vjp(f, std::vector<int>{0, 1, 2}, unmerged_registry());
  CHECK(print_program(v) ==
        "program @f_vjp(%x: f64[2,3], %y: f64[3,4], %z: f64[4,5], %ct_0: f64[2,5]) -> (f64[2,5], f64[2,3], f64[3,4], "
        "f64[4,5]) {\n"
        "  %0 = einstage.einsum.v1(%x, %y, %z) {broadcast = false, plan = auto, subscripts = \"ij,jk,kl->il\"} : "
        "f64[2,5]\n"
        "  %1, %2, %3 = einstage.einsum_ad.v1(%x, %y, %z, %ct_0) {broadcast = false, mode = vjp, plan = auto, slots = "
        "[0, 1, 2], subscripts = \"ij,jk,kl->il\"} : f64[2,3], f64[3,4], f64[4,5]\n"
        "  return %0, %1, %2, %3\n"
        "}\n");
  // The text form reads back to the same program.
  CHECK(print_program(parse_program(print_program(v), registry())) == print_program(v));
  // By default (the family's rewrite_derivative) the einsum and the vjp are one value_vjp walk.
  CHECK(print_program(ad::vjp(f, std::vector<int>{0, 1, 2}, registry())) ==
        "program @f_vjp(%x: f64[2,3], %y: f64[3,4], %z: f64[4,5], %ct_0: f64[2,5]) -> (f64[2,5], f64[2,3], f64[3,4], "
        "f64[4,5]) {\n"
        "  %0, %1, %2, %3 = einstage.einsum_ad.v1(%x, %y, %z, %ct_0) {broadcast = false, mode = value_vjp, plan = "
        "auto, slots = [0, 1, 2], subscripts = \"ij,jk,kl->il\"} : f64[2,5], f64[2,3], f64[3,4], f64[4,5]\n"
        "  return %0, %1, %2, %3\n"
        "}\n");

  // --print-stages: the forward tree, what it keeps, and the reverse steps.
  std::vector<Tensor> in;
  Rng rng{5};
  for (const Parameter& prm : v.params) in.push_back(random_tensor(DType::f64, *prm.value.type.constant_shape(), rng));
  std::string stages = runtime().prepare(v).describe_prepared(in);
  INFO(stages);
  CHECK(stages.find("einsum vjp \"ij,jk,kl->il\" over operands [0, 1, 2] dtype f64\n") != std::string::npos);
  CHECK(stages.find("forward keeps 1 (") != std::string::npos);
  CHECK(stages.find("reverse: ct operand 0 \"ij\" = ct ") != std::string::npos);

  // A symbolic dim: the results carry the operands' types and the walk is planned on the bound shapes.
  Builder s("g", registry());
  Value xs = s.parameter("x", {DType::f64, {Dim::symbol("n"), 3}});
  Value ys = s.parameter("y", {DType::f64, {3, 4}});
  Value zs = s.parameter("z", {DType::f64, {4, 5}});
  Value o = s.extension(std::make_shared<einsum::EinsumPayload>(einsum::parse_subscripts("ij,jk,kl->il"),
                                                                einsum::PlanSpec{}, false),
                        {xs, ys, zs});
  const Program gp = s.finish({o});
  Program g = ad::vjp(gp, std::vector<int>{0, 1, 2}, unmerged_registry());
  CHECK(uses_tree_walk(g));
  CHECK(print_program(g).find(": f64[n,3], f64[3,4], f64[4,5]\n") != std::string::npos);
  std::vector<Tensor> gin = {random_tensor(DType::f64, {6, 3}, rng), random_tensor(DType::f64, {3, 4}, rng),
                             random_tensor(DType::f64, {4, 5}, rng), random_tensor(DType::f64, {6, 5}, rng)};
  std::vector<Tensor> got = run_on(1, g, gin), want = run_on(1, ad::vjp(gp, std::vector<int>{0, 1, 2}, per_operand_registry()), gin);
  for (size_t i = 1; i < got.size(); ++i) {
    std::string why;
    CHECK_MESSAGE(close(got[i], want[i], 1e-12, &why), why);
  }
}

TEST_CASE("einsum_ad errors name the attribute, the operand and the fix") {
  auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(error_of([] {
          einsum::EinsumAdPayload::parse_text("broadcast = false, mode = hvp, plan = auto, slots = [0, 1], "
                                              "subscripts = \"ij,jk->ik\"");
        }) == "'einstage.einsum_ad.v1' attribute 'mode': expected jvp, vjp, vjp_jvp, value_vjp or vjp_with_jvp (got "
              "\"hvp\")");
  CHECK(error_of([] {
          einsum::EinsumAdPayload::parse_text("broadcast = false, mode = vjp, plan = auto, slots = [1, 0], "
                                              "subscripts = \"ij,jk->ik\"");
        }) == "'einstage.einsum_ad.v1' attribute 'slots': expected distinct operand indices in ascending order "
              "(got \"[1, 0]\")");
  CHECK(error_of([] {
          einsum::EinsumAdPayload::parse_text("broadcast = false, mode = vjp, plan = auto, slots = [0, 2], "
                                              "subscripts = \"ij,jk->ik\"");
        }) == "'einstage.einsum_ad.v1' attribute 'slots': operand index 2 is out of range for 2 operands (got "
              "\"[0, 2]\")");
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {2, 3}});
  Value y = b.parameter("y", {DType::f64, {3, 4}});
  auto payload = std::make_shared<einsum::EinsumAdPayload>(
      einsum::EinsumPayload(einsum::parse_subscripts("ij,jk->ik"), einsum::PlanSpec{}, false), einsum::EinsumAdMode::vjp,
      std::vector<int>{0, 1});
  CHECK(error_of([&] { b.extension(payload, {x, y}); }) ==
        "'einstage.einsum_ad.v1' at %0 in @f: mode vjp of einsum \"ij,jk->ik\" over slots [0, 1] takes 3 operands but "
        "was given 2");
}

TEST_CASE("checkpointing: under a memory limit the reverse pass recomputes intermediates, with the same bits") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
    DType dtype;
  };
  const std::vector<Row> rows = {
      {"ab,bc,cd,de,ef,fg->ag", {{8, 9}, {9, 10}, {10, 11}, {11, 12}, {12, 13}, {13, 14}}, DType::f64},
      {"xwu,yxl,yzd,wzr->uldr", {{4, 4, 4}, {4, 4, 4}, {4, 4, 4}, {4, 4, 4}}, DType::c128},
      {"ab,bc,cd,de->", {{5, 6}, {6, 7}, {7, 8}, {8, 5}}, DType::f32},
  };
  Rng rng{77};
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    const einsum::Subscripts subs = einsum::parse_subscripts(r.subscripts);
    std::vector<einsum::TensorMeta> metas;
    std::vector<Tensor> inputs;
    std::vector<int> slots;
    for (const Shape& s : r.shapes) {
      metas.push_back({r.dtype, s});
      inputs.push_back(random_tensor(r.dtype, s, rng));
      slots.push_back(static_cast<int>(slots.size()));
    }
    const einsum::EinsumPlan forward = einsum::EinsumPlan::prepare(subs, metas);
    const Tensor ct = random_tensor(r.dtype, forward.output_shape(), rng);
    const einsum::TensorMeta ct_meta{r.dtype, forward.output_shape()};
    auto all = einsum::EinsumVjpPlan::prepare(subs, metas, ct_meta, slots, {});
    REQUIRE(all.kept_bytes() > 0);
    CHECK(all.recomputed_count() == 0);
    const std::vector<Tensor> expected = all.execute(inputs, ct);
    auto same = [&](const std::vector<Tensor>& got) {
      bool ok = got.size() == expected.size();
      for (size_t i = 0; ok && i < got.size(); ++i) ok = same_bits(got[i], expected[i]);
      return ok;
    };
    for (int64_t limit : {int64_t(0), all.kept_bytes() / 2}) {
      CAPTURE(limit);
      auto some = einsum::EinsumVjpPlan::prepare(subs, metas, ct_meta, slots, {}, limit);
      CHECK(some.kept_bytes() <= limit);
      CHECK(some.recomputed_count() > 0);
      CHECK(some.to_string().find("recomputes") != std::string::npos);
      CHECK(same(some.execute(inputs, ct)));
      static ExecutionContext two_threads(ConfigOptions{.threads = 2});  // its own JIT and pool: the same bits
      CHECK(same(some.execute(inputs, ct, two_threads)));
    }
  }
}

TEST_CASE("checkpointing: a Runtime's vjp takes its keep limit from the Runtime's context, not the process") {
  Builder b("f", registry());
  const std::vector<Shape> shapes = {{8, 9}, {9, 10}, {10, 11}, {11, 12}};
  std::vector<Value> params;
  std::vector<Tensor> inputs;
  Rng rng{78};
  for (size_t k = 0; k < shapes.size(); ++k) {
    params.push_back(b.parameter(fmt::format("a{}", k), {DType::f64, std::vector<Dim>(shapes[k].begin(), shapes[k].end())}));
    inputs.push_back(random_tensor(DType::f64, shapes[k], rng));
  }
  inputs.push_back(random_tensor(DType::f64, {8, 12}, rng));  // the cotangent
  Value out = b.extension(std::make_shared<einsum::EinsumPayload>(einsum::parse_subscripts("ab,bc,cd,de->ae"),
                                                                  einsum::PlanSpec{}, false),
                          params);
  Program v = ad::vjp(b.finish({out}), std::vector<int>{0, 1, 2, 3}, unmerged_registry());
  RuntimeOptions options;
  options.context = std::make_shared<ExecutionContext>(ConfigOptions{.threads = 1, .ad_keep_bytes = 0});
  Runtime keep_nothing(options);
  keep_nothing.add_module(einsum::module_descriptor());
  const std::string limited = keep_nothing.prepare(v).describe_prepared(inputs);
  const std::string unlimited = runtime_with(1).prepare(v).describe_prepared(inputs);  // ctest sets no limit
  CHECK(limited.find("forward keeps 0 (0 bytes, limit 0 bytes): nothing") != std::string::npos);
  CHECK(limited.find("recomputes") != std::string::npos);
  CHECK(unlimited.find("recomputes") == std::string::npos);
  const std::vector<Tensor> expected = runtime_with(1).prepare(v).run(std::span<const Tensor>(inputs));
  const std::vector<Tensor> got = keep_nothing.prepare(v).run(std::span<const Tensor>(inputs));
  REQUIRE(got.size() == expected.size());
  for (size_t k = 0; k < got.size(); ++k) CHECK(same_bits(got[k], expected[k]));
  // The value and the cotangents from one walk (merge_value_vjp): under the limit too, with the same bits.
  const Program one_walk = einsum::merge_value_vjp(v, registry());
  REQUIRE(merged(one_walk));
  const std::string merged_stages = keep_nothing.prepare(one_walk).describe_prepared(inputs);
  CHECK(merged_stages.find("einsum value (the forward phase runs to the root) and vjp \"ab,bc,cd,de->ae\"") !=
        std::string::npos);
  CHECK(merged_stages.find("recomputes") != std::string::npos);
  for (const Runtime* rt : {static_cast<const Runtime*>(&keep_nothing), &runtime_with(1), &runtime_with(2)}) {
    const std::vector<Tensor> m = rt->prepare(one_walk).run(std::span<const Tensor>(inputs));
    REQUIRE(m.size() == expected.size());
    for (size_t k = 0; k < m.size(); ++k) CHECK(same_bits(m[k], expected[k]));
  }
}

TEST_CASE("lowering: jvp, vjp and vjp_jvp programs lower to standard ops with the same values") {
  TraceContext ctx("f", registry());
  Rng rng{31};
  const std::vector<Shape> shapes = {{2, 3}, {3, 3}, {3, 4}};
  auto [params, inputs, all] = trace_operands(ctx, DType::c128, shapes, rng);
  Program p = ctx.finish({einsum::einsum(ctx, "ij,jj,jk->ik", std::span<const TracedTensor>(params))});
  const std::vector<int> wrt = {0, 1, 2};
  Program v = ad::vjp(p, wrt, unmerged_registry());
  Program j = ad::jvp(p, wrt, registry());
  REQUIRE(uses_tree_walk(v));
  REQUIRE(print_program(j).find("mode = jvp") != std::string::npos);
  std::vector<Tensor> vin = inputs, jin = inputs;
  vin.push_back(random_tensor(DType::c128, {2, 4}, rng));
  for (const Shape& s : shapes) jin.push_back(random_tensor(DType::c128, s, rng));
  std::vector<int> all_of_v(v.params.size());
  std::iota(all_of_v.begin(), all_of_v.end(), 0);
  Program h = ad::jvp(v, all_of_v, unmerged_registry());  // an HVP: mode vjp_jvp
  REQUIRE(print_program(h).find("mode = vjp_jvp") != std::string::npos);
  std::vector<Tensor> hin;
  for (const Parameter& prm : h.params)
    hin.push_back(random_tensor(prm.value.type.dtype, *prm.value.type.constant_shape(), rng));
  for (auto [prog, in] : {std::pair{&v, &vin}, std::pair{&j, &jin}, std::pair{&h, &hin}}) {
    const std::string text = check_lowered(*prog, *in, run(*prog, *in));
    CHECK(text.find("dot_general") != std::string::npos);
  }
}
