// einsum's AD rules: 320 seeded random einsums (repeated input labels, repeated output labels, labels only in one
// operand, hyperedges, permitted length-1 broadcasting, 1-5 operands, f64 / c128 / f32 / mixed real and complex,
// auto, explicit path and left-to-right plan specs) through jvp vs central differences, the dot-product test and
// transpose adjointness; the reference broadcast case (docs/behaviour.md §5.6) for 2 and 3 operands; the plan-spec
// rewrite of reverse einsums.
#include "AdTestUtil.h"
#include "RandomEinsum.h"
#include "support/ErrorOf.h"

#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace einstage;
using namespace einstage::ad_test;
using einstage::einsum::EinsumPayload;
using einstage::einsum::Label;
using einstage::einsum::PlanSpec;
using einstage::einsum::Subscripts;

TEST_CASE("320 random einsums: jvp vs finite differences, dot-product test, transpose adjointness (also split)") {
  int with_broadcast = 0, with_diagonal = 0, with_repeated_output = 0, complex_cases = 0, hyperedges = 0,
      one_sided = 0, explicit_plans = 0, split_cases = 0;
  for (uint64_t seed = 1; seed <= 320; ++seed) {
    Rng rng{seed * 7919};
    EinsumCase c = random_case(rng);
    bool f32 = std::find(c.dtypes.begin(), c.dtypes.end(), DType::f32) != c.dtypes.end();
    std::string context = describe(c, seed);
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < c.shapes.size(); ++k) inputs.push_back(random_tensor(c.dtypes[k], c.shapes[k], rng));
    std::vector<int> wrt;
    for (size_t k = 0; k < c.shapes.size(); ++k)
      if (k == 0 || rng.chance(0.8)) wrt.push_back(static_cast<int>(k));
    Program p = einsum_program(c);
    check_derivatives(p, wrt, inputs, rng, tolerance_for(f32 ? DType::f32 : DType::f64), context);
    if (c.shapes.size() >= 3) {  // split along the tree: the same values, and derivatives through pairwise einsums
      Program sp = einsum::split_einsums(p, registry());
      INFO(context << "\nsplit program:\n" << print_program(sp));
      CHECK(static_cast<int>(sp.instructions.size()) == static_cast<int>(c.shapes.size()) - 1);
      std::string why;
      CHECK_MESSAGE(close(run(sp, inputs)[0], run(p, inputs)[0], f32 ? 1e-4 : 1e-12, &why), why);
      check_derivatives(sp, wrt, inputs, rng, tolerance_for(f32 ? DType::f32 : DType::f64), context + " (split)");
      ++split_cases;
    }
    // Tally what the generator produced, so the coverage claims above stay true.
    std::map<Label, int64_t> full;
    for (size_t k = 0; k < c.shapes.size(); ++k)
      for (size_t a = 0; a < c.shapes[k].size(); ++a) full[c.subs.inputs[k][a]] = std::max(full[c.subs.inputs[k][a]], c.shapes[k][a]);
    bool bc = false, diag = false;
    for (size_t k = 0; k < c.shapes.size(); ++k)
      for (size_t a = 0; a < c.shapes[k].size(); ++a) {
        bc |= c.shapes[k][a] == 1 && full[c.subs.inputs[k][a]] > 1;
        diag |= std::count(c.subs.inputs[k].begin(), c.subs.inputs[k].end(), c.subs.inputs[k][a]) > 1;
      }
    with_broadcast += bc;
    with_diagonal += diag;
    std::vector<Label> out = c.subs.output;
    std::sort(out.begin(), out.end());
    with_repeated_output += std::adjacent_find(out.begin(), out.end()) != out.end();
    complex_cases += std::find(c.dtypes.begin(), c.dtypes.end(), DType::c128) != c.dtypes.end();
    std::map<Label, int> carriers;
    for (const auto& term : c.subs.inputs)
      for (Label l : std::set<Label>(term.begin(), term.end())) ++carriers[l];
    bool hyper = false, only_one = false;
    for (auto [l, count] : carriers) {
      hyper |= count >= 3;
      only_one |= count == 1 && std::find(c.subs.output.begin(), c.subs.output.end(), l) == c.subs.output.end();
    }
    hyperedges += hyper;
    one_sided += only_one;
    explicit_plans += c.plan.kind == einsum::PlanKind::path;
  }
  MESSAGE("broadcasting " << with_broadcast << ", diagonals " << with_diagonal << ", repeated output labels "
                          << with_repeated_output << ", complex " << complex_cases << ", hyperedges " << hyperedges
                          << ", labels summed within one operand " << one_sided << ", explicit paths "
                          << explicit_plans << " of 320");
  CHECK(hyperedges >= 30);
  CHECK(one_sided >= 30);
  CHECK(explicit_plans >= 20);
  CHECK(split_cases >= 150);
  CHECK(with_broadcast >= 30);
  CHECK(with_diagonal >= 30);
  CHECK(with_repeated_output >= 10);
  CHECK(complex_cases >= 60);
}

