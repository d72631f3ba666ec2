// Tracing: golden text of traced programs (plain, nested, integer, ellipsis, arithmetic, symbolic constraints,
// broadcast bit and output-shape hint), the payload's own text/JSON forms, and the grouped form.
#include "CompilerTestUtil.h"

#include "compiler/Trace.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/op/TraceEinsum.h"

using namespace einstage;
using namespace compiler_test;
using einsum::TraceEinsumOptions;

namespace {
const Dim n = Dim::symbol("n");
const Dim m = Dim::symbol("m");
}  // namespace

TEST_CASE("trace: the architecture's loss example is one einsum op plus standard ops") {
  TraceContext ctx("loss", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {n, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  CHECK(y.type().to_string() == "f64[n,4]");
  Program p = ctx.finish({sum(y * y)});
  CHECK(p.instructions.size() == 3);
  CHECK(print_program(p) ==
        "program @loss(%x: f64[n,3], %w: f64[3,4]) -> (f64[]) {\n"
        "  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"} : f64[n,4]\n"
        "  %1 = mul(%0, %0) : f64[n,4]\n"
        "  %2 = reduce_sum(%1) {axes = [0, 1]} : f64[]\n"
        "  return %2\n"
        "}\n");
  check_golden("trace_loss", p);
}

TEST_CASE("trace: a nested string stores its order as an explicit tree plan spec, no tree") {
  TraceContext ctx("chain", &registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {n, 3});
  TracedTensor b = ctx.parameter("b", DType::f64, {3, 4});
  TracedTensor c = ctx.parameter("c", DType::f64, {4, 5});
  TracedTensor y = einsum::einsum(ctx, "ij,(jk,kl)->il", {a, b, c});
  Program p = ctx.finish({y});
  const auto& payload =
      static_cast<const einsum::EinsumPayload&>(*std::get<ExtensionOp>(p.instructions[0].op).payload);
  CHECK(payload.plan().kind == einsum::PlanKind::tree);
  CHECK(payload.plan().to_string() == "tree[(1,2),(0,3)]");
  check_golden("trace_nested", p);
  // A plan passed beside parentheses is refused (the string already fixes the order).
  TraceContext ctx2("chain", &registry());
  TracedTensor a2 = ctx2.parameter("a", DType::f64, {2, 3});
  TracedTensor b2 = ctx2.parameter("b", DType::f64, {3, 4});
  TraceEinsumOptions opt;
  opt.plan = einsum::PlanSpec::greedy_plan();
  CHECK(error_of([&] { einsum::einsum(ctx2, "(ij,jk)->ik", {a2, b2}, opt); })
            .find("fixes the contraction order with parentheses, and plan greedy was passed too") != std::string::npos);
}

TEST_CASE("trace: integer labels and ellipsis keep their exact labels in the JSON form of the subscripts") {
  TraceContext ctx("ints", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, n});
  TracedTensor w = ctx.parameter("w", DType::f64, {n, 4});
  TracedTensor y = einsum::einsum(ctx, einsum::make_subscripts({{0, 1}, {1, 2}}, {0, 2}), {x, w});
  CHECK(y.type().to_string() == "f64[2,4]");
  TracedTensor u = ctx.parameter("u", DType::f32, {5, 2, 3});
  TracedTensor v = ctx.parameter("v", DType::f32, {5, 3, 2});
  TracedTensor z = einsum::einsum(ctx, "...ij,...jk->...ik", {u, v});
  CHECK(z.type().to_string() == "f32[5,2,2]");
  check_golden("trace_integer_and_ellipsis", ctx.finish({y, z}));
}

