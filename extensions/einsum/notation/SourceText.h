// Internal helpers of the notation parsers: a UTF-8 tokenizer for the plain notation, UTF-8 encoding, and the caret
// line that error messages put under the offending character.
//
// Stage: front end (notation). Used by Notation.cpp and Grouped.cpp only; not part of the public API. Depends on
// ir/Error.h and ir/Quote.h only.
#pragma once

#include "ir/Error.h"
#include "ir/Quote.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::einsum::detail {

/// Characters with a meaning of their own in the plain notation.
inline bool is_reserved(char32_t c) {
  return c == ',' || c == '-' || c == '>' || c == '(' || c == ')' || c == ' ' || c == '.';
}

/// A code point that can be a label written in a string: not reserved, not a control character, not a surrogate.
inline bool is_label_code_point(int64_t c) {
  return c > 0x20 && c <= 0x10FFFF && !(c >= 0x7F && c < 0xA0) && !(c >= 0xD800 && c <= 0xDFFF) &&
         !is_reserved(char32_t(c));
}

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

using einstage::decode_utf8;  // ir/Quote.h

/// "\n  <text>\n  <spaces>^ ... ^" with a caret under each byte position, the text escaped and shortened as
/// ir/Quote.h echoes it (columns count escapes and East Asian wide characters). Empty when `positions` is empty.
std::string caret_block(std::string_view text, const std::vector<size_t>& positions);

/// The fast path for the common case: a string of printable ASCII labels, ',' and at most one '->' (no spaces,
/// parentheses, '...' or other characters). Fills the terms and the (explicit or implicit) output and returns true;
/// returns false, having decided nothing, whenever the string is anything else or invalid, so the general parser
/// handles it and reports errors with carets. Allocates exactly one vector per term.
bool parse_simple_ascii(std::string_view text, std::vector<std::vector<int32_t>>& inputs, std::vector<int32_t>& output,
                        bool& explicit_output);

enum class TokenKind { label, comma, arrow, lparen, rparen, ellipsis, end };

struct Token {
  TokenKind kind;
  size_t pos;            // byte offset of the token's first character
  char32_t code_point;   // for labels
};

/// Splits a plain-notation string into tokens; skips spaces; fails (Error parse, with a caret) on invalid UTF-8, a
/// lone '-', '>' or '.', and characters that cannot be labels (control characters).
class Tokenizer {
 public:
  explicit Tokenizer(std::string_view text) : text_(text) {}
  Token next();

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& message) const;
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace einstage::einsum::detail
