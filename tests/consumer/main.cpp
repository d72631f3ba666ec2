// Uses the installed headers and libraries: builds a tensor from row-major data, round-trips it through .npy bytes
// in C order and prints it. Given module paths, loads each into one Runtime and, for every family a module provides,
// runs a small program that uses it on that tensor and prints the result:
// - consumer.twice.v1 (Module.cpp): the doubled tensor, then an einsum of it (the linked einsum API, the JIT of the
//   installed libeinstage_runtime.so);
// - consumer.gram.v1 (Module.cpp, the public kernel API): X·Xᵀ, checked bitwise against einsum("ij,kj->ik");
// - einstage.einsum.v1 and einstage.tropical.v1 (the installed modules): X·Xᵀ, and its max-plus counterpart.
// Other families are listed as loaded. Exit status 0 only if the round trip and the checks are bitwise exact (3 when a
// check fails); a refused module prints the refusal and exits with 2.
#include "extensions/einsum/Einsum.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "ir/Tensor.h"
#include "runtime/Runtime.h"

#include <fmt/format.h>

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

}  // namespace

int main(int argc, char** argv) {
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor back = read_npy_bytes(write_npy_bytes(m, NpyOrder::c));
  fmt::print("{}\n", back);
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
