// Trimming and top-level splitting (see Text.h).
#include "ir/Text.h"

namespace einstage {

std::string_view trim(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_top_level(std::string_view s) {
  std::vector<std::string_view> items;
  s = trim(s);
  if (s.empty()) return items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  items.push_back(trim(s.substr(start)));
  return items;
}

}  // namespace einstage
