// The grouped einsum dialect: parsing, co-travelling runs, the exact length solve, expansion and the cache.
// See Grouped.h and docs/notation.md.
#include "extensions/einsum/notation/Grouped.h"

#include "extensions/einsum/notation/GroupSolver.h"
#include "extensions/einsum/notation/SourceText.h"
#include "ir/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <tuple>

namespace einstage::einsum {

namespace {

bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

[[noreturn]] void fail_grouped(std::string_view stripped, std::vector<size_t> carets, const std::string& message) {
  throw Error(ErrorKind::parse,
              fmt::format("grouped einsum {}: {}{}", quote_for_message(stripped), message,
                          detail::caret_block(stripped, carets)));
}

// X -> Y merge edges: every occurrence of X is immediately followed by Y and every occurrence of Y is immediately
// preceded by X, in all terms including the output. Chains, never cycles (a cycle needs a repeated symbol in a term).
std::vector<std::string> co_travel_runs(const std::vector<const std::string*>& terms, const std::string& groups) {
  constexpr int kEnd = 0;
  std::array<std::set<int>, 128> follow, precede;
  for (const std::string* t : terms)
    for (size_t i = 0; i < t->size(); ++i) {
      unsigned char c = (unsigned char)(*t)[i];
      follow[c].insert(i + 1 < t->size() ? (unsigned char)(*t)[i + 1] : kEnd);
      precede[c].insert(i > 0 ? (unsigned char)(*t)[i - 1] : kEnd);
    }
  std::array<char, 128> next{}, prev{};
  for (char x : groups) {
    if (follow[(unsigned char)x].size() != 1) continue;
    int y = *follow[(unsigned char)x].begin();
    if (y == kEnd || !is_upper(char(y))) continue;
    if (precede[y].size() == 1 && *precede[y].begin() == (unsigned char)x) {
      next[(unsigned char)x] = char(y);
      prev[y] = x;
    }
  }
  std::vector<std::string> runs;
  for (char g : groups) {
    if (prev[(unsigned char)g]) continue;  // not the head of its run
    std::string run(1, g);
    for (char c = next[(unsigned char)g]; c; c = next[(unsigned char)c]) run += c;
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace

GroupedNotation parse_grouped(std::string_view subscripts) {
  GroupedNotation g;
  for (char c : subscripts)
    if (!is_space(c)) g.stripped += c;
  std::string_view s = g.stripped;
  g.inputs.emplace_back();
  std::vector<std::vector<size_t>> in_pos(1);
  std::vector<size_t> out_pos, term_end;
  std::string* term = &g.inputs.back();
  std::vector<size_t>* pos = &in_pos.back();
  bool in_output = false;
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (is_upper(c) || is_lower(c)) {
      term->push_back(c);
      pos->push_back(i);
      ++i;
    } else if (c == ',') {
      if (in_output) fail_grouped(s, {i}, "',' in the output; the output is a single term");
      term_end.push_back(i);
      g.inputs.emplace_back();
      in_pos.emplace_back();
      term = &g.inputs.back();
      pos = &in_pos.back();
      ++i;
    } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') {
      if (in_output) fail_grouped(s, {i}, "a second '->'; grouped subscripts have exactly one");
      term_end.push_back(i);
      in_output = true;
      term = &g.output;
      pos = &out_pos;
      i += 2;
    } else if (s.substr(i, 3) == "...") {
      fail_grouped(s, {i}, "'...' is not allowed in grouped subscripts; a group (upper-case letter) already covers "
                           "any number of axes");
    } else {
      char32_t cp = 0;
      size_t len = detail::decode_utf8(s, i, cp);
      std::string shown = len ? std::string(s.substr(i, len)) : fmt::format("\\x{:02x}", (unsigned char)c);
      fail_grouped(s, {i}, fmt::format("character '{}' is not allowed; grouped subscripts use ASCII letters only "
                                       "(upper-case = a group of axes, lower-case = one axis), ',' and '->'",
                                       shown));
    }
  }
  if (!in_output)
    fail_grouped(s, {s.size()}, "the output must be explicit; add '->' and the output term (empty for a scalar)");
  for (size_t k = 0; k < g.inputs.size(); ++k)
    if (g.inputs[k].empty())
      fail_grouped(s, {term_end[k]}, fmt::format("input term {} is empty; every operand needs at least one symbol "
                                                 "(a scalar operand is not supported in grouped subscripts)",
                                                 k));
  auto check_repeats = [&](const std::string& t, const std::vector<size_t>& p, const std::string& what) {
    for (size_t i = 0; i < t.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (t[i] == t[j])
          fail_grouped(s, {p[j], p[i]}, fmt::format("symbol '{}' is repeated in {}; a symbol may occur once per term",
                                                    t[i], what));
  };
  for (size_t k = 0; k < g.inputs.size(); ++k) check_repeats(g.inputs[k], in_pos[k], fmt::format("input term {}", k));
  check_repeats(g.output, out_pos, "the output");
  for (size_t i = 0; i < g.output.size(); ++i) {
    char c = g.output[i];
    bool found = false;
    for (const auto& t : g.inputs) found = found || t.find(c) != std::string::npos;
    if (!found)
      fail_grouped(s, {out_pos[i]}, fmt::format("output symbol '{}' appears in no input term", c));
  }
  std::vector<const std::string*> terms;
  for (const auto& t : g.inputs) terms.push_back(&t);
  terms.push_back(&g.output);
  for (const std::string* t : terms)
    for (char c : *t)
      if (is_upper(c) && g.groups.find(c) == std::string::npos) g.groups += c;
  g.runs = co_travel_runs(terms, g.groups);
  // The symbolic form: one label per lower-case letter and per run (its head's code point).
  std::array<const std::string*, 128> run_of{};
  for (const auto& run : g.runs)
    for (char c : run) run_of[(unsigned char)c] = &run;
  auto symbolic_term = [&](const std::string& t) {
    std::vector<Label> out;
    for (char c : t) {
      if (is_lower(c)) {
        out.push_back(Label(c));
      } else if (run_of[(unsigned char)c]->front() == c) {
        out.push_back(Label(c));
      }
    }
    return out;
  };
  for (const auto& t : g.inputs) g.symbolic.inputs.push_back(symbolic_term(t));
  g.symbolic.output = symbolic_term(g.output);
  for (const auto& run : g.runs)
    if (run.size() > 1) g.symbolic.names[Label(run.front())] = run;
  return g;
}

namespace {

std::string format_ranks(std::span<const int64_t> ranks) {
  return fmt::format("[{}]", fmt::join(ranks, ", "));
}

std::string format_supplied(std::span<const GroupLength> lengths) {
  std::string out;
  for (const auto& l : lengths) out += fmt::format(", len_{}={}", l.group, l.length);
  return out;
}

std::shared_ptr<const GroupedExpansion> solve_and_expand(std::shared_ptr<const GroupedNotation> gn,
                                                         std::span<const int64_t> ranks,
                                                         std::span<const GroupLength> lengths) {
  const GroupedNotation& g = *gn;
  std::string_view s = g.stripped;
  auto q = [&] { return quote_for_message(s); };
  if (ranks.size() != g.inputs.size())
    throw Error(ErrorKind::shape, fmt::format("grouped einsum {}: {} operands given but the subscripts have {} "
                                              "input terms",
                                              q(), ranks.size(), g.inputs.size()));
  for (size_t i = 0; i < lengths.size(); ++i) {
    const GroupLength& l = lengths[i];
    if (!is_upper(l.group))
      fail(ErrorKind::invalid_argument,
           "grouped einsum {}: len_{} names no group; groups are upper-case letters", q(),
           l.group ? std::string(1, l.group) : std::string("\\0"));
    if (g.groups.find(l.group) == std::string::npos)
      fail(ErrorKind::invalid_argument,
           "grouped einsum {}: len_{}={} was supplied but group {} is not in the subscripts; remove it", q(),
           l.group, l.length, l.group);
    if (l.length < 0)
      fail(ErrorKind::invalid_argument, "grouped einsum {}: len_{}={} is negative; a group has 0 or more axes", q(),
           l.group, l.length);
    for (size_t j = 0; j < i; ++j)
      if (lengths[j].group == l.group)
        fail(ErrorKind::invalid_argument, "grouped einsum {}: len_{} is supplied twice", q(), l.group);
  }
  // One row per input term (its groups sum to rank - number of lower-case letters) and one per supplied length.
  const size_t ng = g.groups.size();
  auto col = [&](char c) { return g.groups.find(c); };
  detail::GroupSystem sys(ng);
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    std::vector<int64_t> row(ng, 0);
    int64_t lower = 0;
    for (char c : g.inputs[k]) {
      if (is_upper(c))
        row[col(c)] = 1;
      else
        ++lower;
    }
    sys.add_row(std::move(row), ranks[k] - lower);
  }
  for (const auto& l : lengths) {
    std::vector<int64_t> row(ng, 0);
    row[col(l.group)] = 1;
    sys.add_row(std::move(row), l.length);
  }
  std::string what = fmt::format("operand ranks {}{}", format_ranks(ranks), format_supplied(lengths));
  auto inconsistent = [&](const std::string& detail) {
    throw Error(ErrorKind::shape, fmt::format("grouped einsum {}: {} are inconsistent with the subscripts ({}); "
                                              "check that the operands are passed in the order of the terms",
                                              q(), what, detail));
  };
  sys.eliminate(s);
  if (!sys.consistent()) inconsistent("no group lengths satisfy every term");
  // Identifiability, from the coefficient matrix alone: every run's total must lie in the row space.
  std::vector<detail::GroupSystem::Value> totals;
  std::vector<std::string> confounded, candidates;
  std::vector<detail::GroupSystem::Value> member(ng);
  for (size_t c = 0; c < ng; ++c) {
    std::vector<int64_t> e(ng, 0);
    e[c] = 1;
    member[c] = sys.reduce(std::move(e), s);
  }
  for (const auto& run : g.runs) {
    std::vector<int64_t> f(ng, 0);
    for (char c : run) f[col(c)] = 1;
    totals.push_back(sys.reduce(std::move(f), s));
    if (!totals.back().determined) {
      confounded.push_back(run);
      for (char c : run)
        if (!member[col(c)].determined) candidates.push_back(fmt::format("len_{}", c));
    }
  }
  if (!confounded.empty())
    throw Error(ErrorKind::invalid_argument,
                fmt::format("grouped einsum {}: the group lengths are underdetermined: the operand ranks fix only "
                            "sums of the confounded groups {}; supply one of {} (repeat with another if still "
                            "underdetermined); this is decided from the subscripts alone, so every call with these "
                            "subscripts needs it",
                            q(), fmt::join(confounded, ", "), fmt::join(candidates, ", ")));
  auto check_value = [&](const detail::GroupSystem::Value& v, const std::string& name) {
    if (v.den != 1)
      inconsistent(fmt::format("{} would have length {}/{}", name, v.num, v.den));
    if (v.num < 0) inconsistent(fmt::format("{} would have length {}", name, v.num));
  };
  auto out = std::make_shared<GroupedExpansion>();
  out->notation = gn;
  for (size_t r = 0; r < g.runs.size(); ++r) {
    const std::string& run = g.runs[r];
    check_value(totals[r], run.size() > 1 ? "the run " + run : "group " + run);
    int64_t rest = totals[r].num;
    for (char c : run)
      if (member[col(c)].determined) {
        check_value(member[col(c)], fmt::format("group {}", c));
        rest -= member[col(c)].num;
      }
    if (rest < 0) inconsistent(fmt::format("the run {} would need a negative length for its free groups", run));
    // Pinned members keep their value; the remainder goes to the first free member (any split gives the same
    // expansion, so this choice is unobservable).
    for (char c : run) {
      if (member[col(c)].determined) {
        out->lengths[c] = member[col(c)].num;
      } else {
        out->lengths[c] = rest;
        rest = 0;
      }
    }
    EIN_ASSERT(rest == 0, "run total not distributed");
  }
  // Expansion: fresh labels in first-appearance order, input terms left to right then the output.
  std::array<std::vector<Label>, 128> labels_of;
  std::array<bool, 128> assigned{};
  Label next = kFreshLabelTop;
  Subscripts& x = out->expanded;
  auto expand_term = [&](const std::string& t) {
    std::vector<Label> term;
    for (char c : t) {
      if (is_lower(c)) {
        term.push_back(Label(c));
        continue;
      }
      auto& ls = labels_of[(unsigned char)c];
      if (!assigned[(unsigned char)c]) {
        assigned[(unsigned char)c] = true;
        for (int64_t i = 0; i < out->lengths[c]; ++i) {
          EIN_ASSERT(next > 0x10FFFF, "fresh labels ran into the code-point range");
          ls.push_back(next);
          x.names[next] = fmt::format("{}[{}]", c, i);
          --next;
        }
      }
      term.insert(term.end(), ls.begin(), ls.end());
    }
    return term;
  };
  for (const auto& t : g.inputs) x.inputs.push_back(expand_term(t));
  x.output = expand_term(g.output);
  for (const auto& t : g.inputs)
    for (char c : t)
      if (is_lower(c)) out->symbol_labels[Label(c)] = {Label(c)};
  for (char c : g.groups) out->group_labels[c] = labels_of[(unsigned char)c];
  for (const auto& run : g.runs) {
    auto& ls = out->symbol_labels[Label(run.front())];
    for (char c : run) ls.insert(ls.end(), labels_of[(unsigned char)c].begin(), labels_of[(unsigned char)c].end());
  }
  return out;
}

// ---- the cache: (subscripts, ranks, supplied lengths sorted by group) -> expansion ----

struct KeyView {
  std::string_view text;
  std::span<const int64_t> ranks;
  std::span<const GroupLength> lengths;
};

struct Key {
  std::string text;
  std::vector<int64_t> ranks;
  std::vector<GroupLength> lengths;
  KeyView view() const { return {text, ranks, lengths}; }
};

int compare(const KeyView& a, const KeyView& b) {
  if (int c = a.text.compare(b.text)) return c < 0 ? -1 : 1;
  auto r = std::lexicographical_compare_three_way(a.ranks.begin(), a.ranks.end(), b.ranks.begin(), b.ranks.end());
  if (r != 0) return r < 0 ? -1 : 1;
  auto l = std::lexicographical_compare_three_way(
      a.lengths.begin(), a.lengths.end(), b.lengths.begin(), b.lengths.end(),
      [](const GroupLength& x, const GroupLength& y) {
        return std::tie(x.group, x.length) <=> std::tie(y.group, y.length);
      });
  return l < 0 ? -1 : (l > 0 ? 1 : 0);
}

struct KeyLess {
  using is_transparent = void;
  bool operator()(const Key& a, const Key& b) const { return compare(a.view(), b.view()) < 0; }
  bool operator()(const Key& a, const KeyView& b) const { return compare(a.view(), b) < 0; }
  bool operator()(const KeyView& a, const Key& b) const { return compare(a, b.view()) < 0; }
};

constexpr size_t kMaxCacheEntries = 4096;

// Sorts the supplied lengths by group without allocating (there are at most 26 groups; longer lists are malformed
// and take the slow path, which reports them): the one key order of the cache.
std::span<const GroupLength> sort_lengths(std::span<const GroupLength> lengths, std::array<GroupLength, 26>& buf,
                                          std::vector<GroupLength>& long_buf) {
  if (lengths.size() > buf.size()) {
    long_buf.assign(lengths.begin(), lengths.end());
    return long_buf;
  }
  std::copy(lengths.begin(), lengths.end(), buf.begin());
  std::sort(buf.begin(), buf.begin() + lengths.size(),
            [](const GroupLength& a, const GroupLength& b) { return a.group < b.group; });
  return std::span<const GroupLength>(buf.data(), lengths.size());
}

}  // namespace

struct GroupedCache::Impl {
  mutable std::shared_mutex mutex;
  // Keyed by the string as the caller wrote it (so a warm call does not even strip white space) ...
  std::map<Key, std::shared_ptr<const GroupedExpansion>, KeyLess> by_text;
  // ... and by the stripped string, so spellings that differ only in white space share one entry.
  std::map<Key, std::shared_ptr<const GroupedExpansion>, KeyLess> by_stripped;
  std::atomic<uint64_t> hits{0}, misses{0};
};

GroupedCache::GroupedCache() : impl_(std::make_unique<Impl>()) {}
GroupedCache::~GroupedCache() = default;

std::shared_ptr<const GroupedExpansion> expand_grouped(std::string_view subscripts, std::span<const int64_t> ranks,
                                                       std::span<const GroupLength> lengths) {
  std::array<GroupLength, 26> buf;
  std::vector<GroupLength> long_buf;
  return solve_and_expand(std::make_shared<const GroupedNotation>(parse_grouped(subscripts)), ranks,
                          sort_lengths(lengths, buf, long_buf));
}

std::shared_ptr<const GroupedExpansion> GroupedCache::expand(std::string_view subscripts,
                                                             std::span<const int64_t> ranks,
                                                             std::span<const GroupLength> lengths) {
  std::array<GroupLength, 26> sorted_buf;
  std::vector<GroupLength> sorted_long;
  const std::span<const GroupLength> sorted = sort_lengths(lengths, sorted_buf, sorted_long);
  Impl& c = *impl_;
  KeyView raw{subscripts, ranks, sorted};
  {
    std::shared_lock lock(c.mutex);
    if (auto it = c.by_text.find(raw); it != c.by_text.end()) {
      c.hits.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  auto gn = std::make_shared<const GroupedNotation>(parse_grouped(subscripts));
  KeyView stripped{gn->stripped, ranks, sorted};
  std::shared_ptr<const GroupedExpansion> result;
  {
    std::shared_lock lock(c.mutex);
    if (auto it = c.by_stripped.find(stripped); it != c.by_stripped.end()) result = it->second;
  }
  if (!result) result = solve_and_expand(gn, ranks, sorted);  // throws before anything is cached
  std::unique_lock lock(c.mutex);
  c.misses.fetch_add(1, std::memory_order_relaxed);
  if (c.by_text.size() >= kMaxCacheEntries) {
    c.by_text.clear();
    c.by_stripped.clear();
  }
  auto to_key = [](const KeyView& v) {
    return Key{std::string(v.text), std::vector<int64_t>(v.ranks.begin(), v.ranks.end()),
               std::vector<GroupLength>(v.lengths.begin(), v.lengths.end())};
  };
  c.by_stripped.try_emplace(to_key(stripped), result);
  c.by_text.try_emplace(to_key(raw), result);
  return result;
}

BoundEinsum bind_grouped(std::string_view subscripts, std::span<const Shape> shapes,
                         std::span<const GroupLength> lengths, bool allow_broadcast) {
  std::vector<int64_t> ranks;
  ranks.reserve(shapes.size());
  for (const Shape& s : shapes) ranks.push_back(int64_t(s.size()));
  auto e = expand_grouped(subscripts, ranks, lengths);
  return bind_einsum(e->expanded, shapes, allow_broadcast);
}

GroupedCacheStats GroupedCache::stats() const {
  const Impl& c = *impl_;
  std::shared_lock lock(c.mutex);
  return {c.hits.load(), c.misses.load(), c.by_text.size()};
}

void GroupedCache::clear() {
  Impl& c = *impl_;
  std::unique_lock lock(c.mutex);
  c.by_text.clear();
  c.by_stripped.clear();
  c.hits = 0;
  c.misses = 0;
}

}  // namespace einstage::einsum
