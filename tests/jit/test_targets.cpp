// The JIT's kernel variants for other x86-64 CPUs: every micro-kernel the GETT driver can ask for is compiled for an
// AVX2 CPU (Haswell, Zen 3) and an AVX-512 one (Skylake-AVX512) whatever this machine is, and the targets this
// machine can run execute random and blocked problems against the definitional oracle and the portable kernel. The
// tiles the tile model picks for the CPUs einstage was timed on (Xeon, Zen 4, Zen 3) are compiled for Haswell, Zen 3,
// Skylake-AVX512, Rocket Lake and Zen 4, checked for stack traffic in their k loop, and run on those CPUs' blocks.
#include "ProblemGen.h"

#include "runtime/jit/Blocking.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/TileModel.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <tuple>

using namespace einstage;
using namespace einstage::testing;

namespace {

std::set<std::string> split_features(const std::string& features) {
  std::set<std::string> out;
  std::stringstream in(features);
  for (std::string f; std::getline(in, f, ',');)
    if (!f.empty()) out.insert(f);
  return out;
}

// Every kernel contract_jit may request for a real dtype on a target with or without AVX-512.
std::vector<MicroKernelSpec> every_kernel(DType real, bool avx512) {
  std::vector<MicroKernelSpec> out;
  for (const MicroKernelChoice& c : micro_kernel_candidates(real, avx512)) out.push_back(c.spec);
  for (const MicroKernelChoice& c : direct_kernel_candidates(real, avx512)) out.push_back(c.spec);
  out.push_back(default_lane_kernel(real, avx512));
  return out;
}

template <typename T>
void random_against_oracle(KernelCache& cache, uint64_t first_seed, int count, bool lane) {
  for (uint64_t seed = first_seed; seed < first_seed + uint64_t(count); ++seed) {
    OwnedProblem jit = random_problem(seed, dtype_v<T>, true, lane);
    OwnedProblem portable = random_problem(seed, dtype_v<T>, true, lane);
    INFO("seed " << seed << (lane ? " (lane batch)" : ""));
    contract_jit(jit.p, nullptr, &cache);
    check_against_oracle<T>(jit);
    contract_portable(portable.p, nullptr);
    check_against_oracle<T>(portable);
  }
}

// Column-major ij,jk->ik large enough to cross the default MC / KC / NC blocks (or `blocking`'s), with odd edges.
template <typename T>
void gemm_against_oracle(KernelCache& cache, const GettBlocking* blocking = nullptr) {
  for (auto [m, n, k] : {std::tuple{300, 37, 530}, std::tuple{97, 4100, 3}, std::tuple{64, 64, 64}}) {
    OwnedProblem op = matmul_problem(m, n, k, 1, dtype_v<T>, (n % 2) == 1, uint64_t(m * 7919 + n * 31 + k));
    INFO("m " << m << " n " << n << " k " << k);
    contract_jit(op.p, nullptr, &cache, blocking);
    check_against_oracle<T>(op);
  }
}

// Vector loads and stores through the stack (spills) inside the loops of `assembly` (LLVM's AT&T text) that issue
// FMAs: a micro-kernel's k loop and its remainder loop. `loops` counts those loops.
int k_loop_stack_traffic(const std::string& assembly, int& loops) {
  std::vector<std::string> lines;
  std::stringstream in(assembly);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  int traffic = 0;
  loops = 0;
  for (size_t end = 0; end < lines.size(); ++end) {
    const std::string& jump = lines[end];
    const size_t label_at = jump.find(".LBB");
    if (label_at == std::string::npos || jump.find_first_not_of(" \t") == std::string::npos ||
        jump[jump.find_first_not_of(" \t")] != 'j')
      continue;
    const std::string label = jump.substr(label_at) + ":";
    for (size_t begin = 0; begin < end; ++begin) {
      if (lines[begin].rfind(label, 0) != 0) continue;  // a backward jump: the loop is lines begin..end
      int fmas = 0, stack = 0;
      for (size_t i = begin; i <= end; ++i) {
        fmas += lines[i].find("vfmadd") != std::string::npos;
        stack += (lines[i].find("(%rsp)") != std::string::npos || lines[i].find("(%rbp)") != std::string::npos) &&
                 lines[i].find("mm") != std::string::npos;
      }
      if (fmas >= 4) ++loops, traffic += stack;
    }
  }
  return traffic;
}

// The caches of the CPUs einstage was timed on (tests/jit/test_tile_model.cpp), by vector ISA.
struct RecordedCaches {
  const char* name;
  CacheInfo caches;
  bool avx512;
};
constexpr int64_t KiB = 1024, MiB = 1024 * 1024;
const RecordedCaches kRecordedCaches[] = {
    {"Xeon", {48 * KiB, 2 * MiB, 105 * MiB}, true},   {"Zen 4", {32 * KiB, 1 * MiB, 32 * MiB}, true},
    {"Zen 3", {32 * KiB, 512 * KiB, 32 * MiB}, false}, {"Xeon, AVX2 kernels", {48 * KiB, 2 * MiB, 105 * MiB}, false},
};

struct TargetCase {
  const char* cpu;
  bool avx512;
};
const TargetCase kTargets[] = {{"haswell", false}, {"znver3", false}, {"skylake-avx512", true}};

}  // namespace

