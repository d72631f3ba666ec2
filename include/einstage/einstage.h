// The umbrella header: everything a program that traces, differentiates, lowers and runs tensor programs needs, in
// one include (`#include <einstage/einstage.h>`, installed as include/einstage/einstage.h with the CMake target
// einstage::einstage, which links every installed family library). The fine-grained headers it includes stay the
// way to include less; they are listed below by layer. It adds three conveniences of its own: add_installed_modules()
// registers the families linked into einstage::einstage (einsum, linalg) with a Runtime in one call,
// default_registry() is a registry with both, and trace(name, specs, callable) traces against it. Families that
// ship only as loadable modules (tropical: libeinstage_tropical_module.so) are loaded with Runtime::load_module.
#pragma once

// ir: tensors, .npy files, errors, the IR and its text and JSON forms.
#include "ir/Error.h"
#include "ir/Json.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Program.h"
#include "ir/Tensor.h"

// compiler: tracing, automatic differentiation, simplification and lowering.
#include "compiler/Cse.h"
#include "compiler/Dce.h"
#include "compiler/Lower.h"
#include "compiler/Pipeline.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"

// runtime: the Runtime that runs programs, and the plain interpreter for standard-op programs.
#include "runtime/Interpreter.h"
#include "runtime/Runtime.h"

// extensions: einsum (concrete calls, tracing, module) and linalg (svd, qr, eigh, inv_upper: tracing, module).
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/linalg/Module.h"
#include "extensions/linalg/TraceLinalg.h"

namespace einstage {

/// Registers the families linked into einstage::einstage with `runtime`: einsum (einstage.einsum.v1 and its AD
/// family) and linalg (einstage.linalg.v1). After it, runtime.registry() traces, differentiates and lowers programs
/// that use them and runtime.prepare() runs them.
inline void add_installed_modules(Runtime& runtime) {
  runtime.add_module(einsum::module_descriptor());
  runtime.add_module(linalg::module_descriptor());
}

/// A registry with the einsum and linalg families (their semantics and AD rules), made once: what trace() below
/// traces against, and what ad::grad etc. need for its programs.
inline const ExtensionRegistry& default_registry() {
  static const ExtensionRegistry registry = [] {
    ExtensionRegistry r;
    einsum::register_einsum_semantics(r);
    linalg::register_linalg_semantics(r);
    return r;
  }();
  return registry;
}

/// trace (compiler/Trace.h) against default_registry():
///   Program f = einstage::trace("f", {{"x", DType::f64, {3}}}, [](TracedTensor x) { return sum(x * x); });
template <class F> Program trace(std::string name, const std::vector<ParamSpec>& params, F&& f) {
  return trace(std::move(name), params, std::forward<F>(f), &default_registry());
}

}  // namespace einstage
