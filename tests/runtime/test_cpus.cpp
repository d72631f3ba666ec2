// runtime/Cpus.h: the default thread count. The cgroup readers run on fixture trees (mountinfo, /proc/self/cgroup
// and controller files written into a temporary directory), so v1, v2, nested and namespaced layouts are all
// checked on any machine. The "default threads:" cases also run as their own ctest processes with
// EINSTAGE_NUM_THREADS set (runtime_threads_env_3, runtime_threads_env_bad), because it is read once per process.
#include "runtime/Cpus.h"

#include "ir/Error.h"
#include "runtime/Runtime.h"
#include "runtime/ThreadPool.h"
#include "support/ErrorOf.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

using namespace einstage;
using einstage::test::error_of;
using einstage::test::kNoError;

namespace {

std::string bad_value_message(const std::string& value) {
  return "environment variable EINSTAGE_NUM_THREADS is '" + value +
         "'; expected a whole number of threads from 1 to 1024, or unset it to use every CPU this process may use";
}

// A fake root: files written at paths relative to it, as cgroup_cpu_limit reads them.
struct FakeRoot {
  test::TempDir dir;
  void write(const std::string& path, const std::string& text) const {
    const std::filesystem::path p = dir.path() / std::filesystem::path(path).relative_path();
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::optional<double> limit() const { return cpus::cgroup_cpu_limit(dir.path()); }
};

constexpr const char* kV2Mount =
    "24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

}  // namespace

TEST_CASE("EINSTAGE_NUM_THREADS: a whole number from 1 to 1024, anything else an error naming the variable") {
  auto threads = [](const std::string& v) { return Config::from({{"EINSTAGE_NUM_THREADS", v}}).threads; };
  CHECK(threads("1") == 1);
  CHECK(threads("12") == 12);
  CHECK(threads("1024") == 1024);
  CHECK(threads("") == 0);  // empty is unset: every CPU
  for (std::string bad : {"0", "-2", "1025", "two", "4 ", " 4", "3.5", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK(error_of([&] { threads(bad); }) == bad_value_message(bad));
  }
}

TEST_CASE("cgroup CPU quota files: v2 cpu.max and v1 cfs quota / period") {
  CHECK(cpus::parse_cpu_max("150000 100000\n") == 1.5);
  CHECK(cpus::parse_cpu_max("200000 100000") == 2.0);
  CHECK(cpus::parse_cpu_max("max 100000\n") == std::nullopt);
  CHECK(cpus::parse_cpu_max("0 100000") == std::nullopt);
  CHECK(cpus::parse_cpu_max("150000") == std::nullopt);
  CHECK(cpus::parse_cpu_max("lots of cpus") == std::nullopt);
  CHECK(cpus::parse_cfs_quota("50000\n", "100000\n") == 0.5);
  CHECK(cpus::parse_cfs_quota("-1\n", "100000\n") == std::nullopt);
  CHECK(cpus::parse_cfs_quota("50000", "0") == std::nullopt);
}

TEST_CASE("available CPUs: the affinity count capped by the quota rounded up, at least 1") {
  CHECK(cpus::cpus_from(8, std::nullopt) == 8);
  CHECK(cpus::cpus_from(8, 1.5) == 2);
  CHECK(cpus::cpus_from(8, 2.0) == 2);
  CHECK(cpus::cpus_from(8, 0.25) == 1);
  CHECK(cpus::cpus_from(2, 16.0) == 2);
  CHECK(cpus::cpus_from(0, std::nullopt) == 1);
  CHECK(cpus::cpus_from(4, 1e30) == 4);
  const int n = available_cpus();
  CHECK(n >= 1);
  CHECK(n <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_CASE("cgroup v2: a container whose cgroup is the namespace root (docker --cpus=1.5)") {
  FakeRoot root;
  root.write("/proc/self/mountinfo", kV2Mount);
  root.write("/proc/self/cgroup", "0::/\n");
  root.write("/sys/fs/cgroup/cpu.max", "150000 100000\n");
  CHECK(root.limit() == 1.5);
}

TEST_CASE("cgroup v2: the smallest limit on the path up to the root counts (systemd slice over a scope)") {
  FakeRoot root;
  root.write("/proc/self/mountinfo", kV2Mount);
  root.write("/proc/self/cgroup", "0::/user.slice/app.scope\n");
  root.write("/sys/fs/cgroup/user.slice/app.scope/cpu.max", "max 100000\n");
  root.write("/sys/fs/cgroup/user.slice/cpu.max", "300000 100000\n");
  root.write("/sys/fs/cgroup/cpu.max", "max 100000\n");
  CHECK(root.limit() == 3.0);
  root.write("/sys/fs/cgroup/user.slice/app.scope/cpu.max", "100000 100000\n");
  CHECK(root.limit() == 1.0);
}

TEST_CASE("cgroup v2: no limit anywhere, or no readable files, is no quota") {
  FakeRoot root;
  CHECK(root.limit() == std::nullopt);  // no mountinfo at all
  root.write("/proc/self/mountinfo", kV2Mount);
  root.write("/proc/self/cgroup", "0::/user.slice\n");
  CHECK(root.limit() == std::nullopt);  // no cpu.max files
  root.write("/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
  CHECK(root.limit() == std::nullopt);
}

TEST_CASE("cgroup v2: a cgroup path outside the mounted part reads the mount point itself") {
  FakeRoot root;
  root.write("/proc/self/mountinfo",
             "30 24 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  root.write("/proc/self/cgroup", "0::/../../other\n");
  root.write("/sys/fs/cgroup/cpu.max", "50000 100000\n");
  CHECK(root.limit() == 0.5);
}

TEST_CASE("cgroup v1 (hybrid host): the cpu controller's hierarchy, with the mount's root stripped") {
  FakeRoot root;
  root.write("/proc/self/mountinfo",
             "24 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
             "31 24 0:27 / /sys/fs/cgroup/unified rw shared:5 - cgroup2 cgroup2 rw\n"
             "32 24 0:28 / /sys/fs/cgroup/cpu,cpuacct rw shared:6 - cgroup cgroup rw,cpu,cpuacct\n"
             "33 24 0:29 / /sys/fs/cgroup/memory rw shared:7 - cgroup cgroup rw,memory\n");
  root.write("/proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n");
  root.write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
  root.write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  CHECK(root.limit() == 2.5);

  // Inside the container the hierarchy's /docker/abc is what is mounted, at a path with an escaped space.
  FakeRoot inside;
  inside.write("/proc/self/mountinfo",
               "40 30 0:28 /docker/abc /sys/fs/cgroup/cpu\\040here rw - cgroup cgroup rw,cpu\n");
  inside.write("/proc/self/cgroup", "4:cpu:/docker/abc\n");
  inside.write("/sys/fs/cgroup/cpu here/cpu.cfs_quota_us", "100000\n");
  inside.write("/sys/fs/cgroup/cpu here/cpu.cfs_period_us", "50000\n");
  CHECK(inside.limit() == 2.0);
}

TEST_CASE("default threads: EINSTAGE_NUM_THREADS, else every available CPU; a bad value is an error, never a guess") {
  // ctest runs this case unset (the runtime suite), with 3 (runtime_threads_env_3) and with 3x
  // (runtime_threads_env_bad).
  const char* env = std::getenv("EINSTAGE_NUM_THREADS");
  INFO("EINSTAGE_NUM_THREADS=" << (env ? env : "(unset)"));
  if (env && error_of([&] { Config::from({{"EINSTAGE_NUM_THREADS", env}}); }) != kNoError) {
    const std::string message = bad_value_message(env);
    CHECK(error_of([] { default_threads(); }) == message);
    CHECK(error_of([] { default_threads(); }) == message);  // every call, not only the first
    CHECK(error_of([] { default_pool(); }) == message);
    CHECK(error_of([] { Runtime rt; }) == message);
    CHECK(error_of([] { Runtime rt(RuntimeOptions{1}); }) == kNoError);  // an explicit count needs no default
    CHECK(error_of([] { Runtime rt(RuntimeOptions{2}); }) == kNoError);
    return;
  }
  const int expected = env ? std::atoi(env) : available_cpus();
  CHECK(default_threads() == expected);
  CHECK(default_pool().size() == expected);
  CHECK(&default_pool() == &default_pool());  // one pool per process
  Runtime shared;
  CHECK(shared.pool() == &default_pool());
  Runtime inline_rt(RuntimeOptions{1});
  CHECK(inline_rt.pool() == nullptr);
  Runtime own(RuntimeOptions{2});
  REQUIRE(own.pool() != nullptr);
  CHECK(own.pool() != &default_pool());
  CHECK(own.pool()->size() == 2);
}

TEST_CASE("RuntimeOptions::threads: 0 is the default, a negative count or one above 1024 an error") {
  CHECK(error_of([] { Runtime rt(RuntimeOptions{-1}); }) ==
        "RuntimeOptions::threads is -1; expected 0 (the default: every CPU this process may use) or a count from 1 "
        "to 1024");
  CHECK(error_of([] { Runtime rt(RuntimeOptions{1025}); }) ==
        "RuntimeOptions::threads is 1025; expected 0 (the default: every CPU this process may use) or a count from 1 "
        "to 1024");
}
