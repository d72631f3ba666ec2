// Parsing, printing and binding of the plain einsum notation. See Notation.h for the design and docs/notation.md
// for the user-facing rules.
#include "extensions/einsum/notation/Notation.h"

#include "extensions/einsum/notation/BindRule.h"
#include "extensions/einsum/notation/SourceText.h"
#include "ir/Error.h"
#include "ir/Quote.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace einstage::einsum {

namespace {

using detail::Token;
using detail::TokenKind;

/// The source positions of every entry of every term, found by re-scanning the text (error paths only).
struct SourceMap {
  std::vector<std::vector<size_t>> inputs;  // byte offset of each label / `...` entry
  std::vector<size_t> output;               // empty when the output is implicit
  std::vector<size_t> open_parens;
};

SourceMap scan_positions(std::string_view text) {
  SourceMap map;
  map.inputs.emplace_back();
  bool in_output = false;
  detail::Tokenizer tok(text);
  for (Token t = tok.next(); t.kind != TokenKind::end; t = tok.next()) {
    auto& term = in_output ? map.output : map.inputs.back();
    switch (t.kind) {
      case TokenKind::label:
      case TokenKind::ellipsis: term.push_back(t.pos); break;
      case TokenKind::comma:
        if (!in_output) map.inputs.emplace_back();
        break;
      case TokenKind::arrow: in_output = true; break;
      case TokenKind::lparen: map.open_parens.push_back(t.pos); break;
      default: break;
    }
  }
  return map;
}

/// Byte position of axis `axis` of input term `k` after the term's `...` covered `cover` axes.
size_t axis_position(const Notation& n, const SourceMap& map, size_t k, size_t axis, int64_t cover) {
  const auto& term = n.inputs[k];
  const auto& pos = map.inputs[k];
  auto it = std::find(term.begin(), term.end(), kEllipsisMarker);
  if (it == term.end()) return pos[axis];
  size_t p = size_t(it - term.begin());
  if (axis < p) return pos[axis];
  if (axis < p + size_t(cover)) return pos[p];
  return pos[axis - size_t(cover) + 1];
}

std::string term_text(const Subscripts& s, const std::vector<Label>& term) {
  std::string out;
  for (Label l : term) out += label_name(s, l);
  return out;
}

std::string notation_term_text(const std::vector<Label>& term) {
  std::string out;
  for (Label l : term) {
    if (l == kEllipsisMarker)
      out += "...";
    else
      detail::append_utf8(out, char32_t(l));
  }
  return out;
}

[[noreturn]] void fail_parse(std::string_view text, std::vector<size_t> carets, std::string message) {
  throw Error(ErrorKind::parse,
              fmt::format("einsum {}: {}{}", quote_for_message(text), message, detail::caret_block(text, carets)));
}

// Builds the order of a nested string (it has passed parse_notation's grammar checks): every parenthesised group
// and the top level combine their items left to right; a group of one item is transparent.
std::vector<std::pair<int, int>> parse_order(std::string_view text, int n) {
  struct Node {
    int leaf = -1;
    int left = -1, right = -1;
  };
  std::vector<Node> nodes;
  std::vector<std::vector<int>> groups(1);
  int next_input = 0;
  bool after_close = false;
  auto close_item = [&] {
    if (!after_close) {
      nodes.push_back({next_input++, -1, -1});
      groups.back().push_back(int(nodes.size()) - 1);
    }
    after_close = false;
  };
  auto fold = [&](const std::vector<int>& items) {
    int acc = items[0];
    for (size_t i = 1; i < items.size(); ++i) {
      nodes.push_back({-1, acc, items[i]});
      acc = int(nodes.size()) - 1;
    }
    return acc;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(') {
      groups.emplace_back();
    } else if (c == ')') {
      close_item();
      std::vector<int> items = std::move(groups.back());
      groups.pop_back();
      groups.back().push_back(fold(items));
      after_close = true;
    } else if (c == ',') {
      close_item();
    } else if (c == '-') {
      break;
    }
  }
  close_item();
  EIN_ASSERT(next_input == n && groups.size() == 1, "nested order scan disagrees with the parse");
  int root = fold(groups.back());
  std::vector<std::pair<int, int>> steps;
  // Post-order: both subtrees' steps first, then this one; step k's result is n + k.
  auto emit = [&](auto&& self, int node) -> int {
    const Node& nd = nodes[size_t(node)];
    if (nd.leaf >= 0) return nd.leaf;
    int l = self(self, nd.left);
    int r = self(self, nd.right);
    steps.emplace_back(l, r);
    return n + int(steps.size()) - 1;
  };
  emit(emit, root);
  return steps;
}

void check_output_labels(const Notation& n) {
  for (size_t a = 0; a < n.output.size(); ++a) {
    Label l = n.output[a];
    if (l == kEllipsisMarker) continue;
    bool found = false;
    for (const auto& term : n.inputs)
      if (std::find(term.begin(), term.end(), l) != term.end()) found = true;
    if (!found) {
      std::string name;
      detail::append_utf8(name, char32_t(l));
      SourceMap map = scan_positions(n.text);
      fail_parse(n.text, {map.output[a]},
                 fmt::format("output label '{}' appears in no input term; add it to an input term or remove it from "
                             "the output",
                             name));
    }
  }
}

/// NumPy's implicit output: `...` first (if any input has it), then the labels that occur exactly once in all input
/// terms together, in increasing code-point order.
std::vector<Label> implicit_output(const std::vector<std::vector<Label>>& inputs, bool ellipsis) {
  std::vector<Label> all;
  for (const auto& term : inputs)
    for (Label l : term)
      if (l != kEllipsisMarker) all.push_back(l);
  std::sort(all.begin(), all.end());
  std::vector<Label> out;
  if (ellipsis) out.push_back(kEllipsisMarker);
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    if (j - i == 1) out.push_back(all[i]);
    i = j;
  }
  return out;
}

