// The grouped einsum dialect (docs/behaviour.md §2): "WCa,Caib,WCi->WCb" where an
// upper-case letter is a group of zero or more axes and a lower-case letter is one axis.
//
// Stage: front end, beside Notation.h; a separate entry point because in the plain notation upper-case letters are
// ordinary labels. Pipeline: parse_grouped (validation, co-travelling runs, the symbolic Subscripts with one label
// per run) -> solve the group lengths from operand ranks and supplied lengths (an exact integer system, fraction-free
// elimination with overflow checks, identifiability judged from the string alone) -> expand every group into fresh
// integer labels. expand_grouped() computes it afresh; a GroupedCache caches the whole result under (subscripts,
// operand ranks, supplied lengths), so a warm call is one map lookup. The cache is an object, not process state: each
// ExecutionContext holds one in the einsum family's extension state (exec/Einsum.h grouped_cache()). The planner
// plans on GroupedExpansion::notation->symbolic and applies that order to GroupedExpansion::expanded (same operand
// positions). Depends on ir and Notation.h.
#pragma once

#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/notation/Subscripts.h"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::einsum {

/// A supplied group length: len_W = 2 is {'W', 2}.
struct GroupLength {
  char group;
  int64_t length;
};

/// A validated grouped string; depends on the string only.
struct GroupedNotation {
  std::string stripped;               // the string without white space (the form errors show)
  std::vector<std::string> inputs;    // symbols per input term
  std::string output;                 // symbols of the output term (may be empty)
  std::string groups;                 // upper-case groups in first-appearance order (inputs, then output)
  /// Co-travelling runs in first-appearance order: each is the group letters that always occur together, in
  /// order, in every term including the output (a group that travels with nobody is a run of one).
  std::vector<std::string> runs;
  /// One label per symbol, runs merged: a lower-case letter is its code point; a run is the code point of its first
  /// group, named by the run's letters ("WK"). Plan on this form: it does not depend on the group lengths.
  Subscripts symbolic;
};

/// Parses and validates a grouped string: ASCII letters only, exactly one '->', non-empty input terms (the output
/// may be empty), no symbol twice in a term, every output symbol in some input, no '...'; white space is stripped.
/// Throws Error(parse) with a caret under the offending character of the stripped string.
GroupedNotation parse_grouped(std::string_view subscripts);

/// Everything a call needs, for one (subscripts, operand ranks, supplied lengths).
struct GroupedExpansion {
  std::shared_ptr<const GroupedNotation> notation;
  /// The length of every group. Within a co-travelling run only the total is determined by the string; members
  /// pinned individually keep their value and the rest of the total goes to the first free member (the expansion
  /// does not depend on the split).
  std::map<char, int64_t> lengths;
  /// The plain Subscripts: lower-case letters keep their code point; group axes get fresh labels counted down from
  /// kFreshLabelTop in first-appearance order (input terms left to right, then the output), named "W[0]", "W[1]"...
  /// An empty group vanishes.
  Subscripts expanded;
  /// symbolic label -> its labels in `expanded`, in order (a lower-case letter maps to itself; an empty run to {}).
  std::map<Label, std::vector<Label>> symbol_labels;
  /// group letter -> its labels in `expanded`, in order ({} for an empty group).
  std::map<char, std::vector<Label>> group_labels;
};

/// Solves and expands, without a cache. ranks[k] is the rank of operand k. Errors (Error invalid_argument / shape):
/// underdetermined (lists the confounded groups and the len_ candidates; decided from the subscripts alone),
/// inconsistent (check the operand order), a supplied length for a group that is not in the subscripts.
std::shared_ptr<const GroupedExpansion> expand_grouped(std::string_view subscripts, std::span<const int64_t> ranks,
                                                       std::span<const GroupLength> lengths = {});

/// expand_grouped with the ranks of `shapes`, then bind_einsum() of the expanded Subscripts (extents per axis, length-1
/// broadcasting only with allow_broadcast: group axes are named labels).
BoundEinsum bind_grouped(std::string_view subscripts, std::span<const Shape> shapes,
                         std::span<const GroupLength> lengths = {}, bool allow_broadcast = false);

struct GroupedCacheStats {
  uint64_t hits = 0, misses = 0;
  size_t entries = 0;
};

/// A thread-safe cache of expand_grouped() results under (subscripts, operand ranks, supplied lengths sorted by
/// group), keyed both by the string as written and by the stripped string (spellings that differ in white space share
/// one entry). Errors are not cached; beyond 4096 entries it starts over. Owned by whoever needs one (an
/// ExecutionContext's einsum state, a benchmark); two caches share nothing.
class GroupedCache {
 public:
  GroupedCache();
  ~GroupedCache();
  GroupedCache(const GroupedCache&) = delete;
  GroupedCache& operator=(const GroupedCache&) = delete;

  /// expand_grouped(), looked up first; a hit is one map lookup under a shared lock, without allocation.
  std::shared_ptr<const GroupedExpansion> expand(std::string_view subscripts, std::span<const int64_t> ranks,
                                                 std::span<const GroupLength> lengths = {});
  GroupedCacheStats stats() const;
  /// Drops every entry and resets the counters.
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace einstage::einsum
