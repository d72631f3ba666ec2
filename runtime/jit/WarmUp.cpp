#include "runtime/jit/WarmUp.h"

#include "ir/Error.h"
#include "runtime/jit/JitLlvm.h"
#include "runtime/jit/LlvmProcess.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/CodeGen/SelectionDAG.h>
#include <llvm/IR/PrintPasses.h>

#if defined(__x86_64__) && EINSTAGE_LLVM_SHARED
#include "runtime/jit/MicroKernel.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#elif defined(__x86_64__)
// X86's fold tables are reached through functions of LLVM's X86 code generator (lib/Target/X86/X86InstrFoldTables.h,
// a header LLVM does not install); the library that defines them is linked in as the native target's. Debian's shared
// libLLVM does not export them (EINSTAGE_LLVM_SHARED): that build compiles a small kernel instead (below).
namespace llvm {
struct X86FoldTableEntry;
const X86FoldTableEntry* lookupUnfoldTable(unsigned MemOp);
const X86FoldTableEntry* lookupBroadcastFoldTableBySize(unsigned MemOp, unsigned BroadcastBits);
}  // namespace llvm
#endif

namespace einstage {

// Each call below makes one or more of the statics (LLVM 19; the exit child's "statics" mode lists any other):
void make_code_generator_statics(Jit& jit) {
  LlvmProcess::Use use(LlvmProcess::UseKind::codegen);
  llvm::TargetMachine& tm = jit.impl().target_machine();
  // TargetLibraryInfoImpl::getLibFunc's name index (the O2 pipeline's and instruction selection's library calls).
  llvm::TargetLibraryInfoImpl library(tm.getTargetTriple());
  llvm::LibFunc function;
  (void)library.getLibFunc("memcpy", function);
  // SDNode::getValueTypeList's value-type array and extended-type set (instruction selection).
  llvm::SelectionDAG dag(tm, llvm::CodeGenOptLevel::Aggressive);
  (void)dag.getVTList(llvm::MVT::i64);
  // The pass and function name sets behind -print-after and -filter-print-funcs (every pass manager).
  (void)llvm::isPassInPrintList("");
  (void)llvm::isFunctionInPrintList("");
#if defined(__x86_64__) && EINSTAGE_LLVM_SHARED
  // X86's memory-unfold and broadcast-fold tables, which the shared libLLVM keeps to itself: made by compiling one
  // specialised kernel that takes both paths (the warm-up einstage used before 2026-12-06, 7-9 ms on the Zen 5 guest).
  // C (18 x 1) = A (18 x 4) B (4 x 1) as two tiles of 9 rows of a 3-vector tile, so each tile's rows are masked: with
  // one 9-row tile the memory-unfold table is made only with AVX2, with 3 x 9 tiles of one vector only with AVX-512.
  constexpr int64_t kRows = 9, kTiles = 2, kDepth = 4, kLda = kRows * kTiles;
  SpecialisedKernelSpec spec;
  spec.tile.dtype = DType::f64;
  spec.tile.lanes = jit.host().has_avx512 ? 8 : 4;
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
#elif defined(__x86_64__)
  // X86's memory-unfold and broadcast-fold tables (MachineLICM, the scheduler, the peephole folding of loads).
  (void)llvm::lookupUnfoldTable(0);
  (void)llvm::lookupBroadcastFoldTableBySize(0, 64);
#endif
}

void generate_host_warm_up() { make_code_generator_statics(*Jit::create()); }

// LLVM's code generator makes some function-local statics on first use. Statics are destroyed in reverse order of
// construction, so a context constructed after they exist is destroyed before them, and its specialiser's last job
// still finds them intact; and LLVM work still running when exit() starts (LlvmProcess's gate) finds them intact too.
// Making them directly, on a throwaway JIT, once per process does that. A context's kernel caches ask for it just
// before their first code generation, not when the context is made: a process whose kernels all come from the disk
// cache (a one-shot `einstage einsum` run again) never generates code and never pays for it.
void warm_up_code_generator() {
  try {
    LlvmProcess::get().warm_up(&generate_host_warm_up);
  } catch (const Error&) {
    // No JIT on this machine: nothing of LLVM's code generator will run; contract() reports the failure.
  }
}

bool code_generator_warmed_up() { return LlvmProcess::get().warmed_up(); }

int warm_up_code_generations() {
#if defined(__x86_64__) && EINSTAGE_LLVM_SHARED
  return 1;
#else
  return 0;
#endif
}

}  // namespace einstage
