// Sizes at the edges: einsums over zero-size operands with huge extents give zeros without running kernels or
// sizing scratch (as NumPy does), a plan whose intermediates overflow 64 bits names the step, and a planned arena
// larger than the machine fails with the out-of-memory error before allocating, naming the step and the size.
#include "support/ErrorOf.h"

#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/exec/Executor.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/exec/SlicedEinsum.h"
#include "extensions/einsum/op/TraceEinsum.h"

#include <doctest/doctest.h>

using namespace einstage;
namespace es = einstage::einsum;
using test::error_of;

namespace {
constexpr int64_t p(int bits) { return int64_t{1} << bits; }
}  // namespace

TEST_CASE("einsum over a zero-size operand with huge extents: zeros, like NumPy") {
  const Tensor z = Tensor::empty(DType::f64, {0, p(59)});  // np.empty((0, 2**59))
  Tensor full = es::einsum("ij,kj->", {z, z});
  CHECK(full.shape() == Shape{});
  CHECK(full.at<double>({}) == 0.0);
  CHECK(es::einsum("ij,kj->ik", {z, z}).shape() == Shape{0, 0});
  CHECK(es::einsum("ij->", {z}).at<double>({}) == 0.0);
  CHECK(es::einsum("ij,kj,k->", {z, z, Tensor::empty(DType::f64, {0})}).at<double>({}) == 0.0);
  // A sum over an empty label fills a non-empty output with zeros, whatever was in its memory.
  const Tensor a = Tensor::empty(DType::f32, {3, 0}), b = Tensor::empty(DType::f32, {0, 4});
  CHECK(es::einsum("ij,jk->ik", {a, b}).to_col_major<float>() == std::vector<float>(12, 0.0f));
  CHECK(es::einsum("ij,jk->iik", {a, b}).to_col_major<float>() == std::vector<float>(36, 0.0f));
  const es::EinsumPlan plan = es::EinsumPlan::prepare("ij,kj->", std::vector<es::TensorMeta>{es::TensorMeta::of(z),
                                                                                              es::TensorMeta::of(z)});
  CHECK(plan.arena_bytes() == 0);
  CHECK(plan.workspace_bytes() == 0);
}

TEST_CASE("a plan whose intermediate does not fit in 64 bits names the einsum and the step") {
  const int64_t m = std::numeric_limits<int64_t>::max();
  std::vector<es::TensorMeta> metas(4, es::TensorMeta{DType::f64, Shape{m}});
  CHECK(error_of([&] { es::EinsumPlan::prepare("i,j,k,l->ijkl", metas); }) ==
        "einsum \"i,j,k,l->ijkl\": step 0: the result of shape [9223372036854775807,9223372036854775807] has more "
        "elements than fit in 64 bits");
}

TEST_CASE("a planned arena larger than the machine: the out-of-memory error, before allocating, naming the step") {
  // ab,bc -> ac first: an 8.8 TB intermediate between 8 MB operands and an 8 MB result.
  const Tensor x = Tensor::zeros(DType::f64, {p(20), 1}), y = Tensor::zeros(DType::f64, {1, p(20)});
  es::EinsumOptions options;
  options.plan = es::PlanSpec::path_plan({{0, 1}, {0, 1}});
  const std::string message = error_of([&] { es::einsum("ab,bc,cd->ad", {x, y, x}, options); });
  CHECK(message.starts_with(
      "out of memory allocating 8796093022208 bytes (8.8 TB) for the scratch of einsum \"ab,bc,cd->ad\" (an arena of "
      "8.8 TB for the intermediates, where the largest intermediate is step 0's result [1048576,1048576] of 8.8 TB, "
      "and a workspace of 0 bytes): this machine has "));
}

// A term left out ("ij,jk,kl->ir" for four operands) used to be reported as the output label missing from every
// input; where the number of operands is known, the count is said first, through the direct API, a prepared plan, a
// sliced plan and tracing alike.
TEST_CASE("a wrong number of input terms is reported before an output label it leaves unmatched") {
  std::vector<Tensor> four(4, Tensor::zeros(DType::f64, {2, 2}));
  const std::string count = "einsum \"ij,jk,kl->ir\": 4 operands given but the subscripts have 3 input terms";
  CHECK(error_of([&] { einsum::einsum("ij,jk,kl->ir", four); }) == count);
  std::vector<einsum::TensorMeta> metas;
  for (const Tensor& t : four) metas.push_back(einsum::TensorMeta::of(t));
  CHECK(error_of([&] { einsum::EinsumPlan::prepare("ij,jk,kl->ir", metas); }) == count);
  CHECK(error_of([&] { einsum::SlicedEinsumPlan::prepare("ij,jk,kl->ir", metas, int64_t{1} << 20); }) == count);
  ExtensionRegistry registry;
  einsum::register_einsum_semantics(registry);
  TraceContext ctx("f", &registry);
  std::vector<TracedTensor> params;
  for (int k = 0; k < 4; ++k) params.push_back(ctx.parameter(fmt::format("a{}", k), DType::f64, {2, 2}));
  CHECK(error_of([&] { einsum::einsum(ctx, "ij,jk,kl->ir", std::span<const TracedTensor>(params)); }) == count);
  // With the right count the output label is what is wrong, and said so.
  std::vector<Tensor> three(four.begin(), four.end() - 1);
  CHECK(error_of([&] { einsum::einsum("ij,jk,kl->ir", three); })
            .rfind("einsum \"ij,jk,kl->ir\": output label 'r' appears in no input term", 0) == 0);
}
