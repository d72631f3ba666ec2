// runtime/Context.h: an ExecutionContext owns the config, the pool, the JIT and the specialiser. Two contexts give
// the same bits at different thread counts; destroying one while its specialiser compiles finishes that job and
// drops the rest; a kernel specialised on one context is never called through another; and a process that exits
// from any thread while kernels compile and specialise exits cleanly (child processes, seeded random delays).
#include "extensions/einsum/exec/Einsum.h"
#include "ir/Error.h"
#include "runtime/Context.h"
#include "runtime/Cpus.h"
#include "runtime/Runtime.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Specialise.h"
#include "support/ErrorOf.h"
#include "support/Random.h"
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace einstage;
namespace es = einstage::einsum;
using einstage::test::error_of;

namespace {

Tensor random_tensor(test::SplitMix64& rng, Shape shape) {
  std::vector<double> v(static_cast<size_t>(element_count(shape)));
  for (double& x : v) x = rng.symmetric();
  return Tensor::from_col_major<double>(std::move(shape), v);
}

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  return {p, p + c.nbytes()};
}

ConfigOptions with_threads(int threads) {
  ConfigOptions o;
  o.threads = threads;
  o.kernel_cache_dir = "";  // in memory: these contexts compile for themselves
  return o;
}

}  // namespace

TEST_CASE("context: the config is option > environment variable > default; threads and pool follow it") {
  ExecutionContext from_env(Config::from({{"EINSTAGE_NUM_THREADS", "3"}, {"EINSTAGE_JIT", "0"}}));
  CHECK(from_env.threads() == 3);
  CHECK(from_env.pool().size() == 3);
  CHECK(!from_env.config().jit);
  CHECK(!jit_enabled(from_env));
  ExecutionContext from_option(Config::from({{"EINSTAGE_NUM_THREADS", "3"}}, with_threads(2)));
  CHECK(from_option.threads() == 2);
  ExecutionContext by_default(Config::from({}));
  CHECK(by_default.threads() == available_cpus());
  CHECK(from_env.id() != from_option.id());
  CHECK(&default_context() == &default_context());
  CHECK(&default_pool() == &default_context().pool());
  CHECK(error_of([] { ExecutionContext bad(Config::from({{"EINSTAGE_JIT_DIRECT", "no"}})); }) ==
        "environment variable EINSTAGE_JIT_DIRECT is 'no'; expected 0 or 1 (0 forces the JIT's packed path), or unset "
        "it for the default (1)");
}

TEST_CASE("context: two contexts with different thread counts give identical bits") {
  test::SplitMix64 rng{2024};
  const Tensor a = random_tensor(rng, {40, 33, 6}), b = random_tensor(rng, {33, 6, 50}), c = random_tensor(rng, {50, 7});
  ExecutionContext one(with_threads(1)), three(with_threads(3));
  es::EinsumOptions on_one, on_three;
  on_one.context = &one;
  on_three.context = &three;
  const std::string spec = "ikb,kbj,jl->il";
  const Tensor r1 = es::einsum(spec, {a, b, c}, on_one), r3 = es::einsum(spec, {a, b, c}, on_three);
  const Tensor rd = es::einsum(spec, {a, b, c});
  CHECK(bytes_of(r1) == bytes_of(r3));
  CHECK(bytes_of(r1) == bytes_of(rd));
  // The contexts compiled their own kernels (in memory), and a Runtime shares the one it is given.
  CHECK(one.kernels().stats().kernels_compiled > 0);
  CHECK(&one.kernels() != &three.kernels());
  auto shared = std::make_shared<ExecutionContext>(with_threads(2));
  RuntimeOptions options;
  options.context = shared;
  Runtime rt(options);
  CHECK(&rt.context() == shared.get());
  CHECK(rt.pool() == &shared->pool());
  options.threads = 2;
  CHECK(error_of([&] { Runtime bad(options); }) ==
        "RuntimeOptions::threads is 2 and RuntimeOptions::context is set; the context's thread count applies: leave "
        "threads at 0");
}

TEST_CASE("context: destroying it while its specialiser compiles finishes that job and drops the queued ones") {
  if (!jit_enabled()) return;
  test::SplitMix64 rng{77};
  // Shapes no other test uses, so these steps are queued here.
  const Tensor a = random_tensor(rng, {7, 5}), b = random_tensor(rng, {5, 9}), c = random_tensor(rng, {6, 4}),
               d = random_tensor(rng, {4, 3});
  const es::EinsumPlan first = es::EinsumPlan::prepare("ij,jk->ik", std::vector{es::TensorMeta::of(a), es::TensorMeta::of(b)});
  const es::EinsumPlan second = es::EinsumPlan::prepare("ij,jk->ik", std::vector{es::TensorMeta::of(c), es::TensorMeta::of(d)});
  const std::vector<Tensor> ops1 = {a, b}, ops2 = {c, d};
  const std::vector<unsigned char> ref1 = bytes_of(first.execute(ops1)), ref2 = bytes_of(second.execute(ops2));

  std::mutex mutex;
  std::condition_variable changed;
  int entered = 0;
  bool released = false;
  auto context = std::make_unique<ExecutionContext>(with_threads(2));
  context->specialiser().set_job_hook([&] {
    std::unique_lock lock(mutex);
    ++entered;
    changed.notify_all();
    changed.wait(lock, [&] { return released; });
  });
  for (int64_t call = 0; call < StepKernel::kHotCalls + 2; ++call) {
    CHECK(bytes_of(first.execute(ops1, *context)) == ref1);  // queues the first step's kernel
    CHECK(bytes_of(second.execute(ops2, *context)) == ref2);  // queues the second behind it
  }
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return entered == 1; });  // the first job runs, held in the hook; the second waits
  }
  std::thread releaser([&] {
    std::lock_guard lock(mutex);
    released = true;
    changed.notify_all();
  });
  context.reset();  // joins the specialiser after its running job; the queued one is dropped
  releaser.join();
  CHECK(entered == 1);
  // The plans still run, on other contexts, with the same bits (the dead context's kernels are never called).
  ExecutionContext other(with_threads(1));
  for (int call = 0; call < 3; ++call) {
    CHECK(bytes_of(first.execute(ops1, other)) == ref1);
    CHECK(bytes_of(second.execute(ops2)) == ref2);
  }
}

