// The JIT's dot-product mode (runtime/jit/GettDots.h): matrix-vector products whose matrix is contiguous along k,
// i,ij->j (the vector is A) and ji,j->i (the vector is B), against the definitional loop at several sizes (k and
// the output count not multiples of the vector width), every dtype (complex stays on the 1m path and is checked
// the same way), accumulate on and off, with the same bits at 1 and 2 threads (1024 x 1024 splits its columns between
// the threads: Gett.h, kMinThreadedMatVecMacs) and on a repeated call; and products of a few vectors with a
// k-major matrix (both operands contiguous along k), with one vector's bits per output.
#include "ProblemGen.h"

#include "ir/Scratch.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/GettDots.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/kernels/HostIsa.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

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

// Runs `one` on the calling thread against the definitional loop, then fresh copies (from `make`) on `two` threads
// and through a GettPlan (the executor's path): both must give the first call's bits.
template <typename T, typename Make> void check_call_threads_plan(OwnedProblem& one, Make make, ThreadPool& two) {
  OwnedProblem threaded = make(), again = make();
  contract_jit(one.p, nullptr, &memory_cache());
  check_against_oracle<T>(one);
  contract_jit(threaded.p, &two, &memory_cache());
  CHECK(one.c.bytes == threaded.c.bytes);
  GettPlan plan(again.p, memory_cache(), ScratchAllocator::process_default(), true);
  plan.run(again.p, nullptr);
  CHECK(one.c.bytes == again.c.bytes);
}

}  // namespace

