// reassociate_products: (A B) C → A (B C) through sums of products, when every reader of the intermediate is a thin
// product. Checked by running the program before and after on seeded random inputs (the results agree to rounding),
// by the shapes that remain (the large intermediate is gone), and by the cases it must leave alone.
#include "CompilerTestUtil.h"

#include "compiler/Dce.h"
#include "compiler/Reassociate.h"
#include "ir/Verifier.h"
#include "runtime/Runtime.h"
#include "support/Random.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace einstage;

namespace {

TensorType mat(int64_t r, int64_t c) { return TensorType{DType::f64, {Dim(r), Dim(c)}}; }

// Whether some instruction of p has a result of type t.
bool has_result_type(const Program& p, const TensorType& t) {
  for (const Instruction& inst : p.instructions)
    for (const Value& r : inst.results)
      if (r.type == t) return true;
  return false;
}

// Runs p and q on the same seeded random inputs and checks every output agrees to 1e-12 relative.
void check_same_results(const Program& p, const Program& q, uint64_t seed) {
  CAPTURE(seed);
  test::SplitMix64 rng{seed};
  std::vector<Tensor> inputs;
  for (const Parameter& param : p.params) {
    const std::vector<int64_t> shape = *param.value.type.constant_shape();
    std::vector<double> data(static_cast<size_t>(shape[0] * shape[1]));
    for (double& x : data) x = rng.symmetric();
    inputs.push_back(Tensor::from_col_major<double>(Shape(shape.begin(), shape.end()), data));
  }
  Runtime rt;
  const std::vector<Tensor> a = rt.prepare(p).run(inputs), b = rt.prepare(q).run(inputs);
  REQUIRE(a.size() == b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    REQUIRE(a[o].shape() == b[o].shape());
    const std::vector<double> x = a[o].to_col_major<double>(), y = b[o].to_col_major<double>();
    double scale = 0, diff = 0;
    for (size_t i = 0; i < x.size(); ++i) scale = std::max(scale, std::abs(x[i])), diff = std::max(diff, std::abs(x[i] - y[i]));
    CHECK(diff <= 1e-12 * scale);
  }
}

}  // namespace

TEST_CASE("reassociate: a sum of products read only by thin products is never formed; results agree") {
  // V = A B + Cᵀ D [60, 50], read as V Z, Vᵀ W and Yᵀ V (Z [50, 2], W [60, 3], Y [60, 4]).
  Builder b("thin_readers");
  const Value a = b.parameter("a", mat(60, 40)), bm = b.parameter("b", mat(40, 50));
  const Value c = b.parameter("c", mat(5, 60)), d = b.parameter("d", mat(5, 50));
  const Value z = b.parameter("z", mat(50, 2)), w = b.parameter("w", mat(60, 3)), y = b.parameter("y", mat(60, 4));
  const Value v = b.add(b.dot_general(a, bm, {1}, {0}), b.dot_general(c, d, {0}, {0}));
  const Program p = b.finish({b.dot_general(v, z, {1}, {0}), b.dot_general(v, w, {0}, {0}),
                              b.dot_general(y, v, {0}, {0})});
  REQUIRE(has_result_type(p, mat(60, 50)));
  const Program q = reassociate_products(p);
  verify(q);
  CHECK_FALSE(has_result_type(q, mat(60, 50)));
  CHECK(q.outputs == p.outputs);  // the readers keep their value ids
  for (uint64_t seed : {1u, 2u, 3u}) check_same_results(p, q, seed);
}

TEST_CASE("reassociate: left alone when a reader is not a product, V is an output, or it would not pay") {
  Builder b("kept");
  const Value a = b.parameter("a", mat(60, 40)), bm = b.parameter("b", mat(40, 50));
  const Value z = b.parameter("z", mat(50, 2)), wide = b.parameter("wide", mat(50, 70));
  const Value v = b.dot_general(a, bm, {1}, {0});
  SUBCASE("an elementwise reader") {
    const Program p = b.finish({b.dot_general(v, z, {1}, {0}), b.exp(v)});
    CHECK(print_program(reassociate_products(p)) == print_program(p));
  }
  SUBCASE("V is an output") {
    const Program p = b.finish({b.dot_general(v, z, {1}, {0}), v});
    CHECK(print_program(reassociate_products(p)) == print_program(p));
  }
  SUBCASE("a wide reader: A (B W) costs more than (A B) W") {
    const Program p = b.finish({b.dot_general(v, wide, {1}, {0})});
    CHECK(print_program(reassociate_products(p)) == print_program(p));
  }
  SUBCASE("a batched product is not a plain matrix product") {
    const Value x = b.parameter("x", TensorType{DType::f64, {Dim(60), Dim(40), Dim(2)}});
    const Value xb = b.dot_general(x, bm, {1}, {0});  // [60, 2, 50]: not rank 2, so not a candidate
    const Program p = b.finish({b.dot_general(xb, z, {2}, {0})});
    CHECK(print_program(reassociate_products(p)) == print_program(eliminate_dead_code(p)));  // v is dead here
  }
}

TEST_CASE("reassociate: a thin reader of a single product: (A B) Z becomes A (B Z), and Zᵀ (A B) becomes (Zᵀ A) B") {
  Builder b("single");
  const Value a = b.parameter("a", mat(30, 20)), bm = b.parameter("b", mat(20, 30));
  const Value z = b.parameter("z", mat(30, 1));
  const Value v = b.dot_general(a, bm, {1}, {0});
  const Program p = b.finish({b.dot_general(v, z, {1}, {0}), b.dot_general(z, v, {0}, {0})});
  const Program q = reassociate_products(p);
  verify(q);
  CHECK_FALSE(has_result_type(q, mat(30, 30)));
  check_same_results(p, q, 7);
}

TEST_CASE("reassociate: the transpose of a product read only by it is the swapped product") {
  Builder b("transposed");
  const Value a = b.parameter("a", mat(30, 20)), bm = b.parameter("b", mat(40, 20)), c = b.parameter("c", mat(20, 5));
  const Value kept = b.dot_general(a, bm, {1}, {1});  // A Bᵀ [30, 40], also an output: its transpose stays
  const Program p = b.finish({b.transpose(b.dot_general(a, c, {1}, {0}), {1, 0}), b.transpose(kept, {1, 0}), kept});
  const Program q = reassociate_products(p);
  verify(q);
  size_t transposes = 0;
  for (const Instruction& inst : q.instructions) transposes += std::holds_alternative<Transpose>(inst.op);
  CHECK(transposes == 1);
  check_same_results(p, q, 11);
}
