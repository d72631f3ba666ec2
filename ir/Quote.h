// User text echoed in error messages, made safe and short: the one implementation every message that quotes
// subscripts, .npy headers, IR text, JSON, attribute text or plan specs goes through.
//
// Printable UTF-8 is kept as is (labels may be any code point). Control characters (C0, DEL, C1), NUL, the Unicode
// line and paragraph separators, bidirectional-override controls and bytes that are not valid UTF-8 are escaped
// (\n \t \r \0 \x1b \u2028 ...), as are the backslash and the quote character around the echo, so a message stays
// on one line, keeps everything after a NUL and cannot be confused with the text around it. Text longer than the
// limit keeps its head and tail and says how many bytes were left out. echo_with_columns also gives the display
// column of chosen byte positions, so caret lines point at the right character after escaping and shortening (East
// Asian wide characters count two columns). Depends on nothing but the standard library and fmt.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace einstage {

/// Bytes of user text an echo keeps before it is shortened (head and tail).
inline constexpr size_t kEchoLimit = 160;

/// `text` escaped for a one-line message (see the file comment); `quote` is escaped too. Longer than `limit` bytes:
/// head, "<... N bytes elided ...>", tail.
std::string escape_for_message(std::string_view text, char quote = '"', size_t limit = kEchoLimit);
/// escape_for_message in double quotes: "ij,jk->ik".
std::string quote_for_message(std::string_view text, size_t limit = kEchoLimit);

/// An escaped (and maybe shortened) line and, per requested byte position, its display column; a position in an
/// elided part has no column (npos). The shortened line keeps a window around the first position.
struct EchoLine {
  std::string text;
  std::vector<size_t> columns;
};
EchoLine echo_with_columns(std::string_view text, std::span<const size_t> positions, char quote = '"',
                           size_t limit = kEchoLimit);

/// A format argument as an error message shows it: strings escaped (in single quotes, as messages quote them), any
/// other value unchanged. For error helpers whose every string argument is user text (the IR text parser's line
/// errors, the command line's usage errors):
/// fmt::vformat(fmt::string_view(format), fmt::make_format_args(shown_arg(args)...)).
template <typename T>
decltype(auto) shown_arg(const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) return escape_for_message(value, '\'');
  else return (value);
}

/// Decodes one UTF-8 code point at text[pos]; returns its length in bytes, or 0 for invalid UTF-8 (overlong forms,
/// surrogates, values above U+10FFFF and truncated sequences are invalid).
size_t decode_utf8(std::string_view text, size_t pos, char32_t& out);

}  // namespace einstage
