// The layout of the tree walk's reverse steps (extensions/einsum/exec/ReverseLayout.h): the GETT stride penalty on
// hand-counted layouts, the candidate orders, the choice the TRG plaquette gets (its intermediate cotangents in
// dot_general order with the value as lhs), its cotangents against definitional loops over every index (f64 and
// c128) with the same bits at one and two threads, the tangent walk's cotangents equal to execute()'s and its
// tangents equal to the multilinear sum, and seeded random einsums whose walks lay a step out otherwise than the
// node's order against the per-operand rule, bitwise the same on one and two threads.
#include "TreeAdTestUtil.h"
#include "RandomEinsum.h"

#include "extensions/einsum/exec/ReverseLayout.h"
#include "extensions/einsum/exec/TreeAd.h"
#include "runtime/Context.h"

#include <doctest/doctest.h>

#include <numeric>

using namespace einstage;
using namespace einstage::ad_test;
using einsum::LaidOutTerm;

namespace {

std::vector<einsum::Label> labels_of(const std::string& s) { return {s.begin(), s.end()}; }

// The penalty of C = A . B for terms given as letters, every extent `e`.
double penalty(const std::string& a, const std::string& b, const std::string& c, int64_t e) {
  const std::vector<einsum::Label> la = labels_of(a), lb = labels_of(b), lc = labels_of(c);
  const Shape sa(a.size(), e), sb(b.size(), e), sc(c.size(), e);
  return einsum::gett_stride_penalty(LaidOutTerm{la, sa}, LaidOutTerm{lb, sb}, LaidOutTerm{lc, sc});
}

// Column-major element (i, j, k) of a rank-3 tensor of extent e, and (i, j, k, l) of a rank-4 one.
int64_t at(int64_t e, int64_t i, int64_t j, int64_t k) { return i + e * (j + e * k); }
int64_t at(int64_t e, int64_t i, int64_t j, int64_t k, int64_t l) { return i + e * (j + e * (k + e * l)); }

}  // namespace

TEST_CASE("gett_stride_penalty counts the elements of each tensor the GETT reads or writes along a large stride") {
  // Column-major ik = ij . jk: every tensor's unit-stride label leads its group (m: i, k: j by B's strides).
  CHECK(penalty("ij", "jk", "ik", 8) == 0);
  // The output ki: its unit-stride k is an n label (scattered, 64), and m = [i], n = [k] still lead.
  CHECK(penalty("ij", "jk", "ki", 8) == 64);
  // The TRG plaquette's reverse step uldr . ydwr -> wuyl: B's unit-stride y is not the first n label in C's order
  // (w then y: 256 elements of B), and C's unit-stride w is an n label (256 of C).
  CHECK(penalty("uldr", "ydwr", "wuyl", 4) == 512);
  // The same contraction with the value as lhs, written in dot_general order: nothing along a large stride.
  CHECK(penalty("ydwr", "uldr", "ywul", 4) == 0);
  CHECK(penalty("uldr", "ydwr", "ulyw", 4) == 0);
  // A cotangent laid out ulyw read by the leaf's step: its unit-stride u comes after w in C's (xwu) m order.
  CHECK(penalty("ulyw", "yxl", "xwu", 4) == 256 + 64);
  CHECK(penalty("ywul", "yxl", "xwu", 4) == 64);
  // Extent-1 axes are left out: a broadcast axis in front does not count as the unit stride.
  const std::vector<einsum::Label> la = labels_of("zij"), lb = labels_of("jk"), lc = labels_of("ik");
  const Shape sa{1, 8, 8}, sb{8, 8}, sc{8, 8};
  CHECK(einsum::gett_stride_penalty(LaidOutTerm{la, sa}, LaidOutTerm{lb, sb}, LaidOutTerm{lc, sc}) == 0);
}

TEST_CASE("reverse_layout_candidates: the node's order (cotangent first, then value first), then dot_general's "
          "with either as lhs, without duplicates") {
  using L = einsum::ReverseLayout;
  const std::vector<L> got = einsum::reverse_layout_candidates(labels_of("uldr"), labels_of("ydwr"), labels_of("wuyl"));
  const std::vector<L> want = {L{{0, 1, 2, 3}, false}, L{{0, 1, 2, 3}, true}, L{{1, 3, 2, 0}, false},
                               L{{2, 0, 1, 3}, true}};  // wuyl, wuyl, ulyw, ywul
  CHECK(got == want);
  // A batch label (in both operands and kept) goes last; a label in neither operand (summed inside the node) after.
  const std::vector<L> batch = einsum::reverse_layout_candidates(labels_of("bi"), labels_of("jb"), labels_of("zbij"));
  CHECK(batch == std::vector<L>{L{{0, 1, 2, 3}, false}, L{{0, 1, 2, 3}, true}, L{{2, 3, 1, 0}, false},
                                L{{3, 2, 1, 0}, true}});
  // A matrix chain's node ik from il . kl: its own order is dot_general's with the cotangent first.
  const std::vector<L> chain = einsum::reverse_layout_candidates(labels_of("il"), labels_of("kl"), labels_of("ik"));
  CHECK(chain == std::vector<L>{L{{0, 1}, false}, L{{0, 1}, true}, L{{1, 0}, true}});
}

