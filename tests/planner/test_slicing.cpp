// Slicing under a memory limit (planner/Slicing.h): every intermediate of one slice fits (checked by the std::set
// oracle, not the planner's evaluator), the overhead equals an independent count, only summed labels are sliced, the
// same inputs give the same sliced tree, memory sizes parse and print, and the errors name the operand and the sizes.
#include "Helpers.h"

#include "extensions/einsum/planner/Report.h"
#include "extensions/einsum/planner/Search.h"
#include "extensions/einsum/planner/SliceFinder.h"
#include "extensions/einsum/planner/Slicing.h"
#include "ir/Error.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace einstage;
using einstage::test::error_of;
using namespace einstage::einsum;
using namespace einstage::einsum::testing;

namespace {

// The oracle's view of a sliced plan: the case with the sliced labels at extent 1.
Case sliced_case(const Case& c, const SlicedPlan& p) {
  Case s = c;
  s.extents = slice_extents(c.extents, p.sliced);
  return s;
}

double largest(const std::vector<OracleStep>& steps) {
  double m = 0;
  for (const OracleStep& s : steps) m = std::max(m, s.result_size);
  return m;
}

// Checks one sliced plan against the oracle: fits, counts, overhead, only summed labels.
void check_plan(const Case& c, const SlicedPlan& p, double limit) {
  const Case one = sliced_case(c, p);
  const auto steps = oracle_steps(one, p.tree.steps());
  CHECK(largest(steps) <= limit);
  double slices = 1;
  for (Label l : p.sliced) {
    slices *= static_cast<double>(c.extents.at(l));
    CHECK(std::find(c.subscripts.output.begin(), c.subscripts.output.end(), l) == c.subscripts.output.end());
  }
  CHECK(p.num_slices == slices);
  CHECK(p.sliced.size() == p.sliced_extents.size());
  const double slice_flops = oracle_flops(one, p.tree.steps());
  CHECK(close_rel(p.slice_cost.flops, slice_flops));
  CHECK(close_rel(p.total_flops, slices * slice_flops));
  const double unsliced = oracle_flops(c, p.unsliced_tree.steps());
  CHECK(close_rel(p.overhead, slices * slice_flops / unsliced));
  // Slicing a tree never saves work on that tree: every step's flops shrink by at most the slice count.
  const double same_tree = oracle_flops(c, p.tree.steps());
  CHECK(close_rel(p.same_tree_overhead, slices * slice_flops / same_tree));
  CHECK(p.same_tree_overhead >= 1.0 - 1e-12);
}

// The largest operand or the output: every one is read or written whole, so no limit goes below it.
double largest_fixed(const Case& c) {
  double biggest = 1;
  auto size_of = [&](const std::vector<Label>& term) {
    double size = 1;
    for (Label l : term) size *= static_cast<double>(c.extents.at(l));
    return size;
  };
  for (const auto& term : c.subscripts.inputs) biggest = std::max(biggest, size_of(term));
  return std::max(biggest, size_of(c.subscripts.output));
}

}  // namespace

TEST_CASE("slicing: memory sizes parse with B, KiB, MiB, GiB and print canonically") {
  CHECK(parse_memory_size("1B", "--max-memory") == 1);
  CHECK(parse_memory_size("3KiB", "--max-memory") == 3072);
  CHECK(parse_memory_size("256MiB", "--max-memory") == (int64_t{256} << 20));
  CHECK(parse_memory_size("2GiB", "--max-memory") == (int64_t{2} << 30));
  CHECK(format_memory_size(int64_t{256} << 20) == "256MiB");
  CHECK(format_memory_size(1000) == "1000B");
  CHECK(format_memory_size(int64_t{3} << 30) == "3GiB");
  CHECK(format_memory_size(1536) == "1536B");
  for (const char* bad : {"256", "256MB", "1.5GiB", "-1MiB", "MiB", "256 MiB", "1TiB", ""})
    CHECK(error_of([&] { parse_memory_size(bad, "--max-memory"); }) ==
          fmt::format("--max-memory \"{}\" is not a memory size; write a whole number followed by B, KiB, MiB or GiB, "
                      "e.g. 256MiB", bad));
  CHECK(error_of([] { parse_memory_size("0MiB", "--max-memory"); }) ==
        "--max-memory \"0MiB\" is zero; give a positive memory size, e.g. 256MiB");
  CHECK(error_of([] { parse_memory_size("99999999999GiB", "--max-memory"); }) ==
        "--max-memory \"99999999999GiB\" is too large; the largest memory size is 8191PiB");
}

