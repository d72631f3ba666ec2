// The extension module interface: what a module (linked in, or a shared library loaded by path) gives einstage, and
// the versioned `extern "C"` entry point through which it does. Stage: runtime. Depends on ir/Extension.h and
// ir/Tensor.h only; this header, with the ir headers it includes, is the whole surface a third-party module compiles
// against (extensions/api/Extension.h includes it; docs/extensions.md is the guide).
//
// Model: LLVM's PassPlugin.h. A module defines one entry point, einstage_module_entry(), returning a pointer to a
// static EinstageModuleDescriptor whose first two fields are the ABI version and the einstage build id (BuildId.h)
// of the headers it was built with; the loader reads them before anything else and refuses a module whose version
// or build differs, naming both. The descriptor names the module and its version and lists the
// extension families it provides, each with a registration function. einstage calls each function with a
// ModuleRegistrar that collects the family's compiler-side semantics (ExtensionSemantics into an ExtensionRegistry)
// and its runtime executor (ExtensionExecutor); the Runtime commits a module's families only after all of them
// registered cleanly (transactional: an error leaves the Runtime as it was).
//
// Rules that keep a host and a loaded module from stepping on each other (docs/extensions.md has the reasons):
// - No global state crosses the boundary: a module receives the registry to fill and the host's services
//   (HostServices) through the registration call, and keeps whatever it caches inside its executor objects, which
//   the Runtime owns. Prepared ops are cached by the Runtime, never by module globals.
// - Registration is explicit (no static initialisers). The entry symbol is defined only in the shared-library build
//   (EINSTAGE_DEFINE_MODULE_ENTRY in a file of its own), so two modules linked into one program do not clash; a
//   linked-in module hands its descriptor to Runtime::add_module directly.
// - A loaded module is never unloaded (its code is referenced by payloads, semantics and executors that may outlive
//   any one Runtime), exactly like LLVM pass plugins.
// - C++ types cross the boundary (ExtensionRegistry, ExtensionPayload, Tensor, ExecutionContext, ThreadPool, and the
//   kernel API of extensions/api/Kernels.h: ContractionProblem, StepKernel, the kernels' signatures), so a module must
//   be built with the same compiler ABI and the same einstage headers; kModuleAbiVersion is bumped whenever any of them
//   changes layout or meaning, and kBuildId (version, compiler, build type, sanitizers) tells einstage builds apart.
#pragma once

#include "ir/Extension.h"
#include "ir/Tensor.h"
#include "runtime/BuildId.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace einstage {

class ExecutionContext;

/// The module ABI version this einstage speaks. A module built for any other version is refused by the loader.
/// Version 2 added EinstageModuleDescriptor::build_id; 3: PreparedOp::run receives the Runtime's ExecutionContext
/// (it received a ThreadPool* before); 4: instructions with several results (PreparedOp::run_results,
/// ExtensionExecutor::prepare receives every result type, ExtensionSemantics' *_results slots); 5: prepare receives
/// the Runtime's ExecutionContext, so a prepared op takes its settings from the context's Config, not the process's;
/// 6: ExtensionSemantics::rewrite_derivative (a family's rewrite of the programs the public AD transformations return);
/// 7: ExecutionContext's contraction counters moved into its JitState (ExecutionContext::calls() is gone; jit()).
inline constexpr uint32_t kModuleAbiVersion = 7;

/// The einstage build these headers belong to (runtime/BuildId.h, generated). A module puts it in its descriptor; one
/// built against another build is refused.
inline constexpr const char* kBuildId = EINSTAGE_BUILD_ID;

/// An extension op made ready for fixed operand dtypes and shapes (einsum: the planned tree and its step plans).
/// The Runtime caches it under (payload, operand types) and may call run() from several threads at once, so run()
/// must not mutate shared state without its own synchronisation.
class PreparedOp {
 public:
  virtual ~PreparedOp() = default;
  /// Computes a single-result op. Operands have exactly the prepared dtypes and shapes (any strides); the result must
  /// be a tensor of the instruction's result type (the Runtime checks and names the family if it is not). `context`
  /// is the Runtime's (runtime/Context.h): its pool() for parallel work, its kernels and config. The default fails:
  /// an op with several results overrides run_results instead.
  virtual Tensor run(std::span<const Tensor> operands, ExecutionContext& context) const;
  /// Computes every result, one tensor per result type given to prepare(), in that order; what the Runtime calls.
  /// The default returns {run(operands, context)}, so a single-result op overrides run only.
  virtual std::vector<Tensor> run_results(std::span<const Tensor> operands, ExecutionContext& context) const {
    return {run(operands, context)};
  }
  /// A few lines for people (`einstage run --print-stages`), e.g. the contraction tree; may be empty.
  virtual std::string describe() const { return {}; }
};

