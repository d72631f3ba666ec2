// The einsum shape rule, written once and generic over the kind of extent: concrete integers (bind_einsum in
// Notation.cpp, used by concrete and prepared einsum) and IR dims that may be symbolic (the type rule of the traced op,
// EinsumOp.cpp). Stage: front end (notation); depends on Subscripts.h (label_name) only.
//
// The rule (docs/behaviour.md §1.5): one extent list per operand whose length is the rank its term names; a label
// repeated inside one operand needs equal extents; across operands a label's extents must agree, except that a length-1
// axis broadcasts when the label is under `...` or the caller allows broadcasting. With symbolic extents some of these
// comparisons cannot be decided while tracing: the `Rules` policy then records the equality (a ShapeConstraint
// checked when the program runs) instead of failing. A symbolic extent is never assumed to be a broadcast 1, so
// `n` against `4` records n == 4 even when broadcasting is allowed.
//
// Rules provides:
//   enum Cmp compare(const E& a, const E& b)   equal / differ (decided) / undecided
//   bool is_one(const E&)                      decidedly 1
//   bool negative(const E&)                    decidedly < 0
//   std::string text(const E&)                 for messages
//   E assume_equal(const E& a, const E& b, std::string what)   record a == b, return the more concrete one
// Fail is called as fail(axes, message) with the operand axes to point at and must throw.
#pragma once

#include "extensions/einsum/notation/Subscripts.h"

#include <fmt/format.h>

#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace einstage::einsum::detail {

enum class ExtentCmp { equal, differ, undecided };

template <typename E>
struct LabelExtents {
  std::map<Label, E> extents;  // every input label -> its extent (the non-1 extent when some operand broadcasts)
  std::vector<E> output;       // extents of the output labels, in output order
};

std::string term_label_text(const Subscripts& s, const std::vector<Label>& term);
std::string operand_count_message(size_t given, size_t terms);
std::string operand_rank_message(size_t k, int64_t rank, const std::string& term, size_t named, bool ellipsis);

template <typename E, typename Rules, typename Fail>
LabelExtents<E> bind_label_extents(const Subscripts& s, std::span<const std::vector<E>> shapes, bool allow_broadcast,
                                   Rules& rules, Fail&& fail) {
  using Axes = std::vector<std::pair<size_t, size_t>>;
  if (shapes.size() != s.inputs.size()) fail(Axes{}, operand_count_message(shapes.size(), s.inputs.size()));
  for (size_t k = 0; k < shapes.size(); ++k) {
    if (shapes[k].size() != s.inputs[k].size())
      fail(Axes{}, operand_rank_message(k, int64_t(shapes[k].size()), term_label_text(s, s.inputs[k]),
                                        s.inputs[k].size(), false));
    for (size_t a = 0; a < shapes[k].size(); ++a)
      if (rules.negative(shapes[k][a]))
        fail(Axes{{k, a}}, fmt::format("operand {} has a negative extent {} on axis {}", k, rules.text(shapes[k][a]), a));
  }
  struct Seen {
    E extent;
    size_t operand, axis;  // where the current extent came from
  };
  std::map<Label, Seen> seen;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto& term = s.inputs[k];
    for (size_t a = 0; a < term.size(); ++a) {
      Label l = term[a];
      const E& e = shapes[k][a];
      // A label repeated inside one operand takes a diagonal: its extents must agree exactly.
      for (size_t p = 0; p < a; ++p) {
        if (term[p] != l) continue;
        ExtentCmp c = rules.compare(shapes[k][p], e);
        if (c == ExtentCmp::differ)
          fail(Axes{{k, p}, {k, a}},
               fmt::format("label '{}' is repeated in operand {} with extents {} (axis {}) and {} (axis {}); a "
                           "repeated label takes a diagonal and needs equal extents",
                           label_name(s, l), k, rules.text(shapes[k][p]), p, rules.text(e), a));
        if (c == ExtentCmp::undecided)
          rules.assume_equal(shapes[k][p], e,
                             fmt::format("label '{}' repeated in operand {} (axes {} and {})", label_name(s, l), k, p, a));
      }
      auto [it, fresh] = seen.try_emplace(l, Seen{e, k, a});
      if (fresh) continue;
      Seen& prev = it->second;
      ExtentCmp c = rules.compare(prev.extent, e);
      if (c == ExtentCmp::equal) continue;
      bool one = rules.is_one(e) || rules.is_one(prev.extent);
      if (one && (allow_broadcast || s.is_ellipsis_label(l))) {
        if (rules.is_one(prev.extent)) prev = Seen{e, k, a};
        continue;
      }
      if (c == ExtentCmp::undecided) {
        prev.extent = rules.assume_equal(
            prev.extent, e,
            fmt::format("label '{}' in operand {} (axis {}) and operand {} (axis {})", label_name(s, l), prev.operand,
                        prev.axis, k, a));
        continue;
      }
      std::string msg = fmt::format("label '{}' has extent {} in operand {} (axis {}) but {} in operand {} (axis {})",
                                    label_name(s, l), rules.text(prev.extent), prev.operand, prev.axis, rules.text(e),
                                    k, a);
      if (one)
        msg += "; a length-1 axis broadcasts only under '...' or when the caller allows broadcasting "
               "(allow_broadcast)";
      else
        msg += "; the extents of a label must agree (or one of them be 1 with broadcasting allowed)";
      fail(Axes{{prev.operand, prev.axis}, {k, a}}, msg);
    }
  }
  LabelExtents<E> out;
  for (auto& [l, sn] : seen) out.extents.emplace_hint(out.extents.end(), l, sn.extent);
  for (Label l : s.output) {
    auto it = out.extents.find(l);
    if (it == out.extents.end())
      fail(Axes{}, fmt::format("output label '{}' appears in no input; add it to an input or remove it from the output",
                               label_name(s, l)));
    out.output.push_back(it->second);
  }
  return out;
}

}  // namespace einstage::einsum::detail
