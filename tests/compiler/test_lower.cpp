// lower_to_standard_ops: the four lowering examples of docs/behaviour.md §4.8 printed exactly (goldens), symbolic
// programs lowered under bindings, and the lowered programs evaluated by the reference interpreter
// (runtime/Interpreter.h) against concrete einsum and a definitional loop on seeded random inputs.
#include "CompilerTestUtil.h"

#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "notation/Naive.h"
#include "runtime/Interpreter.h"

#include <fmt/format.h>

using namespace einstage;
using namespace compiler_test;

namespace {

// One einsum over parameters of these shapes, traced and lowered for its (concrete) shapes.
Program traced(const std::string& name, std::string_view subs, const std::vector<Shape>& shapes,
               const einsum::TraceEinsumOptions& options = {}, DType dtype = DType::f64) {
  TraceContext ctx(name, &registry());
  std::vector<TracedTensor> ops;
  for (size_t k = 0; k < shapes.size(); ++k)
    ops.push_back(ctx.parameter(fmt::format("x{}", k), dtype, std::vector<Dim>(shapes[k].begin(), shapes[k].end())));
  TracedTensor y = einsum::einsum(ctx, subs, std::span<const TracedTensor>(ops), options);
  return ctx.finish({y});
}

// Non-standard ops left in a program.
size_t extension_ops(const Program& p) {
  size_t n = 0;
  for (const Instruction& i : p.instructions) n += kind(i.op) == OpKind::extension;
  return n;
}

}  // namespace

TEST_CASE("lower: bij,bjk->bik is one batched dot_general then a transpose (batch goes to the right)") {
  Program p = lower_to_standard_ops(traced("bmm", "bij,bjk->bik", {{6, 2, 3}, {6, 3, 4}}), {}, registry());
  CHECK(print_program(p) ==
        "program @bmm(%x0: f64[6,2,3], %x1: f64[6,3,4]) -> (f64[6,2,4]) {\n"
        "  %0 = dot_general(%x0, %x1) {lhs_batch = [0], lhs_contracting = [2], rhs_batch = [0], rhs_contracting = [1]} "
        ": f64[2,4,6]\n"
        "  %1 = transpose(%0) {perm = [2, 0, 1]} : f64[6,2,4]\n"
        "  return %1\n"
        "}\n");
  check_golden("lower_bij_bjk_bik", p);
}

TEST_CASE("lower: ijb,jkb->ikb is exactly one dot_general") {
  Program p = lower_to_standard_ops(traced("bmm_right", "ijb,jkb->ikb", {{2, 3, 6}, {3, 4, 6}}), {}, registry());
  REQUIRE(p.instructions.size() == 1);
  CHECK(std::get<DotGeneral>(p.instructions[0].op) == DotGeneral{{2}, {1}, {2}, {0}});
  check_golden("lower_ijb_jkb_ikb", p);
}

TEST_CASE("lower: iij,jk->ik takes the diagonal first, then one dot_general") {
  Program p = lower_to_standard_ops(traced("diag", "iij,jk->ik", {{2, 2, 3}, {3, 4}}), {}, registry());
  REQUIRE(p.instructions.size() == 2);
  CHECK(std::get<ExtractDiag>(p.instructions[0].op) == ExtractDiag{0, 1});
  CHECK(std::get<DotGeneral>(p.instructions[1].op) == DotGeneral{{}, {1}, {}, {0}});
  check_golden("lower_iij_jk_ik", p);
}

TEST_CASE("lower: ij,kl->ijkl is an outer product: two broadcast_in_dim and a mul") {
  Program p = lower_to_standard_ops(traced("outer", "ij,kl->ijkl", {{2, 3}, {4, 5}}), {}, registry());
  REQUIRE(p.instructions.size() == 3);
  CHECK(std::get<BroadcastInDim>(p.instructions[0].op).dims == Axes{0, 1});
  CHECK(std::get<BroadcastInDim>(p.instructions[1].op).dims == Axes{2, 3});
  CHECK(kind(p.instructions[2].op) == OpKind::mul);
  check_golden("lower_ij_kl_ijkl", p);
}

