// Uses the installed headers and libraries through the umbrella header <einstage/einstage.h> and the one CMake
// target einstage::einstage: builds a tensor from row-major data, round-trips it through .npy bytes in C order and
// prints it. Without arguments it also traces a program with a thin SVD (the linalg family, which the
// umbrella target links) and an einsum, checks its value against the singular values computed by hand and its
// gradient against central differences, and prints one line saying so. Given module paths, loads each into one
// Runtime and, for every family a module provides, runs a small program that uses it on that tensor and prints the
// result:
// - consumer.twice.v1 (Module.cpp): the doubled tensor, then an einsum of it (the linked einsum API, the JIT of the
//   installed libeinstage_runtime.so);
// - consumer.gram.v1 (Module.cpp, the public kernel API): X·Xᵀ, checked bitwise against einsum("ij,kj->ik");
// - einstage.einsum.v1 and einstage.tropical.v1 (the installed modules): X·Xᵀ, and its max-plus counterpart.
// Other families are listed as loaded. Exit status 0 only if the round trip and the checks are bitwise exact (3 when a
// check fails, 4 when the linalg check fails); a refused module prints the refusal and exits with 2.
#include <einstage/einstage.h>

#include <fmt/format.h>

#include <cmath>
#include <vector>

namespace {

using namespace einstage;

// Runs `%0 = <op> : <result>` on x (f64[2,3]) in rt.
Tensor run_op(Runtime& rt, std::string_view op, std::string_view result, const Tensor& x) {
  std::string text = fmt::format("program @demo(%x: f64[2,3]) -> ({0}) {{\n  %0 = {1} : {0}\n  return %0\n}}\n",
                                 result, op);
  return rt.prepare(parse_program(text, &rt.registry())).run({x}).at(0);
}

// Prints what `family` computes on x; false when a check fails.
bool demo(Runtime& rt, const std::string& family, const Tensor& x) {
  const Tensor gram = einsum::einsum("ij,kj->ik", {x, x});
  if (family == "consumer.twice.v1") {
    Tensor twice = run_op(rt, "consumer.twice.v1(%x)", "f64[2,3]", x);
    fmt::print("{}: {}\n{}\n", family, twice, einsum::einsum("ij,kj->ik", {twice, x}));
    return true;
  }
  if (family == "consumer.gram.v1" || family == "einstage.einsum.v1") {
    Tensor c = family == "consumer.gram.v1"
                   ? run_op(rt, "consumer.gram.v1(%x)", "f64[2,2]", x)
                   : run_op(rt, "einstage.einsum.v1(%x, %x) {broadcast = false, plan = auto, subscripts = \"ij,kj->ik\"}",
                            "f64[2,2]", x);
    fmt::print("{}: {}\n", family, c);
    if (bitwise_equal(c, gram)) return true;
    fmt::print("{} differs from einsum(\"ij,kj->ik\"), which gives {}\n", family, gram);
    return false;
  }
  if (family == "einstage.tropical.v1") {
    fmt::print("{}: {}\n", family,
               run_op(rt, "einstage.tropical.v1(%x, %x) {semiring = \"max_plus\", subscripts = \"ij,kj->ik\"}",
                      "f64[2,2]", x));
    return true;
  }
  fmt::print("{}: loaded (no demo program)\n", family);
  return true;
}

// Traces loss(X) = sum(svd(X).s) + einsum("ij,ij->", X, X) (nuclear norm plus squared Frobenius norm) from a lambda
// (einstage::trace; svd and einsum without a context argument) with the linalg and einsum families of the umbrella
// target, runs it and its gradient on x (f64[2,3], rows [0 1 2], [3 4 5]) and checks: X·Xᵀ = [[5, 14], [14, 50]] has
// eigenvalues 54 and 1, so the singular values are sqrt(54) and 1 and the loss is sqrt(54) + 1 + 55; the gradient
// agrees with central differences of the loss program. Prints one line.
bool linalg_demo(const Tensor& x) {
  Program loss = trace("nuclear", {{"a", DType::f64, {2, 3}}}, [](TracedTensor a) {
    TracedTensor s = linalg::svd(a).s;
    TracedTensor frob = einsum::einsum("ij,ij->", {a, a});
    return sum(s) + frob;
  });
  Program vg = ad::value_and_grad(loss, {0}, &default_registry());
  Runtime rt;
  add_installed_modules(rt);

  const std::vector<Tensor> out = rt.prepare(vg).run({x});
  const double value = out.at(0).at<double>({}), expected = std::sqrt(54.0) + 1 + 55;
  if (std::abs(value - expected) > 1e-12 * expected) {
    fmt::print("linalg: loss is {:.17g} but sqrt(54) + 1 + 55 = {:.17g}\n", value, expected);
    return false;
  }
  const Executable forward = rt.prepare(loss);
  const std::vector<double> xs = x.to_col_major<double>(), grad = out.at(1).to_col_major<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<double> up = xs, down = xs;
    up[i] += h;
    down[i] -= h;
    const double fd = (forward.run({Tensor::from_col_major<double>({2, 3}, up)}).at(0).at<double>({}) -
                       forward.run({Tensor::from_col_major<double>({2, 3}, down)}).at(0).at<double>({})) /
                      (2 * h);
    if (std::abs(fd - grad[i]) > 1e-6) {
      fmt::print("linalg: gradient element {} is {:.17g} but central differences give {:.17g}\n", i, grad[i], fd);
      return false;
    }
  }
  fmt::print("linalg: sum(svd(x).s) + einsum(\"ij,ij->\", x, x) = sqrt(54) + 1 + 55; its gradient matches central "
             "differences\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor back = read_npy_bytes(write_npy_bytes(m, NpyOrder::c));
  fmt::print("{}\n", back);
  if (argc == 1 && !linalg_demo(m)) return 4;
  Runtime rt;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> families;
    try {
      families = rt.load_module(argv[i]).families;
    } catch (const Error& e) {
      fmt::print("{}\n", e.what());
      return 2;
    }
    for (const std::string& family : families)
      if (!demo(rt, family, m)) return 3;
  }
  return bitwise_equal(m, back) ? 0 : 1;
}
