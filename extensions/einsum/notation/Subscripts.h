// Subscripts: the canonical integer form every einsum notation reduces to.
//
// One vector of 32-bit labels per input and one for the output, plus a label table that remembers how each label was
// written (a Unicode code point such as 'i' or '甲', or a fresh label made for an ellipsis axis or a grouped-dialect
// group axis) so that errors and printing show the labels the user wrote. Parsing lives in Notation.h; this header
// is the data and how it prints (label_name, to_string: Subscripts.cpp), shared by notation, the shape rule
// (BindRule.h), planning, step plans, the traced op and AD. Depends on SourceText.h (in Subscripts.cpp) only.
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
  /// How each label prints (UTF-8); labels missing here print as their code point if it is a printable,
  /// non-reserved character, else "#<n>" (see label_name below).
  std::map<Label, std::string> names;
  /// The fresh labels of the `...` axes, leftmost axis first (empty when no term had `...`). An input term covering
  /// k ellipsis axes holds the last k of them, right-aligned. These are the only labels whose length-1 extents
  /// broadcast without the caller's broadcast permission (docs/behaviour.md §1.5).
  std::vector<Label> ellipsis;

  size_t num_inputs() const { return inputs.size(); }
  bool is_ellipsis_label(Label l) const {
    for (Label e : ellipsis)
      if (e == l) return true;
    return false;
  }
  bool operator==(const Subscripts& o) const {
    return inputs == o.inputs && output == o.output && ellipsis == o.ellipsis;
  }
};

/// How a label prints: names[label] if present, else the character if it is a printable non-reserved code point,
/// else "#<n>".
std::string label_name(const Subscripts& subscripts, Label label);
/// Prints Subscripts as a string: "ij,jk->ik"; ellipsis labels print as `...` again, other labels via label_name.
std::string to_string(const Subscripts& subscripts);

}  // namespace einstage::einsum
