// The public extension interface: the one header a third-party extension module includes. Stage: extension API.
// Depends on ir/ and on runtime/Module.h, runtime/Context.h and runtime/ThreadPool.h only; nothing here reaches compiler/ internals,
// the einsum extension or the JIT.
//
// What a module may use (and what the ABI version, kModuleAbiVersion, covers):
// - ir/Extension.h: ExtensionPayload (print, parse, hash, compare a payload), ExtensionSemantics (type rule, optional
//   verify / lower / linearize / transpose rules), ExtensionRegistry, and the payload helpers (string literals,
//   attribute splitting, float printing, hash_bytes);
// - extensions/api/Family.h: the skeleton of a family's compiler side, FamilyPayload<Attrs> (the payload from one
//   attribute class) and make_semantics<Payload>() (readers and type rule into an ExtensionSemantics);
// - ir/Program.h: TensorType, Dim, TypeContext (unify extents, raise errors that name the op), Builder and Value
//   (for lowering and AD rules);
// - ir/Tensor.h: the value type its executor reads and returns;
// - runtime/Module.h: PreparedOp, ExtensionExecutor, ModuleRegistrar, EinstageModuleDescriptor and
//   EINSTAGE_DEFINE_MODULE_ENTRY;
// - runtime/Context.h: the ExecutionContext a PreparedOp::run receives (its config, and its pool);
// - runtime/ThreadPool.h: the context's pool (parallel_for with a static partition).
// The kernels a module computes with are the public kernel API, extensions/api/Kernels.h. docs/extensions.md walks
// through writing a module; extensions/tropical/ is a complete example that uses nothing else.
#pragma once

#include "extensions/api/Family.h"
#include "ir/Extension.h"
#include "ir/Program.h"
#include "ir/Tensor.h"
#include "runtime/Context.h"
#include "runtime/Module.h"
#include "runtime/ThreadPool.h"
