// Common-subexpression elimination: an instruction equal to an earlier one (same op with equal attributes, or an
// extension op with an equal payload; same operands) is dropped and its uses read the earlier result (for several results, each the one at its index). Stage:
// compiler pass (Program -> Program); depends on ir only. Tests: tests/compiler/test_passes.cpp.
//
// Ops are found by ir's hash_op (stable FNV over the printed form; extension payloads hash themselves) and compared
// with the op's equality, so a hash collision never merges different instructions. Every op is pure, so merging is
// always sound. Pre: a verified program. Post: no two instructions are equal; constraints recorded at a removed
// instruction move to the instruction that replaced it (duplicates dropped).
#pragma once

#include "ir/Program.h"

namespace einstage {

Program eliminate_common_subexpressions(const Program& program);

}  // namespace einstage