TEST_CASE("trace: symbolic extents become shape constraints naming the einsum, the label and the operands") {
  TraceContext ctx("sym", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {n, m});
  TracedTensor w = ctx.parameter("w", DType::f64, {Dim::symbol("k"), 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  CHECK(y.type().to_string() == "f64[n,4]");
  Program p = ctx.finish({y});
  REQUIRE(p.constraints.size() == 1);
  CHECK(p.constraints[0].lhs == m);
  CHECK(p.constraints[0].rhs == Dim::symbol("k"));
  CHECK(p.constraints[0].what == "'einstage.einsum.v1' label 'j' in operand 0 (axis 1) and operand 1 (axis 0)");
  check_golden("trace_symbolic_constraint", p);
  // The constraint is checked when the shapes are bound.
  CHECK(error_of([&] { check_constraints(p, {{"n", 2}, {"m", 3}, {"k", 4}}); })
            .find("shape constraint m == k at %0 does not hold: m = 3 but k = 4") != std::string::npos);
  CHECK_NOTHROW(check_constraints(p, {{"n", 2}, {"m", 3}, {"k", 3}}));
}

TEST_CASE("trace: the broadcast bit and the output-shape hint are part of the payload") {
  TraceContext ctx("bcast", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 1});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, n});
  TraceEinsumOptions opt;
  opt.allow_broadcast = true;
  opt.output_shape = std::vector<Dim>{2, Dim::symbol("p")};
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w}, opt);
  // j: 1 broadcasts against 3 (permitted); k: the hint names it p, recorded as p == n.
  CHECK(y.type().to_string() == "f64[2,p]");
  Program p = ctx.finish({y});
  REQUIRE(p.constraints.size() == 1);
  CHECK(p.constraints[0].lhs == Dim::symbol("p"));
  CHECK(p.constraints[0].rhs == n);
  check_golden("trace_broadcast_hint", p);
  // Without the permission the same shapes fail at the call.
  TraceContext ctx2("bcast", &registry());
  TracedTensor x2 = ctx2.parameter("x", DType::f64, {2, 1});
  TracedTensor w2 = ctx2.parameter("w", DType::f64, {3, 4});
  CHECK(error_of([&] { einsum::einsum(ctx2, "ij,jk->ik", {x2, w2}); }) ==
        "'einstage.einsum.v1' at %0 in @bcast: einsum \"ij,jk->ik\": label 'j' has extent 1 in operand 0 (axis 1) "
        "but 3 in operand 1 (axis 0); a length-1 axis broadcasts only under '...' or when the caller allows "
        "broadcasting (allow_broadcast)");
}

TEST_CASE("trace: arithmetic promotes dtypes, broadcasts scalars, and standard-op helpers append one op each") {
  TraceContext ctx("arith", &registry());
  TracedTensor x = ctx.parameter("x", DType::f32, {n, 3});
  TracedTensor y = ctx.parameter("y", DType::f64, {n, 3});
  TracedTensor s = x + y;  // convert x to f64, then add
  CHECK(s.dtype() == DType::f64);
  // One operation per statement: C++ leaves the evaluation order of operands unspecified, and it is the trace order.
  TracedTensor twice = 2.0 * s;
  TracedTensor shifted = twice - 1.0;
  TracedTensor num = exp(shifted);
  TracedTensor den = sqrt(s);
  TracedTensor t = num / den;
  TracedTensor r = reshape(transpose(t, {1, 0}), {3 * n});
  TracedTensor c = ctx.constant(Tensor::from_col_major<double>({3}, {1.0, 2.0, 3.0}));
  TracedTensor z = broadcast_in_dim(c, {0}, {3, n});
  TracedTensor q = reduce_sum(-z, {1});
  Program p = ctx.finish({r, q, log(sum(t))});
  check_golden("trace_arithmetic", p);
}

TEST_CASE("trace: select promotes each pair of operands, broadcasts rank-0 ones, and names itself in errors") {
  TraceContext ctx("relu", &registry());
  TracedTensor x = ctx.parameter("x", DType::f32, {n, 3});
  TracedTensor zero = ctx.full(TensorType{DType::f64, {}}, 0.0);
  TracedTensor relu = select(Comparison::gt, x, zero, x, zero);
  CHECK(relu.type().to_string() == "f64[n,3]");
  Program p = ctx.finish({relu});
  CHECK(print_program(p) ==
        "program @relu(%x: f32[n,3]) -> (f64[n,3]) {\n"
        "  %0 = constant() {value = f64[]<[0]>} : f64[]\n"
        "  %1 = convert(%x) {dtype = f64} : f64[n,3]\n"
        "  %2 = convert(%x) {dtype = f64} : f64[n,3]\n"
        "  %3 = broadcast_in_dim(%0) {dims = [], shape = [n, 3]} : f64[n,3]\n"
        "  %4 = broadcast_in_dim(%0) {dims = [], shape = [n, 3]} : f64[n,3]\n"
        "  %5 = select(%1, %3, %2, %4) {cmp = gt} : f64[n,3]\n"
        "  return %5\n"
        "}\n");
  TraceContext other("mismatch", &registry());
  TracedTensor y = other.parameter("y", DType::f64, {n, 3});
  TracedTensor v = other.parameter("v", DType::f64, {4});
  CHECK(error_of([&] { select(Comparison::lt, y, v, y, v); }) ==
        "'select' at %0 in @mismatch: operand 1 (b) has type f64[4] but operand 0 (a) has f64[n,3]; all four operands "
        "must have equal shapes (insert a broadcast_in_dim)");
}

