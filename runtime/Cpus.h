// Cpus: how many threads einstage runs on when the caller does not say. Stage: runtime. Depends on ir/Error.h and
// the standard library (Linux: sched_getaffinity and the cgroup files under /proc and /sys/fs/cgroup).
//
// The default is every CPU this process may use, like NumPy's OpenBLAS and PyTorch: the CPUs in its affinity mask
// (taskset, numactl, a container's cpuset), capped by the CPU quota of its cgroup (docker --cpus, systemd CPUQuota,
// Kubernetes limits), rounded up. EINSTAGE_NUM_THREADS overrides it; a thread-count option (EinsumOptions::threads,
// RuntimeOptions::threads, the command line's --threads) overrides both, and 0 there means "the default":
//
//   explicit option (1..) > EINSTAGE_NUM_THREADS > available_cpus()
//
// Both values are computed once per process. An EINSTAGE_NUM_THREADS that is not a whole number from 1 to 1024 is
// an einstage::Error naming the variable (ir/Config.h reads and checks it), raised by every default_threads() call,
// never a silent fallback. The parsers below are exposed so tests can feed them fixture files.
#pragma once

#include "ir/Config.h"

#include <filesystem>
#include <optional>
#include <string_view>

namespace einstage {

/// CPUs this process may run on: the affinity mask's count capped by the cgroup CPU quota (rounded up), >= 1.
int available_cpus();

/// Threads a context with this config runs on: config.threads when set (> 0), else available_cpus().
int threads_for(const Config& config);

/// Threads to use for "the default": default_context()'s (runtime/Context.h), i.e. EINSTAGE_NUM_THREADS when set,
/// else available_cpus(). Throws einstage::Error (invalid_argument) when the variable is set to anything but a whole
/// number from 1 to 1024.
int default_threads();

/// The largest thread count any option or EINSTAGE_NUM_THREADS accepts.
inline constexpr int kMaxThreads = Config::kMaxThreads;

namespace cpus {

/// CPUs granted by a cgroup v2 `cpu.max` ("150000 100000" = 1.5); nullopt for "max ..." (no limit) or bad text.
std::optional<double> parse_cpu_max(std::string_view text);

/// CPUs granted by cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`; nullopt for quota -1 (no limit) or bad text.
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);

/// The CPU quota of this process's cgroup: the smallest limit on the path from its cgroup up to the hierarchy's
/// root, found through proc/self/mountinfo and proc/self/cgroup. Every path is read below `root` ("/" for the real
/// system, a fixture directory in tests). nullopt when no limit is set or the files are missing or unreadable.
std::optional<double> cgroup_cpu_limit(const std::filesystem::path& root);

/// min(affinity_cpus, ceil(quota)), at least 1.
int cpus_from(int affinity_cpus, std::optional<double> quota);

}  // namespace cpus

}  // namespace einstage
