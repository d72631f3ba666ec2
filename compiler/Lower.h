// lower_to_standard_ops: expands every extension instruction into standard ops through its family's `lower` rule
// (found in the registry), for inspection or for runtimes without the family's module. Stage: compiler pass;
// depends on ir only (families reach it through ExtensionRegistry). Goldens: tests/compiler/golden/lower_*.ir.
//
// The result is specialised to `bindings`: every symbolic dim with a binding is replaced by its value in parameter
// types and in attributes (reshape, broadcast_in_dim), the program's constraints are checked under the bindings
// first (ir's check_constraints, so a violated constraint fails naming it), and constraints that become constant
// are dropped. Symbols without a binding stay symbolic; a family whose lowering needs concrete shapes (einsum) then
// fails naming the instruction and the symbol. A family without a lower rule fails naming the family and its module
// (unless LowerOptions::keep_unlowerable, below).
// A lower rule may return a placeholder (a Value with id -1) for an instruction that has no standard-op form and is
// read only by instructions whose own lower rules do not read it; a standard op or an output that reads such a
// placeholder fails naming both.
// Pre: a verified program. Post: a verified program with only standard ops and the same outputs for inputs that
// match the bindings.
//
// Partial lowering (LowerOptions::keep_unlowerable, the default of `einstage run --print-stages` and `einstage
// show-program --lower`): an extension op whose family has no lowering rule (linalg's decompositions) stays in the
// program as it is, on its lowered operands, and everything around it is lowered; LoweredProgram::kept lists what
// stayed, and describe() says it in one line per op. Such a program still needs the kept families' modules to run.
#pragma once

#include "ir/Extension.h"
#include "ir/Program.h"

#include <string>
#include <vector>

namespace einstage {

Program lower_to_standard_ops(const Program& program, const DimBindings& bindings, const ExtensionRegistry& registry);

struct LowerOptions {
  /// Keep extension ops whose family registers no lowering rule instead of failing (partial lowering).
  bool keep_unlowerable = false;
};

/// An extension instruction partial lowering left in place.
struct KeptOp {
  std::string family;  // e.g. "einstage.linalg.v1"
  std::string module;  // the module that registers the family
  std::string at;      // its first result's name in the input program, e.g. "%4"
  std::string lowered_at;  // the same in the lowered program
};

struct LoweredProgram {
  Program program;
  std::vector<KeptOp> kept;  // in program order; empty when everything was lowered
  /// One line per kept op: "kept 'einstage.linalg.v1' at %4 (%1 in the lowered program): module 'einstage.linalg'
  /// registers no lowering rule", or "" when nothing was kept.
  std::string describe() const;
};

/// lower_to_standard_ops with options; with keep_unlowerable, ops without a lowering rule stay (see above).
LoweredProgram lower_to_standard_ops(const Program& program, const DimBindings& bindings,
                                     const ExtensionRegistry& registry, const LowerOptions& options);

}  // namespace einstage
