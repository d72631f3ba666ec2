// Einsum notation: parsing the plain string, nested and integer-label forms into Subscripts, printing them back,
// and the one function that validates Subscripts against operand shapes (bind).
//
// Stage: front end, before planning. Every entry point (concrete, prepared, traced) goes string -> Notation ->
// Subscripts -> BoundEinsum through these functions and nothing else, so the notation rules and the length-1
// broadcast rule (docs/behaviour.md §1.5) live in one place. Design: parse_notation() is rank-independent and keeps
// `...` as a marker (kEllipsisMarker) in the terms; expand() turns it into Subscripts once operand ranks are known (the
// ellipsis covers "rank minus named labels" axes); bind_einsum() checks ranks and extents and returns the extent of
// every label. A string without `...` needs no ranks (to_subscripts). Error paths re-scan the original text to point a
// caret at the offending character, so the hot path records no source positions. Depends on ir only (Error, Tensor's
// Shape).
#pragma once

#include "extensions/einsum/notation/Subscripts.h"
#include "ir/Tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace einstage::einsum {

/// Stands for `...` inside Notation terms (never inside Subscripts). Negative, so it is never a code point.
inline constexpr Label kEllipsisMarker = -1;

/// A parsed plain or nested string, before ellipsis expansion.
struct Notation {
  std::string text;                              // the string as the user wrote it (for carets)
  std::vector<std::vector<Label>> inputs;        // code points; kEllipsisMarker at most once per term
  std::vector<Label> output;                     // the explicit output, or the implicit one NumPy would pick
  bool explicit_output = false;                  // true when the string had `->`
  bool nested = false;                           // true when the string had parentheses
  /// The order fixed by the parentheses, as ContractionTree steps: inputs are 0..n-1, step k's result is n+k.
  /// Empty when the string has no parentheses (the planner chooses). See docs/notation.md for the grouping rules.
  std::vector<std::pair<int, int>> order;

  bool has_ellipsis() const;
  size_t num_inputs() const { return inputs.size(); }
};

/// Parses "ij,jk->ik", "ij,jk" (implicit output), "...ij,...jk->...ik", "(ij,jk),kl->il" (nested), UTF-8 labels.
/// Throws Error(parse) with a caret line under the offending character. Given `operands` (the number of operands the
/// caller has), a different number of input terms is reported (Error(shape)) before any output-label error.
Notation parse_notation(std::string_view text, std::optional<size_t> operands = std::nullopt);

/// Expands `...` given the rank of every operand (right-aligned; fresh labels counted down from kFreshLabelTop;
/// the output's `...` takes the longest ellipsis). Checks the number of operands and that no term names more labels
/// than its operand's rank; bind_einsum() checks the rest.
Subscripts expand(const Notation& notation, std::span<const int64_t> ranks);
/// The Subscripts of a notation without `...` (no ranks needed); fails if the string has `...`.
Subscripts to_subscripts(const Notation& notation);
/// parse_notation + to_subscripts: the fast path for strings without `...`.
Subscripts parse_subscripts(std::string_view text);

/// Integer labels given directly: {{0,1},{1,2}} -> {0,2}. Labels must be >= 0 (negative values are reserved) and
/// every output label must occur in some input. The implicit-output overload picks the labels that occur exactly
/// once, in increasing order, as the string form does.
Subscripts make_subscripts(std::vector<std::vector<Label>> inputs, std::vector<Label> output);
Subscripts make_subscripts(std::vector<std::vector<Label>> inputs);

/// Prints a Notation back in canonical form (no spaces, explicit `->`, parentheses as written); parse(to_string(n))
/// gives the same Notation.
std::string to_string(const Notation& notation);

/// The result of validating Subscripts against operand shapes. The planner and executor read this.
struct BoundEinsum {
  Subscripts subs;
  std::vector<Shape> shapes;             // operand shapes, as given
  std::map<Label, int64_t> extents;      // every label -> its extent (the non-1 extent when some operand broadcasts)
  Shape output_shape;                    // extents of the output labels, in output order
  /// broadcast_axes[k][a]: axis a of operand k has extent 1 while its label's extent is larger (only when
  /// `broadcasts`; otherwise every inner vector is all false).
  std::vector<std::vector<bool>> broadcast_axes;
  bool broadcasts = false;               // some operand axis broadcasts
};

/// The one validation function: operand count, rank vs number of labels, equal extents for a label repeated inside
/// one operand, and extents across operands with the length-1 rule: axes under `...` broadcast; a named label
/// whose extents differ with one of them 1 broadcasts only when allow_broadcast is true; anything else fails naming
/// the label as written, both extents and both operands.
BoundEinsum bind_einsum(const Subscripts& subscripts, std::span<const Shape> shapes, bool allow_broadcast);
/// expand + bind, with error messages that point a caret into the original string.
BoundEinsum bind_einsum(const Notation& notation, std::span<const Shape> shapes, bool allow_broadcast);

}  // namespace einstage::einsum
