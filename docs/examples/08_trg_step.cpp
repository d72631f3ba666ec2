// [trg]
#include <einstage/einstage.h>
using namespace einstage;

// One step of the tensor renormalisation group on T[u,l,d,r] (bond d, truncation chi): split T two ways by
// truncated SVDs, contract the four halves into T', and return tr T' and |T'|.
Program trg_step(int64_t d, int64_t chi) {
  return trace("trg_step", {{"t", DType::f64, {d, d, d, d}}}, [=](TracedTensor t) {
    auto split = [=](TracedTensor m) {  // m = U S Vh: (U √S, V √S) of the first chi triplets, as [d, d, chi]
      auto [u, s, vh] = linalg::svd(m, {.keep = chi});
      TracedTensor r = sqrt(s);
      return std::pair{reshape(u * r, {d, d, chi}), reshape(transpose(vh, {1, 0}) * r, {d, d, chi})};
    };
    auto [s1, s3] = split(reshape(t, {d * d, d * d}));
    auto [s2, s4] = split(reshape(transpose(t, {1, 2, 0, 3}), {d * d, d * d}));
    TracedTensor tn = einsum::einsum("xwu,yxl,yzd,wzr->uldr", {s2, s3, s4, s1});
    return std::pair{einsum::einsum("ijij->", {tn}), sqrt(sum(tn * tn))};
  });
}
// [trg]

// The rest runs the step the way docs/guide.md's "A TRG step in one sitting" walks it, and checks it: the values
// against NumPy's (docs/examples/08_trg_step.py prints them; tests/consumer/run.sh reruns it), the gradient of
// tr T' against central differences of the program itself. It includes nothing but the umbrella header, so
// tests/consumer builds this same file against an installed einstage. Exit status 1 when a check fails.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

int failures = 0;

void expect_close(double got, double want, double tol, const char* what) {
  const bool ok = std::abs(got - want) <= tol * (1 + std::abs(want));
  std::printf("%s %s: %.13g (expected %.13g)\n", ok ? "ok" : "MISMATCH", what, got, want);
  failures += !ok;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  const int64_t d = 3, chi = 4;
  std::vector<double> values(d * d * d * d);
  for (size_t k = 0; k < values.size(); ++k) values[k] = std::cos(0.4 + 0.73 * std::pow(double(k), 1.5));
  const Tensor t = Tensor::from_col_major<double>({d, d, d, d}, values);

  // [run]
  Runtime rt;
  add_installed_modules(rt);                                       // einsum and linalg
  Program step = trg_step(d, chi);
  Program grad_trace = ad::grad(step, /*output*/ 0, /*wrt*/ {0}, &rt.registry());
  LoweredProgram lowered = lower_to_standard_ops(step, {}, rt.registry(), LowerOptions{.keep_unlowerable = true});
  std::printf("%s%s", print_program(lowered.program).c_str(), lowered.describe().c_str());
  Executable forward = rt.prepare(step), backward = rt.prepare(grad_trace);
  std::vector<Tensor> out = forward.run({t});                      // plans and compiles on first sight of the shapes
  Tensor g = backward.run({t}).at(0);                              // d tr T' / d T, T's shape
  // [run]

  // A first call of the same step at another size plans and loads (or compiles) its kernels; the same again in a fresh
  // Executable finds them in this process. Printed, not checked: docs/performance.md has the measured table.
  const std::vector<double> other(size_t(4 * 4 * 4 * 4), 0.25);
  const Tensor t4 = Tensor::from_col_major<double>({4, 4, 4, 4}, other);
  const Program step4 = trg_step(4, chi);
  const auto first_start = std::chrono::steady_clock::now();
  rt.prepare(step4).run({t4});
  const double first_ms = milliseconds_since(first_start);
  const auto fresh_start = std::chrono::steady_clock::now();
  rt.prepare(step4).run({t4});
  const double fresh_ms = milliseconds_since(fresh_start);
  std::printf("a new shape: first call %.3f ms; in a fresh Executable %.3f ms\n", first_ms, fresh_ms);

  // Same values as NumPy's svd + einsum (08_trg_step.py), then a second run gives the same bits.
  expect_close(out.at(0).item<double>(), -2.272467656078, 1e-11, "tr T'");
  expect_close(out.at(1).item<double>(), 14.79734020867, 1e-11, "|T'|");
  const auto again_start = std::chrono::steady_clock::now();
  const std::vector<Tensor> again = forward.run({t});
  const double again_ms = milliseconds_since(again_start);
  const bool same = bitwise_equal(again.at(0), out.at(0)) && bitwise_equal(again.at(1), out.at(1));
  std::printf("%s second run: the same bits (%.3f ms)\n", same ? "ok" : "MISMATCH", again_ms);
  failures += !same;

  // The gradient against central differences of tr T', element by element.
  double worst = 0;
  const double h = 1e-6;
  std::vector<double> grad = g.to_col_major<double>();
  for (size_t k = 0; k < values.size(); ++k) {
    std::vector<double> up = values, down = values;
    up[k] += h;
    down[k] -= h;
    const double fu = forward.run({Tensor::from_col_major<double>({d, d, d, d}, up)}).at(0).item<double>();
    const double fd = forward.run({Tensor::from_col_major<double>({d, d, d, d}, down)}).at(0).item<double>();
    worst = std::max(worst, std::abs(grad[k] - (fu - fd) / (2 * h)) / (1 + std::abs(grad[k])));
  }
  const bool close = worst <= 1e-7;
  std::printf("%s gradient of tr T' against central differences: worst relative difference %.2g\n",
              close ? "ok" : "MISMATCH", worst);
  failures += !close;
  return failures == 0 ? 0 : 1;
}
