// GettPlan (runtime/jit/Gett.h), contract_jit's set-up made once, and the StepKernel that keeps one per problem:
// the bits of contract_jit / contract() on every JIT path, for new data pointers, at 1 and 2 threads, and when one
// step is called with problems of other strides and extents; and the set-up contract_jit keeps in its scratch slot,
// reused only for the same geometry, kernel cache and direct switch.
#include "ProblemGen.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Specialise.h"

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <vector>

using namespace einstage;
using namespace einstage::testing;

namespace {

// C's bytes after running `run` on a fresh, bound copy of op (its own buffers: other data pointers than op's).
std::vector<unsigned char> bytes_after(const OwnedProblem& op, const std::function<void(const ContractionProblem&)>& run) {
  OwnedProblem copy = op;
  copy.c.bytes = copy.c_initial;
  copy.bind();
  run(copy.p);
  return copy.c.bytes;
}

// Problems for every set-up path: random ones (elementwise, direct, packed, complex 1m), a unit-stride batch axis
// (lane kernels), a k-major matrix times a vector (C^T = B^T A^T on the direct path) and k-major A and B with n < m
// (the swapped packed path).
std::vector<OwnedProblem> every_path(DType dtype, uint64_t seed) {
  std::vector<OwnedProblem> out;
  for (uint64_t s = seed; s < seed + 12; ++s) out.push_back(random_problem(s, dtype, true, s % 3 == 0));
  for (auto [m, n, k] : {std::tuple{300, 3, 40}, std::tuple{97, 40, 300}}) {
    OwnedProblem op = matmul_problem(m, n, k, 1, dtype, false, seed + uint64_t(m));
    op.p.m[0].stride_a = k;  // A[i, p] at i * k + p: k-major
    op.p.k[0].stride_a = 1;
    out.push_back(std::move(op));
  }
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("jit gett plan: contract_jit's bits on every path, for new data pointers, at 1 and 2 threads", T,
                   float, double, c64, c128) {
  const DType dtype = dtype_v<T>;
  ThreadPool two(2);
  for (const OwnedProblem& op : every_path(dtype, 31000)) {
    INFO("problem " << op.p.m.size() << " m, " << op.p.n.size() << " n, " << op.p.k.size() << " k, "
                    << op.p.batch.size() << " batch axes");
    const auto expect = bytes_after(op, [](const ContractionProblem& p) { contract_jit(p, nullptr, &memory_cache()); });
    const GettPlan plan(op.p, memory_cache(), ScratchAllocator::process_default(), true);
    CHECK(plan.matches(op.p, true));
    for (int call = 0; call < 3; ++call) {
      CHECK(bytes_after(op, [&](const ContractionProblem& p) { plan.run(p, nullptr); }) == expect);
      CHECK(bytes_after(op, [&](const ContractionProblem& p) { plan.run(p, &two); }) == expect);
    }
    // The packed path only (direct = false), as Config::jit_direct off gives it.
    const auto packed =
        bytes_after(op, [](const ContractionProblem& p) { contract_jit(p, nullptr, &memory_cache(), nullptr, nullptr, false); });
    const GettPlan packed_plan(op.p, memory_cache(), ScratchAllocator::process_default(), false);
    CHECK(bytes_after(op, [&](const ContractionProblem& p) { packed_plan.run(p, &two); }) == packed);
  }
}

TEST_CASE("jit gett plan: matches the same geometry only") {
  OwnedProblem op = matmul_problem(13, 9, 7, 2, DType::f64, false, 5);
  const GettPlan plan(op.p, memory_cache(), ScratchAllocator::process_default(), true);
  ContractionProblem p = op.p;
  p.a = p.b = nullptr;  // pointers are not part of the geometry
  CHECK(plan.matches(p, true));
  CHECK_FALSE(plan.matches(p, false));
  std::vector<std::function<void(ContractionProblem&)>> changes = {
      [](ContractionProblem& q) { q.m[0].stride_c = 2; },
      [](ContractionProblem& q) { q.k[0].stride_b = 2; },
      [](ContractionProblem& q) { q.n[0].extent = 8; },
      [](ContractionProblem& q) { q.batch.clear(); },
      [](ContractionProblem& q) { q.k.push_back({1, 0, 0, 0}); },
      [](ContractionProblem& q) { q.accumulate = true; },
      [](ContractionProblem& q) { q.dtype = DType::f32; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    CAPTURE(i);
    ContractionProblem q = op.p;
    changes[i](q);
    CHECK_FALSE(plan.matches(q, true));
    CHECK_FALSE(same_geometry(q, op.p));
  }
  // A plan refuses what contract_jit refuses, with its message.
  ContractionProblem ints = op.p;
  ints.dtype = DType::i64;
  CHECK_THROWS_WITH_AS(GettPlan(ints, memory_cache(), ScratchAllocator::process_default(), true),
                       "contract: the JIT has no i64 kernel; use contract() or contract_portable()", Error);
  ContractionProblem null_c = op.p;
  null_c.c = nullptr;
  const std::string message = "contract: output C (m, n, batch axes) [13,9,2] has 234 elements but "
                              "ContractionProblem::c is null; point it at the output's first element";
  CHECK_THROWS_WITH_AS(GettPlan(null_c, memory_cache(), ScratchAllocator::process_default(), true), message.c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(plan.run(null_c, nullptr), message.c_str(), Error);
}

// A step's handle keeps the set-up of the problems it ran (a few, then it sets up per call again): called with
// problems of other strides, other extents and the first one again, in turn and past the specialisation threshold,
// every call gives contract()'s bits, at 1 and 2 threads.
TEST_CASE("jit step kernel: one step called with problems of other strides and extents gives contract()'s bits") {
  ThreadPool two(2);
  for (DType dtype : {DType::f64, DType::f32, DType::c128}) {
    CAPTURE(name(dtype));
    std::vector<OwnedProblem> problems;
    problems.push_back(matmul_problem(6, 5, 4, 1, dtype, false, 1));
    OwnedProblem strided = problems[0];  // the same values, C with a gap between its columns
    strided.p.n[0].stride_c = 7;
    strided.c.elements = 7 * 5;
    strided.c.bytes.assign(size_t(strided.c.elements) * size_of(dtype), 0);
    strided.c_initial = strided.c.bytes;
    problems.push_back(strided);
    problems.push_back(matmul_problem(6, 5, 9, 1, dtype, true, 2));    // another k extent, accumulating
    problems.push_back(matmul_problem(40, 3, 4, 2, dtype, false, 3));  // other extents and a batch
    for (uint64_t seed = 41000; seed < 41004; ++seed) problems.push_back(random_problem(seed, dtype, false));
    std::vector<std::vector<unsigned char>> expect;
    for (const OwnedProblem& op : problems)
      expect.push_back(bytes_after(op, [](const ContractionProblem& p) { contract(p); }));
    StepKernel one_thread, two_threads;
    for (int round = 0; round < 2 * StepKernel::kHotCalls; ++round) {
      // 0, 1, 0, 2, 0, 3, ...: the first problem comes back between the others.
      const size_t i = round % 2 == 0 ? 0 : 1 + size_t(round / 2) % (problems.size() - 1);
      CAPTURE(round);
      CAPTURE(i);
      CHECK(bytes_after(problems[i], [&](const ContractionProblem& p) { one_thread.run(p); }) == expect[i]);
      CHECK(bytes_after(problems[i], [&](const ContractionProblem& p) { two_threads.run(p, &two); }) == expect[i]);
    }
    wait_specialise_idle();
  }
}

// contract_jit keeps a direct (not packed) set-up in its scratch slot and runs the next call of the same geometry on
// the same kernel cache with the same `direct` switch on it (Gett.cpp: kept_for). Calls on one allocator (one slot)
// in turn: problems of every path and of other strides, the same problem with the packed path forced (K beyond one KC
// block, so the packed bits differ from the direct ones), on a second cache and on a cache made after that one was
// destroyed (its kernels gone: a set-up kept by address would call freed code). Every call gives the bits of a fresh
// set-up (a GettPlan).
TEST_CASE("jit gett: contract_jit reuses a kept set-up only for the same geometry, cache and direct switch") {
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(name(dtype));
    std::vector<OwnedProblem> problems = every_path(dtype, 33000);
    problems.push_back(matmul_problem(64, 64, 64, 1, dtype, false, 7));
    OwnedProblem c_rows = problems.back();
    c_rows.p.m[0].stride_c = 64, c_rows.p.n[0].stride_c = 1;  // C stored transposed
    problems.push_back(c_rows);
    problems.push_back(matmul_problem(40, 3, 600, 1, dtype, false, 8));  // narrow direct, K beyond one KC block
    ScratchAllocator scratch(size_t(1) << 26);
    std::vector<std::vector<unsigned char>> direct, packed;
    for (const OwnedProblem& op : problems) {
      const GettPlan fresh(op.p, memory_cache(), scratch, true), fresh_packed(op.p, memory_cache(), scratch, false);
      direct.push_back(bytes_after(op, [&](const ContractionProblem& p) { fresh.run(p, nullptr); }));
      packed.push_back(bytes_after(op, [&](const ContractionProblem& p) { fresh_packed.run(p, nullptr); }));
    }
    CHECK(direct.back() != packed.back());  // the last problem tells the two switches apart
    auto other = std::make_unique<KernelCache>("");
    CHECK(other->serial() != memory_cache().serial());
    for (size_t round = 0; round < 3 * problems.size(); ++round) {
      // 0, 0, 1, 0, 2, 0, ...: the first problem comes back between the others, on alternating caches.
      const size_t i = round % 2 == 0 ? 0 : 1 + (round / 2) % (problems.size() - 1);
      const bool use_direct = round % 5 != 3;
      KernelCache* cache = round % 3 == 2 ? other.get() : &memory_cache();
      CAPTURE(round);
      CAPTURE(i);
      CHECK(bytes_after(problems[i], [&](const ContractionProblem& p) {
              contract_jit(p, nullptr, cache, nullptr, &scratch, use_direct);
            }) == (use_direct ? direct[i] : packed[i]));
      CHECK(bytes_after(problems[i], [&](const ContractionProblem& p) {
              contract_jit(p, nullptr, cache, nullptr, &scratch, use_direct);
            }) == (use_direct ? direct[i] : packed[i]));
    }
    // The same problem with the switch flipped, and on a cache made right after the one its set-up was kept for is
    // destroyed (often at the same address).
    const OwnedProblem& narrow = problems.back();
    for (bool use_direct : {true, false, true, true, false}) {
      CAPTURE(use_direct);
      CHECK(bytes_after(narrow, [&](const ContractionProblem& p) {
              contract_jit(p, nullptr, other.get(), nullptr, &scratch, use_direct);
            }) == (use_direct ? direct.back() : packed.back()));
      other = std::make_unique<KernelCache>("");
    }
  }
}
