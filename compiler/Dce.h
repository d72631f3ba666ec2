// Dead-code elimination: removes every instruction none of whose results an output needs (an instruction with
// several results stays whole while any one of them is needed). Stage: compiler pass
// (Program -> Program); depends on ir only. Goldens and behaviour tests: tests/compiler/test_passes.cpp.
//
// Pre: a verified program. Post: the same parameters, outputs and results for every input; the instructions that
// remain keep their order and value ids. Shape constraints are all kept: a constraint recorded at a removed
// instruction moves to the program level (at = -1), so the program accepts exactly the inputs it accepted before.
#pragma once

#include "ir/Program.h"

namespace einstage {

Program eliminate_dead_code(const Program& program);

}  // namespace einstage
