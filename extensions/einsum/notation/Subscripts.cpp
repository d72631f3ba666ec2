// How Subscripts print: a label as the user wrote it, and the whole subscripts as a string (see Subscripts.h).
#include "extensions/einsum/notation/Subscripts.h"

#include "extensions/einsum/notation/SourceText.h"

#include <fmt/format.h>

namespace einstage::einsum {

std::string label_name(const Subscripts& s, Label label) {
  if (auto it = s.names.find(label); it != s.names.end()) return it->second;
  if (detail::is_label_code_point(label)) {
    std::string out;
    detail::append_utf8(out, char32_t(label));
    return out;
  }
  return fmt::format("#{}", label);
}

std::string to_string(const Subscripts& s) {
  auto term = [&](std::string& out, const std::vector<Label>& t) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (s.is_ellipsis_label(t[i])) {
        // A run of ellipsis labels prints as one `...` (expand() always produces a contiguous, right-aligned run).
        out += "...";
        while (i + 1 < t.size() && s.is_ellipsis_label(t[i + 1])) ++i;
        continue;
      }
      out += label_name(s, t[i]);
    }
  };
  std::string out;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (k) out += ',';
    term(out, s.inputs[k]);
  }
  out += "->";
  term(out, s.output);
  return out;
}

}  // namespace einstage::einsum
