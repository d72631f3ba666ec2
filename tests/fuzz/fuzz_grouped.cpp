// libFuzzer target: the grouped dialect (parse_grouped, expand_grouped). The first byte gives each operand's rank
// above its symbol count (0-3 axes, two bits per operand for the first four) and whether a group length is supplied,
// so the solver sees determined, underdetermined and inconsistent systems. Accepted strings must expand to
// Subscripts whose input terms have exactly the operand ranks, through a GroupedCache (the one an ExecutionContext
// holds) and identical to the uncached expand_grouped. The cache is cleared after every input (it would otherwise grow
// for the whole run).
#include "FuzzCheck.h"
#include "extensions/einsum/notation/Grouped.h"
#include "ir/Error.h"

#include <cstdint>

using namespace einstage;
using namespace einstage::einsum;

namespace {

GroupedCache& cache() {
  static GroupedCache c;
  return c;
}

void run(std::string_view text, uint8_t shape_byte) {
  GroupedNotation g = parse_grouped(text);
  std::vector<int64_t> ranks;
  for (size_t k = 0; k < g.inputs.size(); ++k)
    ranks.push_back(int64_t(g.inputs[k].size()) + (k < 4 ? (shape_byte >> (2 * k)) & 3 : 0));
  std::vector<GroupLength> lengths;
  if (!g.groups.empty() && (shape_byte & 1)) lengths.push_back({g.groups[0], int64_t(shape_byte >> 6)});
  auto expansion = cache().expand(text, ranks, lengths);
  const Subscripts& s = expansion->expanded;
  fuzz::fuzz_check(s == expand_grouped(text, ranks, lengths)->expanded,
                   "the cached expansion differs from the uncached one", g.stripped);
  fuzz::fuzz_check(s.inputs.size() == ranks.size(), "expanded operand count differs from the string's");
  for (size_t k = 0; k < ranks.size(); ++k)
    fuzz::fuzz_check(int64_t(s.inputs[k].size()) == ranks[k], "expanded term rank differs from the operand rank",
                     g.stripped);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    run(fuzz::as_text(data + 1, size - 1), data[0]);
  } catch (const Error&) {
  }
  cache().clear();
  return 0;
}
