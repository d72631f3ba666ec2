// Guide story (d): inspect the lowered standard-op graph of a traced program, and partially lower one with an svd
// (which has no lowering rule). Quoted in docs/guide.md.
#include "docs/examples/Check.h"
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/linalg/Module.h"
#include "extensions/linalg/TraceLinalg.h"
#include "ir/Json.h"
#include "ir/Printer.h"
#include "runtime/Interpreter.h"
#include "runtime/Runtime.h"

#include <string>
#include <vector>

using namespace einstage;
using example::check;
using example::check_close;

int main() {
  ExtensionRegistry registry;
  einsum::register_einsum_semantics(registry);
  TraceContext ctx("bmm", &registry);
  TracedTensor a = ctx.parameter("a", DType::f64, {Dim::symbol("b"), 2, 3});
  TracedTensor c = ctx.parameter("c", DType::f64, {Dim::symbol("b"), 3, 4});
  Program p = ctx.finish({einsum::einsum(ctx, "bij,bjk->bik", {a, c})});

  // [lower]
  Program lowered = lower_to_standard_ops(p, {{"b", 6}}, registry);   // every symbol needs a value
  std::string text = print_program(lowered);      // the IR text form
  std::string json = program_to_json(lowered);    // the same program as JSON (program_from_json reads it back)
  std::string dot = print_dot(lowered);           // Graphviz: dot -Tsvg lowered.dot > lowered.svg
  fmt::print("{}", text);
  // [lower]
  const std::string want =
      "program @bmm(%a: f64[6,2,3], %c: f64[6,3,4]) -> (f64[6,2,4]) {\n"
      "  %0 = dot_general(%a, %c) {lhs_batch = [0], lhs_contracting = [2], rhs_batch = [0], rhs_contracting = [1]}"
      " : f64[2,4,6]\n"
      "  %1 = transpose(%0) {perm = [2, 0, 1]} : f64[6,2,4]\n"
      "  return %1\n"
      "}\n";
  check(text == want, "lowered text:\n" + text);
  check(json.find("\"dot_general\"") != std::string::npos, "json names dot_general");
  check(dot.rfind("digraph", 0) == 0, "dot output is a digraph:\n" + dot);

  // The lowered program holds only standard ops, so the plain interpreter runs it; compare with loops.
  std::vector<double> as(6 * 2 * 3), cs(6 * 3 * 4);
  for (size_t k = 0; k < as.size(); ++k) as[k] = double(k % 7) - 3;
  for (size_t k = 0; k < cs.size(); ++k) cs[k] = double(k % 5) * 0.5;
  Tensor av = Tensor::from_col_major<double>({6, 2, 3}, as);
  Tensor cv = Tensor::from_col_major<double>({6, 3, 4}, cs);
  std::vector<Tensor> out = evaluate(lowered, std::vector<Tensor>{av, cv});
  std::vector<double> want_v(6 * 2 * 4, 0.0);
  for (int b = 0; b < 6; ++b)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 3; ++j) want_v[b + 6 * (i + 2 * k)] += as[b + 6 * (i + 2 * j)] * cs[b + 6 * (j + 3 * k)];
  check_close(out.at(0), want_v, "lowered bmm");

  // [partial]
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  rt.add_module(linalg::module_descriptor());           // svd has no lowering rule: it is kept
  TraceContext sc("spectrum", &rt.registry());
  TracedTensor m = sc.parameter("m", DType::f64, {4, 3});
  TracedTensor gram = einsum::einsum(sc, "ij,kj->ik", {m, m});   // M Mᵀ
  Program spectrum = sc.finish({linalg::svd(sc, gram).s});
  LoweredProgram partial =
      lower_to_standard_ops(spectrum, {}, rt.registry(), LowerOptions{.keep_unlowerable = true});
  fmt::print("{}{}", print_program(partial.program), partial.describe());
  // [partial]
  const std::string want_partial =
      "program @spectrum(%m: f64[4,3]) -> (f64[4]) {\n"
      "  %0 = dot_general(%m, %m) {lhs_batch = [], lhs_contracting = [1], rhs_batch = [], rhs_contracting = [1]}"
      " : f64[4,4]\n"
      "  %1, %2, %3 = einstage.linalg.v1(%0) {eps = 1e-12, full = false, op = svd} : f64[4,4], f64[4], f64[4,4]\n"
      "  return %2\n"
      "}\n";
  check(print_program(partial.program) == want_partial, "partially lowered text:\n" + print_program(partial.program));
  check(partial.describe() == "kept 'einstage.linalg.v1' at %1 (%1 in the lowered program): module "
                              "'einstage.linalg' registers no lowering rule\n",
        "kept: " + partial.describe());
  // M Mᵀ is positive semidefinite, so its singular values are its eigenvalues and sum to its trace, ‖M‖²_F.
  std::vector<double> ms(4 * 3);
  double frob2 = 0;
  for (size_t k = 0; k < ms.size(); ++k) {
    ms[k] = double(k % 5) - 1.5;
    frob2 += ms[k] * ms[k];
  }
  Tensor sv = rt.prepare(partial.program).run({Tensor::from_col_major<double>({4, 3}, ms)}).at(0);
  double trace = 0;
  for (double v : sv.to_col_major<double>()) trace += v;
  check_close(Tensor::scalar<double>(trace), {frob2}, "sum of the kept svd's singular values");

  return example::result("04_lower");
}
