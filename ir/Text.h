// The two text helpers every reader in ir/ shares: trimming blanks and splitting a list at its top-level commas.
// Used by the text-form parser (Parser.cpp), the attribute readers (AttrText.cpp, split_attribute_text in
// Extension.cpp) and the type reader (Type.cpp), so that each reads the same blanks and the same nesting.
// Depends on nothing of einstage.
#pragma once

#include <string_view>
#include <vector>

namespace einstage {

/// `s` without leading and trailing blanks (space, tab, carriage return).
std::string_view trim(std::string_view s);

/// Splits "a, b, (c, d), [e, f]" at the commas outside parentheses and brackets, each item trimmed; blank text gives
/// no items.
std::vector<std::string_view> split_top_level(std::string_view s);

}  // namespace einstage