TEST_CASE("slicing: PlanSpec carries max_memory in its text form") {
  PlanSpec s = PlanSpec::parse("auto(max_memory=256MiB)");
  CHECK(s.max_memory == (int64_t{256} << 20));
  CHECK(s.to_string() == "auto(max_memory=256MiB)");
  PlanSpec t = PlanSpec::parse("tree(max_memory=1000B)[(0,1),(2,3)]");
  CHECK(t.max_memory == 1000);
  CHECK(t.to_string() == "tree(max_memory=1000B)[(0,1),(2,3)]");
  CHECK(PlanSpec::parse(t.to_string()) == t);
  CHECK(PlanSpec::parse("anneal(seed=3,max_memory=1GiB)").to_string() == "anneal(seed=3,max_memory=1GiB)");
  CHECK(s.hash() != PlanSpec{}.hash());
  CHECK(error_of([] { PlanSpec::parse("auto(max_memory=12MB)"); }) ==
        "plan spec \"auto(max_memory=12MB)\" at column 17: max_memory \"12MB\" is not a memory size; write a whole number "
        "followed by B, KiB, MiB or GiB, e.g. 256MiB");
}

TEST_CASE("slicing: random networks fit the limit and the overhead is the oracle's count") {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    const int n = 5 + static_cast<int>(seed % 14);
    Case c = random_case(seed, n, 5);
    const TreeCost unsliced = evaluate(c.subscripts, c.extents, resolve(PlanSpec{}, c.subscripts, c.extents));
    const double biggest_fixed = largest_fixed(c);  // the floor of any limit
    for (double fraction : {1.0, 0.5, 0.1, 0.01}) {
      const double limit = std::max(biggest_fixed, std::floor(unsliced.max_intermediate * fraction));
      CAPTURE(limit);
      const SlicedPlan p = plan_sliced(PlanSpec{}, c.subscripts, c.extents, {limit});
      check_plan(c, p, limit);
      if (fraction == 1.0) {
        CHECK(p.sliced.empty());
        CHECK(p.overhead == 1.0);
      }
    }
  }
}

TEST_CASE("slicing: an 8x8 grid sliced at least 8 ways fits and is the same plan twice") {
  Case c = grid_case(8, 8, 2);
  const TreeCost unsliced = evaluate(c.subscripts, c.extents, resolve(PlanSpec{}, c.subscripts, c.extents));
  const double limit = std::max(16.0, std::exp2(std::round(unsliced.sc) - 3));
  CAPTURE(unsliced.sc);
  const SlicedPlan p = plan_sliced(PlanSpec{}, c.subscripts, c.extents, {limit});
  check_plan(c, p, limit);
  CHECK(p.num_slices >= 8);
  CHECK(p.overhead >= 1.0);
  const SlicedPlan q = plan_sliced(PlanSpec{}, c.subscripts, c.extents, {limit});
  CHECK(q.tree == p.tree);
  CHECK(q.sliced == p.sliced);
  // An explicit order is sliced as given.
  const PlanSpec given = PlanSpec::tree_plan(p.unsliced_tree.steps());
  const SlicedPlan r = plan_sliced(given, c.subscripts, c.extents, {limit});
  CHECK(r.tree == p.unsliced_tree);
  check_plan(c, r, limit);
  // The JSON report carries the numbers.
  const nlohmann::json j = nlohmann::json::parse(sliced_report_json(c.subscripts, p));
  CHECK(j["num_slices"].get<double>() == p.num_slices);
  CHECK(j["overhead"].get<double>() == p.overhead);
  CHECK(j["same_tree_overhead"].get<double>() == p.same_tree_overhead);
  CHECK(j["sliced"].size() == p.sliced.size());
  CHECK(j["sc"].get<double>() <= std::log2(limit) + 1e-12);
}

TEST_CASE("slicing: a budgeted search slices to the same plan at 1 and 2 threads") {
  Case c = grid_case(5, 5, 2);
  PlanSpec spec = PlanSpec::parse("auto(quality=high,budget=0.05,seed=7)");
  PlanOptions one, two;
  one.clock_guard = two.clock_guard = false;
  two.threads = 2;
  const SlicedPlan a = plan_sliced(spec, c.subscripts, c.extents, {64}, one);
  const SlicedPlan b = plan_sliced(spec, c.subscripts, c.extents, {64}, two);
  CHECK(a.tree == b.tree);
  CHECK(a.sliced == b.sliced);
  check_plan(c, a, 64);
}