TEST_CASE_TEMPLATE("jit gett: matrix-vector products contiguous along k match the definitional loop", T, float, double,
                   c64, c128) {
  const DType dtype = dtype_v<T>;
  ThreadPool two(2);
  for (bool vector_is_a : {true, false})
    for (bool accumulate : {false, true})
      for (auto [outputs, k] : {std::tuple{8, 16}, std::tuple{9, 17}, std::tuple{37, 100}, std::tuple{256, 256},
                                std::tuple{23, 1000}, std::tuple{8, 15}, std::tuple{41, 1000},
                                std::tuple{1024, 1024}}) {
        const uint64_t seed = uint64_t(outputs * 1009 + k * 7 + (accumulate ? 1 : 0) + (vector_is_a ? 2 : 0));
        INFO((vector_is_a ? "i,ij->j" : "ji,j->i") << " outputs " << outputs << " k " << k
                                                   << (accumulate ? " accumulate" : " overwrite") << " seed " << seed);
        OwnedProblem one = dots_problem(vector_is_a, outputs, k, dtype, accumulate, seed);
        auto make = [&] { return dots_problem(vector_is_a, outputs, k, dtype, accumulate, seed); };
        check_call_threads_plan<T>(one, make, two);
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

namespace {

// C[m, n] = sum_p A[i, p] B[p, j] with both operands contiguous along k: A[i, p] at i * k + p (k-major, like Uᵀ of a
// column-major U) and B[p, j] at p + k * j (column-major): the svd rule's Uᵀ X products.
OwnedProblem k_major_problem(int64_t m, int64_t n, int64_t k, DType dtype, bool accumulate, uint64_t seed) {
  OwnedProblem op = matmul_problem(m, n, k, 1, dtype, accumulate, seed);
  op.p.m[0].stride_a = k;
  op.p.k[0].stride_a = 1;
  return op;
}

}  // namespace

// A few vectors (2 to kMaxDotVectors rows of A or columns of B) against a k-major matrix run as blocks of dot
// products (GettDots.h: dot_block): against the definitional loop, with the bits of one vector at a time (each
// output is summed in the same order whatever the blocking), at 1 and 2 threads and through a plan; not specialised.
TEST_CASE_TEMPLATE("jit gett: a few vectors against a k-major matrix run as dot products with one vector's bits", T,
                   float, double) {
  const DType dtype = dtype_v<T>;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;  // no dots mode on this CPU
  ThreadPool two(2);
  for (bool vectors_in_a : {true, false})
    for (bool accumulate : {false, true})
      for (auto [vectors, columns, k] : {std::tuple{2, 8, 128}, std::tuple{3, 37, 129}, std::tuple{16, 240, 256},
                                         std::tuple{16, 16, 256}, std::tuple{5, 100, 300}, std::tuple{7, 9, 200}}) {
        const int64_t m = vectors_in_a ? vectors : columns, n = vectors_in_a ? columns : vectors;
        const uint64_t seed = uint64_t(m * 7919 + n * 31 + k * 3 + (accumulate ? 1 : 0));
        INFO("m " << m << " n " << n << " k " << k << (accumulate ? " accumulate" : " overwrite") << " seed " << seed);
        OwnedProblem one = k_major_problem(m, n, k, dtype, accumulate, seed);
        REQUIRE(runs_as_dots(one.p));
        DirectSchedule schedule;
        CHECK_FALSE(direct_schedule(one.p, memory_cache().host().has_avx512, schedule));
        check_call_threads_plan<T>(one, [&] { return k_major_problem(m, n, k, dtype, accumulate, seed); }, two);
        // Each vector alone (a one-row or one-column product over the same storage) gives the same bits.
        OwnedProblem single = k_major_problem(m, n, k, dtype, accumulate, seed);
        for (int64_t v = 0; v < vectors; ++v) {
          ContractionProblem p = single.p;
          const T* a = static_cast<const T*>(p.a);
          const T* b = static_cast<const T*>(p.b);
          T* c = static_cast<T*>(p.c);
          if (vectors_in_a) p.m[0].extent = 1, p.a = a + v * k, p.c = c + v;
          else p.n[0].extent = 1, p.b = b + v * k, p.c = c + v * m;
          REQUIRE(runs_as_dots(p));
          contract_jit(p, nullptr, &memory_cache());
        }
        CHECK(one.c.bytes == single.c.bytes);
      }
  // Outside the mode: more vectors than kMaxDotVectors, or a short k, stay on the GEMM paths.
  OwnedProblem many = k_major_problem(17, 64, 256, dtype, false, 5);
  OwnedProblem shallow = k_major_problem(4, 64, 127, dtype, false, 6);
  CHECK_FALSE(runs_as_dots(many.p));
  CHECK_FALSE(runs_as_dots(shallow.p));
  contract_jit(many.p, nullptr, &memory_cache());
  contract_jit(shallow.p, nullptr, &memory_cache());
  check_against_oracle<T>(many);
  check_against_oracle<T>(shallow);
}

// A matrix times one vector with the matrix's rows contiguous (ij,j->i on column-major operands) runs by row blocks
// (GettAxpy.h), from the first 64-byte boundary of the columns when they share one alignment: against the
// definitional loop, with the packed path's bits (k within one KC block: one fma chain per row in the same order),
// at 2 threads (4096 x 256 splits its rows between them: Gett.h, kMinThreadedMatVecMacs) and through a plan, for
// row counts that leave a head and a tail below one vector (sub-views starting
// 0-7 elements past an allocation, with a column stride that keeps the columns' alignment or not); not specialised.
TEST_CASE_TEMPLATE("jit gett: a matrix times a vector by row blocks has the packed path's bits", T, float, double) {
  const DType dtype = dtype_v<T>;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;  // no axpy mode on this CPU
  const GettBlocking packed = default_blocking(dtype, memory_cache().host().has_avx512);
  ThreadPool two(2);
  for (bool accumulate : {false, true})
    for (auto [m, k, pad, offset] : {std::tuple{64, 16, 0, 0}, std::tuple{256, 256, 0, 2}, std::tuple{67, 37, 5, 3},
                                      std::tuple{129, 100, 16, 7}, std::tuple{300, 64, 3, 1}, std::tuple{1000, 200, 24, 5},
                                      std::tuple{4096, 256, 8, 3}}) {
      REQUIRE(k <= packed.kc);
      const uint64_t seed = uint64_t(m * 131 + k * 7 + pad + offset * 3 + (accumulate ? 1 : 0));
      INFO("m " << m << " k " << k << " pad " << pad << " offset " << offset << (accumulate ? " accumulate" : ""));
      const int64_t rows = m + pad + offset;  // the column stride of the stored matrix
      auto make = [&] {
        OwnedProblem op = matmul_problem(rows, 1, k, 1, dtype, accumulate, seed);
        op.p.m[0].extent = m;
        op.p.a = static_cast<const T*>(op.p.a) + offset;
        op.p.c = static_cast<T*>(op.p.c) + offset;
        return op;
      };
      OwnedProblem one = make(), threaded = make(), planned = make(), reference = make();
      REQUIRE(runs_as_axpy(one.p));
      DirectSchedule schedule;
      CHECK_FALSE(direct_schedule(one.p, memory_cache().host().has_avx512, schedule));
      contract_jit(one.p, nullptr, &memory_cache());
      contract_jit(threaded.p, &two, &memory_cache());
      GettPlan plan(planned.p, memory_cache(), ScratchAllocator::process_default(), true);
      plan.run(planned.p, nullptr);
      contract_jit(reference.p, nullptr, &memory_cache(), &packed);
      CHECK(one.c.bytes == reference.c.bytes);
      CHECK(one.c.bytes == threaded.c.bytes);
      CHECK(one.c.bytes == planned.c.bytes);
      OwnedProblem full = matmul_problem(m, 1, k, 1, dtype, accumulate, seed);
      REQUIRE(runs_as_axpy(full.p));
      contract_jit(full.p, nullptr, &memory_cache());
      check_against_oracle<T>(full);
    }
  // Outside the mode: fewer than 64 rows or 16 k steps stay on the direct kernels.
  CHECK_FALSE(runs_as_axpy(matmul_problem(63, 1, 64, 1, dtype, false, 1).p));
  CHECK_FALSE(runs_as_axpy(matmul_problem(64, 1, 15, 1, dtype, false, 1).p));
  CHECK_FALSE(runs_as_axpy(matmul_problem(64, 2, 64, 1, dtype, false, 1).p));
}

namespace {

// The dots mode's summation order, written out as scalar code (GettDots.h: block): lanes l = p mod W from zero, one
// fma per position p < k in increasing p, then the lanes summed by halves.
template <typename T> T dot_in_order(const T* x, const T* y, int64_t k, int w) {
  std::vector<T> lanes(size_t(w), T(0));
  for (int64_t p = 0; p < k; ++p) lanes[size_t(p % w)] = std::fma(x[p], y[p], lanes[size_t(p % w)]);
  for (int half = w / 2; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) lanes[size_t(l)] = lanes[size_t(l)] + lanes[size_t(l + half)];
  return lanes[0];
}

// A copy of `values` starting `offset` elements past a 64-byte boundary of a buffer of its own.
template <typename T> struct Placed {
  std::vector<T> storage;
  T* data = nullptr;
  Placed(const std::vector<T>& values, int64_t offset) : storage(values.size() + size_t(offset) + 64 / sizeof(T)) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
    data = reinterpret_cast<T*>((base + 63) / 64 * 64) + offset;
    std::copy(values.begin(), values.end(), data);
  }
};

// n values from `rng`, in [-1, 1).
template <typename T> std::vector<T> random_values(SplitMix64& rng, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (T& e : v) e = T(rng.uniform());
  return v;
}

}  // namespace

// Each ISA's kernels (GettDots.h, called directly: this CPU may run either) against the order written out as scalar
// code, bit for bit: one vector and several (the blocks of four columns and of HB vectors, and their tails), k with
// and without a partial last vector (and below one vector), the operands at several offsets from a cache line,
// loads from every offset s (block), accumulate on and off.
TEST_CASE_TEMPLATE("jit gett: the dot kernels sum every output in the documented order", T, float, double) {
  using namespace einstage::gett_detail;
  const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2") &&
                                                               __builtin_cpu_supports("fma");
  for (int isa : {1, 2}) {
    if ((isa == 2 && !avx512) || (isa == 1 && !avx2)) continue;
    const int w = (isa == 2 ? 64 : 32) / int(sizeof(T));
    for (auto [nvec, count, k, pad, offset] : {std::tuple{1, 9, 16, 0, 0}, std::tuple{1, 13, 17, 3, 1},
                                               std::tuple{1, 4, 1000, 0, 3}, std::tuple{1, 1, 23, 1, 5},
                                               std::tuple{2, 5, 100, 2, 2}, std::tuple{5, 9, 129, 0, 7},
                                               std::tuple{16, 7, 256, 5, 1}, std::tuple{3, 3, 31, 0, 4},
                                               std::tuple{1, 6, 5, 2, 6}, std::tuple{1, 8, 64, 0, 2}})
      for (bool accumulate : {false, true}) {
        const uint64_t seed = uint64_t(isa * 100003 + nvec * 1009 + count * 101 + k * 7 + pad + offset);
        INFO("isa " << isa << " vectors " << nvec << " columns " << count << " k " << k << " pad " << pad
                    << " offset " << offset << (accumulate ? " accumulate" : "") << " seed " << seed);
        SplitMix64 rng(seed);
        const int64_t ld = k + pad;  // the stride between vectors and between columns
        Placed<T> v(random_values<T>(rng, nvec * ld), offset), m(random_values<T>(rng, count * ld), (offset * 3) % w);
        const std::vector<T> initial = random_values<T>(rng, nvec * count);
        std::vector<int64_t> vecs, vec_out, cols, out;
        for (int64_t h = 0; h < nvec; ++h) vecs.push_back(h * ld), vec_out.push_back(h);
        for (int64_t g = 0; g < count; ++g) cols.push_back(g * ld), out.push_back(g * nvec);
        std::vector<T> expected = initial;
        for (int64_t h = 0; h < nvec; ++h)
          for (int64_t g = 0; g < count; ++g) {
            const T s = dot_in_order(v.data + h * ld, m.data + g * ld, k, w);
            T& e = expected[size_t(h + g * nvec)];
            e = accumulate ? e + s : s;
          }
        // Loads from every offset s: the bits are the same (Dots::run passes the columns' own, when they share it).
        for (int64_t shift = 0; shift < w; ++shift) {
          std::vector<T> c = initial;
          if (isa == 2)
            DotsAvx512::all<T, 64 / int(sizeof(T)), 4>(v.data, vecs.data(), vec_out.data(), nvec, m.data, cols.data(),
                                                       out.data(), count, c.data(), k, shift, accumulate);
          else
            DotsAvx2::all<T, 32 / int(sizeof(T)), 2>(v.data, vecs.data(), vec_out.data(), nvec, m.data, cols.data(),
                                                     out.data(), count, c.data(), k, shift, accumulate);
          CHECK_MESSAGE(std::memcmp(c.data(), expected.data(), c.size() * sizeof(T)) == 0, "shift " << shift);
        }
      }
  }
}

// Through contract_jit: i,ij->j with the same values at several addresses (offsets from a cache line, vector and
// matrix apart) and on 1, 2 and 3 threads (1024 x 1024 splits its columns between the threads) gives one set of bits:
// the documented order at this CPU's vector width.
TEST_CASE_TEMPLATE("jit gett: a matrix-vector product's bits depend on neither address nor threads", T, float,
                   double) {
  const kernels::HostIsa& isa = kernels::host_isa();  // what the dots mode chooses its kernels by (GettModes.cpp)
  if (!isa.avx512f && !(isa.avx2 && isa.fma)) return;  // no dots mode on this CPU
  const int w = (isa.avx512f ? 64 : 32) / int(sizeof(T));
  ThreadPool two(2), three(3);
  for (auto [n, k, pad] : {std::tuple{256, 256, 0}, std::tuple{37, 1000, 3}, std::tuple{1024, 1024, 0},
                           std::tuple{100, 77, 1}}) {
    const uint64_t seed = uint64_t(n * 31 + k * 7 + pad);
    INFO("n " << n << " k " << k << " pad " << pad << " seed " << seed);
    SplitMix64 rng(seed);
    const int64_t ld = k + pad;
    const std::vector<T> x = random_values<T>(rng, k), mat = random_values<T>(rng, n * ld);
    std::vector<T> expected(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) expected[size_t(j)] = dot_in_order(x.data(), mat.data() + j * ld, k, w);
    for (auto [ox, om] : {std::pair{0, 0}, std::pair{1, 2}, std::pair{3, 5}, std::pair{7, 1}})
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two, &three}) {
        INFO("vector offset " << ox << " matrix offset " << om << " threads " << (pool ? pool->size() : 1));
        Placed<T> xs(x, ox), ms(mat, om), cs(std::vector<T>(size_t(n), T(7)), (ox + om) % 8);
        ContractionProblem p;
        p.dtype = dtype_v<T>;
        p.m = {{1, 1, 0, 1}};
        p.k = {{k, 1, 1, 0}};
        p.n = {{n, 0, ld, 1}};
        p.a = xs.data, p.b = ms.data, p.c = cs.data;
        REQUIRE(runs_as_dots(p));
        contract_jit(p, pool, &memory_cache());
        CHECK(std::memcmp(cs.data, expected.data(), size_t(n) * sizeof(T)) == 0);
      }
  }
}
