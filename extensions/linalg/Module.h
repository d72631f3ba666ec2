// The linalg module: the descriptor through which the `einstage.linalg.v1` family (compiler-side semantics from
// LinalgOp.h, the LAPACK executor from Lapack.h) reaches a Runtime. Stage: linalg extension. It declares the
// descriptor type instead of including the extension API (runtime/Module.h defines it; Runtime::add_module takes it),
// which keeps the extension API's threads and locks out of every program that includes <einstage/einstage.h>.
//
// Two builds, one descriptor, exactly like the einsum module: linked in, a program calls
// Runtime::add_module(linalg::module_descriptor()); as a shared library (target einstage_linalg_module,
// module/Entry.cpp defines the entry symbol) it is loaded with Runtime::load_module(path).
#pragma once

struct EinstageModuleDescriptor;  // runtime/Module.h

namespace einstage::linalg {

inline constexpr const char* kLinalgModuleVersion = "1.0.0";

/// The module's descriptor (static storage; ABI version kModuleAbiVersion).
const EinstageModuleDescriptor* module_descriptor();

}  // namespace einstage::linalg