// Whether this machine may run a named CPU's kernels is decided by the instruction sets alone. A guest that hides
// system features (the Zen 5 KVM guest reports -fsgsbase and -invpcid) still runs haswell's code; a host without
// AVX-512 does not run skylake-avx512's. Synthetic hosts, so the answer does not depend on the CPU running the test.
TEST_CASE("jit targets: can_run decides from instruction sets, not from system features") {
  const std::string triple = KernelCache("").host().triple;
  auto named = [&](const char* cpu) { return KernelCache("", JitTarget{cpu}).host(); };
  const JitHost haswell = named("haswell"), skx = named("skylake-avx512"), zen3 = named("znver3");
  REQUIRE(split_features(haswell.features).count("+fsgsbase") == 1);  // LLVM's haswell enables system features too
  const std::string avx512 = "+avx,+avx2,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512vl,+bmi,+bmi2,+evex512,+f16c,"
                             "+fma,+lzcnt,+movbe,+popcnt,+sse4.2";
  const JitHost zen5_guest{"19.1.7", triple, "znver5", avx512 + ",-fsgsbase,-invpcid,-rdpid,-waitpkg", true};
  const JitHost avx2_only{"19.1.7", triple, "znver3",
                          "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+popcnt,-avx512bw,-avx512dq,-avx512f,"
                          "-avx512vl,-evex512,-fsgsbase",
                          false};
  const JitHost no_fma{"19.1.7", triple, "sandybridge", "+avx,+popcnt,-avx2,-fma,-avx512f", false};
  for (const JitHost* code : {&haswell, &zen3, &skx}) {
    INFO("code for " << code->cpu);
    CHECK(can_run(*code, zen5_guest));
    CHECK(can_run(*code, avx2_only) == !code->has_avx512);
    CHECK_FALSE(can_run(*code, no_fma));
  }
  JitHost other_triple = zen5_guest;
  other_triple.triple = "aarch64-unknown-linux-gnu";
  CHECK_FALSE(can_run(haswell, other_triple));
  CHECK(can_run(zen5_guest, zen5_guest));
}

