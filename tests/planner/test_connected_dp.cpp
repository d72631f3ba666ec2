// Connected-subset DP with a rising cost cap: exactness against brute force over the same trees, agreement with the
// all-subsets DP where no outer product pays, components, limits.
#include "Helpers.h"

#include "extensions/einsum/planner/ConnectedDp.h"
#include "extensions/einsum/planner/Exact.h"
#include "extensions/einsum/planner/Greedy.h"
#include "ir/Error.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::einsum::testing;

TEST_CASE("connected DP equals brute force over outer-product-free trees on n <= 8") {
  int differs_from_all_trees = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const int n = 3 + static_cast<int>(seed % 6);
    INFO("seed " << seed << " n " << n);
    Case c = random_case(seed, n);
    Network net = make_network(c.subscripts, c.extents);
    ConnectedDpStats stats;
    auto tree = optimal_connected(net, {}, &stats);
    REQUIRE(tree.has_value());
    const double got = evaluate(net, *tree).flops;
    CHECK(close_rel(oracle_flops(c, tree->steps()), got));
    CHECK(close_rel(got, brute_force_min_flops(c, /*outer_products=*/false)));
    // Over all trees it can only be costlier, never cheaper, than the all-subsets optimum.
    const double all = evaluate(net, optimal(net)).flops;
    CHECK(all <= got * (1 + 1e-12));
    if (!close_rel(all, got)) ++differs_from_all_trees;
  }
  MESSAGE("outer products paid on " << differs_from_all_trees << " of 60 networks");
}

TEST_CASE("connected DP: the cap rises until a solution fits, and the result does not depend on the first cap") {
  for (uint64_t seed = 100; seed < 115; ++seed) {
    INFO("seed " << seed);
    Case c = random_case(seed, 10);
    Network net = make_network(c.subscripts, c.extents);
    ConnectedDpStats low_stats, greedy_stats;
    ConnectedDpOptions low;
    low.start_cap = 1;  // far too small: needs several passes
    ConnectedDpOptions from_greedy;
    from_greedy.start_cap = evaluate(net, best_greedy(net)).flops;
    auto a = optimal_connected(net, low, &low_stats);
    auto b = optimal_connected(net, from_greedy, &greedy_stats);
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(low_stats.passes > 1);
    CHECK(close_rel(evaluate(net, *a).flops, evaluate(net, *b).flops));
  }
}

TEST_CASE("connected DP on a 4x5 grid: equals the all-subsets DP (no outer product pays on a lattice)") {
  Case c = grid_case(4, 5, 3);
  Network net = make_network(c.subscripts, c.extents);
  ExactOptions all;
  all.max_inputs = 20;
  const double exact = evaluate(net, optimal(net, all)).flops;
  auto tree = optimal_connected(net);
  REQUIRE(tree.has_value());
  CHECK(close_rel(evaluate(net, *tree).flops, exact));
}

TEST_CASE("connected DP: disconnected networks are solved per component and joined by outer products") {
  // Two chains ij,jk and lm,mn plus a lone vector p; output keeps i, k, l, n, p.
  Subscripts s;
  for (const std::string t : {"ij", "lm", "jk", "p", "mn"}) s.inputs.emplace_back(t.begin(), t.end());
  s.output = {'i', 'k', 'l', 'n', 'p'};
  Extents x{{'i', 2}, {'j', 3}, {'k', 4}, {'l', 5}, {'m', 6}, {'n', 7}, {'p', 8}};
  Network net = make_network(s, x);
  auto tree = optimal_connected(net);
  REQUIRE(tree.has_value());
  // Within components first: (0,2) and (1,4); then outer products smallest first: ik (8) x p (8), then with ln (35).
  CHECK(tree->to_string() == "[(0,2),(1,4),(3,5),(6,7)]");
}

TEST_CASE("connected DP gives up on its subset limit and refuses components above 64 inputs") {
  Case c = grid_case(4, 5, 2);
  Network net = make_network(c.subscripts, c.extents);
  ConnectedDpOptions tight;
  tight.max_subsets = 30;
  CHECK_FALSE(optimal_connected(net, tight).has_value());
  Case big = grid_case(5, 13, 2);
  Network big_net = make_network(big.subscripts, big.extents);
  CHECK_THROWS_WITH_AS(optimal_connected(big_net),
                       "connected-subset DP supports at most 64 inputs per connected component, this network has one "
                       "of 65; use 'auto' or 'anneal' for it",
                       Error);
}
