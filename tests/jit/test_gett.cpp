// JIT GETT against the definitional oracle and the portable kernel on seeded random problems of every JIT dtype.
#include "ProblemGen.h"

#include "ir/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>

using namespace einstage;
using namespace einstage::testing;

namespace {

KernelCache& memory_cache() {
  static KernelCache cache("");  // in-memory: these tests do not touch the user's cache directory
  return cache;
}

std::string describe(const ContractionProblem& p) {
  std::string s = std::string(name(p.dtype)) + (p.accumulate ? " accumulate" : " overwrite");
  const std::vector<ContractionProblem::Axis>* groups[] = {&p.m, &p.n, &p.k, &p.batch};
  for (int g = 0; g < 4; ++g) {
    s += std::string(" ") + kGroupNames[g] + "[";
    for (const auto& ax : *groups[g])
      s += fmt::format("{}:a{},b{},c{} ", ax.extent, ax.stride_a, ax.stride_b, ax.stride_c);
    s += "]";
  }
  return s;
}

template <typename T>
void random_cases(DType dtype, uint64_t first_seed, int count, const GettBlocking* blocking, bool lane = false) {
  for (uint64_t seed = first_seed; seed < first_seed + uint64_t(count); ++seed) {
    OwnedProblem op = random_problem(seed, dtype, true, lane);
    INFO("seed " << seed << ": " << describe(op.p));
    contract_jit(op.p, nullptr, &memory_cache(), blocking);
    check_against_oracle<T>(op);
    // The portable reference must agree too (within the same tolerance: both are checked against the oracle).
    OwnedProblem portable = random_problem(seed, dtype, true, lane);
    contract_portable(portable.p, nullptr);
    check_against_oracle<T>(portable);
  }
}

// Tiny blocks so that small problems still cross MC, KC and NC block boundaries.
const GettBlocking kTiny{48, 8, 16};

}  // namespace

TEST_CASE_TEMPLATE("jit gett: random problems match the oracle", T, float, double, c64, c128) {
  DType dtype = dtype_v<T>;
  SUBCASE("default blocking") { random_cases<T>(dtype, 1000, 60, nullptr); }
  SUBCASE("tiny blocking") { random_cases<T>(dtype, 5000, 60, &kTiny); }
  // A batch axis with unit stride everywhere: lane kernels for real dtypes, the 1m GEMM path for complex.
  SUBCASE("unit-stride batch axis") { random_cases<T>(dtype, 9000, 40, nullptr, true); }
  SUBCASE("unit-stride batch axis, tiny blocking") { random_cases<T>(dtype, 9500, 40, &kTiny, true); }
}

TEST_CASE_TEMPLATE("jit gett: GEMM shapes crossing the default cache blocks", T, double, float, c128) {
  // Column-major ij,jk->ik with m, n, k beyond one MC / NC / KC block and odd edges.
  for (auto [m, n, k] : {std::tuple{500, 37, 530}, std::tuple{97, 4100, 3}, std::tuple{1, 1, 1000}, std::tuple{13, 9, 1}}) {
    uint64_t seed = uint64_t(m * 1000003 + n * 1009 + k);
    SplitMix64 rng(seed);
    OwnedProblem op;
    op.p.dtype = dtype_v<T>;
    op.p.m = {{m, 1, 0, 1}};
    op.p.k = {{k, m, 1, 0}};
    op.p.n = {{n, 0, k, m}};
    op.a.elements = int64_t(m) * k;
    op.b.elements = int64_t(k) * n;
    op.c.elements = int64_t(m) * n;
    for (Storage* s : {&op.a, &op.b, &op.c}) s->bytes.resize(size_t(s->elements) * sizeof(T));
    fill<T>(rng, op.a);
    fill<T>(rng, op.b);
    fill<T>(rng, op.c);
    op.c_initial = op.c.bytes;
    op.p.accumulate = (m % 2) == 1;
    op.bind();
    INFO("seed " << seed << " m " << m << " n " << n << " k " << k);
    contract_jit(op.p, nullptr, &memory_cache());
    check_against_oracle<T>(op);
  }
}