std::string rank_message(size_t k, int64_t rank, const std::string& term, size_t named, bool ellipsis) {
  if (ellipsis)
    return fmt::format("operand {} has rank {} but its term {} names {} labels besides '...'; pass an operand of "
                       "rank at least {} or remove labels from the term",
                       k, rank, quote_for_message(term), named, named);
  return fmt::format("operand {} has rank {} but its term {} names {} labels; pass an operand of rank {} or fix "
                     "the term",
                     k, rank, quote_for_message(term), named, named);
}

std::string count_message(size_t given, size_t terms) {
  return fmt::format("{} operands given but the subscripts have {} input terms", given, terms);
}

}  // namespace

namespace detail {
std::string term_label_text(const Subscripts& s, const std::vector<Label>& term) { return term_text(s, term); }
std::string operand_count_message(size_t given, size_t terms) { return count_message(given, terms); }
std::string operand_rank_message(size_t k, int64_t rank, const std::string& term, size_t named, bool ellipsis) {
  return rank_message(k, rank, term, named, ellipsis);
}
}  // namespace detail

bool Notation::has_ellipsis() const {
  for (const auto& term : inputs)
    for (Label l : term)
      if (l == kEllipsisMarker) return true;
  for (Label l : output)
    if (l == kEllipsisMarker) return true;
  return false;
}