TEST_CASE("lower: symbolic programs need bindings; the lowered program is specialised to them") {
  TraceContext ctx("loss", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  Program p = ctx.finish({sum(y * y)});
  CHECK(error_of([&] { lower_to_standard_ops(p, {}, registry()); }) ==
        "lowering 'einstage.einsum.v1' at %0 in @loss: lowering einsum \"ij,jk->ik\": operand 0 has type f64[n,3] with "
        "symbolic dims; lower_to_standard_ops needs a value for every symbol (pass them as bindings)");
  Program low = lower_to_standard_ops(p, {{"n", 5}}, registry());
  CHECK(extension_ops(low) == 0);
  check_golden("lower_loss_n5", low);
}

TEST_CASE("lower: violated constraints fail before lowering, naming the constraint") {
  TraceContext ctx("sym", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {2, Dim::symbol("m")});
  TracedTensor w = ctx.parameter("w", DType::f64, {Dim::symbol("k"), 4});
  Program p = ctx.finish({einsum::einsum(ctx, "ij,jk->ik", {x, w})});
  CHECK(error_of([&] { lower_to_standard_ops(p, {{"m", 3}, {"k", 4}}, registry()); })
            .find("shape constraint m == k at %0 does not hold: m = 3 but k = 4") != std::string::npos);
}

namespace {

struct Case {
  const char* subs;
  std::vector<Shape> shapes;
  bool broadcast = false;
};

Tensor random_int_tensor(notation_test::SplitMix64& rng, const Shape& shape) {
  std::vector<double> data(size_t(element_count(shape)));
  for (double& v : data) v = rng.small_int();
  return Tensor::from_col_major<double>(shape, std::span<const double>(data));
}

std::vector<double> values_of(const Tensor& t) {
  Tensor c = t.astype(DType::f64).contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + element_count(c.shape()));
}

}  // namespace

TEST_CASE("lower: lowered programs evaluate to concrete einsum's values (seeded, exact integer data)") {
  const std::vector<Case> cases = {
      {"bij,bjk->bik", {{6, 2, 3}, {6, 3, 4}}},
      {"ijb,jkb->ikb", {{2, 3, 6}, {3, 4, 6}}},
      {"iij,jk->ik", {{2, 2, 3}, {3, 4}}},
      {"ij,kl->ijkl", {{2, 3}, {4, 5}}},
      {"bi,bj->bij", {{3, 2}, {3, 4}}},          // outer product with a batch label first (sorted broadcast dims)
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"(ij,jk),(kl,lm)->im", {{2, 3}, {3, 2}, {2, 4}, {4, 3}}},
      {"ij,jk,ki->", {{3, 4}, {4, 2}, {2, 3}}},
      {"ii->i", {{4, 4}}},
      {"ij->", {{3, 5}}},
      {"ijk->kji", {{2, 3, 4}}},
      {"i->ii", {{3}}},
      {"i,i->ii", {{3}, {3}}},
      {"i,i,i->ii", {{3}, {3}, {3}}},
      {"ijk,ik->j", {{2, 3, 4}, {2, 4}}},        // one-sided sums and a free label
      {"ab,bc,cd,de->ae", {{2, 3}, {3, 2}, {2, 3}, {3, 2}}},
      {"ij,jk->ik", {{2, 1}, {3, 4}}, true},     // length-1 broadcast, permitted
      {"ij,jk,kl->il", {{2, 3}, {1, 4}, {4, 2}}, true},
      {"...ij,...jk->...ik", {{5, 2, 3}, {1, 3, 2}}},
  };
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    for (const Case& c : cases) {
      CAPTURE(seed);
      std::string subs_text = c.subs;
      CAPTURE(subs_text);
      notation_test::SplitMix64 rng{seed * 7919 + hash_bytes(c.subs) % 1000};
      std::vector<Tensor> inputs;
      for (const Shape& s : c.shapes) inputs.push_back(random_int_tensor(rng, s));
      einsum::TraceEinsumOptions topt;
      topt.allow_broadcast = c.broadcast;
      Program p = traced("case", c.subs, c.shapes, topt);
      Program low = lower_to_standard_ops(p, {}, registry());
      CHECK(extension_ops(low) == 0);
      std::vector<Tensor> got = evaluate(low, inputs);
      REQUIRE(got.size() == 1);
      einsum::EinsumOptions eopt;
      eopt.allow_broadcast = c.broadcast;
      Tensor want = einsum::einsum(c.subs, std::span<const Tensor>(inputs), eopt);
      CHECK(got[0].shape() == want.shape());
      CHECK(values_of(got[0]) == values_of(want));
      if (values_of(got[0]) != values_of(want)) {
        MESSAGE("lowered:\n" << print_program(low) << "got  " << fmt::format("{}", fmt::join(values_of(got[0]), " "))
                << "\nwant " << fmt::format("{}", fmt::join(values_of(want), " ")));
      }
      // And the definitional loop, independent of both.
      einsum::BoundEinsum bound = einsum::bind_einsum(einsum::parse_notation(c.subs), c.shapes, c.broadcast);
      std::vector<std::vector<double>> ins;
      for (const Tensor& t : inputs) ins.push_back(values_of(t));
      CHECK(values_of(got[0]) == notation_test::naive_einsum(bound, ins));
    }
  }
}