TEST_CASE("jit targets: AVX2 and AVX-512 kernel variants compile for named CPUs and agree with the oracle") {
  KernelCache host_cache("");
  const JitHost& host = host_cache.host();
  MESSAGE("host cpu " << host.cpu << std::string(host.has_avx512 ? " (AVX-512)" : " (no AVX-512)"));
  CHECK(can_run(host, host));
  int ran = 0;
  for (const TargetCase& t : kTargets) {
    INFO("target cpu " << std::string(t.cpu));
    KernelCache cache("", JitTarget{t.cpu});  // in memory only: never the user's cache directory
    CHECK(cache.host().cpu == t.cpu);
    CHECK(cache.host().triple == host.triple);
    CHECK(cache.host().has_avx512 == t.avx512);
    CHECK(split_features(cache.host().features).count("+fma") == 1);
    CHECK(split_features(cache.host().features).count("+avx512f") == (t.avx512 ? 1u : 0u));
    // Compiling needs no support from this CPU: every variant of both real dtypes.
    int64_t kernels = 0;
    for (DType real : {DType::f32, DType::f64})
      for (const MicroKernelSpec& spec : every_kernel(real, t.avx512)) {
        INFO(spec.symbol());
        CHECK(reinterpret_cast<void*>(cache.micro_kernel(spec)) != nullptr);
        ++kernels;
      }
    CHECK(cache.stats().kernels_compiled == kernels);
    MESSAGE(std::string(t.cpu) << ": compiled " << kernels << " kernels");
    if (!can_run(cache.host(), host)) {
      MESSAGE(std::string(t.cpu) << ": this CPU cannot run its kernels; compiled only");
      continue;
    }
    ++ran;
    random_against_oracle<float>(cache, 900, 25, false);
    random_against_oracle<double>(cache, 950, 25, false);
    random_against_oracle<c64>(cache, 1000, 15, false);
    random_against_oracle<c128>(cache, 1050, 15, false);
    random_against_oracle<float>(cache, 1100, 10, true);
    random_against_oracle<double>(cache, 1150, 10, true);
    gemm_against_oracle<double>(cache);
    gemm_against_oracle<float>(cache);
    gemm_against_oracle<c128>(cache);
  }
  // Every x86-64 machine that runs these tests has AVX2 and FMA at least (einstage's kernels assume them).
  CHECK(ran >= 1);
}

TEST_CASE("jit targets: a shape-specialised kernel compiles for each named CPU and matches its direct path") {
  // ij,jk->ik at 16x16x16 and 13x17x5: direct-path steps, compiled the way the hot-step specialiser compiles them
  // (LLVM's O2 pipeline runs for the named CPU too). Where this CPU can run the result it must give the direct
  // path's bits, as Specialise.h promises.
  KernelCache host_cache("");
  for (auto [m, n, k] : {std::tuple{16, 16, 16}, std::tuple{13, 17, 5}}) {
    for (const TargetCase& t : kTargets) {
      INFO("target cpu " << std::string(t.cpu) << ", m " << m << " n " << n << " k " << k);
      OwnedProblem op = matmul_problem(m, n, k, 1, DType::f64, false, uint64_t(m * 131 + n * 17 + k));
      OwnedProblem direct = op;
      direct.bind();
      DirectSchedule schedule;
      REQUIRE(direct_schedule(op.p, t.avx512, schedule));
      REQUIRE(schedule.batch_a.size() == 1);
      KernelCache cache("", JitTarget{t.cpu});
      void* fn = cache.compiled_function(schedule.kernel.symbol(), schedule.kernel.describe(),
                                         [&](Jit& jit) { return compile_specialised_kernel(jit, schedule.kernel); });
      REQUIRE(fn != nullptr);
      if (!can_run(cache.host(), host_cache.host())) continue;
      call_jit(reinterpret_cast<SpecialisedKernelFn>(fn), op.p.a, op.p.b, op.p.c);
      contract_jit(direct.p, nullptr, &cache);
      CHECK(op.c.bytes == direct.c.bytes);
      check_against_oracle<double>(op);
    }
  }
}

