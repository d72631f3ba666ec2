// Memory sizes as text (see MemorySize.h).
#include "extensions/einsum/planner/MemorySize.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

namespace einstage::einsum {

namespace {

struct Unit {
  std::string_view name;
  int shift;
};
constexpr Unit kUnits[] = {{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}};

}  // namespace

int64_t parse_memory_size(std::string_view text, std::string_view what) {
  auto bad = [&]() -> int64_t {
    fail(ErrorKind::parse, "{} {} is not a memory size; write a whole number followed by B, KiB, MiB or GiB, "
         "e.g. 256MiB", what, quote_for_message(text));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return bad();
  const std::string_view unit = text.substr(digits);
  int shift = -1;
  for (const Unit& u : kUnits)
    if (unit == u.name) shift = u.shift;
  if (shift < 0) return bad();
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec != std::errc() || n > (std::numeric_limits<int64_t>::max() >> shift))
    fail(ErrorKind::parse, "{} {} is too large; the largest memory size is 8191PiB", what, quote_for_message(text));
  if (n == 0)
    fail(ErrorKind::parse, "{} {} is zero; give a positive memory size, e.g. 256MiB", what, quote_for_message(text));
  return n << shift;
}

std::string format_memory_size(int64_t bytes) {
  for (const Unit& u : kUnits)
    if (bytes != 0 && bytes % (int64_t{1} << u.shift) == 0) return fmt::format("{}{}", bytes >> u.shift, u.name);
  return fmt::format("{}B", bytes);
}

int64_t round_up_memory_size(int64_t bytes) {
  for (const Unit& u : kUnits) {
    const int64_t unit = int64_t{1} << u.shift;
    if (bytes >= unit) return (bytes + unit - 1) / unit * unit;
  }
  return bytes;
}

}  // namespace einstage::einsum
