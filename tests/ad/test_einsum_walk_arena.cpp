// The vjp walk's arena (EinsumVjpPlan::arena_tensors, TreeAd.h): on seeded random einsums (the AD suites' random
// cases and larger random networks of up to 14 operands) no two tensors the walk holds at one of its steps share a
// byte, by brute force over the steps; and the walk's results, which live in that arena until copied out, are the
// same bits with every value kept or every value recomputed (two different layouts), on one and two threads, and
// match the cotangents of an independent oracle (each operand's cotangent as one einsum of the others) on the
// networks, where they are disjoint column-major tensors of one block.
#include "TreeAdTestUtil.h"
#include "RandomEinsum.h"

#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/exec/TreeAd.h"
#include "runtime/Context.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace einstage;
using namespace einstage::ad_test;

namespace {

// Checks the arena of `plan` by brute force: at every walk step, the tensors written at or before it and read at or
// after it have disjoint byte ranges inside the arena.
void check_arena(const einsum::EinsumVjpPlan& plan) {
  const auto& tensors = plan.arena_tensors();
  int steps = 0;
  for (const auto& t : tensors) {
    CHECK(t.offset >= 0);
    CHECK(t.offset + t.bytes <= plan.arena_bytes());
    for (int r : t.read_at) {
      CHECK_MESSAGE(r > t.written, "node " << t.node << " is read at step " << r << " before it is written at " << t.written);
      steps = std::max(steps, r);
    }
    steps = std::max(steps, t.written);
  }
  auto last_read = [](const einsum::EinsumVjpPlan::ArenaTensor& t) {
    int last = t.written;
    for (int r : t.read_at) last = std::max(last, r);
    return last;
  };
  for (int s = 0; s <= steps; ++s) {
    std::vector<size_t> live;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].written <= s && s <= last_read(tensors[i]) && tensors[i].bytes > 0) live.push_back(i);
    for (size_t x = 0; x < live.size(); ++x)
      for (size_t y = x + 1; y < live.size(); ++y) {
        const auto& a = tensors[live[x]];
        const auto& b = tensors[live[y]];
        CHECK_MESSAGE((a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset),
                      std::string(a.cotangent ? "cotangent" : "value") << " of node " << a.node << " and "
                      << std::string(b.cotangent ? "cotangent" : "value") << " of node " << b.node
                      << " overlap at step " << s);
      }
  }
}

// A random network: `n` operands over labels of extent 2 or 3, each label in one to three operands (so some are
// summed inside one operand and some are hyperedges), ranks up to 4, a random subset of the labels as the output.
EinsumCase random_network(Rng& rng, int n) {
  EinsumCase c;
  std::vector<std::vector<Label>> inputs(static_cast<size_t>(n));
  std::vector<int64_t> extent;
  const int labels = n + static_cast<int>(rng.below(n + 1));
  std::vector<Label> output;
  for (int l = 0; l < labels; ++l) {
    extent.push_back(2 + rng.below(2));
    const int in = 1 + static_cast<int>(rng.below(3));
    for (int k = 0; k < in; ++k) {
      auto& term = inputs[static_cast<size_t>(rng.below(n))];
      if (term.size() < 4 && std::find(term.begin(), term.end(), 'a' + l) == term.end()) term.push_back('a' + l);
    }
    if (rng.chance(0.15)) output.push_back('a' + l);
  }
  std::vector<Label> present;
  for (const auto& term : inputs) present.insert(present.end(), term.begin(), term.end());
  std::erase_if(output, [&](Label l) { return std::find(present.begin(), present.end(), l) == present.end(); });
  c.subs = einsum::make_subscripts(inputs, output);
  for (const auto& term : inputs) {
    Shape s;
    for (Label l : term) s.push_back(extent[static_cast<size_t>(l - 'a')]);
    c.shapes.push_back(s);
    c.dtypes.push_back(DType::f64);
  }
  return c;
}

// Prepares the walk at keep limits "all" and "nothing", checks both arenas, and runs both on one and two threads:
// the same bits everywhere. Returns the results.
std::vector<Tensor> check_walk(const EinsumCase& c, const std::vector<int>& slots, bool with_value,
                               const std::vector<Tensor>& ops, const Tensor& ct) {
  std::vector<einsum::TensorMeta> metas;
  for (const Tensor& t : ops) metas.push_back(einsum::TensorMeta::of(t));
  einsum::EinsumOptions options;
  options.plan = c.plan;
  options.allow_broadcast = c.broadcast;
  std::vector<Tensor> first;
  for (int64_t limit : {int64_t{-1}, int64_t{0}}) {
    const auto plan = einsum::EinsumVjpPlan::prepare(c.subs, metas, einsum::TensorMeta::of(ct), slots, options, limit,
                                                     with_value);
    INFO("keep limit " << limit << "\n" << plan.to_string());
    check_arena(plan);
    for (int threads : {1, 2}) {
      ExecutionContext context(ConfigOptions{.threads = threads});
      for (int repeat = 0; repeat < 2; ++repeat) {  // the second call reuses the slot's arena views
        std::vector<Tensor> got = plan.execute(ops, ct, context);
        if (first.empty()) {
          first = got;
          continue;
        }
        REQUIRE(got.size() == first.size());
        for (size_t i = 0; i < got.size(); ++i)
          CHECK_MESSAGE(same_values(got[i], first[i]), "result " << i << ", " << threads << " threads, call " << repeat);
      }
    }
  }
  return first;
}

