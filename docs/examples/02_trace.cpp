// Guide story (b): trace a program, by hand and from a lambda, and print its IR text form. Quoted in docs/guide.md.
#include <einstage/einstage.h>

#include "docs/examples/Check.h"
#include "compiler/Cse.h"
#include "compiler/Dce.h"
#include "compiler/Pipeline.h"
#include "compiler/Trace.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <string>

using namespace einstage;
using example::check;

int main() {
  // [trace]
  ExtensionRegistry registry;
  einsum::register_einsum_semantics(registry);        // explicit, once per registry

  TraceContext ctx("loss", &registry);
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 3});   // n is bound when the program runs
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  TracedTensor y2 = y * y;
  Program p = ctx.finish({sum(y2)});
  std::string text = print_program(p);
  fmt::print("{}", text);
  // [trace]
  const std::string want =
      "program @loss(%x: f64[n,3], %w: f64[3,4]) -> (f64[]) {\n"
      "  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"} : f64[n,4]\n"
      "  %1 = mul(%0, %0) : f64[n,4]\n"
      "  %2 = reduce_sum(%1) {axes = [0, 1]} : f64[]\n"
      "  return %2\n"
      "}\n";
  check(text == want, "printed program:\n" + text);

  // [lambda]
  Program f = trace("loss", {{"x", DType::f64, {Dim::symbol("n"), 3}}, {"w", DType::f64, {3, 4}}},
                    [](TracedTensor x, TracedTensor w) {
                      TracedTensor y = einsum::einsum("ij,jk->ik", {x, w});   // no context argument
                      TracedTensor y2 = y * y;
                      return sum(y2);
                    });
  Program df = ad::grad(f, {0, 1}, &default_registry());   // like jax.grad(f, argnums=(0, 1))
  // [lambda]
  check(print_program(f) == text, "the traced lambda prints the program traced by hand:\n" + print_program(f));
  check(df.outputs.size() == 2, "grad of the traced lambda has two outputs");

  // [parse]
  Program q = parse_program(text, &registry);         // the text form reads back to the same program
  // [parse]
  check(print_program(q) == text, "parse(print(p)) prints the same");

  // [forms]
  TraceContext ctx2("forms", &registry);
  TracedTensor a = ctx2.parameter("a", DType::f64, {Dim::symbol("m"), 3});
  TracedTensor b = ctx2.parameter("b", DType::f64, {Dim::symbol("k"), 5});
  TracedTensor c = ctx2.parameter("c", DType::f64, {5, 2});
  TracedTensor abc = einsum::einsum(ctx2, "ij,(jk,kl)->il", {a, b, c});      // plan = tree[(1,2),(0,3)]
  einsum::TraceEinsumOptions greedy;
  greedy.plan = einsum::PlanSpec::parse("greedy");
  TracedTensor ab = einsum::einsum(ctx2, einsum::make_subscripts({{0, 1}, {1, 2}}, {0, 2}), {a, b}, greedy);
  Program forms = ctx2.finish({abc, ab});
  fmt::print("{}", print_program(forms));   // j joins 3 and k: the program records "constraint 3 == k"
  // [forms]
  std::string ftext = print_program(forms);
  check(ftext.find("plan = tree[(1,2),(0,3)]") != std::string::npos, "nested string gives a tree spec:\n" + ftext);
  check(ftext.find("plan = greedy") != std::string::npos, "greedy plan spec printed:\n" + ftext);
  check(ftext.find("constraint 3 == k") != std::string::npos, "symbolic constraint recorded:\n" + ftext);
  check(abc.dims().size() == 2 && abc.dims()[0] == Dim::symbol("m") && abc.dims()[1] == Dim(2), "abc is f64[m,2]");

  // [passes]
  Pipeline pipeline(&registry);
  pipeline.add("dce", eliminate_dead_code).add("cse", eliminate_common_subexpressions);
  Program simplified = pipeline.run(p);   // "verification failed after pass 'cse': ..." if a pass breaks an invariant
  // [passes]
  check(print_program(simplified) == text, "dce and cse leave the loss program as it was");

  return example::result("02_trace");
}
