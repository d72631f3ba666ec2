// lower_to_standard_ops: expands every extension instruction into standard ops through its family's `lower` rule
// (found in the registry), for inspection or for runtimes without the family's module. Stage: compiler pass;
// depends on ir only (families reach it through ExtensionRegistry). Goldens: tests/compiler/golden/lower_*.ir.
//
// The result is specialised to `bindings`: every symbolic dim with a binding is replaced by its value in parameter
// types and in attributes (reshape, broadcast_in_dim), the program's constraints are checked under the bindings
// first (ir's check_constraints, so a violated constraint fails naming it), and constraints that become constant
// are dropped. Symbols without a binding stay symbolic; a family whose lowering needs concrete shapes (einsum) then
// fails naming the instruction and the symbol. A family without a lower rule fails naming the family and its module.
// A lower rule may return a placeholder (a Value with id -1) for an instruction that has no standard-op form and is
// read only by instructions whose own lower rules do not read it; a standard op or an output that reads such a
// placeholder fails naming both.
// Pre: a verified program. Post: a verified program with only standard ops and the same outputs for inputs that
// match the bindings.
#pragma once

#include "ir/Extension.h"
#include "ir/Program.h"

namespace einstage {

Program lower_to_standard_ops(const Program& program, const DimBindings& bindings, const ExtensionRegistry& registry);

}  // namespace einstage
