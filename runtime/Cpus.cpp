#include "runtime/Cpus.h"

#include "ir/Config.h"
#include "runtime/Context.h"
#include "ir/Error.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace einstage {

namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

template <typename Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A path read below `root`: "/" + p for the real system, fixture + p in tests.
fs::path under(const fs::path& root, const fs::path& p) { return root / p.relative_path(); }

// mountinfo escapes space, tab, newline and backslash in paths as \ooo (three octal digits).
std::string unescape(std::string_view s) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 4 <= s.size() && octal(s[i + 1]) && octal(s[i + 2]) && octal(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Mount {
  std::string root;         // the directory of the hierarchy mounted here ("/" unless bind-mounted or namespaced)
  std::string mount_point;  // where it is mounted
};

bool has_option(std::string_view options, std::string_view name) {
  for (std::string_view o : split(options, ','))
    if (o == name) return true;
  return false;
}

// The cgroup2 mount (controller empty) or the v1 mount that carries `controller`.
std::optional<Mount> find_mount(std::string_view mountinfo, std::string_view controller) {
  for (std::string_view line : split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> before = split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> after = split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    const bool match = controller.empty() ? after[0] == "cgroup2"
                                          : after[0] == "cgroup" && has_option(after[2], controller);
    if (match) return Mount{unescape(before[3]), unescape(before[4])};
  }
  return std::nullopt;
}

// This process's cgroup path in the v2 hierarchy (controller empty) or in the v1 hierarchy carrying `controller`.
std::optional<std::string> find_cgroup(std::string_view proc_cgroup, std::string_view controller) {
  for (std::string_view line : split(proc_cgroup, '\n')) {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first), controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    const bool match = controller.empty() ? id == "0" && controllers.empty() : has_option(controllers, controller);
    if (match) return std::string(path);
  }
  return std::nullopt;
}

// The smallest limit read by `limit_in(dir)` from the process's cgroup directory up to the mount point.
template <typename LimitIn>
std::optional<double> smallest_limit(const fs::path& root, const Mount& mount, const std::string& cgroup,
                                     LimitIn&& limit_in) {
  // The cgroup path is relative to the hierarchy's root; the mount shows mount.root at mount.mount_point. A path
  // outside the mounted part (another cgroup namespace) leaves the mount point itself as the best guess.
  std::string relative;
  if (mount.root == "/")
    relative = cgroup;
  else if (cgroup.compare(0, mount.root.size(), mount.root) == 0 &&
           (cgroup.size() == mount.root.size() || cgroup[mount.root.size()] == '/'))
    relative = cgroup.substr(mount.root.size());
  const fs::path top = fs::path(mount.mount_point).lexically_normal();
  fs::path dir = (top / fs::path(relative).relative_path()).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "top/" when the process sits in the hierarchy's root
  if (const fs::path up = dir.lexically_relative(top); up.empty() || *up.begin() == "..") dir = top;
  std::optional<double> best;
  for (;;) {
    if (std::optional<double> limit = limit_in(under(root, dir)); limit && (!best || *limit < *best)) best = limit;
    if (dir == top) break;
    dir = dir.parent_path();
  }
  return best;
}

int affinity_cpus() {
  for (int capacity = 1024; capacity <= (1 << 16); capacity *= 4) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    if (!set) break;
    const size_t bytes = CPU_ALLOC_SIZE(capacity);
    CPU_ZERO_S(bytes, set);
    const int rc = sched_getaffinity(0, bytes, set);
    const int count = rc == 0 ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return std::max(1, count);
    if (errno != EINVAL) break;  // EINVAL: the kernel's mask is larger than ours
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

namespace cpus {

std::optional<double> parse_cpu_max(std::string_view text) {
  const std::vector<std::string_view> parts = split(trim(text), ' ');
  if (parts.size() != 2 || parts[0] == "max") return std::nullopt;
  std::optional<int64_t> quota = parse_int<int64_t>(parts[0]), period = parse_int<int64_t>(parts[1]);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> parse_cfs_quota(std::string_view quota_text, std::string_view period_text) {
  std::optional<int64_t> quota = parse_int<int64_t>(trim(quota_text)), period = parse_int<int64_t>(trim(period_text));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;  // -1: no limit
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> cgroup_cpu_limit(const fs::path& root) {
  const std::optional<std::string> mountinfo = read_file(under(root, "/proc/self/mountinfo"));
  const std::optional<std::string> proc_cgroup = read_file(under(root, "/proc/self/cgroup"));
  if (!mountinfo || !proc_cgroup) return std::nullopt;
  // v1 first: on a hybrid system the cpu controller sits in a v1 hierarchy while an empty cgroup2 tree is mounted.
  std::optional<Mount> v1 = find_mount(*mountinfo, "cpu");
  std::optional<std::string> v1_path = find_cgroup(*proc_cgroup, "cpu");
  if (v1 && v1_path)
    return smallest_limit(root, *v1, *v1_path, [](const fs::path& dir) -> std::optional<double> {
      std::optional<std::string> quota = read_file(dir / "cpu.cfs_quota_us");
      std::optional<std::string> period = read_file(dir / "cpu.cfs_period_us");
      return quota && period ? parse_cfs_quota(*quota, *period) : std::nullopt;
    });
  std::optional<Mount> v2 = find_mount(*mountinfo, "");
  std::optional<std::string> v2_path = find_cgroup(*proc_cgroup, "");
  if (v2 && v2_path)
    return smallest_limit(root, *v2, *v2_path, [](const fs::path& dir) -> std::optional<double> {
      std::optional<std::string> text = read_file(dir / "cpu.max");
      return text ? parse_cpu_max(*text) : std::nullopt;
    });
  return std::nullopt;
}

int cpus_from(int affinity, std::optional<double> quota) {
  int n = std::max(1, affinity);
  if (quota) n = std::min(n, static_cast<int>(std::min(std::ceil(*quota), 1e6)));
  return std::max(1, n);
}

}  // namespace cpus

int available_cpus() {
  static const int n = cpus::cpus_from(affinity_cpus(), cpus::cgroup_cpu_limit("/"));
  return n;
}

int threads_for(const Config& config) { return config.threads > 0 ? config.threads : available_cpus(); }

// default_context() throws on a bad EINSTAGE_NUM_THREADS on every call (a throwing static initialiser runs again).
int default_threads() { return default_context().threads(); }

}  // namespace einstage
