#include "ir/Quote.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace einstage {

size_t decode_utf8(std::string_view text, size_t pos, char32_t& out) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b0 = byte(pos);
  if (b0 < 0x80) {
    out = b0;
    return 1;
  }
  size_t len;
  char32_t c, min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (pos + len > text.size()) return 0;
  for (size_t i = 1; i < len; ++i) {
    unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  out = c;
  return len;
}

namespace {

bool is_wide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) || (c >= 0xAC00 && c <= 0xD7A3) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x20000 && c <= 0x3FFFD);
}

// Code points that would break the line or reorder the text around them.
bool must_escape(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c < 0xA0) || c == 0x2028 || c == 0x2029 || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069) || c == 0x200E || c == 0x200F || c == 0xFEFF;
}

// Appends the escaped form of the character at text[pos]; returns its length in bytes and adds its display width.
size_t append_escaped(std::string& out, std::string_view text, size_t pos, char quote, size_t& width) {
  char32_t c = 0;
  const size_t len = decode_utf8(text, pos, c);
  const size_t before = out.size();
  if (len == 0) {
    out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[pos]));
    width += out.size() - before;
    return 1;
  }
  if (c == '\n') out += "\\n";
  else if (c == '\t') out += "\\t";
  else if (c == '\r') out += "\\r";
  else if (c == 0) out += "\\0";
  else if (c == '\\' || (quote && c == static_cast<unsigned char>(quote))) out += {'\\', static_cast<char>(c)};
  else if (c < 0x80 && must_escape(c)) out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
  else if (must_escape(c)) out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
  else {
    out.append(text.substr(pos, len));
    width += is_wide(c) ? 2 : 1;
    return len;
  }
  width += out.size() - before;
  return len;
}

// The start of the character containing byte `pos` (steps back over UTF-8 continuation bytes, at most 3).
size_t char_start(std::string_view text, size_t pos) {
  for (int i = 0; i < 3 && pos > 0 && pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80; ++i)
    --pos;
  return pos;
}

}  // namespace

EchoLine echo_with_columns(std::string_view text, std::span<const size_t> positions, char quote, size_t limit) {
  // The byte ranges shown: everything, or head + (a window around the first position) + tail.
  std::vector<std::pair<size_t, size_t>> kept;
  if (text.size() <= limit) {
    kept.push_back({0, text.size()});
  } else {
    const size_t part = positions.empty() ? limit / 2 : limit / 4;
    kept.push_back({0, part});
    if (!positions.empty()) {
      const size_t p = std::min(positions[0], text.size());
      kept.push_back({p > part / 2 ? p - part / 2 : 0, std::min(text.size(), p + part / 2 + 1)});
    }
    kept.push_back({text.size() - part, text.size()});
    for (auto& [b, e] : kept) b = char_start(text, b), e = char_start(text, e);
    std::vector<std::pair<size_t, size_t>> merged;
    for (auto r : kept) {
      if (!merged.empty() && r.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, r.second);
      else merged.push_back(r);
    }
    kept = std::move(merged);
  }
  EchoLine line;
  line.columns.assign(positions.size(), std::string::npos);
  size_t width = 0, shown_end = 0;
  for (const auto& [begin, end] : kept) {
    if (begin > shown_end) {
      const std::string marker = fmt::format("<... {} bytes elided ...>", begin - shown_end);
      line.text += marker;
      width += marker.size();
    }
    for (size_t pos = begin; pos < end;) {
      for (size_t i = 0; i < positions.size(); ++i)
        if (positions[i] == pos) line.columns[i] = width;
      pos += append_escaped(line.text, text, pos, quote, width);
    }
    shown_end = end;
  }
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] >= text.size() && shown_end == text.size()) line.columns[i] = width;  // the end of the text
  return line;
}

std::string escape_for_message(std::string_view text, char quote, size_t limit) {
  return echo_with_columns(text, {}, quote, limit).text;
}

std::string quote_for_message(std::string_view text, size_t limit) {
  return "\"" + escape_for_message(text, '"', limit) + "\"";
}

}  // namespace einstage
