// The tangent walk (EinsumVjpPlan::execute_tangent, TreeAd.h: the cotangents of an einsum's planned tree and their
// tangents from one walk, the HVP's one instruction) and the work it reports (tangent_work). On 200 seeded random
// einsums with tangents for a random subset of the operands, and sometimes for the cotangent, each result equals an
// independent oracle: the walk is multilinear in the operands and the cotangent, so its tangent is the sum over the
// arguments that have one of execute() with that argument replaced by its tangent; zeros where no tangent reaches a
// slot; the same bits on one and two threads and on a second call (which reuses the slot's arena and views). On
// closed grid networks the work equals forward over reverse counted from the planner's own per-step multiply-adds
// (ContractionTree.h): F - F_root for the values, twice that for their tangents, 2F for the cotangents and
// 4(F - F_root) + 2 F_root for their tangents (the root's cotangent, a constant, has none).
#include "TreeAdTestUtil.h"
#include "RandomEinsum.h"

#include "extensions/einsum/exec/TreeAd.h"
#include "runtime/Context.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <tuple>

using namespace einstage;
using namespace einstage::ad_test;

namespace {

// A rows x cols grid of tensors contracted to a scalar: each bond (label) joins two neighbours, extent `bond`.
std::pair<einsum::Subscripts, std::vector<Shape>> closed_grid(int rows, int cols, int64_t bond) {
  std::vector<std::vector<Label>> inputs(static_cast<size_t>(rows * cols));
  Label next = 'a';
  auto link = [&](int x, int y) {
    inputs[static_cast<size_t>(x)].push_back(next);
    inputs[static_cast<size_t>(y)].push_back(next);
    ++next;
  };
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      if (c + 1 < cols) link(r * cols + c, r * cols + c + 1);
      if (r + 1 < rows) link(r * cols + c, (r + 1) * cols + c);
    }
  std::vector<Shape> shapes;
  for (const auto& term : inputs) shapes.push_back(Shape(term.size(), bond));
  return {einsum::make_subscripts(inputs, {}), shapes};
}

}  // namespace

TEST_CASE("einsum tangent walk: on 200 seeded random einsums its results equal the sum over the arguments with a "
          "tangent of the walk with that one replaced, with the same bits on one and two threads") {
  static ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  int walked = 0, without_tangents = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng{seed * 104729};
    const EinsumCase c = random_case(rng, seed % 3 == 0);
    const size_t n = c.shapes.size();
    if (n < 2) continue;
    INFO(describe(c, seed));
    std::vector<einsum::TensorMeta> metas;
    std::vector<Tensor> x, t(n);
    std::vector<bool> flags(n, false);
    for (size_t k = 0; k < n; ++k) {
      metas.push_back({c.dtypes[k], c.shapes[k]});
      x.push_back(random_tensor(c.dtypes[k], c.shapes[k], rng));
      if (rng.chance(0.5)) {
        t[k] = random_tensor(c.dtypes[k], c.shapes[k], rng);
        flags[k] = true;
      }
    }
    std::vector<int> slots;
    for (size_t k = 0; k < n; ++k)
      if (rng.chance(0.6)) slots.push_back(static_cast<int>(k));
    if (slots.empty()) slots.push_back(static_cast<int>(rng.below(static_cast<int>(n))));
    einsum::EinsumOptions options;
    options.plan = c.plan;
    options.allow_broadcast = c.broadcast;
    const einsum::EinsumPlan forward = einsum::EinsumPlan::prepare(c.subs, metas, options);
    const einsum::TensorMeta ct_meta{forward.dtype(), forward.output_shape()};
    const Tensor ct = random_tensor(ct_meta.dtype, ct_meta.shape, rng);
    const Tensor dct = rng.chance(0.5) ? random_tensor(ct_meta.dtype, ct_meta.shape, rng) : Tensor();
    const auto vjp = einsum::EinsumVjpPlan::prepare(c.subs, metas, ct_meta, slots, options);
    INFO(vjp.to_string());
    const std::vector<Tensor> got = vjp.execute_tangent(x, ct, t, dct, one, true);
    REQUIRE(got.size() == 2 * slots.size());
    // The oracle: the cotangent's tangent plus, per operand j with a tangent, execute() with x_j := t_j (operand j's
    // own cotangent does not depend on x_j).
    std::vector<Tensor> want = dct.defined() ? vjp.execute(x, dct, one) : std::vector<Tensor>(slots.size());
    for (size_t j = 0; j < n; ++j) {
      if (!flags[j]) continue;
      std::vector<Tensor> y = x;
      y[j] = t[j];
      const std::vector<Tensor> terms = vjp.execute(y, ct, one);
      for (size_t i = 0; i < slots.size(); ++i)
        if (static_cast<size_t>(slots[i]) != j)
          want[i] = want[i].defined() ? axpy(want[i], 1.0, terms[i]) : terms[i];
    }
    const std::vector<Tensor> cts = vjp.execute(x, ct, one);
    const bool single = std::any_of(c.dtypes.begin(), c.dtypes.end(),
                                    [](DType d) { return d == DType::f32 || d == DType::c64; });
    for (size_t i = 0; i < slots.size(); ++i) {
      CAPTURE(slots[i]);
      CHECK_MESSAGE(same_bits(got[i], cts[i]), "the cotangent is not execute()'s");
      const Tensor& dgot = got[slots.size() + i];
      CHECK(dgot.dtype() == c.dtypes[static_cast<size_t>(slots[i])]);
      CHECK(dgot.shape() == c.shapes[static_cast<size_t>(slots[i])]);
      if (!want[i].defined()) {  // no tangent reaches this slot: zeros
        CHECK(same_bits(dgot, Tensor::zeros(dgot.dtype(), dgot.shape())));
        continue;
      }
      std::string why;
      CHECK_MESSAGE(close(dgot, want[i], single ? 1e-3 : 1e-11, &why), "tangent of the cotangent: " << why);
    }
    for (const auto& [context, what] : {std::pair{&two, "two threads"}, std::pair{&one, "a second call"}}) {
      const std::vector<Tensor> again = vjp.execute_tangent(x, ct, t, dct, *context, true);
      REQUIRE(again.size() == got.size());
      for (size_t o = 0; o < got.size(); ++o) CHECK_MESSAGE(same_bits(again[o], got[o]), what << ", result " << o);
    }
    // Without a nonzero tangent nothing is computed for the tangents.
    const auto work = vjp.tangent_work(flags, dct.defined(), true);
    const bool any = dct.defined() || std::find(flags.begin(), flags.end(), true) != flags.end();
    if (!any) {
      CHECK(work.tangents.calls == 0);
      CHECK(work.cotangent_tangents.calls == 0);
      ++without_tangents;
    }
    CHECK(work.cotangents.calls >= static_cast<int64_t>(slots.size()));
    ++walked;
  }
  CHECK(walked > 150);
  CHECK(without_tangents > 5);
}

