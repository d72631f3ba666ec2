// The property both program readers' fuzz targets check on an accepted program: its text form and its JSON form
// each read back (with the same registry) to a program that prints identically. Depends on ir/ and FuzzCheck.h.
#pragma once

#include "FuzzCheck.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

namespace einstage::fuzz {

inline void check_program_round_trips(const Program& p, const ExtensionRegistry* registry) {
  const std::string printed = print_program(p);
  fuzz_check(print_program(parse_program(printed, registry)) == printed, "parse(print(p)) prints differently", printed);
  fuzz_check(print_program(program_from_json(program_to_json(p), registry)) == printed,
             "the JSON round trip prints differently", printed);
}

}  // namespace einstage::fuzz