TEST_CASE("jit targets: the tile model's tiles keep their k loop in registers and run on their own blocks") {
  // For each named CPU, the tile TileModel.h picks on each recorded CPU of that vector ISA: its k loop moves nothing
  // through the stack, and where this machine runs the target, GEMMs cut into that CPU's blocks (Blocking.h for the
  // tile) agree with the oracle. 3 x 9 AVX-512 tiles (31 of 32 zmm) are why the model asks for headroom: LLVM 19
  // spills them for skylake-avx512.
  KernelCache host_cache("");
  const TargetCase targets[] = {{"haswell", false}, {"znver3", false}, {"skylake-avx512", true},
                                {"rocketlake", true}, {"znver4", true}};
  for (const TargetCase& t : targets) {
    INFO("target cpu " << std::string(t.cpu));
    std::unique_ptr<Jit> jit = Jit::create(JitTarget{t.cpu});
    KernelCache cache("", JitTarget{t.cpu});
    const bool runs = can_run(cache.host(), host_cache.host());
    for (const RecordedCaches& recorded : kRecordedCaches) {
      if (recorded.avx512 != t.avx512) continue;
      for (DType real : {DType::f32, DType::f64}) {
        const MicroKernelSpec spec = model_micro_kernel(real, vector_isa(t.avx512), recorded.caches);
        INFO(recorded.name << ": " << spec.symbol());
        int loops = 0;
        CHECK(k_loop_stack_traffic(micro_kernel_assembly(*jit, spec), loops) == 0);
        CHECK(loops >= 1);
        if (!runs) continue;
        const GettBlocking blocks =
            blocking_for(recorded.caches, static_cast<int64_t>(size_of(real)), spec.mr, spec.nr);
        if (real == DType::f64) gemm_against_oracle<double>(cache, &blocks);
        else gemm_against_oracle<float>(cache, &blocks);
      }
    }
    if (std::string(t.cpu) == "skylake-avx512") {
      MicroKernelSpec wide = model_micro_kernel(DType::f64, vector_isa(true), kRecordedCaches[0].caches);
      wide.nr = 9;
      int loops = 0;
      CHECK(k_loop_stack_traffic(micro_kernel_assembly(*jit, wide), loops) > 0);
    }
  }
}

TEST_CASE("jit targets: a CPU name LLVM does not know is refused") {
  const std::string triple = KernelCache("").host().triple;
  CHECK(einstage::test::error_of([] { KernelCache cache("", JitTarget{"pentium99"}); }) ==
        "jit: LLVM " + KernelCache("").host().llvm_version + " does not know the CPU 'pentium99' for " + triple +
            "; name one LLVM knows (e.g. 'haswell', 'znver3', 'skylake-avx512'), or leave it empty for the host CPU");
}

// The narrow direct tiles (n < 8) take as many A vectors as the target's vector registers hold: AVX2's 4 x 4 tile
// needed 25 of its 16 ymm registers (accumulators, A vectors, their row masks, a broadcast) and its haswell objects
// moved ~160 vectors through the stack; the compile-and-run test above covers the tiles this rule gives.
TEST_CASE("jit targets: narrow direct tiles fit the vector registers of AVX2 and AVX-512") {
  for (bool avx512 : {false, true}) {
    INFO(std::string(avx512 ? "AVX-512" : "AVX2"));
    const int registers = vector_registers(avx512);
    CHECK(registers == (avx512 ? 32 : 16));
    for (int nr : {1, 2, 4}) {
      INFO("nr " << nr);
      const int vectors = narrow_tile_vectors(nr, avx512);
      const int masks = avx512 ? 0 : vectors;  // AVX-512 masks live in k registers
      CHECK(vectors * nr + vectors + masks + 1 <= registers);
      CHECK((vectors == 4 || (vectors + 1) * nr + (vectors + 1) + (avx512 ? 0 : vectors + 1) + 1 > registers));
    }
    for (DType real : {DType::f32, DType::f64})
      for (const MicroKernelChoice& choice : direct_kernel_candidates(real, avx512))
        if (!choice.spec.kmajor_a && (choice.spec.nr == 1 || choice.spec.nr == 2 || choice.spec.nr == 4)) {  // narrow
          INFO(choice.spec.symbol());
          CHECK(choice.spec.mr == narrow_tile_vectors(choice.spec.nr, avx512) * choice.spec.lanes);
        }
  }
  CHECK(narrow_tile_vectors(1, false) == 4);
  CHECK(narrow_tile_vectors(2, false) == 3);
  CHECK(narrow_tile_vectors(4, false) == 2);
  for (int nr : {1, 2, 4}) CHECK(narrow_tile_vectors(nr, true) == 4);
}
