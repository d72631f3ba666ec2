// Subscripts: the canonical integer form every einsum notation reduces to.
//
// One vector of 32-bit labels per input and one for the output, plus a label table that remembers how each label was
// written (a Unicode code point such as 'i' or '甲', or a fresh label made for an ellipsis axis or a grouped-dialect
// group axis) so that errors and printing show the labels the user wrote. Parsing lives in Notation.h; this header
// is data only, shared by notation, planning, step plans, the traced op and AD. Depends on ir only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace einstage::einsum {

using Label = int32_t;

/// Labels written as characters are their Unicode code point (0 .. 0x10FFFF). Fresh labels (ellipsis axes,
/// grouped-dialect axes) count down from kFreshLabelTop so they never collide with user labels.
inline constexpr Label kFreshLabelTop = INT32_MAX;

struct Subscripts {
  std::vector<std::vector<Label>> inputs;
  std::vector<Label> output;
  /// How each label prints (UTF-8); labels missing here print as their code point if in range, else "#<n>".
  std::map<Label, std::string> names;

  size_t num_inputs() const { return inputs.size(); }
  bool operator==(const Subscripts& o) const { return inputs == o.inputs && output == o.output; }
};

}  // namespace einstage::einsum
