// Test helpers for the einsum suite: random strided operands and an independent definitional-loop einsum (iterate
// over every assignment of every label, multiply the operands' elements, add into the output element), written
// without any einstage einsum code.
#pragma once

#include "kernels/KernelTestUtil.h"
#include "ir/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace et {

using einstage::Shape;
using einstage::Tensor;

/// A random tensor of `shape` stored as a strided view (permuted, every other element) when `strided`.
template <typename T>
Tensor random_tensor(kt::Rng& r, const Shape& shape, bool strided) {
  const int rank = static_cast<int>(shape.size());
  if (!strided || rank == 0) {
    std::vector<T> data(static_cast<size_t>(einstage::element_count(shape)));
    for (auto& v : data) v = kt::random_value<T>(r);
    return Tensor::from_col_major<T>(shape, data);
  }
  std::vector<int> perm(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) perm[i] = i;
  for (int i = rank; i > 1; --i) std::swap(perm[i - 1], perm[static_cast<size_t>(r.uniform(0, i - 1))]);
  // base axis j holds result axis perm^-1... build base shape so that base.permute(perm) has `shape`.
  Shape base(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) base[perm[i]] = shape[i] * 2;
  std::vector<T> data(static_cast<size_t>(einstage::element_count(base)));
  for (auto& v : data) v = kt::random_value<T>(r);
  Tensor t = Tensor::from_col_major<T>(base, data);
  for (int i = 0; i < rank; ++i) t = t.slice(i, 0, base[i], 2);
  return t.permute(perm);
}

/// The definitional einsum over char labels: out[output labels] = sum over all other labels of prod_k op_k.
/// `extent` gives each label's extent; an operand axis of stored extent 1 under a larger label extent broadcasts.
template <typename T>
std::vector<kt::Wide<T>> definitional(const std::vector<std::string>& terms, const std::string& output,
                                      const std::vector<Tensor>& ops, const std::map<char, int64_t>& extent,
                                      std::vector<double>* scale = nullptr) {
  std::vector<char> labels;
  for (auto& [l, e] : extent) labels.push_back(l);
  const size_t L = labels.size();
  std::vector<int64_t> idx(L, 0);
  auto value_of = [&](char l) {
    for (size_t i = 0; i < L; ++i)
      if (labels[i] == l) return idx[i];
    return int64_t(-1);
  };
  Shape out_shape;
  for (char c : output) out_shape.push_back(extent.at(c));
  int64_t out_count = 1;
  for (int64_t e : out_shape) out_count *= e;
  std::vector<kt::Wide<T>> out(static_cast<size_t>(out_count), kt::Wide<T>{});
  if (scale) scale->assign(out.size(), 0.0);
  int64_t total = 1;
  for (char l : labels) total *= extent.at(l);
  if (total == 0) return out;
  std::vector<int64_t> at;
  for (int64_t step = 0; step < total; ++step) {
    // output element (column-major); repeated output labels only on their diagonal (they share one value)
    int64_t o = 0, mul = 1;
    for (size_t p = 0; p < output.size(); ++p) {
      o += value_of(output[p]) * mul;
      mul *= out_shape[p];
    }
    kt::Wide<T> prod = kt::widen(T(1));
    double mag = 1;
    for (size_t k = 0; k < terms.size(); ++k) {
      at.clear();
      for (size_t a = 0; a < terms[k].size(); ++a) at.push_back(ops[k].shape()[a] == 1 ? 0 : value_of(terms[k][a]));
      T v = ops[k].at<T>(at);
      prod = prod * kt::widen(v);
      mag *= kt::magnitude(v);
    }
    out[static_cast<size_t>(o)] += prod;
    if (scale) (*scale)[static_cast<size_t>(o)] += mag;
    for (size_t i = 0; i < L; ++i) {  // odometer over all labels
      if (++idx[i] < extent.at(labels[i])) break;
      idx[i] = 0;
    }
  }
  return out;
}

/// Compares a result tensor (column-major readback) with the oracle; returns an empty string or a message.
template <typename T>
std::string compare(const Tensor& got, const std::vector<kt::Wide<T>>& want, const std::vector<double>& scale) {
  std::vector<T> g = got.to_col_major<T>();
  if (g.size() != want.size()) return "size differs: " + std::to_string(g.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = kt::distance(g[i], want[i]);
    if (!(err <= kt::tolerance<T>() * 10 * (scale[i] + 1)))
      return "element " + std::to_string(i) + " differs by " + std::to_string(err) + " (scale " +
             std::to_string(scale[i]) + ")";
  }
  return {};
}

}  // namespace et
