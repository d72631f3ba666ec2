// The LLVM side of Jit (runtime stage, private to runtime/jit/*.cpp): the Impl behind Jit's pimpl and the helpers
// the kernel generator needs (a fresh module configured for the host, module -> object codegen). This is the only
// header of einstage that includes LLVM; never include it from a public header or from outside runtime/jit/.
#pragma once

#include "runtime/jit/Jit.h"

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <mutex>
#include <string>

namespace einstage {

/// Two halves that start at different times. Linking (an ORC ExecutionSession, a JITLink object layer and one
/// JITDylib, the pieces LLJIT would make for this host) is built by Jit::create: it needs neither LLVM's target
/// registry nor a TargetMachine, so a process whose kernels all come from the disk cache never makes them. Code
/// generation (the target machine, and LLVM's target initialisation before it) is made by the first new_module,
/// emit_* or optimise, under the same mutex. The objects are the same either way: the target machine is built from
/// the same JITTargetMachineBuilder, only later.
struct Jit::Impl {
  JitHost host;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::unique_ptr<llvm::orc::ExecutionSession> session;  // endSession() in ~Impl, before the layer goes
  std::unique_ptr<llvm::orc::ObjectLinkingLayer> linker;
  llvm::orc::JITDylib* main = nullptr;                   // owned by the session
  std::mutex mutex;  // codegen and object adding are serialised per Jit

  ~Impl();

  /// The target machine for our own module -> object codegen, made on first use (thread-safe).
  llvm::TargetMachine& target_machine();
  /// A new empty module with the host's triple and data layout (the caller owns the context).
  std::unique_ptr<llvm::Module> new_module(llvm::LLVMContext& context, const std::string& name);
  /// Verifies the module and runs the code generator only (no IR optimisation pipeline).
  std::vector<char> emit_object(llvm::Module& module);
  /// The same code generation, as AT&T assembly text (tests read it, e.g. for stack traffic in a kernel's k loop).
  std::string emit_assembly(llvm::Module& module);
  /// Runs LLVM's O2 IR pipeline on the module (inlining, constant propagation, unrolling). Only for code compiled off
  /// the critical path (shape-specialised kernels, Specialise.h): it costs several milliseconds per module.
  void optimise(llvm::Module& module);

 private:
  std::once_flag tm_once_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

/// Converts an llvm::Error to einstage::Error(runtime) with `what` as context; does nothing on success.
void throw_if_error(llvm::Error error, std::string_view what);

template <typename T>
T take_or_throw(llvm::Expected<T> value, std::string_view what) {
  if (!value) throw_if_error(value.takeError(), what);
  return std::move(*value);
}

}  // namespace einstage
