// Helpers shared by the tests of the einsum tree walk (test_einsum_tree_ad.cpp) and of its merged walks
// (test_einsum_merge_walks.cpp): the per-operand and unmerged registries that serve as oracles, runtimes on one and
// two threads, bitwise comparison, and what a printed program says about the walks it makes.
#pragma once

#include "AdTestUtil.h"

#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "compiler/Lower.h"

#include <doctest/doctest.h>

#include <cstring>

namespace einstage::ad_test {

// A registry whose einsum rules are the per-operand path: N reverse einsums sharing nothing.
inline const ExtensionRegistry* per_operand_registry() {
  static const ExtensionRegistry r = [] {
    ExtensionRegistry reg;
    einsum::register_einsum_semantics(reg);
    einsum::register_einsum_ad_rules(reg, einsum::EinsumAdPath::per_operand);
    return reg;
  }();
  return &r;
}

// The registry without the einsum_ad family's rewrite_derivative: the programs as AD builds them, before
// einsum::merge_walks, which every public AD transformation applies by default (the unmerged oracle of the merges).
inline const ExtensionRegistry* unmerged_registry() {
  static const ExtensionRegistry r = [] {
    ExtensionRegistry reg = *registry();
    reg.find_mutable(einsum::kEinsumAdFamily)->rewrite_derivative = nullptr;
    return reg;
  }();
  return &r;
}

inline const Runtime& runtime_with(int threads) {
  static const Runtime one = [] {
    Runtime r(RuntimeOptions{1});
    r.add_module(einsum::module_descriptor());
    return r;
  }();
  static const Runtime two = [] {
    Runtime r(RuntimeOptions{2});
    r.add_module(einsum::module_descriptor());
    return r;
  }();
  return threads == 1 ? one : two;
}

inline std::vector<Tensor> run_on(int threads, const Program& p, const std::vector<Tensor>& inputs) {
  return runtime_with(threads).prepare(p).run(std::span<const Tensor>(inputs));
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Equal numbers, where a zero's sign may differ: the value of a complex einsum from the walk is conj(E(conj x)),
// which can turn a +0 imaginary part into -0 (off-diagonal zeros of a repeated output label, say).
inline bool same_values(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (!is_complex(a.dtype())) return same_bits(a, b);
  Tensor x = a.contiguous(), y = b.contiguous();
  const size_t parts = 2 * static_cast<size_t>(x.numel());
  auto equal = [&](auto zero) {
    using T = decltype(zero);
    const T* p = static_cast<const T*>(x.raw_data());
    return std::equal(p, p + parts, static_cast<const T*>(y.raw_data()));
  };
  return a.dtype() == DType::c64 ? equal(0.0f) : equal(0.0);
}

inline bool uses_tree_walk(const Program& p) { return print_program(p).find("mode = vjp,") != std::string::npos; }
inline bool merged(const Program& p) { return print_program(p).find("mode = value_vjp,") != std::string::npos; }

// Parameters a0, a1, ... of `dtype` and `shapes` traced on `ctx`, random values for them drawn from `rng` in order,
// and the list of all their indices (to differentiate with respect to every operand).
struct TracedOperands {
  std::vector<TracedTensor> params;
  std::vector<Tensor> values;
  std::vector<int> wrt;
};

inline TracedOperands trace_operands(TraceContext& ctx, DType dtype, const std::vector<Shape>& shapes, Rng& rng) {
  TracedOperands t;
  for (size_t k = 0; k < shapes.size(); ++k) {
    t.params.push_back(ctx.parameter(fmt::format("a{}", k), dtype, std::vector<Dim>(shapes[k].begin(), shapes[k].end())));
    t.values.push_back(random_tensor(dtype, shapes[k], rng));
    t.wrt.push_back(static_cast<int>(k));
  }
  return t;
}

// Lowers `program` to standard ops (no extension op may be left) and checks that the lowered program gives `want`
// at `inputs` to 1e-12. Returns the lowered program's text, for further checks.
inline std::string check_lowered(const Program& program, const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& want) {
  const Program lowered = lower_to_standard_ops(program, {}, *registry());
  const std::string text = print_program(lowered);
  INFO(text);
  CHECK(text.find("einstage.") == std::string::npos);
  const std::vector<Tensor> got = run(lowered, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    std::string why;
    CHECK_MESSAGE(close(got[o], want[o], 1e-12, &why), "lowered output " << o << ": " << why);
  }
  return text;
}

}  // namespace einstage::ad_test
