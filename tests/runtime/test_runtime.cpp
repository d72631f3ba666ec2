// Runtime and Executable with the einsum module: a traced program with a symbolic batch dim runs at two batch sizes
// (two plans cached, the third run a hit) and agrees with concrete einsum, with a definitional loop and with its
// lowered program on a runtime without the einsum module; a runtime without the module refuses the program naming
// the family, and runs it after loading the module's shared library by path; run-time errors name the parameter or
// the constraint; two threads running one Executable 1,000 times each get identical bits.
#include "runtime/Runtime.h"

#include "RuntimeTestUtil.h"
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Json.h"
#include "ir/Printer.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <thread>

using namespace einstage;
using namespace einstage::runtime_test;

namespace {

/// The compiler-side registry a program is traced with (the host's own linked einsum semantics).
const ExtensionRegistry& trace_registry() {
  static const ExtensionRegistry registry = [] {
    ExtensionRegistry r;
    einsum::register_einsum_semantics(r);
    return r;
  }();
  return registry;
}

/// Outputs y = einsum("bij,bjk->bik", x, w) with a symbolic batch b, and sum(y * y).
Program traced_batched_matmul() {
  TraceContext ctx("bmm", &trace_registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("b"), 2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {Dim::symbol("b"), 3, 4});
  TracedTensor y = einsum::einsum(ctx, "bij,bjk->bik", {x, w});
  return ctx.finish({y, sum(y * y)});
}

struct Case {
  Tensor x, w;
  Tensor y;       // definitional loop
  double total;   // sum of y^2
};

Case make_case(int64_t b, uint64_t seed) {
  Case c{random_tensor(DType::f64, {b, 2, 3}, seed), random_tensor(DType::f64, {b, 3, 4}, seed + 100), {}, 0};
  c.y = naive_einsum<double>({"bij", "bjk"}, "bik", {c.x, c.w});
  for (double v : c.y.to_col_major<double>()) c.total += v * v;
  return c;
}

}  // namespace

TEST_CASE("runtime: a symbolic batch dim at two sizes plans twice and then hits; values match three oracles") {
  Program p = traced_batched_matmul();
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  Executable exe = rt.prepare(p);
  Runtime bare;  // no einsum module: runs the lowered program on standard ops only
  for (int64_t b : {2, 5, 2}) {
    CAPTURE(b);
    Case c = make_case(b, static_cast<uint64_t>(b));
    auto out = exe.run({c.x, c.w});
    REQUIRE(out.size() == 2);
    CHECK(out[0].shape() == Shape{b, 2, 4});
    CHECK(max_abs_diff(out[0], c.y) < 1e-13);
    CHECK(out[1].at<double>({}) == doctest::Approx(c.total).epsilon(1e-13));
    // Concrete einsum goes through the same planner and executor: the same bits.
    CHECK(bitwise_equal(out[0], einsum::einsum("bij,bjk->bik", {c.x, c.w})));
    // The lowered program (standard ops only) on a runtime that has no einsum module.
    Program lowered = lower_to_standard_ops(p, {{"b", b}}, trace_registry());
    for (const Instruction& inst : lowered.instructions) CHECK(kind(inst.op) != OpKind::extension);
    auto low = bare.prepare(lowered).run({c.x, c.w});
    CHECK(max_abs_diff(low[0], out[0]) < 1e-13);
    CHECK(low[1].at<double>({}) == doctest::Approx(out[1].at<double>({})).epsilon(1e-13));
  }
  PreparedCacheStats s = rt.cache_stats();
  CHECK(s.misses == 2);   // b = 2 and b = 5 each planned once
  CHECK(s.hits == 1);     // the second b = 2 run only executed
  CHECK(s.entries == 2);
  Executable::Stats es = exe.stats();
  CHECK(es.runs == 3);
  CHECK(es.misses == 2);
  CHECK(es.hits == 1);
  // Another Executable of the same program shares the Runtime's cache: its first run is a hit.
  Case c = make_case(5, 9);
  rt.prepare(p).run({c.x, c.w});
  CHECK(rt.cache_stats().hits == 2);
  CHECK(rt.cache_stats().misses == 2);
  rt.clear_cache();
  CHECK(rt.cache_stats().entries == 0);
}

