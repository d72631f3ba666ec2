// Partial lowering (compiler/Lower.h, LowerOptions::keep_unlowerable) of a program with an svd between einsums: the
// einsums become standard ops, the svd (no lowering rule) stays and is reported; the golden text of the partially
// lowered program, its text round trip, its values on the Runtime against a product computed by loops, and the
// pinned error of full lowering.
#include "LinalgTestUtil.h"

#include "compiler/Lower.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/linalg/TraceLinalg.h"
#include "ir/Parser.h"
#include "support/ErrorOf.h"
#include "support/Golden.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <filesystem>

using namespace einstage;
using namespace einstage::linalg_test;
using einstage::test::error_of;

namespace {

// y = U diag(S) Vh of svd(a · b) (so y = a · b), and S.
Program svd_between_einsums() {
  TraceContext ctx("svd_lower", registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {4, 5});
  TracedTensor b = ctx.parameter("b", DType::f64, {5, 3});
  TracedTensor ab = einsum::einsum(ctx, "ij,jk->ik", {a, b});
  auto [u, s, vh] = linalg::svd(ctx, ab);
  TracedTensor y = einsum::einsum(ctx, "ij,j,jk->ik", {u, s, vh});
  return ctx.finish({y, s});
}

}  // namespace

TEST_CASE("lower partially: an svd between einsums stays, the einsums become standard ops, the svd is reported") {
  const Program p = svd_between_einsums();
  LoweredProgram low = lower_to_standard_ops(p, {}, *registry(), LowerOptions{.keep_unlowerable = true});
  const std::string text = print_program(low.program);
  test::check_golden_file(std::filesystem::path(EINSTAGE_SOURCE_DIR) / "tests" / "linalg" / "golden" /
                              "partial_lower_svd.ir",
                          text);
  CHECK(print_program(parse_program(text, registry())) == text);
  size_t extension_ops = 0, einsums = 0;
  for (const Instruction& inst : low.program.instructions)
    if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) {
      ++extension_ops;
      einsums += ext->family() == "einstage.einsum.v1";
    }
  CHECK(extension_ops == 1);
  CHECK(einsums == 0);
  REQUIRE(low.kept.size() == 1);
  CHECK(low.kept[0].family == "einstage.linalg.v1");
  CHECK(low.kept[0].module == "einstage.linalg");
  CHECK(low.describe() == "kept 'einstage.linalg.v1' at %1 (%1 in the lowered program): module 'einstage.linalg' "
                          "registers no lowering rule\n");

  // The partially lowered program computes what the traced one does: y = a · b (loops) and the same S.
  Rng rng(40);
  const Tensor a = random_tensor(DType::f64, {4, 5}, rng), b = random_tensor(DType::f64, {5, 3}, rng);
  const std::vector<Tensor> traced = run(p, {a, b}), lowered = run(low.program, {a, b});
  std::vector<double> ab(4 * 3, 0.0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 5; ++j) ab[i + 4 * k] += a.at<double>({i, j}) * b.at<double>({j, k});
  const std::vector<double> y = lowered.at(0).to_col_major<double>();
  for (size_t n = 0; n < ab.size(); ++n) CHECK(y[n] == doctest::Approx(ab[n]).epsilon(1e-12));
  CHECK(bitwise_equal(lowered.at(1), traced.at(1)));

  // Without the option the svd is an error that names it and the option.
  CHECK(error_of([&] { lower_to_standard_ops(p, {}, *registry()); }) ==
        "lower_to_standard_ops: 'einstage.linalg.v1' at %1 in @svd_lower has no lowering rule (module "
        "'einstage.linalg' registers no lower_results rule for its several results); run the program with a runtime "
        "that loads the module instead, or lower partially (LowerOptions::keep_unlowerable) to keep such ops");
}

TEST_CASE("lower partially: a program whose ops all lower keeps nothing and equals the full lowering") {
  TraceContext ctx("mm", registry());
  TracedTensor a = ctx.parameter("a", DType::f64, {2, 3});
  TracedTensor b = ctx.parameter("b", DType::f64, {3, 4});
  const Program p = ctx.finish({einsum::einsum(ctx, "ij,jk->ik", {a, b})});
  LoweredProgram low = lower_to_standard_ops(p, {}, *registry(), LowerOptions{.keep_unlowerable = true});
  CHECK(low.kept.empty());
  CHECK(low.describe().empty());
  CHECK(print_program(low.program) == print_program(lower_to_standard_ops(p, {}, *registry())));
}