TEST_CASE("lower: mixed dtypes are converted to the promoted dtype first, as concrete einsum does") {
  TraceContext ctx("mixed", &registry());
  TracedTensor x = ctx.parameter("x", DType::f32, {2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  CHECK(y.dtype() == DType::f64);
  Program low = lower_to_standard_ops(ctx.finish({y}), {}, registry());
  REQUIRE(low.instructions.size() == 2);
  CHECK(std::get<Convert>(low.instructions[0].op).dtype == DType::f64);
}

TEST_CASE("lower: a symbolic program lowered under bindings computes what the traced program computes") {
  // The traced program runs through the interpreter with einsum handed to concrete einsum; the lowered program runs
  // with standard ops only. Integer-valued data, so the two must agree exactly.
  const Dim n = Dim::symbol("n");
  TraceContext ctx("mixed_ops", &registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {n, 3});
  TracedTensor b = ctx.parameter("b", DType::f64, {3, 4});
  TracedTensor c = ctx.parameter("c", DType::f64, {4, n});
  TracedTensor y = einsum::einsum(ctx, "ij,jk,kl->il", {a, b, c});
  TracedTensor t = transpose(y, {1, 0});
  TracedTensor s = t * 2.0;
  TracedTensor r = reshape(s, {n * n});
  TracedTensor d = einsum::einsum(ctx, "ii->i", {y});
  Program p = ctx.finish({r, d + 1.0});
  EvalOptions handler;
  handler.extension = [](const Instruction& inst, const std::string&, std::span<const Tensor> ops, const DimBindings&) {
    const auto& pl = static_cast<const einsum::EinsumPayload&>(*std::get<ExtensionOp>(inst.op).payload);
    einsum::EinsumOptions o;
    o.plan = pl.plan();
    o.allow_broadcast = pl.broadcast();
    return std::vector<Tensor>{einsum::einsum(pl.subscripts(), ops, o)};
  };
  for (int64_t size : {1, 2, 5}) {
    CAPTURE(size);
    notation_test::SplitMix64 rng{uint64_t(size)};
    std::vector<Tensor> inputs = {random_int_tensor(rng, {size, 3}), random_int_tensor(rng, {3, 4}),
                                  random_int_tensor(rng, {4, size})};
    Program low = lower_to_standard_ops(p, {{"n", size}}, registry());
    CHECK(extension_ops(low) == 0);
    CHECK(low.params[0].value.type.to_string() == fmt::format("f64[{},3]", size));
    std::vector<Tensor> want = evaluate(p, inputs, handler);
    std::vector<Tensor> got = evaluate(low, inputs);
    REQUIRE(got.size() == 2);
    for (size_t k = 0; k < 2; ++k) {
      CHECK(got[k].shape() == want[k].shape());
      CHECK(values_of(got[k]) == values_of(want[k]));
    }
  }
}

TEST_CASE("lower: slice sizes and pad shapes are specialised to the bindings, like reshape's shape") {
  const Dim n = Dim::symbol("n");
  TraceContext ctx("window", &registry());
  TracedTensor x = ctx.parameter("x", DType::f64, {n, 4});
  TracedTensor s = slice(x, 1, 1, 4, 2);  // x[:, 1:4:2]: every row, columns 1 and 3
  Program p = ctx.finish({pad(abs(s), {0, 1}, {n, 4}, {1, 2})});
  Program low = lower_to_standard_ops(p, {{"n", 3}}, registry());
  for (const Instruction& inst : low.instructions) {
    CAPTURE(op_name(inst.op));
    CHECK(inst.result().type.constant_shape().has_value());
  }
  CHECK(low.instructions.back().result().type.to_string() == "f64[3,4]");
  notation_test::SplitMix64 rng{7};
  std::vector<Tensor> inputs = {random_int_tensor(rng, {3, 4})};
  std::vector<Tensor> want = evaluate(p, inputs), got = evaluate(low, inputs);
  REQUIRE(got.size() == 1);
  CHECK(values_of(got[0]) == values_of(want[0]));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      CHECK(got[0].at<double>({i, j}) == (j % 2 == 1 ? std::abs(inputs[0].at<double>({i, j})) : 0.0));
}
