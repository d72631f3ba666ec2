// The verifier: checks that a Program is well formed. Semantic IR (compiler stage); depends on ir/Program.h.
//
// Checks: parameter names are unique identifiers; every value id is defined once; every operand is defined before
// its use with the type it was defined with; every result type is what the op's type rule gives (standard op or
// extension family from `registry`); outputs are defined values; constraints refer to defined results. Undecided
// symbolic extents are accepted: the program's constraints are checked when it runs (check_constraints).
// A failure throws einstage::Error (ErrorKind::verification; an unknown extension family keeps not_found) whose
// message names the instruction and op, then "while verifying:" and the printed lines around it, the failing one
// marked with `>` (JAX check_jaxpr style). Passes run this after they transform a program.
#pragma once

#include "ir/Program.h"

namespace einstage {

void verify(const Program& program, const ExtensionRegistry* registry = nullptr);

}  // namespace einstage
