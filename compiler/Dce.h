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

/// Takes the program by value: a caller that is done with its program moves it in, and the kept instructions are
/// not copied.
Program eliminate_dead_code(Program program);

}  // namespace einstage
