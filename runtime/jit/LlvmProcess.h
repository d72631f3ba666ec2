// LlvmProcess: the JIT's one piece of process state, kept because it is a fact of the host process and not
// configuration (runtime stage, JIT). LLVM makes some function-local statics lazily, on the first use of a code path
// (TargetLibraryInfo's name table, SDNode's value-type lists, X86's fold tables, the pass registries, ...), and the C
// library destroys them at exit in reverse order of construction; every ExecutionContext in the process shares them,
// and no context can own or order them. So two things stay per process, in this one object: the exit gate (every use
// of LLVM passes it; an exit handler younger than the statics closes it before they are destroyed, and later uses
// fail with Error(runtime)) and whether LLVM's code generator was warmed up (runtime/jit/WarmUp.h: one small kernel
// that makes those statics once). Neither holds a setting, a cache or a failure of any context: which JIT runs the
// warm-up and what a failure does are decided by the context (JitState passes its warm-up to its kernel caches; a
// warm-up that throws fails that context only and leaves the process not warmed up, so the next context tries again).
//
// The exit handler is registered a bounded number of times, not once per use: after the first completed use of each
// kind, after each code generation that began before the warm-up finished (in a process that compiles through
// contexts, only the warm-up's own: a bare Jit compiling with no warm-up yet still registers after each one), and once
// when the warm-up finishes (the
// "statics" check of tests/runtime/exit_child/ says no static with a destructor is made by compiling, linking and looking
// up einstage's kernels after it). A static first made by a later use of a kind already seen, outside those, has no
// handler younger than it: the window WarmUp.h describes. Registering after every use instead made the list of exit
// handlers grow without bound in a long process. Depends on nothing of einstage but ir/Error.h in its implementation.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>

namespace einstage {

class LlvmProcess {
 public:
  /// The process's one instance, made on first use and never destroyed (its gate is held while the process exits).
  static LlvmProcess& get();

  /// What a use of LLVM does; the first completed use of each kind registers the exit handler after it.
  enum class UseKind : uint8_t { create, target_machine, codegen, parse, link, lookup };

  /// One use of LLVM: passes the exit gate for its lifetime (throws Error(runtime) once the process is exiting), and
  /// registers the exit handler after it when the use may have made new statics (see the header comment).
  class Use {
   public:
    explicit Use(UseKind kind);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    UseKind kind_;
    bool register_after_;
  };

  /// Whether the exit handler has closed the gate: no code is generated any more.
  bool exiting() const { return closed_.load(); }

  /// Runs `generate` (which makes LLVM's lazily made statics, WarmUp.h) unless a warm-up already succeeded in this
  /// process; concurrent callers wait for the one that runs it. If it throws, the exception goes to this caller and
  /// the process stays not warmed up (the next caller runs its own). Code `generate` compiles must not ask for the
  /// warm-up again (it uses a JIT of its own, outside any kernel cache).
  void warm_up(void (*generate)());
  /// Whether a warm-up has succeeded in this process.
  bool warmed_up() const { return warmed_up_.load(std::memory_order_acquire); }

  /// std::atexit registrations of the exit handler so far (tests check that it stays bounded).
  int64_t exit_handler_registrations() const { return registrations_.load(); }

 private:
  LlvmProcess() = default;
  void register_exit_handler();
  static void close_gate_at_exit();

  std::shared_mutex gate_;
  std::atomic<bool> closed_{false};
  std::atomic<uint32_t> kinds_done_{0};  // a bit per UseKind whose first use has completed
  std::mutex warm_up_mutex_;
  std::atomic<bool> warmed_up_{false};
  std::atomic<int64_t> registrations_{0};
};

}  // namespace einstage
