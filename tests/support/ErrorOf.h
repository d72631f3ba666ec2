// error_of(f): the message of the einstage::Error that f throws, or "<no error>" when it throws none. The one helper
// every suite uses to pin error messages by their text (STYLE: errors are checked by message). Test-only; depends on
// ir/Error.h.
#pragma once

#include "ir/Error.h"

#include <string>
#include <string_view>

namespace einstage::test {

inline constexpr std::string_view kNoError = "<no error>";

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return std::string(kNoError);
}

}  // namespace einstage::test
