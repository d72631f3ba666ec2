#include "ir/Extension.h"

#include "ir/Quote.h"
#include "ir/Text.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace einstage {

bool is_family_name(std::string_view name) {
  size_t segments = 0, start = 0;
  std::string_view last;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string_view seg = name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (seg.empty()) return false;
    for (char c : seg)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    ++segments;
    last = seg;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (segments < 2 || last.size() < 2 || last[0] != 'v') return false;
  for (char c : last.substr(1))
    if (c < '0' || c > '9') return false;
  return true;
}

void ExtensionRegistry::register_family(ExtensionSemantics s) {
  if (!is_family_name(s.family))
    fail(ErrorKind::invalid_argument, "extension family name '{}' (module '{}') is malformed; expected lower-case "
         "segments joined by '.' ending in a version, e.g. 'einstage.einsum.v1'", s.family, s.module);
  if (auto it = families_.find(s.family); it != families_.end())
    fail(ErrorKind::invalid_argument, "extension family '{}' is already registered (by module '{}'); module '{}' "
         "cannot register it again: load each module once, or bump the family's version", s.family,
         it->second.module, s.module);
  const char* missing = !s.parse_text ? "parse_text" : !s.parse_json ? "parse_json" : !s.infer_type && !s.infer_types ? "infer_type (or infer_types)" : nullptr;
  if (missing)
    fail(ErrorKind::invalid_argument, "extension family '{}' (module '{}') has no {} rule; it is required",
         s.family, s.module, missing);
  std::string key = s.family;
  families_.emplace(std::move(key), std::move(s));
}

ExtensionSemantics* ExtensionRegistry::find_mutable(std::string_view family) {
  auto it = families_.find(family);
  return it == families_.end() ? nullptr : &it->second;
}

const ExtensionSemantics* ExtensionRegistry::find(std::string_view family) const {
  auto it = families_.find(family);
  return it == families_.end() ? nullptr : &it->second;
}

void fail_unknown_family(std::string_view family, std::string_view where) {
  const std::string prefix = where.empty() ? "" : fmt::format("{}: ", where);
  // einstage's own families are einstage.<name>.v<k>: name the CMake target and the register function.
  const size_t dot = family.find('.', 9), version = family.rfind(".v");
  if (family.starts_with("einstage.") && dot != std::string_view::npos && dot == version && dot > 9) {
    const std::string name(family.substr(9, dot - 9));
    fail(ErrorKind::not_found, "{}unknown extension family '{}'; register its module before use: link the CMake "
         "target einstage::einstage_{} and call {}::register_{}_semantics(registry) on this ExtensionRegistry (or "
         "load the module into a Runtime and trace with runtime.registry())",
         prefix, escape_for_message(family, '\''), name, name, name);
  }
  fail(ErrorKind::not_found, "{}unknown extension family '{}'; register the module that provides it before use "
       "(e.g. its register function on the ExtensionRegistry, or load the module into the Runtime)",
       prefix, escape_for_message(family, '\''));
}

const ExtensionSemantics& ExtensionRegistry::get(std::string_view family) const {
  const ExtensionSemantics* s = find(family);
  if (!s) fail_unknown_family(family, "");
  return *s;
}

std::vector<std::string> ExtensionRegistry::families() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : families_) out.push_back(name);
  return out;
}

std::string format_string_literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

std::optional<std::string> parse_string_literal(std::string_view text) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return std::nullopt;
  std::string out;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    char c = text[i];
    if (c == '"') return std::nullopt;
    if (c != '\\') { out += c; continue; }
    if (i + 2 >= text.size()) return std::nullopt;
    char e = text[++i];
    if (e == 'n') out += '\n';
    else if (e == 't') out += '\t';
    else if (e == '"' || e == '\\') out += e;
    else return std::nullopt;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> split_attribute_text(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](std::string_view entry) {
    entry = trim(entry);
    size_t eq = entry.find(" = ");
    if (eq == std::string_view::npos)
      fail(ErrorKind::parse, "attribute '{}' is not of the form 'key = value'", escape_for_message(entry, '\''));
    std::string key(trim(entry.substr(0, eq)));
    for (const auto& [k, v] : out)
      if (k == key) fail(ErrorKind::parse, "attribute '{}' is given twice", escape_for_message(key, '\''));
    out.emplace_back(std::move(key), std::string(trim(entry.substr(eq + 3))));
  };
  if (trim(text).empty()) return out;
  int depth = 0;
  bool in_string = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    else if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
    else if (c == ',' && depth == 0) {
      add(text.substr(start, i - start));
      start = i + 1;
    }
  }
  add(text.substr(start));
  return out;
}

std::string format_float(double v) { return fmt::format("{}", v); }
std::string format_float(float v) { return fmt::format("{}", v); }

namespace {
template <typename T> std::optional<T> parse_floating(std::string_view s) {
  if (s.empty()) return std::nullopt;
  // from_chars does not take a leading '+'; fmt never prints one, so neither do we accept one.
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (p != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) return std::nullopt;
  if (ec != std::errc()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<double> parse_double(std::string_view text) { return parse_floating<double>(text); }
std::optional<float> parse_float(std::string_view text) { return parse_floating<float>(text); }

}  // namespace einstage
