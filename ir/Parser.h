// Reads the text form of a Program (ir/Printer.h, grammar in docs/ir.md) back into a verified Program. Semantic IR
// (compiler stage); depends on ir/Program.h.
//
// Every instruction is rebuilt through Builder, so types are re-inferred and must equal the printed ones; the
// program's constraints are the printed `constraint` lines (in their order, so parse(print(p)) prints identically)
// plus any constraint the rebuilt instructions derive that those lines do not imply (merge_listed_constraints).
// Errors are ErrorKind::parse with "line N:" and what was expected; an unknown extension family is
// ErrorKind::not_found naming the family and how to make it available.
#pragma once

#include "ir/Program.h"

#include <string_view>

namespace einstage {

Program parse_program(std::string_view text, const ExtensionRegistry* registry = nullptr);

}  // namespace einstage