Notation parse_notation(std::string_view text, std::optional<size_t> operands) {
  Notation n;
  n.text.assign(text);
  if (detail::parse_simple_ascii(text, n.inputs, n.output, n.explicit_output)) return n;
  n.inputs.emplace_back();
  std::vector<Label>* term = &n.inputs.back();
  enum class Prev { start, label, comma, lparen, rparen };
  Prev prev = Prev::start;
  bool in_output = false, term_ellipsis = false, any_ellipsis = false;
  size_t first_ellipsis = 0, first_paren = 0;
  std::vector<size_t> open;  // positions of unmatched '('
  detail::Tokenizer tok(text);
  for (Token t = tok.next(); t.kind != TokenKind::end; t = tok.next()) {
    switch (t.kind) {
      case TokenKind::label:
        if (prev == Prev::rparen)
          fail_parse(text, {t.pos}, "a label follows ')'; separate operands with ',' or start the output with '->'");
        term->push_back(Label(t.code_point));
        prev = Prev::label;
        break;
      case TokenKind::ellipsis:
        if (prev == Prev::rparen)
          fail_parse(text, {t.pos}, "'...' follows ')'; separate operands with ',' or start the output with '->'");
        if (term_ellipsis) fail_parse(text, {t.pos}, "'...' appears twice in one term; a term may have at most one");
        if (!any_ellipsis) first_ellipsis = t.pos;
        term_ellipsis = any_ellipsis = true;
        term->push_back(kEllipsisMarker);
        prev = Prev::label;
        break;
      case TokenKind::comma:
        if (in_output)
          fail_parse(text, {t.pos}, "',' in the output; the output is a single term (did you mean to put this "
                                    "before '->'?)");
        n.inputs.emplace_back();
        term = &n.inputs.back();
        term_ellipsis = false;
        prev = Prev::comma;
        break;
      case TokenKind::arrow:
        if (in_output) fail_parse(text, {t.pos}, "a second '->'; the subscripts may have only one");
        if (!open.empty()) fail_parse(text, {open.back(), t.pos}, "'(' is not closed before '->'; add ')'");
        in_output = true;
        n.explicit_output = true;
        term = &n.output;
        term_ellipsis = false;
        prev = Prev::start;
        break;
      case TokenKind::lparen:
        if (in_output) fail_parse(text, {t.pos}, "parentheses are not allowed in the output");
        if (prev == Prev::label || prev == Prev::rparen)
          fail_parse(text, {t.pos}, "'(' must start an operand; put ',' before it");
        if (!n.nested) first_paren = t.pos;
        n.nested = true;
        open.push_back(t.pos);
        prev = Prev::lparen;
        break;
      case TokenKind::rparen:
        if (in_output) fail_parse(text, {t.pos}, "parentheses are not allowed in the output");
        if (open.empty()) fail_parse(text, {t.pos}, "')' has no matching '('");
        if (prev == Prev::lparen) fail_parse(text, {open.back(), t.pos}, "empty parentheses; put operands inside");
        open.pop_back();
        prev = Prev::rparen;
        break;
      case TokenKind::end: break;
    }
  }
  if (!open.empty()) fail_parse(text, {open.back()}, "'(' is never closed; add ')'");
  if (n.nested && any_ellipsis)
    fail_parse(text, {first_paren, first_ellipsis},
               "parentheses and '...' cannot be used together; write the ellipsis axes out as labels or drop the "
               "parentheses");
  // With the operand count known, a wrong number of terms is the first thing to say: an output label missing from
  // the inputs is often a term left out ("ij,jk,kl->ir" for four operands).
  if (operands && *operands != n.inputs.size())
    throw Error(ErrorKind::shape,
                fmt::format("einsum {}: {}", quote_for_message(n.text), count_message(*operands, n.inputs.size())));
  if (n.explicit_output)
    check_output_labels(n);
  else
    n.output = implicit_output(n.inputs, any_ellipsis);
  if (n.nested) n.order = parse_order(text, int(n.inputs.size()));
  return n;
}

Subscripts expand(const Notation& n, std::span<const int64_t> ranks) {
  if (ranks.size() != n.inputs.size())
    throw Error(ErrorKind::shape,
                fmt::format("einsum {}: {}", quote_for_message(n.text), count_message(ranks.size(), n.inputs.size())));
  Subscripts s;
  int64_t longest = 0;
  std::vector<int64_t> cover(n.inputs.size(), 0);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const auto& term = n.inputs[k];
    bool ell = std::find(term.begin(), term.end(), kEllipsisMarker) != term.end();
    size_t named = term.size() - (ell ? 1 : 0);
    if ((ell && int64_t(named) > ranks[k]) || (!ell && int64_t(named) != ranks[k])) {
      SourceMap map = scan_positions(n.text);
      std::vector<size_t> carets;
      // Point at the first label the operand cannot hold (or at the term's start when it holds too few).
      if (int64_t(named) > ranks[k] && !map.inputs[k].empty()) {
        size_t skip = size_t(std::max<int64_t>(ranks[k], 0));
        size_t seen = 0;
        for (size_t e = 0; e < term.size(); ++e) {
          if (term[e] == kEllipsisMarker) continue;
          if (seen++ == skip) {
            carets.push_back(map.inputs[k][e]);
            break;
          }
        }
      } else if (!map.inputs[k].empty()) {
        carets.push_back(map.inputs[k][0]);
      }
      throw Error(ErrorKind::shape,
                  fmt::format("einsum {}: {}{}", quote_for_message(n.text),
                              rank_message(k, ranks[k], notation_term_text(term), named, ell),
                              detail::caret_block(n.text, carets)));
    }
    if (ell) {
      cover[k] = ranks[k] - int64_t(named);
      longest = std::max(longest, cover[k]);
    }
  }
  for (int64_t j = 0; j < longest; ++j) {
    Label l = kFreshLabelTop - Label(j);
    s.ellipsis.push_back(l);
    s.names[l] = fmt::format("...[{}]", j);
  }
  auto put = [&](std::vector<Label>& out, const std::vector<Label>& term, int64_t c) {
    for (Label l : term) {
      if (l != kEllipsisMarker) {
        out.push_back(l);
        continue;
      }
      for (int64_t j = longest - c; j < longest; ++j) out.push_back(s.ellipsis[size_t(j)]);
    }
  };
  s.inputs.resize(n.inputs.size());
  for (size_t k = 0; k < n.inputs.size(); ++k) put(s.inputs[k], n.inputs[k], cover[k]);
  put(s.output, n.output, longest);
  return s;
}