TEST_CASE("the TRG plaquette: intermediate cotangents in dot_general order with the value as lhs; cotangents equal "
          "definitional loops, the same bits at one and two threads, and the tangent walk agrees") {
  const int64_t e = 3;
  const einsum::Subscripts subs = einsum::parse_subscripts("xwu,yxl,yzd,wzr->uldr");
  static ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  for (DType dtype : {DType::f64, DType::c128}) {
    CAPTURE(name(dtype));
    Rng rng{dtype == DType::f64 ? 1515u : 1516u};
    std::vector<einsum::TensorMeta> metas(4, einsum::TensorMeta{dtype, {e, e, e}});
    std::vector<Tensor> x, t;
    for (int k = 0; k < 4; ++k) {
      x.push_back(random_tensor(dtype, {e, e, e}, rng));
      t.push_back(random_tensor(dtype, {e, e, e}, rng));
    }
    const Tensor ct = random_tensor(dtype, {e, e, e, e}, rng), dct = random_tensor(dtype, {e, e, e, e}, rng);
    const auto vjp = einsum::EinsumVjpPlan::prepare(subs, metas, {dtype, {e, e, e, e}}, {0, 1, 2, 3}, {});
    const std::string stages = vjp.to_string();
    INFO(stages);
    CHECK(stages.find("tree [(0,1),(2,3),(4,5)]") != std::string::npos);
    CHECK(stages.find("reverse: ct node 4 \"wuyl\" = ct node 6 \"uldr\" x node 5 \"ydwr\" (laid out \"ywul\", value "
                      "first)") != std::string::npos);
    CHECK(stages.find("reverse: ct node 5 \"ydwr\" = ct node 6 \"uldr\" x node 4 \"wuyl\" (laid out \"wydr\", value "
                      "first)") != std::string::npos);
    CHECK(stages.find("reverse: ct operand 0 \"xwu\" = ct node 4 \"wuyl\" x operand 1 \"yxl\" (value first)\n") !=
          std::string::npos);  // an operand keeps its layout; its step may take the value first
    // Definitional loops: d/dA_k of <ct, einsum> with the other operands conjugated (the walk's convention).
    const std::vector<c128> a = values(x[0]), b = values(x[1]), c = values(x[2]), d = values(x[3]), g = values(ct);
    std::vector<std::vector<c128>> want(4, std::vector<c128>(static_cast<size_t>(e * e * e)));
    for (int64_t X = 0; X < e; ++X)
      for (int64_t W = 0; W < e; ++W)
        for (int64_t U = 0; U < e; ++U)
          for (int64_t Y = 0; Y < e; ++Y)
            for (int64_t L = 0; L < e; ++L)
              for (int64_t Z = 0; Z < e; ++Z)
                for (int64_t D = 0; D < e; ++D)
                  for (int64_t R = 0; R < e; ++R) {
                    const c128 fa = std::conj(a[at(e, X, W, U)]), fb = std::conj(b[at(e, Y, X, L)]),
                               fc = std::conj(c[at(e, Y, Z, D)]), fd = std::conj(d[at(e, W, Z, R)]);
                    const c128 gg = g[at(e, U, L, D, R)];
                    want[0][at(e, X, W, U)] += gg * fb * fc * fd;
                    want[1][at(e, Y, X, L)] += gg * fa * fc * fd;
                    want[2][at(e, Y, Z, D)] += gg * fa * fb * fd;
                    want[3][at(e, W, Z, R)] += gg * fa * fb * fc;
                  }
    const std::vector<Tensor> got = vjp.execute(x, ct, one), got2 = vjp.execute(x, ct, two);
    REQUIRE(got.size() == 4);
    for (size_t k = 0; k < 4; ++k) {
      CAPTURE(k);
      std::string why;
      CHECK_MESSAGE(close(got[k], tensor_of(dtype, {e, e, e}, want[k]), 1e-12, &why), why);
      CHECK(same_bits(got[k], got2[k]));
    }
    // The tangent walk runs the same reverse steps (value first, the re-laid-out cotangents): its cotangents are
    // execute()'s bits, and its tangents the sum over arguments of the cotangents with that argument replaced.
    const std::vector<Tensor> tangent = vjp.execute_tangent(x, ct, t, dct, one, true);
    const std::vector<Tensor> tangent2 = vjp.execute_tangent(x, ct, t, dct, two, true);
    REQUIRE(tangent.size() == 8);
    std::vector<Tensor> want_dct = vjp.execute(x, dct, one);
    for (size_t j = 0; j < 4; ++j) {
      std::vector<Tensor> y = x;
      y[j] = t[j];
      const std::vector<Tensor> cts = vjp.execute(y, ct, one);
      for (size_t k = 0; k < 4; ++k)
        if (k != j) want_dct[k] = axpy(want_dct[k], 1.0, cts[k]);
    }
    for (size_t k = 0; k < 4; ++k) {
      CAPTURE(k);
      CHECK(same_bits(tangent[k], got[k]));
      std::string why;
      CHECK_MESSAGE(close(tangent[4 + k], want_dct[k], 1e-12, &why), why);
    }
    for (size_t o = 0; o < tangent.size(); ++o) CHECK_MESSAGE(same_bits(tangent[o], tangent2[o]), "output " << o);
  }
}

