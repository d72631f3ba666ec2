// The JSON form of a Program, mirroring the text form (same type strings, same value names, same attribute keys).
// Semantic IR (compiler stage); depends on ir/Program.h. nlohmann_json is used only in ir/Json.cpp.
//
//   {"format": "einstage.ir", "version": 1, "name": "loss",
//    "params": [{"name": "x", "type": "f64[n,3]"}],
//    "instructions": [{"result": "%0", "op": "reduce_sum", "operands": ["%x"], "attributes": {"axes": [0, 1]},
//                      "type": "f64[]"}],
//    "constraints": [{"lhs": "n", "rhs": "m", "at": "%0", "what": "..."}],
//    "outputs": ["%0"]}
//
// Standard-op attributes are typed JSON: integer lists as arrays, dims as arrays of integers and strings ("n",
// "2*n"), dtypes as strings, tensors as {"type": "f64[2]", "data": [...]} in column-major order (complex elements
// as [re, im], non-finite floats as the strings "nan", "inf", "-inf"). Extension ops carry their payload's own JSON
// under "payload". Reading rebuilds through Builder, like the text parser, and keeps the constraints the rebuilt
// instructions derive even when "constraints" omits them (merge_listed_constraints, ir/Program.h).
#pragma once

#include "ir/Program.h"

#include <string>
#include <string_view>

namespace einstage {

/// Pretty-printed with 2-space indent when `indent` >= 0, one line when -1.
std::string program_to_json(const Program& program, int indent = 2);
/// Fails with ErrorKind::parse ("malformed JSON program: <where>: <what>") or not_found for an unknown family.
Program program_from_json(std::string_view json, const ExtensionRegistry* registry = nullptr);

}  // namespace einstage