namespace {

// The exit status of einstage_test_exit_child `first` `mode` with EINSTAGE_CACHE_DIR = cache_dir, or -signal.
int child_status(const std::string& mode, const std::string& cache_dir, const std::string& first = "1") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("EINSTAGE_CACHE_DIR", cache_dir.c_str(), 1);
    ::execl(EINSTAGE_EXIT_CHILD_PATH, EINSTAGE_EXIT_CHILD_PATH, first.c_str(), mode.c_str(), nullptr);
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace

TEST_CASE("context: a process whose kernels all come from the disk cache skips the JIT's warm-up") {
  REQUIRE(jit_enabled());
  test::TempDir cache;
  // Status 20 + 1 (warm-up ran) + 2 (a kernel compiled) + 4 (a kernel loaded from disk) + 8 (code generations other
  // than the cache's kernels and the warm-up's own: none, or one on the shared libLLVM): see ExitChild.cpp.
  CHECK(child_status("cache", cache.path().string()) == 20 + 1 + 2);  // cold: compiles, warming up first
  CHECK(child_status("cache", cache.path().string()) == 20 + 4);      // warm: loads, never warms up
}

TEST_CASE("context: the JIT's warm-up makes every LLVM static that compiling einstage's kernels makes") {
  // runtime/jit/WarmUp.h: after the warm-up, compiling every micro-, lane, direct and specialised kernel kind registers
  // no new static destructor, for the host and for CPUs of either vector width (compiled, never run). Status 30:
  // none; 31: some, listed on the child's stderr (make_code_generator_statics must make them too); 32: the warm-up
  // made none, so the child's __cxa_atexit saw nothing; 33: a sanitizer build, which cannot check.
  test::TempDir cache;
  for (const std::string cpu : {"host", "haswell", "skylake-avx512", "znver3"}) {
    CAPTURE(cpu);
    const int status = child_status("statics", cache.path().string(), cpu);
    if (status == 33) {
      MESSAGE("a sanitizer runtime owns __cxa_atexit here: the warm-up's statics are not checked");
      break;
    }
    CHECK(status == 30);
  }
}

TEST_CASE("context: the JIT's exit handler is registered a bounded number of times, not once per use of LLVM") {
  // runtime/jit/LlvmProcess.h: after one context has compiled, six more contexts loading kernels from the disk cache
  // and compiling new shapes register no atexit() handler (counted by the child's own __cxa_atexit). Status 40: so;
  // 41: some after the first context; 42: more than the bound in all; 43: too little work to tell; 33: a sanitizer
  // build, which cannot count. The counts are on the child's stderr.
  test::TempDir cache;
  const int status = child_status("handlers", cache.path().string());
  if (status == 33) MESSAGE("a sanitizer runtime owns __cxa_atexit here: the registrations are not counted");
  else CHECK(status == 40);
}

TEST_CASE("context: a context whose JIT warm-up fails does not poison another; a context with the JIT off runs none") {
  // LlvmProcessChecks.cpp, in a fresh process: JIT off (no warm-up asked), then a failing warm-up (that context runs
  // on the portable kernel, the process stays not warmed up), then a context that warms up and runs on the JIT,
  // then one given the failing warm-up that never calls it. Status 50: all as expected; 51-55: the step that was not.
  test::TempDir cache;
  CHECK(child_status("warm-up-fault", cache.path().string()) == 50);
}

TEST_CASE("context: the specialiser's thread never warms LLVM up; the thread that queues the first kernel does") {
  // LlvmProcessChecks.cpp: a process whose ordinary kernels all come from the disk cache and whose first generated
  // kernel is a hot step's specialised one. Status 61: the warm-up ran on the queueing thread and the background
  // generated the kernels; 62-65: what went wrong (see the child).
  test::TempDir cache;
  REQUIRE(child_status("specialise-fill", cache.path().string()) == 60);
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache.path()))
    if (entry.path().filename().string().rfind("ein_spec_", 0) == 0) removed += std::filesystem::remove(entry.path());
  REQUIRE(removed > 0);
  CHECK(child_status("specialise-cold", cache.path().string()) == 61);
}

TEST_CASE("context: a process exiting from main or from a worker while kernels compile and specialise exits cleanly") {
  int clean = 0, runs = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed)
    for (const std::string mode : {"main", "worker"}) {
      CAPTURE(seed);
      CAPTURE(mode);
      const std::string seed_text = std::to_string(seed);
      test::TempDir cache;  // an empty kernel cache: every kernel is generated, in every child
      const std::string cache_dir = cache.path().string();
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::setenv("EINSTAGE_CACHE_DIR", cache_dir.c_str(), 1);
        ::execl(EINSTAGE_EXIT_CHILD_PATH, EINSTAGE_EXIT_CHILD_PATH, seed_text.c_str(), mode.c_str(), nullptr);
        ::_exit(127);
      }
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      ++runs;
      const std::string signal = WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "none";
      CAPTURE(signal);
      CHECK(WIFEXITED(status));
      if (WIFEXITED(status)) {
        CHECK(WEXITSTATUS(status) == 7);
        clean += WEXITSTATUS(status) == 7;
      }
    }
  CHECK(clean == runs);
}
