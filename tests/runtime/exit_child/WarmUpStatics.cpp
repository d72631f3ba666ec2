// The "statics" mode of einstage_test_exit_child: checks that the JIT's warm-up (runtime/jit/WarmUp.h) makes every
// static with a destructor that compiling einstage's kernels makes, so that none is first made by LLVM work that may
// still run when exit() starts. This executable defines __cxa_atexit, which the C++ runtime calls to register each
// static's destructor when the static is made, and forwards to the C library's; the check counts registrations
// (those with an object: atexit() handlers such as the JIT's exit gate have none; LlvmProcessChecks.cpp counts those)
// after the warm-up while every
// micro-, lane, direct and specialised kernel kind compiles for the host or a named CPU (LLVM's name). Sanitizer
// runtimes intercept __cxa_atexit themselves; there the mode reports that it cannot check.
#include "runtime/jit/Gett.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/WarmUp.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define EINSTAGE_SANITIZER_ATEXIT 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EINSTAGE_SANITIZER_ATEXIT 1
#endif

#ifndef EINSTAGE_SANITIZER_ATEXIT
namespace {

struct Registration {
  void (*fn)(void*);
  void* object;
};
constexpr int kMaxRegistrations = 1 << 16;
Registration g_registrations[kMaxRegistrations];
std::atomic<int> g_count{0};
std::atomic<int> g_handlers{0};  // registrations without an object: atexit()

}  // namespace

extern "C" int __cxa_atexit(void (*fn)(void*), void* object, void* dso) noexcept {
  using Real = int (*)(void (*)(void*), void*, void*);
  static const Real real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "__cxa_atexit"));
  if (object) {
    const int at = g_count.fetch_add(1);
    if (at < kMaxRegistrations) g_registrations[at] = {fn, object};
  } else {
    g_handlers.fetch_add(1);
  }
  return real(fn, object, dso);
}
#endif

namespace einstage::test {

int exit_handlers_seen() {
#ifdef EINSTAGE_SANITIZER_ATEXIT
  return -1;
#else
  return g_handlers.load();
#endif
}

// Exit status: 30 no new static after the warm-up; 31 some (listed on stderr); 32 the warm-up made none (so the
// interposition saw nothing and proves nothing); 33 this build cannot check (a sanitizer runtime owns __cxa_atexit).
int check_warm_up_statics(const std::string& cpu) {
#ifdef EINSTAGE_SANITIZER_ATEXIT
  (void)cpu;
  return 33;
#else
  const JitTarget target{cpu == "host" ? "" : cpu};
  // Everything einstage itself makes once (the tile tables, the cache's JIT) before the warm-up, so that what is
  // counted after it comes from compiling.
  KernelCache cache("", target);
  const bool avx512 = cache.host().has_avx512;
  std::vector<MicroKernelSpec> kernels;
  std::vector<SpecialisedKernelSpec> specialised;
  for (DType dtype : {DType::f64, DType::f32}) {
    for (const MicroKernelChoice& c : micro_kernel_candidates(dtype, avx512)) kernels.push_back(c.spec);
    for (const MicroKernelChoice& c : direct_kernel_candidates(dtype, avx512)) kernels.push_back(c.spec);
    kernels.push_back(default_lane_kernel(dtype, avx512));
    for (int64_t m : {3, 9, 17, 40})
      for (int64_t n : {1, 2, 5, 13}) {  // C (m x n) = A (m x 9) B (9 x n), column-major: direct tiles of each width
        ContractionProblem p;
        p.dtype = dtype;
        p.m = {{m, 1, 0, 1}};
        p.n = {{n, 0, 9, m}};
        p.k = {{9, m, 1, 0}};
        DirectSchedule schedule;
        if (direct_schedule(p, avx512, schedule)) specialised.push_back(schedule.kernel);
      }
  }
  const int before = g_count.load();
  make_code_generator_statics(*Jit::create(target));
  const int warmed = g_count.load();
  for (const MicroKernelSpec& spec : kernels) (void)cache.micro_kernel(spec);
  for (const SpecialisedKernelSpec& spec : specialised)
    (void)cache.compiled_function(spec.symbol(), spec.describe(),
                                  [&](Jit& jit) { return compile_specialised_kernel(jit, spec); });
  const int after = std::min(g_count.load(), kMaxRegistrations);
  for (int i = warmed; i < after; ++i) {
    Dl_info info{};
    const void* fn = reinterpret_cast<const void*>(g_registrations[i].fn);
    ::dladdr(fn, &info);
    std::fprintf(stderr, "static made after the warm-up for '%s': destructor %s+0x%zx (%s)\n", cpu.c_str(),
                 info.dli_fname ? info.dli_fname : "?",
                 static_cast<size_t>(static_cast<const char*>(fn) - static_cast<const char*>(info.dli_fbase)),
                 info.dli_sname ? info.dli_sname : "hidden symbol");
  }
  if (after > warmed) return 31;
  return warmed > before ? 30 : 32;
#endif
}

}  // namespace einstage::test
