#include "extensions/einsum/notation/SourceText.h"

#include <algorithm>

namespace einstage::einsum::detail {

std::string caret_block(std::string_view text, const std::vector<size_t>& positions) {
  if (positions.empty()) return {};
  // The line as the message shows it (escaped, long text shortened around the first caret), carets by display column.
  const EchoLine line = echo_with_columns(text, positions, '\0');
  std::vector<size_t> columns;
  for (size_t c : line.columns)
    if (c != std::string::npos) columns.push_back(c);
  if (columns.empty()) return fmt::format("\n  {}", line.text);
  std::sort(columns.begin(), columns.end());
  std::string carets(columns.back() + 1, ' ');
  for (size_t c : columns) carets[c] = '^';
  return fmt::format("\n  {}\n  {}", line.text, carets);
}

bool parse_simple_ascii(std::string_view t, std::vector<std::vector<int32_t>>& inputs, std::vector<int32_t>& output,
                        bool& explicit_output) {
  const size_t n = t.size();
  constexpr size_t kNone = ~size_t(0);
  size_t arrow = kNone, commas = 0;
  uint8_t count[128] = {};  // occurrences of each label in the input terms (saturating)
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(t[i]);
    if (c <= 0x20 || c >= 0x7F || c == '(' || c == ')' || c == '.' || c == '>') return false;
    if (c == '-') {
      if (arrow != kNone || i + 1 >= n || t[i + 1] != '>') return false;
      arrow = i++;
    } else if (c == ',') {
      if (arrow != kNone) return false;
      ++commas;
    } else if (arrow == kNone && count[c] < 255) {
      ++count[c];
    }
  }
  const size_t in_end = arrow == kNone ? n : arrow;
  if (arrow != kNone)
    for (size_t i = arrow + 2; i < n; ++i)
      if (count[static_cast<unsigned char>(t[i])] == 0) return false;  // the general parser reports it
  inputs.resize(commas + 1);
  size_t start = 0, k = 0;
  for (size_t i = 0; i <= in_end; ++i) {
    if (i == in_end || t[i] == ',') {
      inputs[k++].assign(t.begin() + std::ptrdiff_t(start), t.begin() + std::ptrdiff_t(i));
      start = i + 1;
    }
  }
  explicit_output = arrow != kNone;
  if (explicit_output) {
    output.assign(t.begin() + std::ptrdiff_t(arrow + 2), t.end());
  } else {
    size_t once = 0;
    for (int c = 0; c < 128; ++c) once += count[c] == 1;
    output.reserve(once);
    for (int c = 0; c < 128; ++c)  // increasing code point
      if (count[c] == 1) output.push_back(c);
  }
  return true;
}

void Tokenizer::fail_at(size_t pos, const std::string& message) const {
  throw Error(ErrorKind::parse,
              fmt::format("einsum {}: {}{}", quote_for_message(text_), message, caret_block(text_, {pos})));
}

Token Tokenizer::next() {
  while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  if (pos_ >= text_.size()) return {TokenKind::end, pos_, 0};
  size_t at = pos_;
  char ch = text_[pos_];
  switch (ch) {
    case ',': ++pos_; return {TokenKind::comma, at, 0};
    case '(': ++pos_; return {TokenKind::lparen, at, 0};
    case ')': ++pos_; return {TokenKind::rparen, at, 0};
    case '-':
      if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
        pos_ += 2;
        return {TokenKind::arrow, at, 0};
      }
      fail_at(at, "'-' must be followed by '>' (the arrow '->')");
    case '>': fail_at(at, "'>' without '-' before it (the arrow is '->')");
    case '.':
      if (text_.substr(pos_, 3) == "...") {
        pos_ += 3;
        return {TokenKind::ellipsis, at, 0};
      }
      fail_at(at, "'.' is only valid as part of '...'");
    default: break;
  }
  char32_t c = 0;
  size_t len = decode_utf8(text_, pos_, c);
  if (len == 0) fail_at(at, fmt::format("invalid UTF-8 at byte {}", at));
  if (!is_label_code_point(c))
    fail_at(at, fmt::format("character U+{:04X} cannot be a label (control or white-space character)",
                            uint32_t(c)));
  pos_ += len;
  return {TokenKind::label, at, c};
}

}  // namespace einstage::einsum::detail
