// Seeded random einsums for the AD suites: 1-5 operands, repeated input labels (diagonals), repeated output labels,
// labels only in one operand, hyperedges, permitted length-1 broadcasting, optionally `...` axes (which broadcast
// without the permission), f64 / c128 / f32 / mixed real and complex, auto / explicit path / left-to-right plan
// specs; and the program computing one. Test-only; depends on AdTestUtil.h and the einsum notation.
#pragma once

#include "AdTestUtil.h"

#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/notation/Notation.h"

#include <algorithm>
#include <map>

namespace einstage::ad_test {

using einstage::einsum::Label;

/// Gives each term `...` covering 0, 1 or 2 axes (fresh labels, the last k of them, right-aligned) and the output
/// the widest `...` first, as NumPy's implicit output would.
inline void add_ellipsis(einsum::Subscripts& s, Rng& rng) {
  const int count = 1 + static_cast<int>(rng.below(2));
  std::vector<Label> fresh;
  for (int i = 0; i < count; ++i) fresh.push_back(einsum::kFreshLabelTop - count + 1 + i);
  std::vector<int> covered;
  for (size_t t = 0; t < s.inputs.size(); ++t) covered.push_back(static_cast<int>(rng.below(count + 1)));
  const int widest = *std::max_element(covered.begin(), covered.end());
  if (widest == 0) return;
  s.ellipsis.assign(fresh.end() - widest, fresh.end());
  for (size_t t = 0; t < s.inputs.size(); ++t)
    s.inputs[t].insert(s.inputs[t].begin(), fresh.end() - covered[t], fresh.end());
  s.output.insert(s.output.begin(), s.ellipsis.begin(), s.ellipsis.end());
}

struct EinsumCase {
  einsum::Subscripts subs;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  bool broadcast = false;
  einsum::PlanSpec plan;
};

inline EinsumCase random_case(Rng& rng, bool ellipsis = false) {
  EinsumCase c;
  int n = rng.chance(0.05) ? 1 : 2 + rng.below(4);
  int num_labels = 1 + rng.below(6);
  std::vector<int64_t> extent(static_cast<size_t>(num_labels));
  for (int64_t& e : extent) e = 2 + rng.below(2);
  auto label_extent = [&](Label l) -> int64_t {
    return c.subs.is_ellipsis_label(l) ? 2 : extent[static_cast<size_t>(l - 'a')];
  };
  c.broadcast = rng.chance(0.35);
  std::vector<std::vector<Label>> inputs(static_cast<size_t>(n));
  for (auto& term : inputs) {
    int rank = rng.below(5);
    for (int a = 0; a < rank; ++a) {
      if (!term.empty() && rng.chance(0.15))
        term.push_back(term[static_cast<size_t>(rng.below(static_cast<int>(term.size())))]);  // a diagonal
      else
        term.push_back('a' + rng.below(num_labels));
    }
  }
  std::vector<Label> present;
  for (const auto& term : inputs)
    for (Label l : term)
      if (std::find(present.begin(), present.end(), l) == present.end()) present.push_back(l);
  std::vector<Label> output;
  for (Label l : present)
    if (rng.chance(0.5)) output.push_back(l);
  for (size_t i = output.size(); i > 1; --i) std::swap(output[i - 1], output[static_cast<size_t>(rng.below(int(i)))]);
  if (!output.empty() && rng.chance(0.12))  // a repeated output label: the output's diagonal is filled
    output.insert(output.begin() + rng.below(int(output.size()) + 1), output[static_cast<size_t>(rng.below(int(output.size())))]);
  c.subs = einsum::make_subscripts(inputs, output);
  if (ellipsis) add_ellipsis(c.subs, rng);
  for (const auto& term : c.subs.inputs) {
    std::map<Label, int64_t> local;  // a label repeated inside one operand keeps one extent there
    Shape s;
    for (Label l : term) {
      // ellipsis axes broadcast without the permission
      const bool may_broadcast = c.broadcast || c.subs.is_ellipsis_label(l);
      if (!local.count(l)) local[l] = may_broadcast && rng.chance(0.3) ? 1 : label_extent(l);
      s.push_back(local[l]);
    }
    c.shapes.push_back(s);
  }
  double d = rng.uniform();
  for (int k = 0; k < n; ++k) {
    if (d < 0.5) c.dtypes.push_back(DType::f64);
    else if (d < 0.78) c.dtypes.push_back(DType::c128);
    else if (d < 0.9) c.dtypes.push_back(DType::f32);
    else c.dtypes.push_back(rng.chance(0.5) ? DType::f64 : DType::c128);  // mixed real and complex
  }
  double p = rng.uniform();
  if (n >= 2 && p < 0.2) {
    std::vector<einsum::Step> path;
    for (int m = n; m > 1; --m) {
      int a = rng.below(m), b = rng.below(m - 1);
      if (b >= a) ++b;
      path.emplace_back(a, b);
    }
    c.plan = einsum::PlanSpec::path_plan(path);
  } else if (p < 0.3) {
    c.plan = einsum::PlanSpec::left_to_right_plan();
  }
  return c;
}

inline Program einsum_program(const EinsumCase& c) {
  Builder b("e", registry());
  std::vector<Value> params;
  for (size_t k = 0; k < c.shapes.size(); ++k) {
    TensorType t{c.dtypes[k], {}};
    for (int64_t e : c.shapes[k]) t.dims.push_back(Dim(e));
    params.push_back(b.parameter(fmt::format("a{}", k), t));
  }
  Value y = b.extension(std::make_shared<einsum::EinsumPayload>(c.subs, c.plan, c.broadcast), params);
  return b.finish({y});
}

/// "seed 7: "ab,bc->ac" shapes [2,3] [3,2] broadcast false plan auto dtypes f64,f64", printed on failure.
inline std::string describe(const EinsumCase& c, uint64_t seed) {
  std::string shapes, dtypes;
  for (size_t k = 0; k < c.shapes.size(); ++k) {
    // Appended piece by piece: `"," + std::string(...)` trips a false GCC 12 -Wrestrict in char_traits.
    if (k) {
      shapes += ' ';
      dtypes += ',';
    }
    shapes += shape_to_string(c.shapes[k]);
    dtypes += name(c.dtypes[k]);
  }
  return fmt::format("seed {}: \"{}\" shapes {} broadcast {} plan {} dtypes {}", seed, einsum::to_string(c.subs),
                     shapes, c.broadcast, c.plan.to_string(), dtypes);
}

}  // namespace einstage::ad_test
