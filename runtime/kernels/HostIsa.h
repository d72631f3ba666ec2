// HostIsa: the vector instructions of the CPU this process runs on, for the hand-written kernels that pick an
// AVX-512, an AVX2 or a scalar body at run time (GettDots.h, GettLoops.h, BlockProduct.cpp). Stage: runtime.
// Depends on the compiler's CPU builtins only. The JIT asks LLVM instead (runtime/jit/Jit.h: JitHost), which names
// the CPU and its features for the disk cache's keys.
//
// A constant of the machine, not process state: read once on first use (never in a static initialiser, which may
// run before the compiler's CPU model is set up) and never freed.
#pragma once

namespace einstage::kernels {

struct HostIsa {
  bool avx512f = false;
  bool avx2 = false;
  bool fma = false;
};

inline const HostIsa& host_isa() {
  static const HostIsa isa{__builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx2") != 0,
                           __builtin_cpu_supports("fma") != 0};
  return isa;
}

}  // namespace einstage::kernels
