// The warm-up of LLVM's code generator (runtime stage, JIT): what the process's first code generation compiles first
// (a context's kernel caches ask LlvmProcess::warm_up for it before their first code generation: runtime/jit/JitState.h,
// runtime/jit/LlvmProcess.h). LLVM makes some function-local statics on
// the first use of a code path (TargetLibraryInfo's name table, SDNode's value-type lists, X86's broadcast-fold and
// memory-unfold tables, ...); each registers its destructor with the C library's exit handlers then. A static first
// made by LLVM work still running when exit() starts (on the background specialiser, say) would be destroyed under
// that work, so every static einstage's kernels reach is made once, up front, by one small kernel. Depends on
// runtime/jit/Jit.h and LlvmProcess.h only; tests/runtime/exit_child/ExitChild.cpp ("statics" mode) checks that after it, compiling
// every kind of kernel einstage generates registers no new static destructor, for the host and for named CPUs.
#pragma once

namespace einstage {

class Jit;

/// Compiles (never runs) one small shape-specialised kernel for `jit`'s target: a 3-vector direct tile of one
/// column, two 9-row tiles with masked edges, through LLVM's O2 pipeline and the code generator. That one kernel
/// takes every code path of LLVM that makes a static with a destructor when einstage compiles its micro-kernels,
/// lane, direct and specialised kernels, with AVX-512 and with AVX2: the six kernels the warm-up compiled before (one
/// micro-, lane and specialised kernel per real dtype) made the same statics, missed one on AVX2 targets, and took
/// 4-5x as long (docs/performance.md, "First kernel of a process").
void generate_warm_up_kernel(Jit& jit);

/// Generates the warm-up kernel on a throwaway JIT for the host; throws Error(runtime) if LLVM cannot target this
/// machine. What a context's JIT passes to LlvmProcess::warm_up.
void generate_host_warm_up();

/// LlvmProcess::warm_up(generate_host_warm_up): once per process (LLVM's statics are the process's, not a context's);
/// later calls return at once. Never throws: without a JIT on this machine nothing of LLVM's code generator will run,
/// and contract() reports the failure (the process then stays not warmed up).
void warm_up_code_generator();
/// Whether a warm-up has succeeded in this process (LlvmProcess::warmed_up).
bool code_generator_warmed_up();

}  // namespace einstage
