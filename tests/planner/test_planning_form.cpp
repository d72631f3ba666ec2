// The planning form (fuse_cotravelling, Network.h): co-travelling labels become one, extent-1 labels go, and every
// tree costs the same on both forms step by step; so an expanded grouped-dialect einsum (what a traced op stores)
// plans exactly like its grouped string.
#include "Helpers.h"

#include "extensions/einsum/notation/Grouped.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/planner/Greedy.h"
#include "extensions/einsum/planner/Network.h"
#include "extensions/einsum/planner/PlanSpec.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::einsum::testing;

namespace {

Extents extents_of(const Subscripts& s, std::initializer_list<std::pair<char, int64_t>> list) {
  Extents e;
  for (auto [c, v] : list) e[static_cast<Label>(c)] = v;
  (void)s;
  return e;
}

/// `c` with a twin added after some labels: the twin sits next to its label in every term (as often) and in the
/// output, so the two travel together.
Case with_twins(const Case& c, uint64_t seed) {
  SplitMix64 rng(seed);
  Case out = c;
  Label next = 0x4e00;  // CJK ideographs: never used by random_case
  std::map<Label, Label> twin;
  for (auto& [l, e] : c.extents)
    if (rng.randint(2) == 0) {
      twin[l] = next++;
      out.extents[twin[l]] = 1 + static_cast<int64_t>(rng.randint(4));
    }
  auto add = [&](const std::vector<Label>& term) {
    std::vector<Label> t;
    for (Label l : term) {
      t.push_back(l);
      if (twin.count(l)) t.push_back(twin[l]);
    }
    return t;
  };
  for (auto& term : out.subscripts.inputs) term = add(term);
  out.subscripts.output = add(out.subscripts.output);
  return out;
}

}  // namespace

TEST_CASE("fuse_cotravelling merges labels that travel together and drops extent-1 labels") {
  const Subscripts s = parse_subscripts("abcdg,cdef->abefg");
  const PlanningForm f = fuse_cotravelling(s, extents_of(s, {{'a', 2}, {'b', 3}, {'c', 4}, {'d', 5}, {'e', 6},
                                                            {'f', 7}, {'g', 1}}));
  // ab -> one label (6), cd -> one label (20), ef -> one label (42); g (extent 1) is gone.
  REQUIRE(f.subscripts.inputs.size() == 2);
  CHECK(f.subscripts.inputs[0] == std::vector<Label>{0, 1});
  CHECK(f.subscripts.inputs[1] == std::vector<Label>{1, 2});
  CHECK(f.subscripts.output == std::vector<Label>{0, 2});
  CHECK(f.extents == Extents{{0, 6}, {1, 20}, {2, 42}});
}

TEST_CASE("fuse_cotravelling keeps labels apart that differ in multiplicity, zero extents, or would overflow") {
  const Subscripts s = parse_subscripts("aab,bc->ac");  // a twice on operand 0, b once: different signatures
  const PlanningForm f = fuse_cotravelling(s, extents_of(s, {{'a', 2}, {'b', 3}, {'c', 4}}));
  CHECK(f.subscripts.inputs[0] == std::vector<Label>{0, 0, 1});
  CHECK(f.subscripts.inputs[1] == std::vector<Label>{1, 2});

  const Subscripts z = parse_subscripts("abc,c->ab");  // a, b co-travel but b is empty: kept apart
  const PlanningForm fz = fuse_cotravelling(z, extents_of(z, {{'a', 2}, {'b', 0}, {'c', 4}}));
  CHECK(fz.extents == Extents{{0, 2}, {1, 0}, {2, 4}});

  // 70 co-travelling labels of extent 2: 2^70 does not fit, so the run is split at 2^62.
  Subscripts big;
  big.inputs.resize(2);
  Extents e;
  for (Label l = 0; l < 70; ++l) {
    big.inputs[0].push_back(1000 + l);
    big.inputs[1].push_back(1000 + l);
    e[1000 + l] = 2;
  }
  const PlanningForm fb = fuse_cotravelling(big, e);
  CHECK(fb.extents == Extents{{0, int64_t{1} << 62}, {1, 256}});
  CHECK(fb.subscripts.inputs[0] == std::vector<Label>{0, 1});

  // A label without an extent gives make_network's error.
  const Subscripts m = parse_subscripts("ab,bc->ac");
  CHECK_THROWS_WITH_AS(fuse_cotravelling(m, extents_of(m, {{'a', 2}, {'b', 3}})),
                       "label 'c' of operand 1 has no extent; give an extent for every label", Error);
}