TEST_CASE("einsum tangent walk: on closed grids its work is forward over reverse on the planner's per-step "
          "multiply-adds, and no call computes a tangent that is zero") {
  for (const auto& [rows, cols, bond] : {std::tuple{2, 2, 3}, std::tuple{2, 3, 2}, std::tuple{3, 3, 2},
                                         std::tuple{2, 4, 3}, std::tuple{3, 4, 2}}) {
    const auto [subs, shapes] = closed_grid(rows, cols, bond);
    CAPTURE(einsum::to_string(subs));
    const int n = rows * cols;
    std::vector<einsum::TensorMeta> metas;
    std::vector<int> slots;
    for (const Shape& s : shapes) {
      metas.push_back({DType::f64, s});
      slots.push_back(static_cast<int>(slots.size()));
    }
    const einsum::EinsumPlan forward = einsum::EinsumPlan::prepare(subs, metas);
    const einsum::TreeCost cost = einsum::evaluate(subs, forward.extents(), forward.tree());
    const double f = cost.flops, root = cost.steps.back().flops;
    CHECK(einsum::contraction_work(forward).multiply_adds == f);
    CHECK(einsum::contraction_work(forward).steps == n - 1);
    const auto vjp = einsum::EinsumVjpPlan::prepare(subs, metas, {DType::f64, {}}, slots, {});
    INFO(vjp.to_string());
    const std::vector<bool> all(static_cast<size_t>(n), true), none(static_cast<size_t>(n), false);
    // Every operand with a tangent, the cotangent without (the HVP of a scalar loss).
    const auto hvp = vjp.tangent_work(all, false, true);
    CHECK(hvp.values.multiply_adds == f - root);
    CHECK(hvp.values.calls == n - 2);
    CHECK(hvp.tangents.multiply_adds == 2 * (f - root));
    CHECK(hvp.cotangents.multiply_adds == 2 * f);
    CHECK(hvp.cotangents.calls == 2 * n - 2);
    CHECK(hvp.cotangent_tangents.multiply_adds == 4 * (f - root) + 2 * root);
    CHECK(hvp.total().multiply_adds == 9 * f - 5 * root);
    // Only the cotangent has a tangent: no forward tangent, one term per reverse step.
    const auto ct_only = vjp.tangent_work(none, true, true);
    CHECK(ct_only.tangents.calls == 0);
    CHECK(ct_only.cotangent_tangents.calls == 2 * n - 2);
    CHECK(ct_only.cotangent_tangents.multiply_adds == 2 * f);
    // No tangent at all: the cotangents only.
    const auto plain = vjp.tangent_work(none, false, true);
    CHECK(plain.tangents.calls + plain.cotangent_tangents.calls == 0);
    CHECK(plain.cotangents.multiply_adds == 2 * f);
    // Only operand 0 with a tangent: a forward tangent, of one term, for each step on its path below the root.
    std::vector<bool> first = none;
    first[0] = true;
    const auto path = vjp.tangent_work(first, false, true);
    int64_t below_root = 0;
    double path_flops = 0;
    const std::vector<einsum::Step>& steps = forward.tree().steps();
    for (int node = 0;;) {
      size_t t = 0;
      while (steps[t].first != node && steps[t].second != node) ++t;
      if (t + 1 == steps.size()) break;
      ++below_root;
      path_flops += cost.steps[t].flops;
      node = n + static_cast<int>(t);
    }
    CHECK(path.tangents.calls == below_root);
    CHECK(path.tangents.multiply_adds == path_flops);
  }
}
