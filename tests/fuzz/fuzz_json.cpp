// libFuzzer target: the JSON program reader (program_from_json) with the einsum family registered. An accepted
// program must write JSON that reads back to a program printing identically, and its text form must read back to
// the same printed program.
#include "FuzzProgram.h"
#include "FuzzRegistry.h"
#include "ir/Error.h"

#include <cstdint>

using namespace einstage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ExtensionRegistry* registry = &fuzz::fuzz_registry();
  try {
    fuzz::check_program_round_trips(program_from_json(fuzz::as_text(data, size), registry), registry);
  } catch (const Error&) {
  }
  return 0;
}
