#include "runtime/jit/WarmUp.h"

#include "ir/Error.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/LlvmProcess.h"
#include "runtime/jit/MicroKernel.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace einstage {

void generate_warm_up_kernel(Jit& jit) {
  // C (18 x 1) = A (18 x 4) B (4 x 1), all column-major, as two tiles of 9 rows of a 3-vector tile (24 rows with
  // AVX-512, 12 with AVX2), so each tile's rows are masked. The shape is chosen for the code paths it takes, not for
  // speed: with one 9-row tile the memory-unfold table is made only with AVX2, with 3 x 9 tiles of one vector only
  // with AVX-512 (measured on LLVM 19; the exit child's "statics" mode is the check).
  constexpr int64_t kRows = 9, kTiles = 2, kDepth = 4, kLda = kRows * kTiles;
  const bool avx512 = jit.host().has_avx512;
  SpecialisedKernelSpec spec;
  spec.tile.dtype = DType::f64;
  spec.tile.lanes = avx512 ? 8 : 4;
  spec.tile.mr = 3 * spec.tile.lanes;
  spec.tile.nr = 1;
  spec.tile.k_unroll = 1;
  spec.tile.direct = true;
  spec.k_inner = kDepth;
  const int64_t geometry[kKGeometry] = {1, kLda, 1, 0, 0, 0, 0};  // one k level: A's k stride kLda, B's 1
  std::copy(std::begin(geometry), std::end(geometry), spec.k_geometry);
  spec.col_off = {0, 0};  // C's one column, padded with nr zeros
  for (int64_t t = 0; t < kTiles; ++t) spec.tiles.push_back({t * kRows, t * kRows, 0, kRows, 1, {0}});
  (void)compile_specialised_kernel(jit, spec);
}

void generate_host_warm_up() { generate_warm_up_kernel(*Jit::create()); }

// LLVM's code generator makes some function-local statics on first use. Statics are destroyed in reverse order of
// construction, so a context constructed after they exist is destroyed before them, and its specialiser's last job
// still finds them intact; and LLVM work still running when exit() starts (LlvmProcess's gate) finds them intact too.
// One small specialised kernel on a throwaway JIT makes them once per process. A context's kernel caches ask for it
// just before their first code generation, not when the context is made: a process whose kernels all come from the
// disk cache (a one-shot `einstage einsum` run again) never generates code and never pays for it.
void warm_up_code_generator() {
  try {
    LlvmProcess::get().warm_up(&generate_host_warm_up);
  } catch (const Error&) {
    // No JIT on this machine: nothing of LLVM's code generator will run; contract() reports the failure.
  }
}

bool code_generator_warmed_up() { return LlvmProcess::get().warmed_up(); }

}  // namespace einstage
