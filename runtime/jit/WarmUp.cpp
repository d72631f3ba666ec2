#include "runtime/jit/WarmUp.h"

#include "ir/Error.h"
#include "runtime/jit/JitLlvm.h"
#include "runtime/jit/LlvmProcess.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/CodeGen/SelectionDAG.h>
#include <llvm/IR/PrintPasses.h>

#if defined(__x86_64__)
// X86's fold tables are reached through functions of LLVM's X86 code generator (lib/Target/X86/X86InstrFoldTables.h,
// a header LLVM does not install); the library that defines them is linked in as the native target's.
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
#if defined(__x86_64__)
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

}  // namespace einstage
