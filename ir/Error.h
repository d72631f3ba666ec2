// einstage::Error, the one exception type for user errors, and EIN_ASSERT for internal invariants.
//
// A user error is something the caller can fix: a bad subscript string, a shape that does not match, a malformed
// file. Its message starts lower-case, names the op / operand / label involved, shows actual vs expected and says
// how to fix it; it is composed at the throw site with fmt. A broken invariant inside einstage is a programming
// error: EIN_ASSERT prints file:line and aborts. Depends on fmt's core only (<fmt/core.h>: fmt::format and its
// compile-time checked format strings); a file that needs more of fmt (fmt::join, width and fill for einstage's
// types, ...) includes <fmt/format.h> itself, so the public headers stay light to compile (docs/performance.md,
// "Consumer compile time"). ToStringFormatter is how einstage's types become formattable without it.
#pragma once

#include <fmt/core.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace einstage {

/// What went wrong, coarsely, so callers can react without parsing messages.
enum class ErrorKind {
  invalid_argument,  // a value the caller passed is not acceptable
  parse,             // notation, IR text or JSON could not be read
  shape,             // ranks or extents do not agree
  dtype,             // element types do not agree or are unsupported
  io,                // a file could not be read or written
  unsupported,       // valid request that einstage does not implement
  not_found,         // a name (op, family, module, parameter) is unknown
  verification,      // a program broke an IR invariant
  runtime,           // failure while running (JIT, module loading, resources)
};

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

/// Throws einstage::Error with a message formatted at the call site.
template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& message);

/// The fmt::formatter of a type printed as its to_string(), for "{}" only: fmt/core.h alone cannot pad or align a
/// user type, and a spec such as "{:>8}" fails to compile (format `.to_string()` instead).
template <class T> struct ToStringFormatter {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const T& value, fmt::format_context& ctx) const {
    auto out = ctx.out();
    for (char c : value.to_string()) *out++ = c;
    return out;
  }
};
}  // namespace detail

}  // namespace einstage

/// An internal invariant; failure is a bug in einstage, not in the caller's input.
#define EIN_ASSERT(cond, ...)                                                                              \
  do {                                                                                                     \
    if (!(cond)) ::einstage::detail::assertion_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)
