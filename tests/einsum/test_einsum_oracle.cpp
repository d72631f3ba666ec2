// The executor against the definitional loop (EinsumTestUtil.h) on seeded random einsums: 1-6 operands, repeated
// input and output labels, hyperedges, scalars, zero-size extents, permitted length-1 broadcasting, strided
// operands, every dtype, several plan specs; each case also checks that a prepared plan run on 2 threads gives the
// same bits as the one-shot call on 1 thread. Then the operands' roles from the output's strides (StepOrientation.h):
// the rule on hand-made problems, and row-major products into row-major results against the loop.
#include "EinsumTestUtil.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/exec/StepOrientation.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/ThreadPool.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <set>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

struct Case {
  std::vector<std::string> terms;
  std::string output;
  std::map<char, int64_t> extent;    // label extents
  std::vector<Shape> shapes;         // stored shapes (1 where an axis broadcasts)
  bool broadcast = false;
  es::PlanSpec spec;
  std::string text() const {
    std::string s;
    for (size_t k = 0; k < terms.size(); ++k) s += (k ? "," : "") + terms[k];
    return s + "->" + output;
  }
};

Case random_case(kt::Rng& r) {
  Case c;
  const int n = static_cast<int>(r.uniform(1, 6));
  const int pool = static_cast<int>(r.uniform(1, 6));
  for (int i = 0; i < pool; ++i) {
    int64_t kind = r.uniform(0, 29);
    c.extent['a' + i] = kind == 0 ? 0 : kind < 6 ? 1 : r.uniform(2, 4);
  }
  // Keep the full index space small so the definitional loop is fast.
  int64_t total = 1;
  for (auto& [l, e] : c.extent) {
    if (total * std::max<int64_t>(e, 1) > 3000) e = 1;
    total *= std::max<int64_t>(e, 1);
  }
  std::set<char> used;
  for (int k = 0; k < n; ++k) {
    std::string t;
    const int rank = static_cast<int>(r.uniform(0, 4));
    for (int a = 0; a < rank; ++a) {
      char l = static_cast<char>('a' + r.uniform(0, pool - 1));
      t += l;
      used.insert(l);
    }
    c.terms.push_back(t);
  }
  // Output: a random subset of the used labels in random order, sometimes with a repeated label.
  std::vector<char> cand(used.begin(), used.end());
  for (size_t i = cand.size(); i > 1; --i) std::swap(cand[i - 1], cand[static_cast<size_t>(r.uniform(0, static_cast<int64_t>(i) - 1))]);
  for (char l : cand)
    if (r.uniform(0, 1)) c.output += l;
  if (!c.output.empty() && r.uniform(0, 5) == 0)
    c.output.insert(static_cast<size_t>(r.uniform(0, static_cast<int64_t>(c.output.size()))), 1, c.output[0]);
  for (auto it = c.extent.begin(); it != c.extent.end();) it = used.count(it->first) ? std::next(it) : c.extent.erase(it);
  // Broadcasting: with permission, some (operand, label) pairs store extent 1 (all of that label's axes in the
  // operand, so repeated labels stay equal within the operand).
  c.broadcast = r.uniform(0, 3) == 0;
  for (const std::string& t : c.terms) {
    std::map<char, bool> bc;
    for (char l : t)
      if (!bc.count(l)) bc[l] = c.broadcast && c.extent[l] > 1 && r.uniform(0, 2) == 0;
    Shape s;
    for (char l : t) s.push_back(bc[l] ? 1 : c.extent[l]);
    c.shapes.push_back(s);
  }
  // The bound extent of a label all of whose axes broadcast is 1.
  for (auto& [l, e] : c.extent) {
    bool full = false;
    for (size_t k = 0; k < c.terms.size(); ++k)
      for (size_t a = 0; a < c.terms[k].size(); ++a)
        if (c.terms[k][a] == l && c.shapes[k][a] == e) full = true;
    if (!full) e = 1;
  }
  switch (r.uniform(0, 3)) {
    case 0: c.spec = es::PlanSpec{}; break;
    case 1: c.spec = es::PlanSpec::greedy_plan(); break;
    case 2: c.spec = es::PlanSpec::left_to_right_plan(); break;
    default: c.spec = es::PlanSpec::optimal_plan(); break;
  }
  return c;
}

