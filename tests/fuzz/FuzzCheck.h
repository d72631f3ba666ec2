// What every fuzz target shares: the input as a string_view, and fuzz_check(), which stops the run with the input's
// property that failed (libFuzzer then saves the input as a crash file).
//
// A target feeds the bytes to one reader. An einstage::Error is the expected answer to malformed input and is
// swallowed; any other exception escapes and aborts (libFuzzer reports it), as do sanitizer findings. Accepted input
// is printed back and read again: the second reading must give the same value (fuzz_check). Depends on ir/Error.h.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace einstage::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

/// Aborts with `what` when `ok` is false; `detail` (e.g. the printed form) is shown too.
inline void fuzz_check(bool ok, const char* what, std::string_view detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property failed: %s\n%.*s\n", what, int(detail.size()), detail.data());
  std::abort();
}

}  // namespace einstage::fuzz