TEST_CASE("runtime: without the einsum module the family is named; after loading its library by path it runs") {
  Program p = traced_batched_matmul();
  Runtime rt;
  CHECK(error_of([&] { rt.prepare(p); }) ==
        "@bmm: missing extension family \"einstage.einsum.v1\" (used by %0): load the module that provides it "
        "(Runtime::load_module(\"path/to/libeinstage_einsum_module.so\")) or link the module in and call "
        "Runtime::add_module with its descriptor");
  const ModuleInfo& info = rt.load_module(EINSTAGE_EINSUM_MODULE_PATH);
  CHECK(info.name == "einstage.einsum");
  CHECK(info.families == std::vector<std::string>{"einstage.einsum.v1", "einstage.einsum_ad.v1"});
  CHECK(info.origin == EINSTAGE_EINSUM_MODULE_PATH);
  Case c = make_case(3, 7);
  auto out = rt.prepare(p).run({c.x, c.w});
  CHECK(max_abs_diff(out[0], c.y) < 1e-13);
  CHECK(out[1].at<double>({}) == doctest::Approx(c.total).epsilon(1e-13));
  // The linked-in build of the same module then conflicts, naming where the family came from.
  CHECK(error_of([&] { rt.add_module(einsum::module_descriptor()); }) ==
        fmt::format("module 'einstage.einsum' (linked in) provides extension family \"einstage.einsum.v1\", which "
                    "module 'einstage.einsum' ('{}') already provides; a family is registered once per Runtime",
                    EINSTAGE_EINSUM_MODULE_PATH));
}

TEST_CASE("runtime: input and constraint errors name the parameter, or the instruction, the symbols and values") {
  TraceContext ctx("pair", &trace_registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("b"), 2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {Dim::symbol("c"), 3, 4});
  Program p = ctx.finish({einsum::einsum(ctx, "bij,bjk->bik", {x, w})});
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  Executable exe = rt.prepare(p);
  Tensor x2 = Tensor::zeros(DType::f64, {2, 2, 3});
  CHECK(error_of([&] { exe.run({x2}); }) == "@pair takes 2 inputs (%x: f64[b,2,3], %w: f64[c,3,4]) but 1 was given");
  CHECK(error_of([&] { exe.run({x2, Tensor::zeros(DType::i64, {2, 3, 4})}); }) ==
        "@pair: input 1 (%w) has dtype i64 but the parameter is f64[c,3,4]; convert it (Tensor::astype(f64))");
  CHECK(error_of([&] { exe.run({x2, Tensor::zeros(DType::f64, {3, 4})}); }) ==
        "@pair: input 1 (%w) has shape [3,4] but the parameter has type f64[c,3,4]");
  std::string msg = error_of([&] { exe.run({x2, Tensor::zeros(DType::f64, {3, 3, 4})}); });
  CHECK(msg.find("@pair: shape constraint b == c at %0 does not hold: b = 2 but c = 3") == 0);
  CHECK(rt.cache_stats().misses == 0);  // nothing was prepared for rejected inputs
  auto ok = exe.run({x2, Tensor::zeros(DType::f64, {2, 3, 4})});
  CHECK(ok[0].shape() == Shape{2, 2, 4});
}

TEST_CASE("runtime: an Executable outlives its Runtime object and describes its prepared plans") {
  Executable exe = [] {
    Runtime rt;
    rt.add_module(einsum::module_descriptor());
    return rt.prepare(traced_batched_matmul());
  }();
  Case c = make_case(4, 3);
  auto out = exe.run({c.x, c.w});
  CHECK(max_abs_diff(out[0], c.y) < 1e-13);
  std::string text = exe.describe_prepared(std::vector<Tensor>{c.x, c.w});
  CHECK(text.rfind("%0 = einstage.einsum.v1 on f64[4,2,3], f64[4,3,4]:\n", 0) == 0);
  CHECK(text.size() > std::string("%0 = einstage.einsum.v1 on f64[4,2,3], f64[4,3,4]:\n").size());
}

