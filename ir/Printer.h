// The text form of a Program (the form goldens, the verifier's messages and people read) and its Graphviz form.
// Semantic IR (compiler stage); depends on ir/Program.h. The grammar is in docs/ir.md; ir/Parser.h reads back
// exactly what print_program writes.
//
//   program @loss(%x: f64[n,3], %w: f64[3,4]) -> (f64[]) {
//     %0 = dot_general(%x, %w) {lhs_batch = [], lhs_contracting = [1], rhs_batch = [], rhs_contracting = [0]} : f64[n,4]
//     %1 = mul(%0, %0) : f64[n,4]
//     %2 = reduce_sum(%1) {axes = [0, 1]} : f64[]
//     constraint n == m at %1 "'mul' operand 1 axis 0"
//     return %2
//   }
//
// An instruction with several results lists them, and their types, in order:
//     %3, %4 = einstage.linalg.v1(%0) {op = "qr"} : f64[m,k], f64[k,n]
// Parameters print by name, instruction results are renumbered densely in order (every result counts), attributes are sorted by key, and
// nothing depends on pointers or hash order, so the same program always prints the same bytes.
#pragma once

#include "ir/Program.h"

#include <string>
#include <vector>

namespace einstage {

std::string print_program(const Program& program);

/// The lines of print_program (without newlines); instruction k is line k + 1. A value id that the program does not
/// define prints as `%?<id>`, so broken programs can still be shown.
std::vector<std::string> print_program_lines(const Program& program);

/// Graphviz DOT: parameters as ellipses, instructions as boxes (name, attributes, type), operand edges labelled with
/// the operand index when an op has more than one, outputs as a double octagon. Tensor literals with more than 8
/// elements are abbreviated to their type (the text form keeps them whole).
std::string print_dot(const Program& program);

}  // namespace einstage
