// The runtime on instructions with several results: a linked-in module whose prepared op returns two tensors from
// run_results (the test family test.dup.v1: x -> (a x, b x)), checked against the oracle computed here; the interpreter
// refuses an executor that returns the wrong number of tensors or a wrong one, naming the result.
#include "runtime/Interpreter.h"
#include "runtime/Runtime.h"
#include "support/DupModule.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <doctest/doctest.h>

using namespace einstage;
using einstage::test::error_of;

namespace {

Program pairs(const ExtensionRegistry& reg) {
  Builder b("pairs", &reg);
  Value x = b.parameter("x", {DType::f64, {Dim::symbol("n"), 2}});
  std::vector<Value> r = b.extension_results(std::make_shared<testing::DupPayload>(2, -0.5), {x});
  return b.finish({r[1], b.mul(r[0], r[1]), r[0]});
}

Tensor random_matrix(int64_t n, uint64_t seed) {
  test::SplitMix64 rng{seed};
  Tensor x = Tensor::empty(DType::f64, {n, 2});
  for (int64_t i = 0; i < 2 * n; ++i) x.data<double>()[i] = rng.symmetric();
  return x;
}

}  // namespace

TEST_CASE("multi-result runtime: a module's prepared op returns every result") {
  Runtime rt;
  rt.add_module(testing::dup_module_descriptor());
  Program p = pairs(rt.registry());
  Executable exe = rt.prepare(p);
  for (int64_t n : {1, 5}) {
    Tensor x = random_matrix(n, static_cast<uint64_t>(n));
    std::vector<Tensor> out = exe.run(std::vector<Tensor>{x});
    REQUIRE(out.size() == 3);
    for (int64_t i = 0; i < 2 * n; ++i) {
      double v = x.data<double>()[i];
      CHECK(out[0].data<double>()[i] == -0.5 * v);
      CHECK(out[1].data<double>()[i] == (2 * v) * (-0.5 * v));
      CHECK(out[2].data<double>()[i] == 2 * v);
    }
  }
  CHECK(exe.describe_prepared(std::vector<Tensor>{random_matrix(3, 1)}) == "%0, %1 = test.dup.v1 on f64[3,2]:\n");
}

TEST_CASE("multi-result runtime: the interpreter checks the number and types of an executor's results") {
  ExtensionRegistry reg;
  testing::register_dup_family(reg);
  Program p = pairs(reg);
  Tensor x = random_matrix(3, 9);
  EvalOptions one;
  one.extension = [](const Instruction&, const std::string&, std::span<const Tensor> in, const DimBindings&) {
    return std::vector<Tensor>{in[0].clone()};
  };
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{x}, one); }) ==
        "'test.dup.v1' at %0 in @pairs: the module's executor returned 1 tensor but the instruction has 2 results");
  EvalOptions wrong;
  wrong.extension = [](const Instruction&, const std::string&, std::span<const Tensor> in, const DimBindings&) {
    return std::vector<Tensor>{in[0].clone(), Tensor::zeros(DType::f64, {3})};
  };
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{x}, wrong); }) ==
        "'test.dup.v1' at %0 in @pairs: the module's executor returned f64[3] for result 1 (%1) but the type rule "
        "says f64[n,2] = [3,2]");
}
