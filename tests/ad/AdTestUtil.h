// Helpers of the AD suite (and of the linalg suite): a seeded RNG, random tensors of every floating dtype, a Runtime
// with the einsum and linalg modules and the two-result test family test.dup.v1 (its registry carries their AD
// rules), running programs, the real inner product <a, b> = Re sum(conj(a) b), central finite differences and the
// three checks every case goes through:
//   jvp against central finite differences; the dot-product test <vjp(c), t> = <c, jvp(t)>; transpose adjointness
//   of the linearized program (<T(c), t> = <c, L(t)>, with L's tangent equal to jvp's).
// Test-only; depends on the public headers of compiler/ad, runtime and the einsum and linalg modules.
#pragma once

#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"
#include "support/DupModule.h"
#include "support/Random.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace einstage::ad_test {

using Rng = einstage::test::SplitMix64;  // uniform() in [0, 1), symmetric() in [-1, 1), below(n), chance(p)

/// A tensor of `dtype` and `shape` holding `v` (column-major; real dtypes take the real parts).
inline Tensor tensor_of(DType dtype, const Shape& shape, const std::vector<c128>& v) {
  Tensor t = Tensor::empty(dtype, shape);
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* d = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, c64>) d[i] = c64(v[i]);
      else if constexpr (std::is_same_v<T, c128>) d[i] = v[i];
      else d[i] = static_cast<T>(v[i].real());
    }
  });
  return t;
}

/// Values in [-1, 1) (both parts for complex), or in [0.5, 1.5) when `positive` (real part for complex), so that
/// log, sqrt and division stay away from their singularities and branch cuts.
inline Tensor random_tensor(DType dtype, const Shape& shape, Rng& rng, bool positive = false) {
  std::vector<c128> v(static_cast<size_t>(element_count(shape)));
  for (c128& x : v) x = c128(positive ? 1 + 0.5 * rng.symmetric() : rng.symmetric(), rng.symmetric());
  return tensor_of(dtype, shape, v);
}

/// Elements as complex<double> in column-major order.
inline std::vector<c128> values(const Tensor& t) {
  return dispatch_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> raw = t.to_col_major<T>();
    std::vector<c128> out;
    for (const T& x : raw) {
      if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) out.emplace_back(x.real(), x.imag());
      else out.emplace_back(static_cast<double>(x), 0.0);
    }
    return out;
  });
}

/// x + h * t in x's dtype (t of the same dtype and shape).
inline Tensor axpy(const Tensor& x, double h, const Tensor& t) {
  std::vector<c128> a = values(x), b = values(t);
  for (size_t i = 0; i < a.size(); ++i) a[i] += h * b[i];
  return tensor_of(x.dtype(), x.shape(), a);
}

/// Re sum(conj(a) * b).
inline double inner(const Tensor& a, const Tensor& b) {
  std::vector<c128> x = values(a), y = values(b);
  REQUIRE(x.size() == y.size());
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += (std::conj(x[i]) * y[i]).real();
  return s;
}
inline double norm(const Tensor& a) { return std::sqrt(inner(a, a)); }

/// max |a - b| / (atol + rtol * max|b|) <= 1, with a readable message otherwise.
inline bool close(const Tensor& a, const Tensor& b, double rtol, std::string* why = nullptr) {
  if (a.shape() != b.shape()) {
    if (why) *why = fmt::format("shapes differ: {} vs {}", shape_to_string(a.shape()), shape_to_string(b.shape()));
    return false;
  }
  std::vector<c128> x = values(a), y = values(b);
  double scale = 0, err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    err = std::max(err, std::abs(x[i] - y[i]));
  }
  bool ok = err <= rtol * (scale + 1e-3);
  if (!ok && why) *why = fmt::format("max abs error {:.3e}, scale {:.3e}, rtol {:.1e}", err, scale, rtol);
  return ok;
}

/// The Runtime every AD test runs programs on (einsum and linalg modules and the two-result test family test.dup.v1 linked in).
inline const Runtime& runtime() {
  static const Runtime rt = [] {
    Runtime r;
    r.add_module(einsum::module_descriptor());
    r.add_module(linalg::module_descriptor());
    r.add_module(testing::dup_module_descriptor());
    return r;
  }();
  return rt;
}
inline const ExtensionRegistry* registry() { return &runtime().registry(); }

inline std::vector<Tensor> run(const Program& p, const std::vector<Tensor>& inputs) {
  return runtime().prepare(p).run(std::span<const Tensor>(inputs));
}

struct Tolerance {
  double fd = 1e-6;     // jvp vs central differences (relative to the tangent's size)
  double exact = 1e-10; // identities that hold up to rounding (dot-product test, adjointness)
  double h = 1e-6;      // finite-difference step
};
inline Tolerance tolerance_for(DType dtype) {
  if (dtype == DType::f32 || dtype == DType::c64) return Tolerance{3e-2, 2e-4, 1e-2};
  return Tolerance{};
}