TEST_CASE("every tree costs the same on the planning form, step by step (seeded)") {
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    CAPTURE(seed);
    const int n = 2 + static_cast<int>(seed % 9);
    const Case c = with_twins(random_case(seed, n), seed * 7919);
    const PlanningForm f = fuse_cotravelling(c.subscripts, c.extents);
    const Network original = make_network(c.subscripts, c.extents);
    const Network fused = make_network(f.subscripts, f.extents);
    CHECK(fused.num_labels <= original.num_labels);
    for (const ContractionTree& tree : {ContractionTree::left_to_right(n), greedy(original), greedy(fused)}) {
      const TreeCost a = evaluate(original, tree), b = evaluate(fused, tree);
      CHECK(a.flops == b.flops);
      CHECK(a.max_intermediate == b.max_intermediate);
      CHECK(a.peak_memory == b.peak_memory);
      REQUIRE(a.steps.size() == b.steps.size());
      for (size_t k = 0; k < a.steps.size(); ++k) {
        CHECK(a.steps[k].flops == b.steps[k].flops);
        CHECK(a.steps[k].result_size == b.steps[k].result_size);
      }
    }
    // resolve() plans on the fused form; plan_contraction reports the caller's labels.
    const PlanResult r = plan_contraction(PlanSpec{}, c.subscripts, c.extents);
    CHECK(r.tree == resolve(PlanSpec{}, c.subscripts, c.extents));
    CHECK(r.cost.flops == evaluate(original, r.tree).flops);
    for (const StepCost& st : r.cost.steps)
      for (Label l : st.result_labels) CHECK(original.label.end() != std::find(original.label.begin(),
                                                                               original.label.end(), l));
  }
}

TEST_CASE("an expanded grouped einsum plans like its grouped string (what a traced grouped op relies on)") {
  struct GroupedCase {
    const char* text;
    std::vector<std::vector<int64_t>> shapes;
  };
  const std::vector<GroupedCase> cases = {
      {"WCa,Caib,bWd->WCd", {{2, 3, 4, 5, 6}, {4, 5, 6, 7, 8}, {8, 2, 3, 9}}},
      {"WCa,Caib,bWd->WCd", {{2, 3, 4, 5, 6, 7}, {5, 6, 7, 3, 8}, {8, 2, 3, 4, 9}}},
      {"Ab,bC,CD,De->Ae", {{2, 3, 4}, {4, 5, 6}, {5, 6, 7, 8}, {7, 8, 2}}},
      {"Ab,bC,CD,De->Ae", {{4}, {4, 5}, {5, 7}, {7, 3}}},
  };
  for (const auto& gc : cases)
    for (const char* spec_text : {"auto", "greedy", "optimal", "auto(quality=fast)"}) {
      CAPTURE(gc.text);
      CAPTURE(spec_text);
      std::vector<Shape> shapes(gc.shapes.begin(), gc.shapes.end());
      const BoundEinsum bound = bind_grouped(gc.text, shapes);
      std::vector<int64_t> ranks;
      for (const auto& s : shapes) ranks.push_back(static_cast<int64_t>(s.size()));
      const auto expansion = expand_grouped(gc.text, ranks);
      const PlanSpec spec = PlanSpec::parse(spec_text);
      const ContractionTree on_grouped = resolve_grouped(spec, expansion->notation->symbolic,
                                                         expansion->symbol_labels, bound.subs, bound.extents);
      const ContractionTree on_expanded = resolve(spec, bound.subs, bound.extents);
      CHECK(on_grouped == on_expanded);
    }
}