template <typename T>
void run_case(const Case& c, kt::Rng& r, uint64_t seed) {
  std::vector<Tensor> ops;
  for (const Shape& s : c.shapes) ops.push_back(et::random_tensor<T>(r, s, r.uniform(0, 1) == 1));
  INFO("seed " << seed << " einsum " << c.text() << " dtype " << name(dtype_v<T>) << " broadcast " << c.broadcast
                << " plan " << c.spec.to_string());
  es::EinsumOptions opt;
  opt.plan = c.spec;
  opt.allow_broadcast = c.broadcast;
  Tensor got = es::einsum(c.text(), ops, opt);
  std::vector<double> scale;
  auto want = et::definitional<T>(c.terms, c.output, ops, c.extent, &scale);
  const std::string diff = et::compare<T>(got, want, scale);
  CHECK_MESSAGE(diff.empty(), diff);
  // Prepared, on two threads: the same bits.
  std::vector<es::TensorMeta> metas;
  for (const Tensor& t : ops) metas.push_back(es::TensorMeta::of(t));
  es::EinsumPlan plan = es::EinsumPlan::prepare(c.text(), metas, opt);
  ThreadPool pool(2);
  Tensor again = plan.execute(ops, &pool);
  CHECK(bitwise_equal(got, again));
}

}  // namespace

TEST_CASE("einsum matches the definitional loop on 600 random einsums") {
  int counts[5] = {};
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    kt::Rng r(seed * 1000003);
    Case c = random_case(r);
    const DType dt = kAllDTypes[seed % 5];
    counts[seed % 5]++;
    dispatch_dtype(dt, [&](auto tag) { run_case<decltype(tag)>(c, r, seed); });
  }
  CHECK(counts[0] == 120);
}

// Run by ctest as einsum_portable, in a process started with EINSTAGE_JIT=0 (the variable is read once per process).
TEST_CASE("einsum on the portable kernel (EINSTAGE_JIT=0) matches the definitional loop" * doctest::skip()) {
  REQUIRE(!jit_enabled());
  for (uint64_t seed = 601; seed <= 800; ++seed) {
    kt::Rng r(seed * 1000003);
    Case c = random_case(r);
    dispatch_dtype(kAllDTypes[seed % 5], [&](auto tag) { run_case<decltype(tag)>(c, r, seed); });
  }
}

namespace {

using Axis = ContractionProblem::Axis;

// C[m, n] = A[m, k] B[k, n] with C's strides (cm, cn) and A's and B's column-major.
ContractionProblem matrix_problem(int64_t m, int64_t n, int64_t k, int64_t cm, int64_t cn) {
  ContractionProblem p;
  p.m = {Axis{m, 1, 0, cm}};
  p.n = {Axis{n, 0, k, cn}};
  p.k = {Axis{k, m, 1, 0}};
  return p;
}

}  // namespace

