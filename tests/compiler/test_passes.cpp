// DCE, CSE and the Pipeline: behaviour, constraint bookkeeping, the verify-after-each-pass contract and dumping.
#include "CompilerTestUtil.h"

#include "compiler/Cse.h"
#include "compiler/Dce.h"
#include "compiler/Pipeline.h"
#include "compiler/Trace.h"
#include "extensions/einsum/op/TraceEinsum.h"

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

using namespace einstage;
using namespace compiler_test;

TEST_CASE("dce: removes what no output needs, keeps order and every constraint") {
  TraceContext ctx("dce", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), Dim::symbol("m")});
  TracedTensor w = ctx.parameter("w", DType::f64, {Dim::symbol("k"), 4});
  TracedTensor dead = einsum::einsum(ctx, "ij,jk->ik", {x, w});  // records m == k at %0
  (void)exp(dead);
  TracedTensor live = neg(x);
  Program p = ctx.finish({live});
  REQUIRE(p.instructions.size() == 3);
  Program q = eliminate_dead_code(p);
  CHECK(print_program(q) ==
        "program @dce(%x: f64[n,m], %w: f64[k,4]) -> (f64[n,m]) {\n"
        "  %0 = neg(%x) : f64[n,m]\n"
        "  constraint m == k \"'einstage.einsum.v1' label 'j' in operand 0 (axis 1) and operand 1 (axis 0)\"\n"
        "  return %0\n"
        "}\n");
  // Idempotent, and a program without dead code is unchanged.
  CHECK(print_program(eliminate_dead_code(q)) == print_program(q));
}

TEST_CASE("cse: equal ops on equal operands merge; different payloads or attributes do not") {
  TraceContext ctx("cse", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor a = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  TracedTensor b = einsum::einsum(ctx, "ij,jk->ik", {x, w});  // same payload: merged
  einsum::TraceEinsumOptions greedy;
  greedy.plan = einsum::PlanSpec::greedy_plan();
  TracedTensor c = einsum::einsum(ctx, "ij,jk->ik", {x, w}, greedy);  // other plan spec: kept
  TracedTensor d = einsum::einsum(ctx, "ab,bc->ac", {x, w});           // other names: kept
  TracedTensor e = exp(a) + exp(b);  // exp(a) and exp(b) become one exp after a and b merge
  TracedTensor f = transpose(x, {1, 0});
  TracedTensor g = transpose(x, {1, 0});
  Program p = ctx.finish({e, c, d, f, g});
  Program q = eliminate_common_subexpressions(p);
  CHECK(print_program(q) ==
        "program @cse(%x: f64[2,3], %w: f64[3,4]) -> (f64[2,4], f64[2,4], f64[2,4], f64[3,2], f64[3,2]) {\n"
        "  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"} : f64[2,4]\n"
        "  %1 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = greedy, subscripts = \"ij,jk->ik\"} : f64[2,4]\n"
        "  %2 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = \"ab,bc->ac\"} : f64[2,4]\n"
        "  %3 = exp(%0) : f64[2,4]\n"
        "  %4 = add(%3, %3) : f64[2,4]\n"
        "  %5 = transpose(%x) {perm = [1, 0]} : f64[3,2]\n"
        "  return %4, %1, %2, %5, %5\n"
        "}\n");
  CHECK(print_program(eliminate_common_subexpressions(q)) == print_program(q));
  check_golden("cse_einsum", q);
}

TEST_CASE("cse: constraints of merged instructions move to the survivor without duplicates") {
  TraceContext ctx("csec", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, Dim::symbol("m")});
  TracedTensor w = ctx.parameter("w", DType::f64, {Dim::symbol("k"), 4});
  TracedTensor a = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  TracedTensor b = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  Program p = ctx.finish({a + b});
  REQUIRE(p.constraints.size() == 2);
  Program q = eliminate_common_subexpressions(p);
  REQUIRE(q.constraints.size() == 1);
  CHECK(q.constraints[0].at == q.instructions[0].result().id);
}

TEST_CASE("pipeline: runs passes in order, dumps after each, and simplify = dce, cse, dce") {
  TraceContext ctx("pipe", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {3});
  TracedTensor a = exp(x);
  TracedTensor b = exp(x);
  (void)log(x);
  Program p = ctx.finish({a * b});
  std::vector<std::string> headings;
  Pipeline pl = simplify_pipeline(&registry());
  pl.set_dump([&](std::string_view pass, std::string_view text) {
    headings.push_back(std::string(pass));
    CHECK(text.substr(0, 13) == "program @pipe");
  });
  Program q = pl.run(p);
  CHECK(headings == std::vector<std::string>{"input", "dce", "cse", "dce"});
  CHECK(print_program(q) ==
        "program @pipe(%x: f64[3]) -> (f64[3]) {\n"
        "  %0 = exp(%x) : f64[3]\n"
        "  %1 = mul(%0, %0) : f64[3]\n"
        "  return %1\n"
        "}\n");
  CHECK(print_program(simplify(p, &registry())) == print_program(q));
}

namespace {

// What `run` printed on stderr (file descriptor 2 pointed at a temporary file meanwhile).
std::string stderr_of(const std::function<void()>& run) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const int saved = dup(2);
  dup2(fileno(file), 2);
  run();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  std::rewind(file);
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(file);
  return text;
}

}  // namespace

TEST_CASE("pipeline: set_config's dump_passes prints every pass to stderr, without reading the environment") {
  TraceContext ctx("pipe", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {3});
  Program p = ctx.finish({exp(x) * exp(x)});
  Config dumping;
  dumping.dump_passes = true;
  Pipeline on = simplify_pipeline(&registry());
  on.set_config(dumping);
  const std::string printed = stderr_of([&] { (void)on.run(p); });
  CHECK(printed.find("// ---- after pass 'input' ----\nprogram @pipe") == 0);
  CHECK(printed.find("// ---- after pass 'cse' ----\n") != std::string::npos);
  Pipeline off = simplify_pipeline(&registry());
  off.set_config(Config{});  // ctest does not set EINSTAGE_DUMP_PASSES; the config decides either way
  CHECK(stderr_of([&] { (void)off.run(p); }).empty());
}

TEST_CASE("pipeline: a pass that breaks an invariant is named in the error") {
  TraceContext ctx("broken", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {3});
  Program p = ctx.finish({exp(x)});
  Pipeline pl(&registry());
  pl.add("dce", eliminate_dead_code);
  pl.add("drop-first", [](const Program& in) {
    Program out = in;
    out.instructions.erase(out.instructions.begin());  // the output now refers to nothing
    return out;
  });
  std::string msg = error_of([&] { pl.run(p); });
  CHECK(msg.rfind("verification failed after pass 'drop-first': @broken: output 0 (%?1) is not a defined value", 0) ==
        0);
  // A pass that throws is named too.
  Pipeline thrower(&registry());
  thrower.add("explode", [](const Program&) -> Program { fail(ErrorKind::unsupported, "not today"); });
  CHECK(error_of([&] { thrower.run(p); }) == "pass 'explode' failed: not today");
}