Subscripts to_subscripts(const Notation& n) {
  if (n.has_ellipsis()) {
    SourceMap map = scan_positions(n.text);
    std::vector<size_t> carets;
    for (size_t k = 0; k < n.inputs.size() && carets.empty(); ++k)
      for (size_t e = 0; e < n.inputs[k].size(); ++e)
        if (n.inputs[k][e] == kEllipsisMarker) {
          carets.push_back(map.inputs[k][e]);
          break;
        }
    fail_parse(n.text, carets, "'...' needs the operand ranks to expand; use expand() or bind_einsum() with the shapes");
  }
  Subscripts s;
  s.inputs = n.inputs;
  s.output = n.output;
  return s;
}

Subscripts parse_subscripts(std::string_view text) {
  Subscripts s;
  bool explicit_output;
  if (detail::parse_simple_ascii(text, s.inputs, s.output, explicit_output)) return s;
  Notation n = parse_notation(text);
  if (n.has_ellipsis()) return to_subscripts(n);  // fails with a caret
  s.inputs = std::move(n.inputs);
  s.output = std::move(n.output);
  return s;
}

Subscripts make_subscripts(std::vector<std::vector<Label>> inputs, std::vector<Label> output) {
  Subscripts s;
  s.inputs = std::move(inputs);
  s.output = std::move(output);
  for (size_t k = 0; k < s.inputs.size(); ++k)
    for (size_t a = 0; a < s.inputs[k].size(); ++a)
      if (s.inputs[k][a] < 0)
        fail(ErrorKind::invalid_argument,
             "einsum integer subscripts: label {} (operand {}, axis {}) is negative; integer labels must be >= 0",
             s.inputs[k][a], k, a);
  for (size_t a = 0; a < s.output.size(); ++a) {
    Label l = s.output[a];
    bool found = false;
    for (const auto& term : s.inputs)
      if (std::find(term.begin(), term.end(), l) != term.end()) found = true;
    if (!found)
      fail(ErrorKind::invalid_argument,
           "einsum integer subscripts: output label {} (output axis {}) appears in no input; add it to an input or "
           "remove it from the output",
           l, a);
  }
  return s;
}

Subscripts make_subscripts(std::vector<std::vector<Label>> inputs) {
  std::vector<Label> out = implicit_output(inputs, false);
  return make_subscripts(std::move(inputs), std::move(out));
}

std::string to_string(const Notation& n) {
  std::string out;
  int num = int(n.inputs.size());
  if (n.order.empty()) {
    for (int k = 0; k < num; ++k) {
      if (k) out += ',';
      out += notation_term_text(n.inputs[size_t(k)]);
    }
    if (n.nested) out = "(" + out + ")";
  } else {
    // Every step but the last is parenthesised; parsing this gives the same steps.
    auto print = [&](auto&& self, int id, bool top) -> std::string {
      if (id < num) return notation_term_text(n.inputs[size_t(id)]);
      auto [l, r] = n.order[size_t(id - num)];
      std::string inner = self(self, l, false) + "," + self(self, r, false);
      return top ? inner : "(" + inner + ")";
    };
    out = print(print, num + int(n.order.size()) - 1, true);
    // A single step prints without parentheses ("(ij),jk" is that step too): wrap it, or it would read back as a
    // string with no order at all.
    if (out.find('(') == std::string::npos) out = "(" + out + ")";
  }
  out += "->";
  out += notation_term_text(n.output);
  return out;
}