std::vector<int> random_slots(Rng& rng, int n) {
  std::vector<int> slots;
  for (int k = 0; k < n; ++k)
    if (rng.chance(0.6)) slots.push_back(k);
  if (slots.empty()) slots.push_back(static_cast<int>(rng.below(n)));
  return slots;
}

}  // namespace

// The cotangent of einsum `c` at `ops`: random, in the einsum's output shape and promoted dtype.
Tensor random_cotangent(const EinsumCase& c, const std::vector<Tensor>& ops, Rng& rng) {
  std::vector<einsum::TensorMeta> metas;
  for (const Tensor& t : ops) metas.push_back(einsum::TensorMeta::of(t));
  einsum::EinsumOptions options;
  options.allow_broadcast = c.broadcast;
  const einsum::EinsumPlan plan = einsum::EinsumPlan::prepare(c.subs, metas, options);
  return random_tensor(plan.dtype(), plan.output_shape(), rng);
}

TEST_CASE("einsum vjp walk: the arena never overlaps live tensors, on 200 seeded random einsums") {
  int walked = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng{seed};
    const EinsumCase c = random_case(rng, seed % 3 == 0);
    const int n = static_cast<int>(c.shapes.size());
    if (n < 2) continue;
    INFO(describe(c, seed));
    std::vector<Tensor> ops;
    for (int k = 0; k < n; ++k)
      ops.push_back(random_tensor(c.dtypes[static_cast<size_t>(k)], c.shapes[static_cast<size_t>(k)], rng));
    const Tensor ct = random_cotangent(c, ops, rng);
    check_walk(c, random_slots(rng, n), rng.chance(0.5), ops, ct);
    ++walked;
  }
  CHECK(walked > 150);
}

TEST_CASE("einsum vjp walk: the arena on 60 seeded random networks of 6 to 14 operands, against one einsum per operand") {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Rng rng{seed};
    const int n = 6 + static_cast<int>(rng.below(9));
    const EinsumCase c = random_network(rng, n);
    INFO(describe(c, seed));
    std::vector<Tensor> ops;
    for (int k = 0; k < n; ++k) ops.push_back(random_tensor(DType::f64, c.shapes[static_cast<size_t>(k)], rng));
    const Tensor ct = random_cotangent(c, ops, rng);
    const std::vector<int> slots = random_slots(rng, n);
    const bool with_value = rng.chance(0.5);
    const std::vector<Tensor> got = check_walk(c, slots, with_value, ops, ct);
    REQUIRE(got.size() == slots.size() + (with_value ? 1 : 0));
    // The slots' cotangents are disjoint column-major tensors of one block (one allocation per call).
    const size_t first = with_value ? 1 : 0;
    for (size_t i = first; i < got.size(); ++i) {
      CHECK(got[i].is_col_major());
      CHECK(got[i].shares_storage_with(got[first]));
      for (size_t j = first; j < i; ++j) CHECK_FALSE(got[i].overlaps(got[j]));
    }
    if (with_value) {
      std::string why;
      CHECK_MESSAGE(close(got[0], einsum::einsum(c.subs, ops), 1e-12, &why), "value: " << why);
    }
    // The oracle: operand k's cotangent is the einsum of the other operands and the output cotangent with k's
    // labels as the output, with a ones vector for each label only k has (no label repeats inside an operand here,
    // so no diagonal).
    for (size_t i = 0; i < slots.size(); ++i) {
      const int k = slots[i];
      std::vector<std::vector<Label>> inputs;
      std::vector<Tensor> others;
      for (int j = 0; j < n; ++j)
        if (j != k) {
          inputs.push_back(c.subs.inputs[static_cast<size_t>(j)]);
          others.push_back(ops[static_cast<size_t>(j)]);
        }
      inputs.push_back(c.subs.output);
      others.push_back(ct);
      // A label of k in no other term is summed inside k: its cotangent is constant along it (a ones vector).
      const std::vector<Label>& own = c.subs.inputs[static_cast<size_t>(k)];
      for (size_t a = 0; a < own.size(); ++a) {
        const bool elsewhere = std::any_of(inputs.begin(), inputs.end(), [&](const std::vector<Label>& term) {
          return std::find(term.begin(), term.end(), own[a]) != term.end();
        });
        if (elsewhere) continue;
        inputs.push_back({own[a]});
        others.push_back(tensor_of(DType::f64, {c.shapes[static_cast<size_t>(k)][a]},
                                   std::vector<c128>(static_cast<size_t>(c.shapes[static_cast<size_t>(k)][a]), 1.0)));
      }
      const Tensor want = einsum::einsum(einsum::make_subscripts(inputs, c.subs.inputs[static_cast<size_t>(k)]), others);
      std::string why;
      CHECK_MESSAGE(close(got[i + (with_value ? 1 : 0)], want, 1e-12, &why), "operand " << k << ": " << why);
    }
  }
}