TEST_CASE("step orientation: a result contiguous along an n axis runs as C^T = B^T A^T") {
  int dummy_a = 0, dummy_b = 0;
  // Column-major C (contiguous along m): as given.
  ContractionProblem col = matrix_problem(6, 5, 4, 1, 6);
  CHECK_FALSE(es::should_exchange_operands(col));
  CHECK_FALSE(es::orient_for_output(col));
  // Row-major C (contiguous along n): m and n, A and B, and every axis's A and B strides exchanged.
  ContractionProblem row = matrix_problem(6, 5, 4, 5, 1);
  row.a = &dummy_a;
  row.b = &dummy_b;
  REQUIRE(es::orient_for_output(row));
  REQUIRE(row.m.size() == 1);
  REQUIRE(row.n.size() == 1);
  CHECK(row.a == &dummy_b);
  CHECK(row.b == &dummy_a);
  CHECK(row.m[0].extent == 5);
  CHECK(row.m[0].stride_a == 4);  // B's n stride, now A's m stride
  CHECK(row.m[0].stride_c == 1);
  CHECK(row.n[0].extent == 6);
  CHECK(row.n[0].stride_b == 1);  // A's m stride, now B's n stride
  CHECK(row.n[0].stride_c == 5);
  CHECK(row.k[0].stride_a == 1);
  CHECK(row.k[0].stride_b == 6);
  CHECK_FALSE(es::should_exchange_operands(row));  // oriented once, it stays
  exchange_operands(row);                         // and exchanging back restores the caller's problem
  CHECK(row.a == &dummy_a);
  CHECK(row.m[0].extent == 6);
  CHECK(row.m[0].stride_c == 5);
  CHECK(row.n[0].stride_b == 4);
  CHECK(row.k[0].stride_a == 6);
  // A strided C: the smaller stride decides (|-2| along n against 7 along m).
  CHECK(es::should_exchange_operands(matrix_problem(6, 5, 4, 7, -2)));
  // Matrix-vector shapes and extent-1 axes keep their roles: the kernel has paths of its own for them.
  CHECK_FALSE(es::should_exchange_operands(matrix_problem(1, 5, 4, 5, 1)));
  CHECK_FALSE(es::should_exchange_operands(matrix_problem(6, 1, 4, 1, 1)));
  ContractionProblem vector_matrix = matrix_problem(6, 5, 4, 5, 1);
  vector_matrix.m.clear();
  CHECK_FALSE(es::should_exchange_operands(vector_matrix));
  // A C contiguous along a batch axis: as given.
  ContractionProblem batched = matrix_problem(6, 5, 4, 3, 18);
  batched.batch = {Axis{3, 24, 20, 1}};
  CHECK_FALSE(es::should_exchange_operands(batched));
}

TEST_CASE("row-major products into row-major results (NumPy's C order) match the definitional loop in every dtype") {
  // ij,jk->ik on C-ordered operands into a C-ordered result, the case the orientation is for, with k beyond one KC
  // block of the packed path; and a three-operand chain whose last step writes a C-ordered result. Each at 1 and 2
  // threads: the same bits.
  auto c_ordered = [](const Tensor& t) { return t.transpose().contiguous().transpose(); };  // values kept, row-major
  uint64_t seed = 77;
  for (DType dt : kAllDTypes) {
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      kt::Rng r(seed++);
      const Tensor a = c_ordered(et::random_tensor<T>(r, {37, 530}, false));
      const Tensor b = c_ordered(et::random_tensor<T>(r, {530, 41}, false));
      const Tensor a2 = c_ordered(et::random_tensor<T>(r, {37, 20}, false));
      const Tensor b2 = c_ordered(et::random_tensor<T>(r, {20, 41}, false));
      const Tensor d = c_ordered(et::random_tensor<T>(r, {41, 9}, false));
      struct Run {
        std::vector<std::string> terms;
        std::string output;
        std::vector<Tensor> ops;
        std::map<char, int64_t> extent;
      };
      const std::map<char, int64_t> long_j{{'i', 37}, {'j', 530}, {'k', 41}};
      for (const Run& run : {Run{{"ij", "jk"}, "ik", {a, b}, long_j}, Run{{"jk", "ij"}, "ki", {b, a}, long_j},
                             Run{{"ij", "jk", "kl"}, "il", {a2, b2, d}, {{'i', 37}, {'j', 20}, {'k', 41}, {'l', 9}}}}) {
        std::string text;
        for (size_t t = 0; t < run.terms.size(); ++t) text += (t ? "," : "") + run.terms[t];
        text += "->" + run.output;
        INFO("einsum " << text << " dtype " << name(dt));
        std::vector<es::TensorMeta> metas;
        for (const Tensor& t : run.ops) metas.push_back(es::TensorMeta::of(t));
        const es::EinsumPlan plan = es::EinsumPlan::prepare(text, metas);
        const Shape out_shape = plan.output_shape();
        Tensor out = Tensor::empty(dt, {out_shape[1], out_shape[0]}).transpose();  // row-major
        plan.execute_into(run.ops, out, nullptr);
        std::vector<double> scale;
        const auto want = et::definitional<T>(run.terms, run.output, run.ops, run.extent, &scale);
        const std::string diff = et::compare<T>(out, want, scale);
        CHECK_MESSAGE(diff.empty(), diff);
        ThreadPool pool(2);
        Tensor again = Tensor::empty(dt, {out_shape[1], out_shape[0]}).transpose();
        plan.execute_into(run.ops, again, &pool);
        CHECK(bitwise_equal(out, again));
      }
    });
  }
}
