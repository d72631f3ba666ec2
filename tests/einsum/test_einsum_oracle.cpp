// The executor against the definitional loop (EinsumTestUtil.h) on seeded random einsums: 1-6 operands, repeated
// input and output labels, hyperedges, scalars, zero-size extents, permitted length-1 broadcasting, strided
// operands, every dtype, several plan specs; each case also checks that a prepared plan run on 2 threads gives the
// same bits as the one-shot call on 1 thread.
#include "EinsumTestUtil.h"
#include "extensions/einsum/exec/Einsum.h"
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
