// ContractionTree validation, explicit orders, the evaluator's cost model and the plan report.
#include "Helpers.h"

#include "extensions/einsum/planner/Report.h"
#include "ir/Error.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::einsum::testing;
using einstage::test::error_of;

namespace {

Subscripts subs(std::vector<std::string> terms, std::string out) {
  Subscripts s;
  for (auto& t : terms) s.inputs.emplace_back(t.begin(), t.end());
  s.output.assign(out.begin(), out.end());
  return s;
}

}  // namespace

TEST_CASE("tree validation names the bad step and id") {
  CHECK(ContractionTree(3, {{0, 1}, {3, 2}}).root() == 4);
  CHECK(ContractionTree(1, {}).root() == 0);
  CHECK(ContractionTree(0, {}).root() == -1);
  CHECK(ContractionTree().to_string() == "[]");
  CHECK(error_of([] { ContractionTree(3, {{0, 1}}); }) ==
        "contraction tree for 3 input(s) needs exactly 2 step(s), got 1; every step joins two live operands");
  CHECK(error_of([] { ContractionTree(1, {{0, 1}}); }).find("needs exactly 0 step(s), got 1") != std::string::npos);
  CHECK(error_of([] { ContractionTree(3, {{0, 1}, {1, 2}}); }) ==
        "contraction tree step 1 (1,2): id 1 was already consumed by step 0; each id is used once");
  CHECK(error_of([] { ContractionTree(3, {{0, 4}, {3, 2}}); }) ==
        "contraction tree step 0 (0,4): id 4 does not exist yet; step 0 may use inputs 0..2 and the results of "
        "earlier steps (ids 3..2)");
  CHECK(error_of([] { ContractionTree(3, {{0, 0}, {3, 2}}); }).find("both sides are id 0") != std::string::npos);
  CHECK(error_of([] { ContractionTree(3, {{0, -1}, {3, 2}}); }).find("id -1 does not exist") != std::string::npos);
}

TEST_CASE("left_to_right is (0,1),(n,2),(n+1,3),...") {
  CHECK(ContractionTree::left_to_right(7).to_string() == "[(0,1),(7,2),(8,3),(9,4),(10,5),(11,6)]");
  CHECK(ContractionTree::left_to_right(2).to_string() == "[(0,1)]");
  CHECK(ContractionTree::left_to_right(1).steps().empty());
  CHECK(ContractionTree::left_to_right(0).steps().empty());
}

TEST_CASE("positional paths map to ids and back") {
  // JAX semantics: positions in the current list, result appended at the end.
  ContractionTree t = ContractionTree::from_positional_path(4, {{1, 3}, {0, 1}, {0, 1}});
  CHECK(t.to_string() == "[(1,3),(0,2),(4,5)]");
  CHECK(t.to_positional_path() == std::vector<Step>{{1, 3}, {0, 1}, {0, 1}});
  // The reference's "left to right" path ((0,1) repeated) pairs operands (0,1),(2,3),...
  CHECK(ContractionTree::from_positional_path(4, {{0, 1}, {0, 1}, {0, 1}}).to_string() == "[(0,1),(2,3),(4,5)]");
  // Position order within a step is kept as given.
  CHECK(ContractionTree::from_positional_path(3, {{2, 0}, {1, 0}}).to_string() == "[(2,0),(3,1)]");
  CHECK(error_of([] { ContractionTree::from_positional_path(3, {{0, 1}, {0, 2}}); }) ==
        "contraction path step 1 (0,2): position 2 is out of range; the list has 2 operand(s) before this step "
        "(positions 0..1)");
  CHECK(error_of([] { ContractionTree::from_positional_path(3, {{1, 1}, {0, 1}}); }) ==
        "contraction path step 0 (1,1): position 1 is named twice; name two different positions");
  CHECK(error_of([] { ContractionTree::from_positional_path(3, {{0, 1}}); }) ==
        "contraction path for 3 input(s) needs exactly 2 step(s), got 1");
}

TEST_CASE("evaluator: labels, flops, sizes, totals on a matrix chain") {
  Subscripts s = subs({"ij", "jk", "kl"}, "il");
  Extents x{{'i', 2}, {'j', 3}, {'k', 4}, {'l', 5}};
  TreeCost c = evaluate(s, x, ContractionTree(3, {{0, 1}, {3, 2}}));
  REQUIRE(c.steps.size() == 2);
  CHECK(c.steps[0].left_labels == std::vector<Label>{'i', 'j'});
  CHECK(c.steps[0].right_labels == std::vector<Label>{'j', 'k'});
  CHECK(c.steps[0].result_labels == std::vector<Label>{'i', 'k'});
  CHECK(c.steps[0].summed == std::vector<Label>{'j'});
  CHECK(c.steps[0].flops == 2 * 3 * 4);
  CHECK(c.steps[0].result_size == 8);
  CHECK(c.steps[1].flops == 2 * 4 * 5);
  CHECK(c.steps[1].result_labels == std::vector<Label>{'i', 'l'});
  CHECK(c.flops == 24 + 40);
  CHECK(c.tc == doctest::Approx(std::log2(64.0)));
  CHECK(c.sc == doctest::Approx(std::log2(10.0)));
  CHECK(c.rw == doctest::Approx(std::log2((6 + 12 + 8) + (8 + 20 + 10))));
  CHECK(c.write == 18);
  // Inputs 6 + 12 + 20 = 38 live; step 0 adds 8 (46), frees 18 -> 28; step 1 adds 10 (38).
  CHECK(c.peak_memory == 46);
  CHECK(c.naive_flops == 2 * (2 * 3 * 4 * 5));
}

