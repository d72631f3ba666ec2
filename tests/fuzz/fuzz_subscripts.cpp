// libFuzzer target: einsum subscripts (parse_notation, expand, to_subscripts, bind_einsum) and the printers.
// Accepted strings must print back to a string that parses to the same Notation, and the Subscripts of a string
// without `...` must print back to a string with the same Subscripts. The first byte chooses the operand ranks'
// slack for `...` (0-3 axes) so expand() and bind_einsum() run on accepted strings too.
#include "FuzzCheck.h"
#include "extensions/einsum/notation/Notation.h"
#include "ir/Error.h"

#include <cstdint>

using namespace einstage;
using namespace einstage::einsum;

namespace {

bool same_notation(const Notation& x, const Notation& y) {
  return x.inputs == y.inputs && x.output == y.output && x.nested == y.nested && x.order == y.order;
}

void run(std::string_view text, int slack) {
  Notation n = parse_notation(text);
  const std::string printed = to_string(n);
  Notation again = parse_notation(printed);
  fuzz::fuzz_check(same_notation(n, again), "parse(to_string(notation)) differs", printed);
  fuzz::fuzz_check(to_string(again) == printed, "to_string is not stable", printed);
  std::vector<int64_t> ranks;
  for (const auto& term : n.inputs) {
    bool ellipsis = false;
    for (Label l : term) ellipsis |= l == kEllipsisMarker;
    ranks.push_back(int64_t(term.size()) - (ellipsis ? 1 : 0) + (ellipsis ? slack : 0));
  }
  Subscripts s = n.has_ellipsis() ? expand(n, ranks) : to_subscripts(n);
  if (!n.has_ellipsis()) {
    const std::string flat = to_string(s);
    fuzz::fuzz_check(parse_subscripts(flat) == s, "parse_subscripts(to_string(subscripts)) differs", flat);
  }
  // Every operand axis of extent 2 (a label repeated in a term takes its diagonal): binding must accept it.
  std::vector<Shape> shapes;
  for (const auto& term : s.inputs) shapes.push_back(Shape(term.size(), 2));
  BoundEinsum bound = bind_einsum(s, shapes, false);
  fuzz::fuzz_check(bound.output_shape.size() == s.output.size(), "bound output rank differs from the subscripts");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int slack = data[0] % 4;
  try {
    run(fuzz::as_text(data + 1, size - 1), slack);
  } catch (const Error&) {
  }
  return 0;
}
