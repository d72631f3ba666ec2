// Helpers for the runtime tests: random tensors from the shared seeded stream (support/Random.h), the shared
// error_of (support/ErrorOf.h), and a definitional einsum oracle (one loop over every label assignment) that the
// interpreter, executor and module results are checked against. Test-only; depends on ir/Tensor.h.
#pragma once

#include "ir/Tensor.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace einstage::runtime_test {

using test::error_of;
using test::SplitMix64;

/// f64 values in [-1, 1) (or i64 in [-2, 2]) in column-major order.
inline Tensor random_tensor(DType dtype, const Shape& shape, uint64_t seed) {
  SplitMix64 rng{seed};
  Tensor t = Tensor::empty(dtype, shape);
  int64_t n = t.numel();
  if (dtype == DType::f64) {
    double* d = t.data<double>();
    for (int64_t i = 0; i < n; ++i) d[i] = rng.symmetric();
  } else if (dtype == DType::i64) {
    int64_t* d = t.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) d[i] = rng.below(5) - 2;
  } else if (dtype == DType::c128) {
    c128* d = t.data<c128>();
    for (int64_t i = 0; i < n; ++i) d[i] = c128(rng.symmetric(), rng.symmetric());
  } else {
    FAIL("random_tensor: unsupported dtype in tests");
  }
  return t;
}

/// The definitional einsum: out[output labels] = sum over all other labels of prod_k operand_k[its labels].
/// `inputs` are one string of letters per operand; every letter's extent is read from the operands.
template <typename T>
Tensor naive_einsum(const std::vector<std::string>& inputs, const std::string& output, const std::vector<Tensor>& ops) {
  std::map<char, int64_t> extent;
  for (size_t k = 0; k < inputs.size(); ++k)
    for (size_t a = 0; a < inputs[k].size(); ++a) extent[inputs[k][a]] = ops[k].shape()[a];
  std::vector<char> labels;
  for (auto& [c, e] : extent) labels.push_back(c);
  Shape out_shape;
  for (char c : output) out_shape.push_back(extent.at(c));
  Tensor out = Tensor::zeros(dtype_v<T>, out_shape);
  std::map<char, int64_t> idx;
  for (char c : labels) idx[c] = 0;
  int64_t total = 1;
  for (char c : labels) total *= extent[c];
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t r = flat;
    for (char c : labels) { idx[c] = r % extent[c]; r /= extent[c]; }
    T prod = T(1);
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::vector<int64_t> i;
      for (char c : inputs[k]) i.push_back(idx[c]);
      prod = prod * ops[k].at<T>(i);
    }
    std::vector<int64_t> o;
    for (char c : output) o.push_back(idx[c]);
    out.at<T>(o) += prod;
  }
  return out;
}

/// Max |a - b| over elements (same shape required).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  auto x = a.astype(DType::c128).to_col_major<c128>(), y = b.astype(DType::c128).to_col_major<c128>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace einstage::runtime_test
