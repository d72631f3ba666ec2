// The kernel cache (lazy compile once, disk objects, corrupt files, entries that are no regular file) and the
// contract() dispatcher's fallback.
#include "ProblemGen.h"

#include "ir/Config.h"
#include "ir/Error.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

using namespace einstage;
using namespace einstage::testing;

namespace {

std::string fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("einstage-test-jit-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

// The first seed from `seed` whose random problem contracts something (m, n and k all at least 2): it needs a kernel
// (elementwise-shaped problems, k = 1, run a plain loop and compile nothing).
uint64_t contracting_seed(uint64_t seed, DType dtype) {
  auto product = [](const std::vector<ContractionProblem::Axis>& axes) {
    int64_t n = 1;
    for (const auto& ax : axes) n *= ax.extent;
    return n;
  };
  for (;; ++seed) {
    OwnedProblem op = random_problem(seed, dtype, false);
    if (product(op.p.m) >= 2 && product(op.p.n) >= 2 && product(op.p.k) >= 2 && product(op.p.batch) >= 1) return seed;
  }
}

void run_and_check(KernelCache& cache, uint64_t seed, DType dtype) {
  seed = contracting_seed(seed, dtype);
  OwnedProblem op = random_problem(seed, dtype, false);
  INFO("seed " << seed);
  contract_jit(op.p, nullptr, &cache);
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, int64_t>) check_against_oracle<T>(op);
  });
}

// A column-major 48 x 16 x 7 f64 GEMM: the default 24 x 8 tile has no padding there, so it is the tile chosen.
void default_tile_gemm(KernelCache& cache) {
  OwnedProblem op;
  op.p.m = {{48, 1, 0, 1}};
  op.p.k = {{7, 48, 1, 0}};
  op.p.n = {{16, 0, 7, 48}};
  op.a.elements = 48 * 7;
  op.b.elements = 7 * 16;
  op.c.elements = 48 * 16;
  SplitMix64 rng(99);
  allocate_and_fill<double>(op, rng);
  op.bind();
  // Explicit block sizes select the packed path (a problem this small would otherwise run on a direct kernel).
  const GettBlocking packed = default_blocking(DType::f64, cache.host().has_avx512);
  contract_jit(op.p, nullptr, &cache, &packed);
  check_against_oracle<double>(op);
}

// What f writes to stderr (file descriptor 2), captured through a temporary file.
template <typename F> std::string stderr_of(F&& f) {
  std::fflush(stderr);
  FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  int saved = ::dup(2);
  ::dup2(::fileno(capture), 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;) out += static_cast<char>(c);
  std::fclose(capture);
  return out;
}

}  // namespace

