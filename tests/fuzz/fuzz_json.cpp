// libFuzzer target: the JSON program reader (program_from_json) with the einsum family registered. An accepted
// program must write JSON that reads back to a program printing identically, and its text form must read back to
// the same printed program.
#include "FuzzCheck.h"
#include "FuzzRegistry.h"
#include "ir/Error.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <cstdint>

using namespace einstage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ExtensionRegistry* registry = &fuzz::fuzz_registry();
  try {
    Program p = program_from_json(fuzz::as_text(data, size), registry);
    const std::string printed = print_program(p);
    fuzz::fuzz_check(print_program(program_from_json(program_to_json(p), registry)) == printed,
                     "the JSON round trip prints differently", printed);
    fuzz::fuzz_check(print_program(parse_program(printed, registry)) == printed, "parse(print(p)) prints differently",
                     printed);
  } catch (const Error&) {
  }
  return 0;
}
