// Jit: einstage's wrapper around LLVM ORC for the host CPU, or a named one (JitTarget; runtime stage).
// KaleidoscopeJIT-shaped: create(), compile a module to a relocatable object, add objects, look symbols up. Every
// compiled function goes the same way: LLVM module -> object file (codegen only, CodeGenOptLevel::Aggressive, no IR
// optimisation pipeline: the kernels are written as explicit vector IR) -> ORC's JITLink object layer -> address.
// Splitting "emit object" from "add object" is what lets KernelCache keep compiled objects on disk and skip codegen in
// a second process. create() makes only the linking half (an ORC session and a JITLink object layer); LLVM's target set-up and
// the target machine wait for the first compilation, so a process whose kernels all come from the disk cache never
// pays for them (its first call was 10-20 ms, most of it there: docs/performance.md, "Start-up, first calls").
//
// No LLVM type appears here (the implementation is a pimpl; libLLVM is linked privately into einstage_runtime).
// llvm::Error / Expected are converted to einstage::Error (ErrorKind::runtime) at this boundary. Code inside
// runtime/jit/ that builds IR reaches the LLVM objects through JitLlvm.h. Depends on ir/Error.h only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Clang's -fsanitize=function (part of -fsanitize=undefined) checks an indirect call by reading the 8 bytes before the
// callee, where clang-compiled functions keep a type signature. Generated code has none: see call_jit().
#if defined(__clang__)
#define EINSTAGE_NO_SANITIZE_FUNCTION __attribute__((no_sanitize("function")))
#else
#define EINSTAGE_NO_SANITIZE_FUNCTION
#endif

namespace einstage {

/// Calls a function the JIT compiled: fn(args...). Every call into generated code goes through here. Under clang's
/// UBSan the function-type check would read the 8 bytes before `fn`; a kernel at the start of a JIT memory page has
/// nothing mapped there in general, and the check itself faults (a SEGV at the call in sanitizer builds only: the
/// runtime suite's two-thread test hit it on the first specialised kernel). Generated code cannot carry the
/// signature, so the check is skipped for these calls and nowhere else.
template <typename Fn, typename... Args>
EINSTAGE_NO_SANITIZE_FUNCTION inline decltype(auto) call_jit(Fn fn, Args&&... args) {
  return fn(std::forward<Args>(args)...);
}

/// What the JIT compiles for; part of every disk-cache key, because an object is only valid for these.
struct JitHost {
  std::string llvm_version;  // e.g. "19.1.7"
  std::string triple;        // e.g. "x86_64-pc-linux-gnu"
  std::string cpu;           // LLVM's CPU name, e.g. "sapphirerapids" (the host's, unless JitTarget names one)
  std::string features;      // LLVM's feature string, sorted, e.g. "+avx512f,+fma,..."
  bool has_avx512 = false;   // avx512f is available (selects 512-bit micro-kernels)
};

/// True when code compiled for `code` may run on `host`: no instruction-set extension that `code` enables (SSE to
/// AVX-512, FMA, BMI, F16C, ...: the instructions code generation can emit) is one `host` reports absent. System
/// features (fsgsbase, invpcid, xsave, rdrnd, ...) never decide it: generated kernels use none of them, and guests
/// hide some (a KVM guest on Zen 5 reports no fsgsbase and no invpcid, yet runs every kernel). Neither is a feature
/// `host` does not report at all.
bool can_run(const JitHost& code, const JitHost& host);

/// Which CPU to generate code for. The default (empty) is the host CPU with the features LLVM detects on it, which
/// is what einstage always uses. A named CPU ("haswell", "znver3", "skylake-avx512": LLVM's names) makes objects for
/// that CPU with its own features, even on a machine that cannot run them: tests compile every kernel variant this
/// way and run only those the host supports.
struct JitTarget {
  std::string cpu;
};

class Jit {
 public:
  /// A JIT for the host, or for `target.cpu` on the host's triple. For the host, LLVM's native target is initialised
  /// and the target machine made at the first compilation (an error there throws from that call); a named CPU's are
  /// made here. Throws Error(runtime) if LLVM cannot target this machine, Error(invalid_argument) if it does not
  /// know the named CPU.
  static std::unique_ptr<Jit> create(const JitTarget& target = {});
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  const JitHost& host() const;

  /// Parses textual LLVM IR and compiles it to an ELF object for the host (no IR optimisation passes).
  std::vector<char> compile_ir_text(std::string_view llvm_ir, std::string_view module_name = "einstage");

  /// Adds a relocatable object (from compile_* or a disk cache) to the JIT's main library. Symbols must be unique
  /// per Jit instance.
  void add_object(const std::vector<char>& object, std::string_view name = "einstage-object");

  /// Address of a symbol defined by an added object; throws Error(runtime, not_found text) if absent.
  void* lookup(std::string_view symbol);

  /// compile_ir_text + add_object + lookup, for one-off functions (tests, tools).
  void* compile_and_lookup(std::string_view llvm_ir, std::string_view symbol);

  /// Code generations (object emissions, any Jit) run on the calling thread so far. Tests use it to check that a
  /// foreground call leaves compilation to the background specialiser.
  static int64_t codegens_on_this_thread();
  /// Target machines made on the calling thread so far (each Jit makes one, at its first compilation). Tests use it
  /// to check that a JIT that only links cached objects makes none.
  static int64_t target_machines_on_this_thread();

  // Every use of LLVM by any Jit passes the process's exit gate (runtime/jit/LlvmProcess.h).

  struct Impl;  // LLVM side; see JitLlvm.h
  Impl& impl() { return *impl_; }

 private:
  explicit Jit(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace einstage