/// The runtime half of an extension family.
class ExtensionExecutor {
 public:
  virtual ~ExtensionExecutor() = default;
  /// Prepares `payload` (of this executor's family) for operands of these concrete types; `results` are the result
  /// types the family's type rule gave for them (one for a single-result op). `context` is the Runtime's, the same
  /// one every run() of the prepared op receives: settings come from its config(), never from Config::process().
  /// Called once per distinct (payload, operand types) per Runtime, possibly concurrently for different keys. User
  /// errors: throw einstage::Error naming the op.
  virtual std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload,
                                                    std::span<const TensorType> operands,
                                                    std::span<const TensorType> results,
                                                    ExecutionContext& context) const = 0;
};

/// What the host offers a module while it registers (instead of process globals shared across the boundary).
struct HostServices {
  uint32_t abi_version = kModuleAbiVersion;  // what the host speaks (equal to the module's, or it was refused)
  std::string origin;                        // the path the module was loaded from, or "linked"
};

/// Collects one module's families while it registers. The Runtime creates it, calls each family's registration
/// function, checks the result and only then commits.
class ModuleRegistrar {
 public:
  ModuleRegistrar(std::string module_name, HostServices host)
      : module_(std::move(module_name)), host_(std::move(host)) {}

  /// Register compiler-side semantics here (register_family), exactly as into any registry.
  ExtensionRegistry& semantics() { return semantics_; }
  /// The runtime executor of `family` (one per family; a second one fails naming the family).
  void set_executor(std::string_view family, std::shared_ptr<const ExtensionExecutor> executor);

  const std::string& module_name() const { return module_; }
  const HostServices& host() const { return host_; }

  // For the Runtime:
  const ExtensionRegistry& staged_semantics() const { return semantics_; }
  const std::map<std::string, std::shared_ptr<const ExtensionExecutor>, std::less<>>& staged_executors() const {
    return executors_;
  }

 private:
  std::string module_;
  HostServices host_;
  ExtensionRegistry semantics_;
  std::map<std::string, std::shared_ptr<const ExtensionExecutor>, std::less<>> executors_;
};

}  // namespace einstage

extern "C" {

/// One family a module provides and the function that registers its semantics and executor.
struct EinstageFamilyEntry {
  const char* family;  // "einstage.einsum.v1"
  void (*register_family)(einstage::ModuleRegistrar& registrar);
};

/// What einstage_module_entry() returns. Layout rule: abi_version stays the first field in every ABI version and,
/// from version 2 on, build_id the second, so a loader can read both from a module built for any version and refuse
/// it with a clear message.
struct EinstageModuleDescriptor {
  uint32_t abi_version;  // kModuleAbiVersion of the headers the module was built with
  const char* build_id;  // kBuildId of the headers the module was built with
  const char* name;      // "einstage.einsum": [a-z0-9_]+ segments joined by '.'
  const char* version;   // the module's own version, e.g. "1.0.0"
  const EinstageFamilyEntry* families;
  size_t family_count;
};

typedef const EinstageModuleDescriptor* (*EinstageModuleEntryFn)(void);
}

/// The entry symbol a shared-library module exports (the same name for every ABI version).
#define EINSTAGE_MODULE_ENTRY_SYMBOL "einstage_module_entry"

/// Defines the entry point of a shared-library module; `descriptor_fn` returns its descriptor. Put it in a source
/// file of its own that only the shared-library build compiles.
#define EINSTAGE_DEFINE_MODULE_ENTRY(descriptor_fn)                                                         \
  extern "C" __attribute__((visibility("default"))) const EinstageModuleDescriptor* einstage_module_entry( \
      void) {                                                                                              \
    return descriptor_fn();                                                                                \
  }
