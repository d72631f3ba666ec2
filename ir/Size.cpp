#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

namespace einstage {

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    fail(ErrorKind::shape, "{}: {} * {} does not fit in 64 bits", what, a, b);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    fail(ErrorKind::shape, "{}: {} + {} does not fit in 64 bits", what, a, b);
  return r;
}

namespace {

// The product of the non-zero extents, and whether an extent is 0.
int64_t nonzero_product(std::span<const int64_t> extents, std::string_view what, bool& has_zero) {
  int64_t n = 1;
  has_zero = false;
  for (size_t i = 0; i < extents.size(); ++i) {
    const int64_t e = extents[i];
    if (e < 0)
      fail(ErrorKind::shape, "{} [{}]: extent {} of axis {} is negative; extents must be >= 0", what,
           fmt::join(extents, ","), e, i);
    if (e == 0) {
      has_zero = true;
      continue;
    }
    if (__builtin_mul_overflow(n, e, &n)) {
      const bool zero = std::find(extents.begin(), extents.end(), 0) != extents.end();
      fail(ErrorKind::shape, "{} [{}] has more elements than fit in 64 bits{}", what, fmt::join(extents, ","),
           zero ? " (counting its non-zero extents only, as NumPy does)" : "");
    }
  }
  return n;
}

}  // namespace

int64_t checked_product(std::span<const int64_t> extents, std::string_view what) {
  bool has_zero = false;
  const int64_t n = nonzero_product(extents, what, has_zero);
  return has_zero ? 0 : n;
}

int64_t checked_bytes(std::span<const int64_t> extents, size_t element_size, std::string_view what) {
  bool has_zero = false;
  const int64_t n = nonzero_product(extents, what, has_zero);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(element_size), &bytes))
    fail(ErrorKind::shape, "{} [{}] needs more bytes than fit in 64 bits ({} elements of {} bytes{})", what,
         fmt::join(extents, ","), n, element_size, has_zero ? ", counting its non-zero extents only" : "");
  return has_zero ? 0 : bytes;
}

int64_t machine_memory_bytes() {
#if defined(__linux__)
  struct sysinfo info {};
  if (sysinfo(&info) == 0) {
    const unsigned __int128 total =
        (static_cast<unsigned __int128>(info.totalram) + info.totalswap) * (info.mem_unit ? info.mem_unit : 1);
    if (total > 0 && total < static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()))
      return static_cast<int64_t>(total);
  }
#endif
  return std::numeric_limits<int64_t>::max();
}

bool fits_in_memory(int64_t bytes) {
  // Every machine einstage runs on has a GiB: small requests (most tensors) skip the system call.
  return bytes < (int64_t(1) << 30) || bytes <= machine_memory_bytes();
}

void fail_out_of_memory(int64_t bytes, std::string_view what) {
  const int64_t machine = machine_memory_bytes();
  if (bytes > machine)
    fail(ErrorKind::runtime, "out of memory allocating {} bytes ({}) for {}: this machine has {} of memory (RAM and "
         "swap)", bytes, human_bytes(bytes), what, human_bytes(machine));
  fail(ErrorKind::runtime, "out of memory allocating {} bytes ({}) for {}", bytes, human_bytes(bytes), what);
}

std::string human_bytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 6) v /= 1000, ++u;
  if (u == 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace einstage
