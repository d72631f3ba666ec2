#include "runtime/jit/LlvmProcess.h"

#include "ir/Error.h"

#include <cstdlib>
#include <thread>

namespace einstage {

LlvmProcess& LlvmProcess::get() {
  static auto* process = new LlvmProcess;  // never destroyed: its gate is held at exit
  return *process;
}

// Exit. Static destructors run in reverse order of construction; a thread still inside LLVM when exit() destroys
// LLVM's statics touches freed memory. So every use of LLVM passes the gate, and an exit handler younger than every
// static those uses made runs before they are destroyed: it waits for the LLVM work in progress on any thread and
// closes the gate. Later work fails with Error(runtime), which contract() turns into the portable kernel and the
// specialiser into a step left on contract(). What remains is a static first made by LLVM work still running when
// exit() starts; the warm-up (WarmUp.h) makes the ones einstage's kernels reach before the first code generation.
void LlvmProcess::close_gate_at_exit() {
  LlvmProcess& process = get();
  if (process.closed_.exchange(true)) return;
  process.gate_.lock();  // waits for the LLVM work in progress; never unlocked
}

void LlvmProcess::register_exit_handler() {
  registrations_.fetch_add(1);
  std::atexit(close_gate_at_exit);  // younger than the statics made so far
}

namespace {
[[noreturn]] void fail_exiting() {
  fail(ErrorKind::runtime, "jit: the process is exiting; no code is generated any more");
}
constexpr uint32_t bit(LlvmProcess::UseKind kind) { return uint32_t{1} << static_cast<unsigned>(kind); }
}  // namespace

// A use registers the handler after it when it may have made a static no handler is younger than: it began before
// the first use of its kind completed, or it generates code (or makes a target machine) and began before the warm-up
// finished. After the warm-up and one use of each kind, nothing einstage's kernels do registers it again.
LlvmProcess::Use::Use(UseKind kind) : kind_(kind) {
  LlvmProcess& process = get();
  while (!process.gate_.try_lock_shared()) {
    if (process.closed_.load()) fail_exiting();
    std::this_thread::yield();
  }
  if (process.closed_.load()) {
    process.gate_.unlock_shared();
    fail_exiting();
  }
  const bool generates = kind == UseKind::codegen || kind == UseKind::target_machine;
  register_after_ = !(process.kinds_done_.load() & bit(kind)) || (generates && !process.warmed_up());
}

LlvmProcess::Use::~Use() {
  LlvmProcess& process = get();
  process.gate_.unlock_shared();
  if (!register_after_) return;
  process.kinds_done_.fetch_or(bit(kind_));
  process.register_exit_handler();
}

void LlvmProcess::warm_up(void (*generate)()) {
  if (warmed_up()) return;
  std::lock_guard lock(warm_up_mutex_);  // a second caller waits for the first one's warm-up
  if (warmed_up()) return;
  generate();  // throws: not warmed up, the caller's context decides what its failure means
  warmed_up_.store(true, std::memory_order_release);
  register_exit_handler();  // younger than every static the warm-up made
}

}  // namespace einstage
