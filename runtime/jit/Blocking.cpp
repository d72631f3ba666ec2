#include "runtime/jit/Blocking.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace einstage {

namespace {

std::string first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

// "48K" -> 49152, "2048K", "32M", "1G", "512" (bytes); 0 when unreadable.
int64_t parse_cache_size(const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value <= 0) return 0;
  const std::string unit(end, text.data() + text.size());
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

int64_t round_down(int64_t value, int64_t multiple, int64_t at_least) {
  return std::max(at_least, value / multiple * multiple);
}

}  // namespace

CacheInfo read_cache_info(const std::filesystem::path& root) {
  CacheInfo found;
  const std::filesystem::path dir = root / "sys/devices/system/cpu/cpu0/cache";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.path().filename().string().starts_with("index")) continue;
    const std::string level = first_line(entry.path() / "level"), type = first_line(entry.path() / "type");
    const int64_t size = parse_cache_size(first_line(entry.path() / "size"));
    if (size == 0 || type == "Instruction") continue;
    if (level == "1" && type == "Data") found.l1d = size;
    else if (level == "2") found.l2 = size;
    else if (level == "3") found.l3 = size;
  }
  if (found.l1d == 0) found.l1d = kFallbackCaches.l1d;
  if (found.l2 == 0) found.l2 = kFallbackCaches.l2;
  if (found.l3 == 0) found.l3 = kFallbackCaches.l3;
  return found;
}

const CacheInfo& host_cache_info() {
  static const CacheInfo info = read_cache_info("/");
  return info;
}

GettBlocking blocking_for(const CacheInfo& caches, int64_t elem_bytes, int64_t mr, int64_t nr) {
  GettBlocking b;
  b.kc = round_down(caches.l1d / (3 * nr * elem_bytes), 8, 8);
  // At least kMinKc while the B sliver still fits in half of L1d: every KC block streams C through memory once more.
  if (b.kc < kMinKc && nr * kMinKc * elem_bytes <= caches.l1d / 2) b.kc = kMinKc;
  const int64_t panel_row = b.kc * elem_bytes;  // bytes of one packed row (of A) or column (of B)
  b.mc = round_down((caches.l2 / 2 - 2 * nr * panel_row) / panel_row, mr, mr);
  b.nc = round_down(std::min<int64_t>(4096, caches.l3 / 2 / panel_row), nr, nr);
  return b;
}

int64_t direct_a_limit(const CacheInfo& caches) { return caches.l1d - caches.l1d / 6; }

int64_t lane_kc(const CacheInfo& caches, int64_t vector_bytes, int64_t mr, int64_t nr) {
  return round_down(direct_a_limit(caches) / ((mr + nr) * vector_bytes), 8, 8);
}

}  // namespace einstage
