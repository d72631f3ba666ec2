// Test-only helpers for the notation suite: a definitional einsum loop over bound plain Subscripts, and error
// capture. Deliberately naive (one odometer over every label) so it is obviously right.
#pragma once

#include "extensions/einsum/notation/Notation.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace notation_test {

using einstage::Shape;
using einstage::einsum::BoundEinsum;
using einstage::einsum::Label;

/// Column-major offset of `index` in a dense tensor of `shape`.
inline int64_t offset(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t off = 0, stride = 1;
  for (size_t a = 0; a < shape.size(); ++a) {
    off += index[a] * stride;
    stride *= shape[a];
  }
  return off;
}

inline int64_t count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

/// out[output labels] += prod_k in_k[labels of k] over every assignment of every label (column-major data; a
/// broadcast axis reads index 0). Repeated output labels write only the diagonal.
inline std::vector<double> naive_einsum(const BoundEinsum& b, const std::vector<std::vector<double>>& ins) {
  std::vector<Label> labels;
  std::vector<int64_t> extents;
  for (auto [l, e] : b.extents) labels.push_back(l), extents.push_back(e);
  std::vector<double> out(size_t(count(b.output_shape)), 0.0);
  for (int64_t e : extents)
    if (e == 0) return out;
  std::vector<int64_t> value(labels.size(), 0);
  auto index_of = [&](Label l) {
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] == l) return value[i];
    return int64_t(-1);
  };
  while (true) {
    double p = 1.0;
    for (size_t k = 0; k < ins.size(); ++k) {
      std::vector<int64_t> idx;
      for (size_t a = 0; a < b.subs.inputs[k].size(); ++a)
        idx.push_back(b.broadcast_axes[k][a] ? 0 : index_of(b.subs.inputs[k][a]));
      p *= ins[k][size_t(offset(b.shapes[k], idx))];
    }
    std::vector<int64_t> oidx;
    for (Label l : b.subs.output) oidx.push_back(index_of(l));
    out[size_t(offset(b.output_shape, oidx))] += p;
    size_t i = 0;
    for (; i < value.size(); ++i) {
      if (++value[i] < extents[i]) break;
      value[i] = 0;
    }
    if (i == value.size()) break;
  }
  return out;
}

using einstage::test::error_of;  // the message of the einstage::Error that f throws, or "<no error>"

/// Small deterministic data: SplitMix64 mapped to integers in [-2, 2] (exact sums) or to doubles in [-1, 1).
struct SplitMix64 : einstage::test::SplitMix64 {
  double small_int() { return double(int64_t(next() % 5) - 2); }
  double unit() { return symmetric(); }
};

}  // namespace notation_test