TEST_CASE("evaluator: hyperedges, repeated labels, output-only labels, private labels") {
  // b is on three operands (a hyperedge): it survives the first step because operand 2 still carries it.
  Subscripts s = subs({"ab", "bc", "bd"}, "");
  Extents x{{'a', 2}, {'b', 3}, {'c', 5}, {'d', 7}};
  TreeCost c = evaluate(s, x, ContractionTree(3, {{0, 1}, {3, 2}}));
  CHECK(c.steps[0].result_labels == std::vector<Label>{'b'});
  CHECK(c.steps[0].summed == std::vector<Label>{'a', 'c'});
  CHECK(c.steps[0].flops == 2 * 3 * 5);
  CHECK(c.steps[1].flops == 3 * 7);
  CHECK(c.steps[1].result_labels.empty());
  // A repeated label counts once (the step reads the diagonal); storage counts it twice.
  Subscripts r = subs({"iij", "jk"}, "ik");
  Extents rx{{'i', 4}, {'j', 3}, {'k', 2}};
  TreeCost rc = evaluate(r, rx, ContractionTree(2, {{0, 1}}));
  CHECK(rc.steps[0].left_labels == std::vector<Label>{'i', 'j'});
  CHECK(rc.steps[0].flops == 4 * 3 * 2);
  CHECK(rc.steps[0].left_size == 12);
  CHECK(rc.peak_memory == 48 + 6 + 8);
  // An output-only label never enters a step and may lack an extent.
  Subscripts o = subs({"ij", "jk"}, "ikz");
  TreeCost oc = evaluate(o, {{'i', 2}, {'j', 3}, {'k', 4}}, ContractionTree(2, {{0, 1}}));
  CHECK(oc.steps[0].result_labels == std::vector<Label>{'i', 'k'});
  // One input: no steps, costs zero.
  TreeCost one = evaluate(subs({"ii"}, "i"), {{'i', 3}}, ContractionTree(1, {}));
  CHECK(one.steps.empty());
  CHECK(one.flops == 0);
  CHECK(one.tc == 0);
  CHECK(one.peak_memory == 9);
}

TEST_CASE("evaluator agrees with the independent set-based oracle on random networks") {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    INFO("seed " << seed);
    Case c = random_case(seed, 2 + static_cast<int>(seed % 9));
    const int n = static_cast<int>(c.subscripts.inputs.size());
    ContractionTree t = ContractionTree::left_to_right(n);
    CHECK(close_rel(evaluate(c.subscripts, c.extents, t).flops, oracle_flops(c, t.steps())));
  }
}

TEST_CASE("missing and bad extents are reported with the label") {
  Subscripts s = subs({"ij", "jk"}, "ik");
  CHECK(error_of([&] { make_network(s, {{'i', 2}, {'j', 3}}); }) ==
        "label 'k' of operand 1 has no extent; give an extent for every label");
  CHECK(error_of([&] { make_network(s, {{'i', 2}, {'j', -3}, {'k', 1}}); }) ==
        "label 'j' has negative extent -3; extents must be >= 0");
  CHECK(error_of([&] { extents_from_shapes(s, {{2, 3}, {4, 5}}); }) ==
        "label 'j' has extent 3 in operand 0 but 4 in operand 1; make the extents agree");
  CHECK(extents_from_shapes(s, {{2, 3}, {3, 5}}) == Extents{{'i', 2}, {'j', 3}, {'k', 5}});
}

TEST_CASE("report text golden for a small case") {
  Subscripts s = subs({"ij", "jk", "kl"}, "il");
  s.names['l'] = "λ";
  Extents x{{'i', 2}, {'j', 3}, {'k', 4}, {'l', 5}};
  ContractionTree t(3, {{1, 2}, {0, 3}});
  const std::string expected =
      "  contraction: ij,jk,kλ->iλ\n"
      "       method: tree\n"
      "         tree: [(1,2),(0,3)]\n"
      "  naive flops: 2.4000e+02\n"
      "planned flops: 9.0000e+01  (tc 6.49, sc 3.91, rw 6.29)\n"
      "     speed-up: 2.67x\n"
      " largest intermediate: 15 elements, peak memory 53 elements\n"
      "step  ids           contraction                     flops  result size\n"
      "   0  (1,2)->3      jk,kλ->jλ                  6.0000e+01   1.5000e+01\n"
      "   1  (0,3)->4      ij,jλ->iλ                  3.0000e+01   1.0000e+01\n";
  CHECK(report_text(s, t, evaluate(s, x, t), "tree") == expected);
}

TEST_CASE("report JSON round-trips the tree and carries the totals") {
  Subscripts s = subs({"ij", "jk", "kl"}, "il");
  Extents x{{'i', 2}, {'j', 3}, {'k', 4}, {'l', 5}};
  ContractionTree t(3, {{1, 2}, {0, 3}});
  const std::string j = report_json(s, t, evaluate(s, x, t), "tree");
  CHECK(tree_from_json(j) == t);
  CHECK(j.find("\"flops\":90.0") != std::string::npos);
  CHECK(j.find("\"path\":[[1,2],[0,1]]") != std::string::npos);
  CHECK(error_of([] { tree_from_json("{\"num_inputs\":3,\"steps\":[[0,1],[3]]}"); }) ==
        "contraction tree JSON: steps[1] is [3]; expected [left, right] with integer ids");
  CHECK(error_of([] { tree_from_json("{\"num_inputs\":3,\"steps\":[[0,1],[1,2]]}"); })
            .find("step 1 (1,2): id 1 was already consumed by step 0") != std::string::npos);
  CHECK(error_of([] { tree_from_json("{\"steps\":[]}"); }) ==
        "contraction tree JSON needs an integer field \"num_inputs\"");
}
