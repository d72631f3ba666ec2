#include "runtime/jit/Blocking.h"

#include <algorithm>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
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

CacheInfo read_cache_info(const std::filesystem::path& root) { return merge_cache_info(root, CacheInfo{}); }

CacheInfo merge_cache_info(const std::filesystem::path& root, const CacheInfo& from_cpuid) {
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
  auto pick = [](int64_t sysfs, int64_t cpuid, int64_t fallback) { return sysfs ? sysfs : cpuid ? cpuid : fallback; };
  found.l1d = pick(found.l1d, from_cpuid.l1d, kFallbackCaches.l1d);
  found.l2 = pick(found.l2, from_cpuid.l2, kFallbackCaches.l2);
  found.l3 = pick(found.l3, from_cpuid.l3, kFallbackCaches.l3);
  return found;
}

CacheInfo cpuid_cache_info(CpuidQuery query) {
  CacheInfo found;
  const uint32_t max_basic = query(0, 0)[0], max_extended = query(0x80000000u, 0)[0];
  // Deterministic cache parameters: one subleaf per cache until type 0.
  for (uint32_t leaf : {4u, 0x8000001Du}) {
    if (leaf < 0x80000000u ? max_basic < leaf : max_extended < leaf) continue;
    for (uint32_t sub = 0; sub < 16; ++sub) {
      const std::array<uint32_t, 4> r = query(leaf, sub);
      const uint32_t type = r[0] & 31, level = (r[0] >> 5) & 7;
      if (type == 0) break;
      const int64_t size = int64_t((r[1] >> 22) + 1) * int64_t(((r[1] >> 12) & 1023) + 1) *
                           int64_t((r[1] & 4095) + 1) * (int64_t(r[2]) + 1);
      if (level == 1 && type == 1) found.l1d = size;
      else if (level == 2 && type != 2) found.l2 = size;
      else if (level == 3 && type != 2) found.l3 = size;
    }
    if (found.l1d) return found;
  }
  // AMD's legacy leaves (what a guest that hides the topology leaf still answers).
  if (max_extended >= 0x80000005u && !found.l1d) found.l1d = int64_t(query(0x80000005u, 0)[2] >> 24) << 10;
  if (max_extended >= 0x80000006u) {
    const std::array<uint32_t, 4> r = query(0x80000006u, 0);
    if (!found.l2) found.l2 = int64_t(r[2] >> 16) << 10;
    if (!found.l3) found.l3 = int64_t(r[3] >> 18) * (512 << 10);
  }
  return found;
}

std::array<uint32_t, 4> host_cpuid(uint32_t leaf, uint32_t subleaf) {
  std::array<uint32_t, 4> r{};
#if defined(__x86_64__) || defined(__i386__)
  const uint32_t max = __get_cpuid_max(leaf & 0x80000000u, nullptr);
  if (max >= leaf) __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
#else
  (void)leaf, (void)subleaf;
#endif
  return r;
}

const CacheInfo& host_cache_info() {
  static const CacheInfo info = merge_cache_info("/", cpuid_cache_info(host_cpuid));
  return info;
}

GettBlocking blocking_for(const CacheInfo& caches, int64_t elem_bytes, int64_t mr, int64_t nr) {
  GettBlocking b;
  b.kc = round_down(caches.l1d / (3 * nr * elem_bytes), 8, 8);
  // At least kMinKc while the B sliver still fits in half of L1d: every KC block streams C through memory once more.
  if (b.kc < kMinKc && nr * kMinKc * elem_bytes <= caches.l1d / 2) b.kc = kMinKc;
  return blocking_for_kc(caches, elem_bytes, mr, nr, b.kc);
}

GettBlocking blocking_for_kc(const CacheInfo& caches, int64_t elem_bytes, int64_t mr, int64_t nr, int64_t kc) {
  GettBlocking b;
  b.kc = kc;
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