TEST_CASE("seeded random einsums whose walk lays a reverse step out otherwise: cotangents equal the per-operand "
          "rule's, bitwise the same on one and two threads") {
  int laid_out = 0, value_first = 0, tried = 0;
  for (uint64_t seed = 1; seed <= 400 && laid_out < 40; ++seed) {
    Rng rng{seed * 7919};
    const EinsumCase c = random_case(rng, seed % 3 == 0);
    if (c.shapes.size() < 3) continue;
    ++tried;
    std::vector<einsum::TensorMeta> metas;
    DType dtype = c.dtypes[0];
    for (size_t k = 0; k < c.shapes.size(); ++k) {
      metas.push_back({c.dtypes[k], c.shapes[k]});
      dtype = promote(dtype, c.dtypes[k]);
    }
    einsum::EinsumOptions options;
    options.plan = c.plan;
    options.allow_broadcast = c.broadcast;
    std::vector<int> slots(c.shapes.size());
    std::iota(slots.begin(), slots.end(), 0);
    const einsum::EinsumPlan forward = einsum::EinsumPlan::prepare(c.subs, metas, options);
    const std::string stages =
        einsum::EinsumVjpPlan::prepare(c.subs, metas, {dtype, forward.output_shape()}, slots, options).to_string();
    const bool relaid = stages.find("(laid out") != std::string::npos;
    const bool swapped = stages.find("value first") != std::string::npos;
    if (!relaid && !swapped) continue;
    laid_out += relaid;
    value_first += swapped;
    const std::string context = describe(c, seed);
    INFO(context);
    INFO(stages);
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < c.shapes.size(); ++k) inputs.push_back(random_tensor(c.dtypes[k], c.shapes[k], rng));
    const Program p = einsum_program(c);
    const Program tree = ad::vjp(p, slots, unmerged_registry()), old = ad::vjp(p, slots, per_operand_registry());
    REQUIRE(uses_tree_walk(tree));
    const Tensor primal = run_on(1, p, inputs)[0];
    std::vector<Tensor> in = inputs;
    in.push_back(random_tensor(primal.dtype(), primal.shape(), rng));
    const std::vector<Tensor> g1 = run_on(1, tree, in), g2 = run_on(2, tree, in), go = run_on(1, old, in);
    const bool single = std::find(c.dtypes.begin(), c.dtypes.end(), DType::f32) != c.dtypes.end();
    for (size_t o = 1; o < g1.size(); ++o) {
      CAPTURE(o);
      std::string why;
      CHECK_MESSAGE(close(g1[o], go[o], single ? 1e-4 : 1e-12, &why), "tree walk vs per-operand rule: " << why);
      CHECK_MESSAGE(same_bits(g1[o], g2[o]), "one and two threads differ");
    }
  }
  MESSAGE("of " << tried << " random einsums of three or more operands, " << laid_out << " lay an intermediate "
                << "cotangent out otherwise and " << value_first << " run a step with the value first");
  CHECK(laid_out >= 10);
  CHECK(value_first >= 10);
}
