// The LLVM side of Jit (runtime stage, private to runtime/jit/*.cpp): the Impl behind Jit's pimpl and the helpers
// the kernel generator needs (a fresh module configured for the host, module -> object codegen). This is the only
// header of einstage that includes LLVM; never include it from a public header or from outside runtime/jit/.
#pragma once

#include "runtime/jit/Jit.h"

#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <mutex>
#include <string>

namespace einstage {

struct Jit::Impl {
  JitHost host;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::unique_ptr<llvm::TargetMachine> tm;  // for our own module -> object codegen
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::mutex mutex;  // codegen and object adding are serialised per Jit

  /// A new empty module with the host's triple and data layout (the caller owns the context).
  std::unique_ptr<llvm::Module> new_module(llvm::LLVMContext& context, const std::string& name);
  /// Verifies the module and runs the code generator only (no IR optimisation pipeline).
  std::vector<char> emit_object(llvm::Module& module);
  /// The same code generation, as AT&T assembly text (tests read it, e.g. for stack traffic in a kernel's k loop).
  std::string emit_assembly(llvm::Module& module);
  /// Runs LLVM's O2 IR pipeline on the module (inlining, constant propagation, unrolling). Only for code compiled off
  /// the critical path (shape-specialised kernels, Specialise.h): it costs several milliseconds per module.
  void optimise(llvm::Module& module);
};

/// Converts an llvm::Error to einstage::Error(runtime) with `what` as context; does nothing on success.
void throw_if_error(llvm::Error error, std::string_view what);

template <typename T>
T take_or_throw(llvm::Expected<T> value, std::string_view what) {
  if (!value) throw_if_error(value.takeError(), what);
  return std::move(*value);
}

}  // namespace einstage
