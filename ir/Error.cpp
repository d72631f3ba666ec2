#include "ir/Error.h"

#include <cstdio>
#include <cstdlib>

namespace einstage {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return "invalid argument";
    case ErrorKind::parse: return "parse error";
    case ErrorKind::shape: return "shape error";
    case ErrorKind::dtype: return "dtype error";
    case ErrorKind::io: return "i/o error";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::not_found: return "not found";
    case ErrorKind::verification: return "verification error";
    case ErrorKind::runtime: return "runtime error";
  }
  return "error";
}

namespace detail {
void assertion_failed(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "einstage internal error: %s:%d: assertion `%s` failed%s%s\n", file, line, expr,
               message.empty() ? "" : ": ", message.c_str());
  std::abort();
}
}  // namespace detail

}  // namespace einstage