namespace {

// sum(einsum(subscripts, operands)) with broadcasting allowed, traced as a user would.
Program summed_einsum(const std::string& subscripts, const std::vector<Shape>& shapes) {
  TraceContext ctx("loss", registry());
  std::vector<TracedTensor> params;
  for (size_t k = 0; k < shapes.size(); ++k)
    params.push_back(ctx.parameter(fmt::format("a{}", k), DType::f64, std::vector<Dim>(shapes[k].begin(), shapes[k].end())));
  einsum::TraceEinsumOptions options;
  options.allow_broadcast = true;
  TracedTensor y = einsum::einsum(ctx, subscripts, std::span<const TracedTensor>(params), options);
  return ctx.finish({y.rank() == 0 ? y : sum(y)});
}

// The finite-difference gradient of a scalar program with respect to parameter k, element by element.
Tensor fd_gradient(const Program& p, const std::vector<Tensor>& inputs, size_t k) {
  Tensor g = Tensor::zeros(DType::f64, inputs[k].shape());
  const double h = 1e-6;
  std::vector<double> x = inputs[k].to_col_major<double>();
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<Tensor> plus = inputs, minus = inputs;
    std::vector<double> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    plus[k] = Tensor::from_col_major<double>(inputs[k].shape(), std::span<const double>(xp));
    minus[k] = Tensor::from_col_major<double>(inputs[k].shape(), std::span<const double>(xm));
    out[i] = (run(p, plus)[0].at<double>({}) - run(p, minus)[0].at<double>({})) / (2 * h);
  }
  return Tensor::from_col_major<double>(inputs[k].shape(), std::span<const double>(out));
}

}  // namespace

TEST_CASE("the reference broadcast case: a[2,1], b[3,2], ij,jk->ik: the gradient of sum has a's shape [2,1]") {
  Program loss = summed_einsum("ij,jk->ik", {{2, 1}, {3, 2}});
  Tensor a = Tensor::from_row_major<double>({2, 1}, {0.5, -1.5});
  Tensor b = Tensor::from_row_major<double>({3, 2}, {1, 2, 3, 4, 5, 6});
  Program g = ad::grad(loss, std::vector<int>{0, 1}, registry());
  std::vector<Tensor> grads = run(g, {a, b});
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].shape() == Shape{2, 1});  // the reference returns a wrong [2,3]
  // d/da[i,0] of sum_ijk a[i,0] b[j,k] is the sum of b's entries, 1 + ... + 6 = 21 (docs/behaviour.md §5.6's value).
  CHECK(grads[0].to_col_major<double>() == std::vector<double>{21, 21});
  std::string why;
  CHECK_MESSAGE(close(grads[0], fd_gradient(loss, {a, b}, 0), 1e-8, &why), why);
  CHECK(grads[1].shape() == Shape{3, 2});
  CHECK_MESSAGE(close(grads[1], fd_gradient(loss, {a, b}, 1), 1e-8, &why), why);
  // d/db[j,k] = sum_i a[i,0] = -1 everywhere.
  for (double v : grads[1].to_col_major<double>()) CHECK(v == -1);
}

TEST_CASE("broadcast gradients keep each operand's shape for N operands") {
  struct Row {
    std::string subscripts;
    std::vector<Shape> shapes;
  };
  const std::vector<Row> rows = {
      {"ij,jk,kl->il", {{2, 1}, {3, 2}, {1, 4}}},     // j broadcast in a, k broadcast in c
      {"ij,jk,kl->il", {{2, 3}, {1, 1}, {2, 4}}},     // b broadcast on both labels
      {"ijk,jk,k->ij", {{2, 3, 1}, {1, 4}, {4}}},     // hyperedge k, broadcast in the first operand
      {"ii,ij,j->j", {{1, 1}, {3, 2}, {1}}},          // a repeated label of extent 1 broadcasting
      {"ab,bc,cd,de->ae", {{2, 1}, {3, 1}, {1, 2}, {2, 3}}},
      {"i,i,i->", {{1}, {3}, {1}}},
      {"...ij,...jk->...ik", {{1, 2, 3}, {4, 3, 2}}},  // ellipsis axes broadcast without the permission too
      {"(ij,jk),kl->il", {{2, 1}, {3, 2}, {1, 4}}},    // a nested string: explicit tree, rewritten in reverse
  };
  Rng rng{99};
  for (const Row& r : rows) {
    CAPTURE(r.subscripts);
    Program loss = summed_einsum(r.subscripts, r.shapes);
    std::vector<Tensor> inputs;
    std::vector<int> wrt;
    for (size_t k = 0; k < r.shapes.size(); ++k) {
      inputs.push_back(random_tensor(DType::f64, r.shapes[k], rng));
      wrt.push_back(static_cast<int>(k));
    }
    std::vector<Tensor> grads = run(ad::grad(loss, wrt, registry()), inputs);
    for (size_t k = 0; k < r.shapes.size(); ++k) {
      CAPTURE(k);
      CHECK(grads[k].shape() == r.shapes[k]);
      std::string why;
      CHECK_MESSAGE(close(grads[k], fd_gradient(loss, inputs, k), 1e-7, &why), why);
    }
  }
}

