// PlanSpec text form, equality and hashing; resolve() for every kind; the grouped-dialect mapping.
#include "Helpers.h"

#include "extensions/einsum/planner/PlanSpec.h"
#include "ir/Error.h"

#include <doctest/doctest.h>

#include <unordered_set>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::einsum::testing;

namespace {

std::string parse_error(std::string_view text) {
  try {
    PlanSpec::parse(text);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
    return e.what();
  }
  return "<no error>";
}

Subscripts chain7() {
  Subscripts s;
  for (std::string t : {"ij", "jk", "kl", "lm", "mn", "no", "o"}) s.inputs.emplace_back(t.begin(), t.end());
  s.output = {'i'};
  return s;
}

}  // namespace

TEST_CASE("PlanSpec text form round-trips") {
  PlanSpec tuned = PlanSpec::anneal_plan(2.5, 42, 8);
  tuned.moves = 1000;
  PlanSpec high = PlanSpec::automatic_plan(PlanQuality::high);
  high.budget_s = 0.25;
  const std::vector<std::pair<PlanSpec, std::string>> cases = {
      {PlanSpec::automatic_plan(), "auto"},
      {PlanSpec::automatic_plan(PlanQuality::fast), "auto(quality=fast)"},
      {high, "auto(budget=0.25,quality=high)"},
      {PlanSpec::greedy_plan(), "greedy"},
      {PlanSpec::greedy_plan(GreedyCost::smallest_result), "greedy(cost=smallest_result)"},
      {PlanSpec::optimal_plan(), "optimal"},
      {PlanSpec::anneal_plan(), "anneal"},
      {tuned, "anneal(budget=2.5,seed=42,trials=8,moves=1000)"},
      {PlanSpec::left_to_right_plan(), "left_to_right"},
      {PlanSpec::path_plan({{0, 1}, {0, 1}}), "path[(0,1),(0,1)]"},
      {PlanSpec::tree_plan({{0, 1}, {3, 2}}), "tree[(0,1),(3,2)]"},
      {PlanSpec::tree_plan({}), "tree[]"},
  };
  std::unordered_set<PlanSpec, PlanSpecHash> set;
  for (const auto& [spec, text] : cases) {
    CHECK(spec.to_string() == text);
    CHECK(PlanSpec::parse(text) == spec);
    CHECK(PlanSpec::parse(text).hash() == spec.hash());
    set.insert(spec);
  }
  CHECK(set.size() == cases.size());
  // Spaces are tolerated; the printed form is canonical.
  CHECK(PlanSpec::parse(" tree [ (0, 1) , (3,2) ] ") == PlanSpec::tree_plan({{0, 1}, {3, 2}}));
  CHECK(PlanSpec::parse("anneal(seed=3,budget=1)").to_string() == "anneal(budget=1,seed=3)");
  CHECK(PlanSpec::automatic_plan() != PlanSpec::greedy_plan());
}

TEST_CASE("PlanSpec parse errors point at the column") {
  CHECK(parse_error("fastest") ==
        "plan spec \"fastest\" at column 1: unknown plan kind 'fastest'; expected auto, greedy, optimal, anneal, "
        "left_to_right, path[...] or tree[...]");
  CHECK(parse_error("greedy(seed=1)") == "plan spec \"greedy(seed=1)\" at column 8: option 'seed' does not apply to "
                                         "plan kind 'greedy'");
  CHECK(parse_error("anneal(budget=-1)") ==
        "plan spec \"anneal(budget=-1)\" at column 15: budget '-1' is not a positive number of seconds");
  CHECK(parse_error("auto(quality=best)") ==
        "plan spec \"auto(quality=best)\" at column 14: quality 'best' is not one of fast, normal, high");
  CHECK(parse_error("path[(0,1),(0 1)]") == "plan spec \"path[(0,1),(0 1)]\" at column 15: expected ','");
  CHECK(parse_error("path") == "plan spec \"path\" at column 5: expected '['");
  CHECK(parse_error("path[(-1,0)]") == "plan spec \"path[(-1,0)]\" at column 7: expected a non-negative integer");
  CHECK(parse_error("auto[(0,1)]") == "plan spec \"auto[(0,1)]\" at column 5: unexpected text after the plan kind");
}