/// The three checks on `p` with respect to every floating parameter in `wrt`, at `inputs`, with random tangents and
/// cotangents from `rng`. `context` is printed on failure (it should contain the seed). `finite_differences` false
/// skips the comparison of jvp with the values' differences (stop_gradient's zero rule differs from them on purpose).
inline void check_derivatives(const Program& p, const std::vector<int>& wrt, const std::vector<Tensor>& inputs,
                              Rng& rng, const Tolerance& tol_in, const std::string& context,
                              bool finite_differences = true) {
  INFO(context);
  const ExtensionRegistry* reg = registry();
  std::vector<Tensor> primal = run(p, inputs);
  Tolerance tol = tol_in;  // single precision anywhere (an f32 output of f64 inputs too) loosens every check
  for (const std::vector<Tensor>* ts : {&inputs, static_cast<const std::vector<Tensor>*>(&primal)})
    for (const Tensor& t : *ts)
      if (t.dtype() == DType::f32 || t.dtype() == DType::c64) tol = tolerance_for(DType::f32);
  std::vector<Tensor> tangents;
  for (int i : wrt) tangents.push_back(random_tensor(inputs[i].dtype(), inputs[i].shape(), rng));
  std::vector<Tensor> cotangents;
  for (const Tensor& y : primal) cotangents.push_back(random_tensor(y.dtype(), y.shape(), rng));

  // 1. jvp against central differences.
  Program j = ad::jvp(p, wrt, reg);
  INFO("jvp program:\n" << print_program(j));
  std::vector<Tensor> jin = inputs;
  jin.insert(jin.end(), tangents.begin(), tangents.end());
  std::vector<Tensor> jout = run(j, jin);
  REQUIRE(jout.size() == 2 * primal.size());
  std::vector<Tensor> plus = inputs, minus = inputs;
  for (size_t w = 0; w < wrt.size(); ++w) {
    plus[wrt[w]] = axpy(inputs[wrt[w]], tol.h, tangents[w]);
    minus[wrt[w]] = axpy(inputs[wrt[w]], -tol.h, tangents[w]);
  }
  std::vector<Tensor> fp = run(p, plus), fm = run(p, minus);
  for (size_t o = 0; o < primal.size(); ++o) {
    CHECK(close(jout[o], primal[o], tol.exact));
    Tensor diff = axpy(fp[o], -1, fm[o]);
    Tensor fd = axpy(Tensor::zeros(diff.dtype(), diff.shape()), 1 / (2 * tol.h), diff);
    std::string why;
    if (finite_differences) {
      CHECK_MESSAGE(close(jout[primal.size() + o], fd, tol.fd, &why), "jvp vs finite differences, output " << o << ": "
                                                                        << why);
    }
  }

  // 2. The dot-product test: <vjp(c), t> = <c, jvp(t)>.
  Program v = ad::vjp(p, wrt, reg);
  INFO("vjp program:\n" << print_program(v));
  std::vector<Tensor> vin = inputs;
  vin.insert(vin.end(), cotangents.begin(), cotangents.end());
  std::vector<Tensor> vout = run(v, vin);
  REQUIRE(vout.size() == primal.size() + wrt.size());
  double lhs = 0, rhs = 0, scale = 0;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const Tensor& g = vout[primal.size() + w];
    CHECK(g.shape() == inputs[wrt[w]].shape());
    CHECK(g.dtype() == inputs[wrt[w]].dtype());
    lhs += inner(g, tangents[w]);
    scale += norm(g) * norm(tangents[w]);
  }
  for (size_t o = 0; o < primal.size(); ++o) {
    rhs += inner(cotangents[o], jout[primal.size() + o]);
    scale += norm(cotangents[o]) * norm(jout[primal.size() + o]);
  }
  CHECK_MESSAGE(std::abs(lhs - rhs) <= tol.exact * (scale + 1e-12), "dot-product test: <vjp(c), t> = " << lhs
                                                                         << " but <c, jvp(t)> = " << rhs);

  // 3. Transpose adjointness of the linearized program, whose tangent must equal jvp's.
  ad::Linearized lin = ad::linearize(p, wrt, reg);
  std::vector<Tensor> pr = run(lin.primal, inputs);
  REQUIRE(pr.size() == static_cast<size_t>(lin.num_outputs + lin.num_residuals));
  std::vector<Tensor> res(pr.begin() + lin.num_outputs, pr.end());
  std::vector<Tensor> lin_in = res;
  lin_in.insert(lin_in.end(), tangents.begin(), tangents.end());
  std::vector<Tensor> lt = run(lin.linear, lin_in);
  std::vector<int> tangent_params;
  for (size_t w = 0; w < wrt.size(); ++w) tangent_params.push_back(lin.num_residuals + static_cast<int>(w));
  Program t = ad::transpose(lin.linear, tangent_params, reg);
  INFO("transposed linear program:\n" << print_program(t));
  std::vector<Tensor> t_in = res;
  t_in.insert(t_in.end(), cotangents.begin(), cotangents.end());
  std::vector<Tensor> tc = run(t, t_in);
  double a = 0, b = 0, s = 0;
  for (size_t w = 0; w < wrt.size(); ++w) {
    a += inner(tc[w], tangents[w]);
    s += norm(tc[w]) * norm(tangents[w]);
  }
  for (size_t o = 0; o < primal.size(); ++o) {
    CHECK(close(lt[o], jout[primal.size() + o], tol.exact));
    b += inner(cotangents[o], lt[o]);
    s += norm(cotangents[o]) * norm(lt[o]);
  }
  CHECK_MESSAGE(std::abs(a - b) <= tol.exact * (s + 1e-12), "adjointness: <T(c), t> = " << a << " but <c, L(t)> = " << b);
}

}  // namespace einstage::ad_test
