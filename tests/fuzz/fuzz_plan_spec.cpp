// libFuzzer target: the plan-spec text form (PlanSpec::parse). An accepted spec must print to a text that parses to
// an equal spec with the same hash, and printing that again must give the same text.
#include "FuzzCheck.h"
#include "extensions/einsum/planner/PlanSpec.h"
#include "ir/Error.h"

#include <cstdint>

using namespace einstage;
using namespace einstage::einsum;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    PlanSpec spec = PlanSpec::parse(fuzz::as_text(data, size));
    const std::string printed = spec.to_string();
    PlanSpec again = PlanSpec::parse(printed);
    fuzz::fuzz_check(again == spec, "parse(to_string(spec)) differs", printed);
    fuzz::fuzz_check(again.hash() == spec.hash(), "hash differs after a round trip", printed);
    fuzz::fuzz_check(again.to_string() == printed, "to_string is not stable", printed);
  } catch (const Error&) {
  }
  return 0;
}