TEST_CASE("trace: grouped and integer forms append one einsum op with expanded integer labels") {
  TraceContext ctx("grouped", &registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {2, 3, 4});
  TracedTensor b = ctx.parameter("b", DType::f64, {3, 4, 5});
  TracedTensor y = einsum::einsum_grouped(ctx, "aG,Gb->ab", {a, b});
  CHECK(y.type().to_string() == "f64[2,5]");
  Program p = ctx.finish({y});
  CHECK(p.instructions.size() == 1);
  // The payload prints and parses back exactly (the group axes keep their labels and names).
  const auto& payload =
      static_cast<const einsum::EinsumPayload&>(*std::get<ExtensionOp>(p.instructions[0].op).payload);
  CHECK(payload.subscripts().inputs[0].size() == 3);
  auto back = einsum::EinsumPayload::parse_text(payload.to_text());
  CHECK(back->equals(payload));
  CHECK(back->to_text() == payload.to_text());
  auto back_json = einsum::EinsumPayload::parse_json(payload.to_json());
  CHECK(back_json->equals(payload));
  CHECK(print_program(parse_program(print_program(p), &registry())) == print_program(p));
}

TEST_CASE("einsum payload: text and JSON forms, equality and hash") {
  using einsum::EinsumPayload;
  EinsumPayload a(einsum::parse_subscripts("ij,jk->ik"), einsum::PlanSpec{}, false);
  EinsumPayload b(einsum::parse_subscripts("ij,jk->ik"), einsum::PlanSpec{}, false);
  EinsumPayload c(einsum::parse_subscripts("ij,jk->ik"), einsum::PlanSpec::greedy_plan(), false);
  EinsumPayload d(einsum::parse_subscripts("ij,jk->ik"), einsum::PlanSpec{}, true, std::vector<Dim>{n, 4});
  EinsumPayload e(einsum::parse_subscripts("ab,bc->ac"), einsum::PlanSpec{}, false);
  CHECK(a.equals(b));
  CHECK(a.hash() == b.hash());
  CHECK(!a.equals(c));
  CHECK(!a.equals(d));
  CHECK(!a.equals(e));  // same structure, other names: they print differently, so they are different ops
  CHECK(a.hash() != c.hash());
  CHECK(a.to_text() == "broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"");
  CHECK(d.to_text() == "broadcast = true, output_shape = [n, 4], plan = auto, subscripts = \"ij,jk->ik\"");
  CHECK(c.to_text() == "broadcast = false, plan = greedy, subscripts = \"ij,jk->ik\"");
  for (const EinsumPayload* p : {&a, &c, &d, &e}) {
    CHECK(EinsumPayload::parse_text(p->to_text())->equals(*p));
    CHECK(EinsumPayload::parse_json(p->to_json())->equals(*p));
  }
  CHECK(d.to_json() == R"({"broadcast":true,"output_shape":["n",4],"plan":"auto","subscripts":"ij,jk->ik"})");
  EinsumPayload u(einsum::parse_subscripts("甲乙,乙丙->甲丙"), einsum::PlanSpec::anneal_plan(10, 3), false);
  CHECK(u.to_text() == "broadcast = false, plan = anneal(budget=10,seed=3), subscripts = \"甲乙,乙丙->甲丙\"");
  CHECK(EinsumPayload::parse_text(u.to_text())->equals(u));
}