namespace {

// The case with the network's dense labels `dense` at extent 1.
Case with_sliced(const Case& c, const Network& net, const std::vector<int>& dense) {
  Case s = c;
  for (int l : dense) s.extents[net.label[l]] = 1;
  return s;
}

}  // namespace

TEST_CASE("slicing: slice_tree fits any tree, counts like the oracle and keeps only the labels it needs") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    Case c = random_case(seed, 6 + static_cast<int>(seed % 10), 5);
    const Network net = make_network(c.subscripts, c.extents);
    const ContractionTree tree = resolve(PlanSpec{}, c.subscripts, c.extents);
    const double floor_size = largest_fixed(c);  // slicing cannot go below it
    const double limit = std::max(floor_size, std::floor(largest(oracle_steps(c, tree.steps())) / 16));
    CAPTURE(limit);
    const SliceChoice choice = slice_tree(net, tree, limit);
    REQUIRE(choice.fits);
    const Case one = with_sliced(c, net, choice.labels);
    CHECK(largest(oracle_steps(one, tree.steps())) <= limit);
    double slices = 1;
    for (int l : choice.labels) {
      CHECK_FALSE(net.in_output[l]);
      slices *= static_cast<double>(net.extent[l]);
    }
    CHECK(choice.num_slices == slices);
    CHECK(close_rel(choice.total_flops, slices * oracle_flops(one, tree.steps())));
    // Every label is needed: un-slicing any one of them breaks the limit.
    for (size_t k = 0; k < choice.labels.size(); ++k) {
      std::vector<int> fewer = choice.labels;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(k));
      CHECK(largest(oracle_steps(with_sliced(c, net, fewer), tree.steps())) > limit);
    }
    // Starting from its own answer changes nothing.
    const SliceChoice again = slice_tree(net, tree, limit, {}, choice.labels);
    CHECK(again.labels == choice.labels);
  }
}

TEST_CASE("slicing: the slicing-aware search scores trees by their sliced cost and never returns a costlier one") {
  for (auto [rows, cols] : {std::pair{5, 5}, std::pair{4, 7}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    Case c = grid_case(rows, cols, 2);
    const Network net = make_network(c.subscripts, c.extents);
    const ContractionTree base = resolve(PlanSpec{}, c.subscripts, c.extents);
    const double limit = 8;
    SearchOptions so;
    so.budget_s = 0;
    so.trials = 4;
    so.seed = 3;
    so.slice_limit = limit;
    const SearchResult r = search(net, base, so);
    CHECK(r.flops <= slice_tree(net, base, limit).total_flops);
    // The reported labels make the tree fit, and its flops are their sliced total (oracle).
    const Case one = with_sliced(c, net, r.sliced);
    CHECK(largest(oracle_steps(one, r.tree.steps())) <= limit);
    double slices = 1;
    for (int l : r.sliced) slices *= static_cast<double>(net.extent[l]);
    CHECK(close_rel(r.flops, slices * oracle_flops(one, r.tree.steps())));
    // Deterministic, at any thread count.
    so.threads = 2;
    const SearchResult t = search(net, base, so);
    CHECK(t.tree == r.tree);
    CHECK(t.sliced == r.sliced);
  }
}

TEST_CASE("slicing: an operand or output above the limit is an error naming it and the sizes") {
  Subscripts s;
  s.inputs = {{'i', 'j'}, {'j', 'k'}};
  s.output = {'i'};
  Extents e{{'i', 4}, {'j', 100}, {'k', 3}};
  CHECK(error_of([&] { plan_sliced(PlanSpec{}, s, e, {200, 8}); }) ==
        "operand 0 ('ij') has 400 elements (3200B) but the memory limit is 200 elements (1600B); every operand is "
        "read whole, so raise the limit to at least 4KiB");
  CHECK(error_of([&] { plan_sliced(PlanSpec{}, s, e, {350}); }) ==
        "operand 0 ('ij') has 400 elements but the memory limit is 350 elements; every operand is read whole, so "
        "raise the limit to at least 400 elements");
  s.output = {'i', 'k'};
  e['j'] = 2;
  e['i'] = 40;
  CHECK(error_of([&] { plan_sliced(PlanSpec{}, s, e, {100, 4}); }) ==
        "the output has 120 elements (480B) but the memory limit is 100 elements (400B); output labels are never "
        "sliced, so raise the limit to at least 480B");
  CHECK(error_of([&] { plan_sliced(PlanSpec{}, s, e, {0}); }) ==
        "memory limit of 0 elements is below one element; give a positive limit");
}
