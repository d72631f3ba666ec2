// The einsum module: the descriptor through which the `einstage.einsum.v1` family (compiler-side semantics from
// EinsumOp.h, runtime executor built on EinsumPlan from Executor.h) reaches a Runtime. Stage: einsum extension;
// depends on runtime/Module.h, EinsumOp.h and Executor.h.
//
// Two builds, one descriptor: linked in, a program calls Runtime::add_module(einsum::module_descriptor()); as a
// shared library (target einstage_einsum_module, extensions/einsum/module/Entry.cpp defines the entry symbol) it is
// loaded with Runtime::load_module("path/to/libeinstage_einsum_module.so"). The executor prepares one EinsumPlan per
// (payload, operand types) -- bind, plan the tree for the payload's PlanSpec, step plans, arena -- and the Runtime
// caches it; it keeps no state of its own (in particular it does not use the one-shot einsum() plan cache).
#pragma once

#include "runtime/Module.h"

namespace einstage::einsum {

inline constexpr const char* kEinsumModuleVersion = "1.0.0";

/// The module's descriptor (static storage; ABI version kModuleAbiVersion).
const EinstageModuleDescriptor* module_descriptor();

}  // namespace einstage::einsum