TEST_CASE("jit cache: a second cache with the same directory compiles nothing") {
  std::string dir = fresh_dir("second");
  int64_t compiled = 0;
  {
    KernelCache first(dir);
    run_and_check(first, 11, DType::f64);
    run_and_check(first, 12, DType::c64);  // complex runs on the f32 kernels (1m)
    compiled = first.stats().kernels_compiled;
    CHECK(compiled >= 2);
    run_and_check(first, 11, DType::f64);  // the same kernels again: no new compile
    JitStats s = first.stats();
    CHECK(s.kernels_compiled == compiled);
    CHECK(s.disk_writes == compiled);
    CHECK(s.disk_hits == 0);
    CHECK(s.compile_ms > 0);
  }
  KernelCache second(dir);
  run_and_check(second, 11, DType::f64);
  run_and_check(second, 12, DType::c64);
  JitStats s = second.stats();
  CHECK(s.kernels_compiled == 0);
  CHECK(s.disk_hits == compiled);
  CHECK(s.disk_rejected == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("jit cache: corrupt, truncated or foreign cache files are detected and recompiled") {
  std::string dir = fresh_dir("corrupt");
  MicroKernelSpec spec;
  std::string path;
  {
    KernelCache first(dir);
    spec = default_micro_kernel(DType::f64, first.host().has_avx512);
    first.micro_kernel(spec);
    path = first.cache_file(spec);
  }
  REQUIRE(std::filesystem::exists(path));
  auto size = std::filesystem::file_size(path);
  SUBCASE("a flipped payload byte") {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size - 100));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(size - 100));
    f.write(&byte, 1);
  }
  SUBCASE("a truncated file") { std::filesystem::resize_file(path, size / 2); }
  SUBCASE("an empty file") { std::filesystem::resize_file(path, 0); }
  KernelCache second(dir);
  std::string err = stderr_of([&] { default_tile_gemm(second); });
  CHECK(err.rfind("einstage: warning: kernel cache: '" + path + "' is not a usable cache entry (", 0) == 0);
  CHECK(err.ends_with("); recompiling\n"));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  JitStats s = second.stats();
  CHECK(s.disk_rejected == 1);
  CHECK(s.kernels_compiled == 1);
  CHECK(s.disk_hits == 0);
  // The rewritten file is good again.
  KernelCache third(dir);
  third.micro_kernel(spec);
  CHECK(third.stats().disk_hits == 1);
  CHECK(third.stats().kernels_compiled == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("jit cache: an entry that is no regular file is recompiled with a one-line warning naming it") {
  std::string dir = fresh_dir("special");
  std::string path;
  MicroKernelSpec spec;
  {
    KernelCache first(dir);
    spec = default_micro_kernel(DType::f64, first.host().has_avx512);
    path = first.cache_file(spec);
  }
  std::filesystem::create_directories(dir);
  std::string problem;
  SUBCASE("a directory") {
    std::filesystem::create_directory(path);
    problem = "cannot read '" + path + "': it is a directory, not a regular file";
  }
  SUBCASE("a FIFO (reading it must not wait for a writer)") {
    REQUIRE(::mkfifo(path.c_str(), 0666) == 0);
    problem = "cannot read '" + path + "': it is a FIFO, not a regular file";
  }
  SUBCASE("a symlink to /dev/zero (reading it must not run forever)") {
    std::filesystem::create_symlink("/dev/zero", path);
    problem = "cannot read '" + path + "': it is a character device, not a regular file";
  }
  SUBCASE("garbage") {
    std::ofstream(path) << "not an object file";
    problem = "'" + path + "' is not a usable cache entry (no header)";
  }
  KernelCache second(dir);
  std::string err = stderr_of([&] { second.micro_kernel(spec); });
  CHECK(err == "einstage: warning: kernel cache: " + problem + "; recompiling\n");
  CHECK(second.stats().disk_rejected == 1);
  CHECK(second.stats().kernels_compiled == 1);
  // The entry is replaced by a good regular file, except a directory, which is left alone (and warned about again).
  KernelCache third(dir);
  std::string again = stderr_of([&] { third.micro_kernel(spec); });
  if (std::filesystem::is_directory(path)) {
    CHECK(again == err);
  } else {
    CHECK(again.empty());
    CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(path)));
    CHECK(third.stats().disk_hits == 1);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("jit cache: threads asking for the same kernel at once compile it once") {
  KernelCache cache("");
  MicroKernelSpec spec = default_micro_kernel(DType::f32, cache.host().has_avx512);
  MicroKernelFn got[4] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { got[t] = cache.micro_kernel(spec); });
  for (auto& t : threads) t.join();
  CHECK(cache.stats().kernels_compiled == 1);
  for (int t = 1; t < 4; ++t) CHECK((got[t] == got[0]));
}

TEST_CASE("jit cache: a context's cache directory is its config's (ir/Config.h checks the order of sources)") {
  CHECK(default_context().kernels().cache_dir() == default_context().config().kernel_cache_dir);
  const std::string dir = (std::filesystem::temp_directory_path() / "einstage_context_cache_dir").string();
  ExecutionContext own(ConfigOptions{.kernel_cache_dir = dir});
  CHECK(own.kernels().cache_dir() == dir);
  CHECK(&own.kernels() != &default_context().kernels());
}

TEST_CASE("dispatch: contract() runs floats on the JIT, i64 on the portable kernel") {
  REQUIRE(jit_enabled());  // ctest runs this suite with the JIT on (EINSTAGE_JIT unset)
  DispatchStats before = dispatch_stats();
  OwnedProblem f = random_problem(31, DType::f64, false);
  contract(f.p);
  check_against_oracle<double>(f);
  DispatchStats after = dispatch_stats();
  CHECK(after.jit_calls == before.jit_calls + 1);
  CHECK(after.portable_calls == before.portable_calls);

  OwnedProblem i = random_problem(32, DType::i64, false);
  contract(i.p);
  check_against_oracle<int64_t>(i);
  CHECK(dispatch_stats().portable_calls == after.portable_calls + 1);
}

// Run by ctest as jit_portable, in a process started with EINSTAGE_JIT=0 (the variable is read once per process).
TEST_CASE("dispatch: with EINSTAGE_JIT=0 contract() runs every dtype on the portable kernel" * doctest::skip()) {
  REQUIRE(!Config::process().jit);
  CHECK(!jit_enabled());
  DispatchStats before = dispatch_stats();
  OwnedProblem f = random_problem(31, DType::f64, false);
  contract(f.p);
  check_against_oracle<double>(f);
  OwnedProblem g = random_problem(33, DType::c128, false);
  contract(g.p);
  check_against_oracle<c128>(g);
  CHECK(dispatch_stats().portable_calls == before.portable_calls + 2);
  CHECK(dispatch_stats().jit_calls == before.jit_calls);
}