TEST_CASE("runtime: two threads running one Executable 1,000 times each get identical bits") {
  // A three-operand einsum (a planned tree, not the two-operand shortcut) with a symbolic batch, on a Runtime whose
  // kernel pool the two threads share; the threads alternate two batch sizes so the cache sees concurrent misses.
  TraceContext ctx("tri", &trace_registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {Dim::symbol("b"), 3, 4});
  TracedTensor m = ctx.parameter("m", DType::f64, {4, 5});
  TracedTensor v = ctx.parameter("v", DType::f64, {5, 2});
  Program p = ctx.finish({einsum::einsum(ctx, "bij,jk,kl->bil", {a, m, v})});
  Runtime rt(RuntimeOptions{2});
  rt.add_module(einsum::module_descriptor());
  Executable exe = rt.prepare(p);
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t b : {3, 6})
    inputs.push_back({random_tensor(DType::f64, {b, 3, 4}, 1 + b), random_tensor(DType::f64, {4, 5}, 2),
                      random_tensor(DType::f64, {5, 2}, 3)});
  std::vector<Tensor> expect;
  for (auto& in : inputs) {
    expect.push_back(naive_einsum<double>({"bij", "jk", "kl"}, "bil", in));
    CHECK(max_abs_diff(einsum::einsum("bij,jk,kl->bil", in), expect.back()) < 1e-13);
  }
  rt.clear_cache();
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::vector<Tensor>> seen(2, std::vector<Tensor>(2));
  auto worker = [&](int t) {
    try {
      for (int i = 0; i < 1000; ++i) {
        int which = (i + t) % 2;
        Tensor out = exe.run(inputs[which])[0];
        if (!seen[t][which].defined()) seen[t][which] = out;
        else if (!bitwise_equal(out, seen[t][which])) ++mismatches;
      }
    } catch (...) {
      ++failures;
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  CHECK(failures == 0);
  CHECK(mismatches == 0);
  for (int which = 0; which < 2; ++which) {
    CHECK(bitwise_equal(seen[0][which], seen[1][which]));
    CHECK(max_abs_diff(seen[0][which], expect[which]) < 1e-13);
  }
  PreparedCacheStats s = rt.cache_stats();
  CHECK(s.misses == 2);  // each shape prepared exactly once, even with both threads missing at the start
  CHECK(s.hits == 1998);
}

TEST_CASE("runtime: a program saved as JSON is read back with the loaded module's parsers and runs the same") {
  Program p = traced_batched_matmul();
  Runtime rt;
  rt.load_module(EINSTAGE_EINSUM_MODULE_PATH);
  // The payloads are now made by the shared library's copy of the einsum code; the executor reads them the same.
  Program back = program_from_json(program_to_json(p), &rt.registry());
  CHECK(print_program(back) == print_program(p));
  Case c = make_case(3, 21);
  auto out = rt.prepare(back).run({c.x, c.w});
  CHECK(max_abs_diff(out[0], c.y) < 1e-13);
}

TEST_CASE("runtime: an Executable releases intermediates after their last use") {
  TraceContext ctx("chain", &trace_registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 4});
  TracedTensor m = ctx.parameter("m", DType::f64, {4, 4});
  TracedTensor y = x;
  for (int i = 0; i < 6; ++i) y = einsum::einsum(ctx, "ij,jk->ik", {y, m});
  Program p = ctx.finish({y});
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  Executable exe = rt.prepare(p);
  EvalStats stats;
  Tensor xs = random_tensor(DType::f64, {3, 4}, 1), ms = random_tensor(DType::f64, {4, 4}, 2);
  auto out = exe.run(std::vector<Tensor>{xs, ms}, &stats);
  CHECK(stats.instructions == 6);
  CHECK(stats.peak_live_values == 3);  // m, one intermediate and the next: never the whole chain
  Tensor expect = xs;
  for (int i = 0; i < 6; ++i) expect = naive_einsum<double>({"ij", "jk"}, "ik", {expect, ms});
  CHECK(max_abs_diff(out[0], expect) < 1e-12);
}

TEST_CASE("runtime: the prepared-op cache is bounded; the least recently used entry goes first") {
  Program p = traced_batched_matmul();
  RuntimeOptions options;
  options.cache_capacity = 2;
  Runtime rt(options);
  rt.add_module(einsum::module_descriptor());
  Executable exe = rt.prepare(p);
  auto run = [&](int64_t b) {
    Case c = make_case(b, static_cast<uint64_t>(b));
    CHECK(max_abs_diff(exe.run({c.x, c.w})[0], c.y) < 1e-13);
  };
  run(1);
  run(2);
  run(1);  // hit: b = 1 is now the most recently used
  run(3);  // miss: evicts b = 2
  PreparedCacheStats s = rt.cache_stats();
  CHECK(s.entries == 2);
  CHECK(s.capacity == 2);
  CHECK(s.evictions == 1);
  CHECK(s.hits == 1);
  CHECK(s.misses == 3);
  run(1);  // still cached
  run(2);  // planned again
  s = rt.cache_stats();
  CHECK(s.hits == 2);
  CHECK(s.misses == 4);
  CHECK(s.evictions == 2);
  CHECK(error_of([] { Runtime bad(RuntimeOptions{1, 0}); }) ==
        "RuntimeOptions::cache_capacity is 0; expected 1 or more");
}