TEST_CASE("resolve: explicit orders produce exactly the requested pairs") {
  Subscripts s = chain7();
  Extents x;
  for (char ch = 'i'; ch <= 'o'; ++ch) x[ch] = 4;
  CHECK(resolve(PlanSpec::left_to_right_plan(), s, x).to_string() == "[(0,1),(7,2),(8,3),(9,4),(10,5),(11,6)]");
  CHECK(resolve(PlanSpec::tree_plan({{5, 6}, {4, 7}, {3, 8}, {2, 9}, {1, 10}, {0, 11}}), s, x).to_string() ==
        "[(5,6),(4,7),(3,8),(2,9),(1,10),(0,11)]");
  CHECK(resolve(PlanSpec::path_plan({{5, 6}, {4, 5}, {3, 4}, {2, 3}, {1, 2}, {0, 1}}), s, x).to_string() ==
        "[(5,6),(4,7),(3,8),(2,9),(1,10),(0,11)]");
  // The nested string's order arrives as steps over ids, i.e. a tree spec.
  const std::vector<Step> nested = {{0, 1}, {2, 3}, {7, 8}, {4, 5}, {9, 10}, {11, 6}};
  CHECK(resolve(PlanSpec::tree_plan(nested), s, x).steps() == nested);
  CHECK_THROWS_WITH_AS(resolve(PlanSpec::tree_plan({{0, 1}, {1, 2}, {8, 3}, {9, 4}, {10, 5}, {11, 6}}), s, x),
                       "contraction tree step 1 (1,2): id 1 was already consumed by step 0; each id is used once",
                       Error);
  CHECK_THROWS_WITH_AS(resolve(PlanSpec::path_plan({{0, 1}, {0, 6}, {0, 1}, {0, 1}, {0, 1}, {0, 1}}), s, x),
                       "contraction path step 1 (0,6): position 6 is out of range; the list has 6 operand(s) before "
                       "this step (positions 0..5)",
                       Error);
}

TEST_CASE("resolve: one and zero inputs") {
  Subscripts one;
  one.inputs = {{'i', 'i'}};
  one.output = {'i'};
  for (const char* text : {"auto", "greedy", "optimal", "anneal(trials=1)", "left_to_right", "path[]", "tree[]"}) {
    INFO(text);
    CHECK(resolve(PlanSpec::parse(text), one, {{'i', 3}}).steps().empty());
  }
  Subscripts none;
  CHECK(resolve(PlanSpec::automatic_plan(), none, {}).root() == -1);
  CHECK_THROWS_WITH_AS(resolve(PlanSpec::path_plan({{0, 1}}), one, {{'i', 3}}),
                       "contraction path step 0 (0,1): position 1 is out of range; the list has 1 operand(s) before "
                       "this step (positions 0..0)",
                       Error);
}

TEST_CASE("grouped dialect: plan on the groups, apply the same tree to the expansion") {
  // Grouped "Ab,bC,CD->AD" with A = (a1 a2), C = (c1 c2 c3), D = () (an empty group), b a single axis.
  const Label A = 'A', C = 'C', D = 'D';
  Subscripts grouped;
  grouped.inputs = {{A, 'b'}, {'b', C}, {C, D}};
  grouped.output = {A, D};
  const Label a1 = 1000, a2 = 1001, c1 = 1002, c2 = 1003, c3 = 1004;
  std::map<Label, std::vector<Label>> groups = {{A, {a1, a2}}, {C, {c1, c2, c3}}, {D, {}}};
  Subscripts expanded;
  expanded.inputs = {{a1, a2, 'b'}, {'b', c1, c2, c3}, {c1, c2, c3}};
  expanded.output = {a1, a2};
  Extents ex{{a1, 3}, {a2, 5}, {'b', 7}, {c1, 2}, {c2, 4}, {c3, 6}};
  CHECK(grouped_extents(grouped, groups, ex) == Extents{{A, 15}, {'b', 7}, {C, 48}, {D, 1}});
  for (const char* text : {"auto", "greedy", "optimal", "left_to_right", "tree[(1,2),(0,3)]"}) {
    INFO(text);
    ContractionTree t = resolve_grouped(PlanSpec::parse(text), grouped, groups, expanded, ex);
    TreeCost g = evaluate(grouped, grouped_extents(grouped, groups, ex), t);
    TreeCost e = evaluate(expanded, ex, t);
    REQUIRE(g.steps.size() == e.steps.size());
    for (size_t k = 0; k < g.steps.size(); ++k) {
      CHECK(g.steps[k].flops == e.steps[k].flops);
      CHECK(g.steps[k].result_size == e.steps[k].result_size);
    }
  }
  // The planned tree avoids the 15x7x48 step: contract C first (b,C with C,D), then A b with b.
  CHECK(resolve_grouped(PlanSpec::optimal_plan(), grouped, groups, expanded, ex).to_string() == "[(1,2),(0,3)]");
  CHECK_THROWS_WITH_AS(grouped_extents(grouped, groups, {{a1, 3}, {'b', 7}}),
                       "axis #1001 of group 'A' has no extent; give an extent for every expanded label", Error);
}
