// The warm-up of LLVM's code generator (runtime stage, JIT): what the process does before its first code generation (a
// context's kernel caches ask LlvmProcess::warm_up for it before their first code generation: runtime/jit/JitState.h,
// runtime/jit/LlvmProcess.h). LLVM makes some function-local statics on the first use of a code path
// (TargetLibraryInfo's name table, SDNode's value-type lists, X86's broadcast-fold and memory-unfold tables, the
// print-pass name sets); each registers its destructor with the C library's exit handlers then. A static first made by
// LLVM work still running when exit() starts (on the background specialiser, say) would be destroyed under that work,
// so every static einstage's kernels reach is made once, up front, by calling the LLVM functions that own them
// directly: no kernel is compiled (except in a build on Debian's shared libLLVM, EINSTAGE_LLVM_SHARED, which does not
// export X86's fold-table functions: it compiles one small kernel for those two). (Until 2026-12-06 one small
// specialised kernel was compiled through the O2 pipeline for this; that cost 7-9 ms of the process's first kernel on
// the Zen 5 guest: docs/performance.md, "First kernel of a process".) Depends on runtime/jit/Jit.h and LlvmProcess.h
// only; tests/runtime/exit_child/WarmUpStatics.cpp ("statics" mode) checks that after it, compiling every kind of
// kernel einstage generates registers no new static destructor, for the host and for named CPUs: a new LLVM version
// that makes another static on those paths fails there, naming its destructor.
#pragma once

namespace einstage {

class Jit;

/// Makes every lazily made LLVM static with a destructor that compiling einstage's micro-kernels, lane, direct and
/// specialised kernels (the O2 pipeline and the code generator) reaches, for `jit`'s target, by calling the LLVM
/// functions that own them (makes `jit`'s target machine if it has none). Generates no code: takes well under a
/// millisecond once the target machine exists.
void make_code_generator_statics(Jit& jit);

/// make_code_generator_statics on a throwaway JIT for the host; throws Error(runtime) if LLVM cannot target this
/// machine. What a context's JIT passes to LlvmProcess::warm_up.
void generate_host_warm_up();

/// LlvmProcess::warm_up(generate_host_warm_up): once per process (LLVM's statics are the process's, not a context's);
/// later calls return at once. Never throws: without a JIT on this machine nothing of LLVM's code generator will run,
/// and contract() reports the failure (the process then stays not warmed up).
void warm_up_code_generator();
/// Whether a warm-up has succeeded in this process (LlvmProcess::warmed_up).
bool code_generator_warmed_up();

/// How many code generations a warm-up makes on its thread: 0, or 1 in a build on the shared libLLVM
/// (EINSTAGE_LLVM_SHARED), whose warm-up compiles one small kernel (for the tests that count code generations).
int warm_up_code_generations();

}  // namespace einstage
