// The JIT's dot-product mode (runtime/jit/GettDots.h): matrix-vector products whose matrix is contiguous along k,
// i,ij->j (the vector is A) and ji,j->i (the vector is B), against the definitional loop at several sizes (k and
// the output count not multiples of the vector width), every dtype (complex stays on the 1m path and is checked
// the same way), accumulate on and off, with the same bits at 1 and 2 threads and on a repeated call.
#include "ProblemGen.h"

#include "ir/Scratch.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"

#include <doctest/doctest.h>

#include <tuple>

using namespace einstage;
using namespace einstage::testing;

namespace {

// i,ij->j with i of extent k and j of extent n (column-major B: each column contiguous in k), or its mirror
// ji,j->i (A[j, i] at j + k * i: each output row contiguous in k; B the vector).
OwnedProblem dots_problem(bool vector_is_a, int64_t outputs, int64_t k, DType dtype, bool accumulate, uint64_t seed) {
  if (vector_is_a) return matmul_problem(1, outputs, k, 1, dtype, accumulate, seed);
  OwnedProblem op = matmul_problem(outputs, 1, k, 1, dtype, accumulate, seed);
  op.p.m[0].stride_a = k;  // A[i, p] at i * k + p: row i of the output is a dot product along A's contiguous k
  op.p.k[0].stride_a = 1;
  return op;
}

}  // namespace

TEST_CASE_TEMPLATE("jit gett: matrix-vector products contiguous along k match the definitional loop", T, float, double,
                   c64, c128) {
  const DType dtype = dtype_v<T>;
  ThreadPool two(2);
  for (bool vector_is_a : {true, false})
    for (bool accumulate : {false, true})
      for (auto [outputs, k] : {std::tuple{8, 16}, std::tuple{9, 17}, std::tuple{37, 100}, std::tuple{256, 256},
                                std::tuple{23, 1000}, std::tuple{8, 15}}) {
        const uint64_t seed = uint64_t(outputs * 1009 + k * 7 + (accumulate ? 1 : 0) + (vector_is_a ? 2 : 0));
        INFO((vector_is_a ? "i,ij->j" : "ji,j->i") << " outputs " << outputs << " k " << k
                                                   << (accumulate ? " accumulate" : " overwrite") << " seed " << seed);
        OwnedProblem one = dots_problem(vector_is_a, outputs, k, dtype, accumulate, seed);
        OwnedProblem threaded = dots_problem(vector_is_a, outputs, k, dtype, accumulate, seed);
        OwnedProblem again = dots_problem(vector_is_a, outputs, k, dtype, accumulate, seed);
        contract_jit(one.p, nullptr, &memory_cache());
        check_against_oracle<T>(one);
        contract_jit(threaded.p, &two, &memory_cache());
        CHECK(one.c.bytes == threaded.c.bytes);
        // A plan (the executor's path) gives the call's bits.
        GettPlan plan(again.p, memory_cache(), ScratchAllocator::process_default(), true);
        plan.run(again.p, nullptr);
        CHECK(one.c.bytes == again.c.bytes);
        // The dots mode is not specialised (Specialise.h), so a hot step keeps these bits: real dtypes with
        // k >= 16 on a CPU with AVX2 and FMA run as dot products, which direct_schedule refuses.
        if (!is_complex(dtype) && k >= 16 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
          CHECK(runs_as_dots(one.p));
          DirectSchedule schedule;
          CHECK_FALSE(direct_schedule(one.p, memory_cache().host().has_avx512, schedule));
        } else {
          CHECK_FALSE(runs_as_dots(one.p));  // complex, or k below 16: the direct kernels
        }
      }
}