TEST_CASE("jit gett: bitwise identical at 1 and 2 threads") {
  ThreadPool one(1), two(2);
  for (DType dtype : {DType::f64, DType::f32, DType::c64, DType::c128}) {
    for (uint64_t seed = 77; seed < 97; ++seed) {
      bool lane = seed % 2 == 0;
      OwnedProblem serial = random_problem(seed, dtype, false, lane);
      OwnedProblem single = random_problem(seed, dtype, false, lane);
      OwnedProblem dual = random_problem(seed, dtype, false, lane);
      INFO("seed " << seed << ": " << describe(serial.p));
      contract_jit(serial.p, nullptr, &memory_cache(), &kTiny);
      contract_jit(single.p, &one, &memory_cache(), &kTiny);
      contract_jit(dual.p, &two, &memory_cache(), &kTiny);
      CHECK(serial.c.bytes == single.c.bytes);
      CHECK(serial.c.bytes == dual.c.bytes);
    }
  }
  // A problem large enough to take the threaded paths (work above the serial threshold), batched and not.
  for (int batch : {1, 3}) {
    SplitMix64 rng(4242 + uint64_t(batch));
    OwnedProblem base;
    base.p.dtype = DType::f64;
    int64_t m = 130, n = 70, k = 90;
    base.p.m = {{m, 1, 0, 1}};
    base.p.k = {{k, m, 1, 0}};
    base.p.n = {{n, 0, k, m}};
    base.p.batch = {{batch, m * k, k * n, m * n}};
    base.a.elements = m * k * batch;
    base.b.elements = k * n * batch;
    base.c.elements = m * n * batch;
    for (Storage* s : {&base.a, &base.b, &base.c}) s->bytes.resize(size_t(s->elements) * 8);
    fill<double>(rng, base.a);
    fill<double>(rng, base.b);
    base.c_initial = base.c.bytes;
    OwnedProblem x = base, y = base;
    x.bind();
    y.bind();
    contract_jit(x.p, nullptr, &memory_cache(), &kTiny);
    contract_jit(y.p, &two, &memory_cache(), &kTiny);
    CHECK(x.c.bytes == y.c.bytes);
    check_against_oracle<double>(y);
  }
}

TEST_CASE("jit gett: zero extents") {
  SUBCASE("k = 0 overwrites C with zeros, accumulate leaves it") {
    for (bool accumulate : {false, true}) {
      std::vector<double> a(1), b(1), c(6, 5.0);
      ContractionProblem p;
      p.m = {{3, 1, 0, 1}};
      p.n = {{2, 0, 1, 3}};
      p.k = {{0, 3, 1, 0}};
      p.a = a.data();
      p.b = b.data();
      p.c = c.data();
      p.accumulate = accumulate;
      contract_jit(p, nullptr, &memory_cache());
      for (double v : c) CHECK(v == (accumulate ? 5.0 : 0.0));
    }
  }
  SUBCASE("m = 0 or batch = 0 writes nothing") {
    std::vector<float> a(4, 1), b(4, 1), c(4, 7);
    ContractionProblem p;
    p.dtype = DType::f32;
    p.m = {{0, 1, 0, 1}};
    p.n = {{2, 0, 2, 2}};
    p.k = {{2, 1, 1, 0}};
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
    contract_jit(p, nullptr, &memory_cache());
    for (float v : c) CHECK(v == 7);
  }
}

TEST_CASE("jit gett: i64 is refused with a message naming the fallback") {
  ContractionProblem p;
  p.dtype = DType::i64;
  CHECK_THROWS_WITH_AS(contract_jit(p, nullptr, &memory_cache()),
                       doctest::Contains("the JIT has no i64 kernel"), Error);
}