TEST_CASE("reverse plan specs: auto stays auto, explicit paths and trees are rewritten for the new operand order") {
  using einsum::reverse_plan_spec;
  CHECK(reverse_plan_spec(PlanSpec{}, 3, 1) == PlanSpec{});
  CHECK(reverse_plan_spec(PlanSpec::greedy_plan(), 4, 0) == PlanSpec::greedy_plan());
  // ((0,1),(2,3)) for operand 0: the off-path subtree (2,3) as before (reverse ids 2,3), then ct*(2,3), then *1.
  CHECK(reverse_plan_spec(PlanSpec::tree_plan({{0, 1}, {2, 3}, {4, 5}}), 4, 0).to_string() ==
        "tree[(2,3),(0,4),(5,1)]");
  // Same tree, operand 3: leaves 0,1,2 become 1,2,3; (0,1) first, then ct*(0,1), then *2.
  CHECK(reverse_plan_spec(PlanSpec::tree_plan({{0, 1}, {2, 3}, {4, 5}}), 4, 3).to_string() ==
        "tree[(1,2),(0,4),(5,3)]");
  // A positional path is read as the tree it denotes.
  CHECK(reverse_plan_spec(PlanSpec::path_plan({{0, 1}, {0, 1}}), 3, 2).to_string() == "tree[(1,2),(0,3)]");
  CHECK(reverse_plan_spec(PlanSpec::tree_plan({{0, 1}}), 2, 1).to_string() == "tree[(0,1)]");

  // In a vjp program the reverse einsums carry the rewritten spec.
  Builder b("f", registry());
  Value x = b.parameter("x", {DType::f64, {2, 3}});
  Value y = b.parameter("y", {DType::f64, {3, 4}});
  Value z = b.parameter("z", {DType::f64, {4, 5}});
  Value out = b.extension(std::make_shared<EinsumPayload>(einsum::parse_subscripts("ij,jk,kl->il"),
                                                          PlanSpec::tree_plan({{1, 2}, {0, 3}}), false),
                          {x, y, z});
  Program v = ad::vjp(b.finish({out}), std::vector<int>{0}, registry());
  std::string text = print_program(v);
  INFO(text);
  CHECK(text.find("plan = tree[(1,2),(0,3)], subscripts = \"il,jk,kl->ij\"") != std::string::npos);
}

TEST_CASE("a pass that needs extension rules and is given no registry says so, not that the family is unknown") {
  // Without the registry argument the einsum op's rules cannot be found; the message must not send the user to
  // register a module that is registered.
  const Program p = summed_einsum("ij,jk->ik", {{2, 3}, {3, 4}});
  const std::string expected =
      "%0 in @loss: extension op 'einstage.einsum.v1' is differentiated by the rules its module registers, and no "
      "ExtensionRegistry was given; pass the registry the program was traced with (e.g. ad::grad(p, wrt, &registry), "
      "or runtime.registry() for a Runtime's modules)";
  CHECK(einstage::test::error_of([&] { (void)ad::value_and_grad(p, {0}); }) == expected);
  CHECK(einstage::test::error_of([&] { (void)ad::jvp(p, {0, 1}); }) == expected);
  // With a registry that lacks the family: the unknown-family message.
  const ExtensionRegistry empty;
  CHECK(einstage::test::error_of([&] { (void)ad::grad(p, {0}, &empty); }).rfind(
            "unknown extension family 'einstage.einsum.v1'; register its module before use: link the CMake target "
            "einstage::einstage_einsum and call einsum::register_einsum_semantics(registry)", 0) == 0);
  CHECK_NOTHROW((void)ad::value_and_grad(p, {0}, registry()));
}
