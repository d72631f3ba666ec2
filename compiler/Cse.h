// Common-subexpression elimination: an instruction equal to an earlier one (same op with equal attributes, or an
// extension op with an equal payload; same operands) is dropped and its uses read the earlier result (for several results, each the one at its index). Stage:
// compiler pass (Program -> Program); depends on ir only. Tests: tests/compiler/test_passes.cpp.
//
// Candidates are found by op kind and operand ids (an op without operands, a constant, by ir's hash_op: FNV over the
// printed form) and compared with the op's equality (extension ops: their payloads'), so a shared bucket never
// merges different instructions. Every op is pure, so merging is
// always sound. Pre: a verified program. Post: no two instructions are equal; constraints recorded at a removed
// instruction move to the instruction that replaced it (duplicates dropped).
#pragma once

#include "ir/Program.h"

namespace einstage {

/// Takes the program by value: a caller that is done with its program moves it in, and the kept instructions are
/// not copied.
Program eliminate_common_subexpressions(Program program);

}  // namespace einstage