namespace {

// Where an operand axis sits in the original text, when there is one (for carets).
struct Source {
  const Notation* notation = nullptr;
  SourceMap map;
  std::vector<int64_t> cover;
};

// Integer extents: every comparison is decided, so the rule never records anything.
struct ConcreteExtentRules {
  detail::ExtentCmp compare(int64_t a, int64_t b) const {
    return a == b ? detail::ExtentCmp::equal : detail::ExtentCmp::differ;
  }
  bool is_one(int64_t e) const { return e == 1; }
  bool negative(int64_t e) const { return e < 0; }
  std::string text(int64_t e) const { return std::to_string(e); }
  int64_t assume_equal(int64_t a, int64_t, const std::string&) const { return a; }  // never called
};

BoundEinsum bind_impl(const Subscripts& s, std::span<const Shape> shapes, bool allow_broadcast, const Source* src) {
  auto fail_shape = [&](const std::vector<std::pair<size_t, size_t>>& axes, const std::string& message) {
    std::string shown = src ? src->notation->text : to_string(s);
    std::string carets;
    if (src) {
      std::vector<size_t> pos;
      for (auto [k, a] : axes) pos.push_back(axis_position(*src->notation, src->map, k, a, src->cover[k]));
      carets = detail::caret_block(shown, pos);
    }
    throw Error(ErrorKind::shape, fmt::format("einsum {}: {}{}", quote_for_message(shown), message, carets));
  };
  ConcreteExtentRules rules;
  // The rule itself lives in BindRule.h, shared with the traced op's type rule (symbolic extents).
  detail::LabelExtents<int64_t> bound = detail::bind_label_extents<int64_t>(s, shapes, allow_broadcast, rules, fail_shape);
  BoundEinsum b;
  b.extents = std::move(bound.extents);
  b.output_shape = std::move(bound.output);
  b.broadcast_axes.resize(shapes.size());
  for (size_t k = 0; k < shapes.size(); ++k) {
    b.broadcast_axes[k].resize(shapes[k].size(), false);
    for (size_t a = 0; a < shapes[k].size(); ++a)
      if (shapes[k][a] == 1 && b.extents[s.inputs[k][a]] != 1) b.broadcast_axes[k][a] = b.broadcasts = true;
  }
  b.subs = s;
  b.shapes.assign(shapes.begin(), shapes.end());
  return b;
}

}  // namespace

BoundEinsum bind_einsum(const Subscripts& subscripts, std::span<const Shape> shapes, bool allow_broadcast) {
  return bind_impl(subscripts, shapes, allow_broadcast, nullptr);
}

BoundEinsum bind_einsum(const Notation& notation, std::span<const Shape> shapes, bool allow_broadcast) {
  std::vector<int64_t> ranks;
  for (const Shape& sh : shapes) ranks.push_back(int64_t(sh.size()));
  Subscripts s = expand(notation, ranks);
  Source src;
  src.notation = &notation;
  // Ranks already match the terms here, so the source map is only built if binding fails: bind_impl is cheap to
  // retry with it.
  try {
    return bind_impl(s, shapes, allow_broadcast, nullptr);
  } catch (const Error&) {
    src.map = scan_positions(notation.text);
    for (size_t k = 0; k < notation.inputs.size(); ++k) {
      const auto& term = notation.inputs[k];
      bool ell = std::find(term.begin(), term.end(), kEllipsisMarker) != term.end();
      src.cover.push_back(ell ? int64_t(shapes[k].size()) - int64_t(term.size() - 1) : 0);
    }
    bind_impl(s, shapes, allow_broadcast, &src);
    throw;  // unreachable in practice: the same inputs fail the same way
  }
}

}  // namespace einstage::einsum
