// Greedy rules: the opt_einsum reproduction against numbers from an independent exact-integer implementation, and
// the greedy tier's guarantee.
#include "Helpers.h"

#include "extensions/einsum/planner/Greedy.h"
#include "extensions/einsum/planner/PlanSpec.h"
#include "ir/Error.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::einsum::testing;

TEST_CASE("opt_einsum rule: exact integer costs on large lattices (not double precision)") {
  // Independent oracle: a separate exact-integer (Python int) implementation of opt_einsum's greedy, run once on
  // these networks; its totals are the constants. In double precision, size(result) - size(a) - size(b) rounds once
  // sizes pass 2^53 and the rule takes other steps: 137.17 on the 20x100 grid instead of 96.02.
  struct Pin {
    int rows, cols;
    double tc;
  };
  for (Pin p : {Pin{20, 100, 96.02237065765634}, Pin{16, 16, 28.75516132351438}, Pin{10, 100, 24.59307922008058}}) {
    INFO("grid " << p.rows << "x" << p.cols);
    Case c = grid_case(p.rows, p.cols, 2);
    Network net = make_network(c.subscripts, c.extents);
    const TreeCost cost = evaluate(net, greedy(net, {GreedyCost::opt_einsum}));
    CHECK(cost.tc == doctest::Approx(p.tc).epsilon(1e-12));
  }
}

TEST_CASE("opt_einsum rule: Hadamard products of identical label sets come first and keep the key") {
  // Inputs 0 and 2 have the same labels {i,j}: multiplied first (step (0,2) -> id 4), as opt_einsum does.
  Subscripts s;
  for (const std::string t : {"ij", "jk", "ij", "k"}) s.inputs.emplace_back(t.begin(), t.end());
  Extents x{{'i', 3}, {'j', 4}, {'k', 5}};
  Network net = make_network(s, x);
  ContractionTree t = greedy(net, {GreedyCost::opt_einsum});
  CHECK(t.steps()[0] == Step{0, 2});
}

TEST_CASE("opt_einsum rule refuses alpha and temperature") {
  Case c = random_case(3, 6);
  Network net = make_network(c.subscripts, c.extents);
  GreedyOptions o;
  o.cost = GreedyCost::opt_einsum;
  o.temperature = 0.5;
  CHECK_THROWS_WITH_AS(greedy(net, o),
                       "greedy rule opt_einsum takes no alpha or temperature (it reproduces opt_einsum's "
                       "deterministic rule); use memory_removed for a randomised greedy",
                       Error);
}

TEST_CASE("best_greedy is never costlier than any single rule") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    INFO("seed " << seed);
    Case c = random_case(seed, 5 + static_cast<int>(seed % 40));
    Network net = make_network(c.subscripts, c.extents);
    const double best = evaluate(net, best_greedy(net)).flops;
    for (GreedyCost r : {GreedyCost::memory_removed, GreedyCost::opt_einsum, GreedyCost::smallest_result})
      CHECK(best <= evaluate(net, greedy(net, {r})).flops);
  }
}

TEST_CASE("a budget smaller than one greedy run is raised to that run, and PlanResult says so") {
  Case c = grid_case(12, 12, 2);
  Network net = make_network(c.subscripts, c.extents);
  PlanSpec spec = PlanSpec::automatic_plan(PlanQuality::high);
  spec.budget_s = 1e-9;  // expires before any greedy run can finish
  PlanResult r = plan(spec, net);
  CHECK(r.budget_raised);
  CHECK_FALSE(r.stopped_by_budget);  // the work allowance (0 units) ended it, not the clock: no timing involved
  // The first rule of the greedy tier, complete and valid.
  CHECK(r.tree.to_string() == greedy(net, {GreedyCost::memory_removed}).to_string());
  // An interruptible run gives up (no half-built tree) once its deadline has passed.
  const Deadline expired(1e-9);
  GreedyOptions o;
  o.deadline = &expired;
  while (!expired.expired()) {
  }
  CHECK_FALSE(greedy_until(net, o).has_value());
  o.cost = GreedyCost::opt_einsum;
  CHECK_FALSE(greedy_until(net, o).has_value());
}
