// Uses the installed headers and libraries: builds a tensor from row-major data, round-trips it through .npy bytes
// in C order and prints it. Given a module path, loads that module into a Runtime and runs a program that uses its
// family consumer.twice.v1 and an einsum (the JIT, from the installed libeinstage_runtime.so), printing the result.
// Exit status 0 only if the round trip is bitwise exact; a refused module prints the refusal and exits with 2.
#include "extensions/einsum/Einsum.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "ir/Tensor.h"
#include "runtime/Runtime.h"

#include <fmt/format.h>

int main(int argc, char** argv) {
  using namespace einstage;
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor back = read_npy_bytes(write_npy_bytes(m, NpyOrder::c));
  fmt::print("{}\n", back);
  if (argc > 1) {
    Runtime rt;
    try {
      rt.load_module(argv[1]);
    } catch (const Error& e) {
      fmt::print("{}\n", e.what());
      return 2;
    }
    Program p = parse_program(R"(program @twice(%x: f64[2,3]) -> (f64[2,3]) {
  %0 = consumer.twice.v1(%x) : f64[2,3]
  return %0
}
)", &rt.registry());
    Tensor twice = rt.prepare(p).run({m}).at(0);
    fmt::print("{}\n{}\n", twice, einsum::einsum("ij,kj->ik", {twice, m}));
  }
  return bitwise_equal(m, back) ? 0 : 1;
}
