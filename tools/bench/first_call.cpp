// einstage_bench_first_call: the process's first call of the guide's TRG step (docs/examples/08_trg_step.cpp,
// d = 3, chi = 4) with a warm kernel cache, measured in fresh processes (issue 40: <= 2 ms), with the price of a
// page fault on this machine measured in the same processes, so that "faults x cost per fault" is a number.
//
// Each child process builds a Runtime with einsum and linalg, traces and prepares the step (not timed), then times
// the first Executable::run (wall, with its CLOCK_MONOTONIC start and end in seconds for `perf report --time`;
// thread and process CPU time; the process's minor page faults over the call), a second call, and the first call on
// a second Runtime (a fresh context in a process no longer cold). Then it probes the fault cost: 2000 fresh anonymous
// pages touched one byte each, up to 2000 pages of the runtime's shared library mapped afresh and read one byte each
// (microseconds per fault counted by getrusage), and one cpuid. The parent warms the kernel cache with one child,
// then runs --runs children one after the other and prints each and the medians.
//
// Usage: einstage_bench_first_call [--runs N] [--cache-dir DIR] [--json FILE]
//        (without --cache-dir: a fresh directory under the temporary directory, warmed by a first child, removed at
//        the end)
#include "tools/bench/Machine.h"

// The step itself, trg_step(d, chi), from the guide's example source (its main renamed out of the way), so this
// measures the very program docs/guide.md shows.
#define main trg_step_example_main
#include "docs/examples/08_trg_step.cpp"
#undef main

#include <einstage/einstage.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace einstage;
using json = nlohmann::json;

namespace {

// Wall time, CPU time (the calling thread's and the whole process's, from clock_gettime: getrusage's CPU times are
// sampled at the scheduler tick, too coarse for a call of a few milliseconds) and the process's page faults.
struct Usage {
  double wall_ms, thread_cpu_ms, process_cpu_ms;
  long minflt, majflt;
  static Usage now() {
    auto ms = [](clockid_t clock) {
      timespec ts{};
      ::clock_gettime(clock, &ts);
      return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
    };
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    return {ms(CLOCK_MONOTONIC), ms(CLOCK_THREAD_CPUTIME_ID), ms(CLOCK_PROCESS_CPUTIME_ID), r.ru_minflt, r.ru_majflt};
  }
};

// Microseconds per minor fault when touching `pages` pages of `base` (one byte each): read or write.
double touch_cost_us(volatile char* base, size_t pages, bool write, long* faults) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const Usage u0 = Usage::now();
  char sink = 0;
  for (size_t p = 0; p < pages; ++p) {
    if (write) base[p * page] = 1;
    else sink = static_cast<char>(sink + base[p * page]);
  }
  const Usage u1 = Usage::now();
  (void)sink;
  *faults = u1.minflt - u0.minflt;
  return *faults > 0 ? (u1.wall_ms - u0.wall_ms) * 1e3 / static_cast<double>(*faults) : 0.0;
}

json fault_probe() {
  const size_t pages = 2000, page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  json out;
  long faults = 0;
  void* anon = ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anon != MAP_FAILED) {
    out["anon_write_us"] = touch_cost_us(static_cast<char*>(anon), pages, true, &faults);
    out["anon_write_faults"] = faults;
    ::munmap(anon, pages * page);
  }
  // A shared library already in the page cache (the one holding the runtime, as /proc/self/maps names it), mapped
  // afresh and read one byte a page: what a first touch of a library's code costs. The kernel maps several resident
  // pages per fault (fault-around), so the cost is per fault taken and the faults are fewer than the pages.
  std::string library;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; library.empty() && std::getline(maps, line);)
    if (const size_t at = line.find('/');
        at != std::string::npos && line.find("libeinstage_runtime") != std::string::npos)
      library = line.substr(at);
  if (FILE* f = library.empty() ? nullptr : std::fopen(library.c_str(), "rb")) {
    const size_t file_pages = std::min(pages, static_cast<size_t>(std::filesystem::file_size(library)) / page);
    void* file = ::mmap(nullptr, file_pages * page, PROT_READ, MAP_PRIVATE, ::fileno(f), 0);
    if (file != MAP_FAILED) {
      out["file_read_us"] = touch_cost_us(static_cast<char*>(file), file_pages, false, &faults);
      out["file_read_faults"] = faults;
      out["file_read_pages"] = file_pages;
      ::munmap(file, file_pages * page);
    }
    std::fclose(f);
  }
#if defined(__x86_64__)
  // cpuid, which a virtual machine traps (the JIT reads the host's name, features and caches with it).
  const double t0 = Usage::now().wall_ms;
  for (unsigned i = 0; i < 200; ++i) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(4, i & 3, a, b, c, d);
    asm volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d));
  }
  out["cpuid_us"] = (Usage::now().wall_ms - t0) * 1e3 / 200;
#endif
  return out;
}

int child() {
  const int64_t d = 3, chi = 4;
  std::vector<double> values(static_cast<size_t>(d * d * d * d));
  for (size_t k = 0; k < values.size(); ++k) values[k] = std::cos(0.4 + 0.73 * std::pow(double(k), 1.5));
  const Tensor t = Tensor::from_col_major<double>({d, d, d, d}, values);
  Runtime rt;
  add_installed_modules(rt);
  Executable forward = rt.prepare(trg_step(d, chi));
  const Usage u0 = Usage::now();
  std::vector<Tensor> out = forward.run({t});
  const Usage u1 = Usage::now();
  const Usage s0 = Usage::now();
  forward.run({t});
  const Usage s1 = Usage::now();
  // The first call of the same step on a second Runtime (its own context: JIT, kernel loads, plans) in this process,
  // whose code and libraries the first call has already touched: what is left when the process is no longer cold.
  Runtime other;
  add_installed_modules(other);
  Executable again = other.prepare(trg_step(d, chi));
  const Usage o0 = Usage::now();
  again.run({t});
  const Usage o1 = Usage::now();
  json result = {{"first_call_ms", u1.wall_ms - u0.wall_ms}, {"thread_cpu_ms", u1.thread_cpu_ms - u0.thread_cpu_ms},
                 {"process_cpu_ms", u1.process_cpu_ms - u0.process_cpu_ms},
                 {"minor_faults", u1.minflt - u0.minflt}, {"major_faults", u1.majflt - u0.majflt},
                 {"second_call_ms", s1.wall_ms - s0.wall_ms},
                 {"other_runtime_first_call_ms", o1.wall_ms - o0.wall_ms},
                 {"other_runtime_faults", o1.minflt - o0.minflt}, {"trace", out.at(0).item<double>()},
                 {"first_call_start_s", u0.wall_ms * 1e-3}, {"first_call_end_s", u1.wall_ms * 1e-3}};
  result.update(fault_probe());
  std::puts(result.dump().c_str());
  return 0;
}

std::optional<json> spawn(const std::string& self, const std::string& cache_dir) {
  const std::string command = fmt::format("EINSTAGE_CACHE_DIR='{}' '{}' --child", cache_dir, self);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string output;
  char buffer[1024];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  if (::pclose(pipe) != 0 || output.empty()) return std::nullopt;
  return json::parse(output);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 11;
  std::string cache_dir, json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--child") return child();
    if (a == "--runs" && i + 1 < argc) runs = std::stoi(argv[++i]);
    else if (a == "--cache-dir" && i + 1 < argc) cache_dir = argv[++i];
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else {
      fmt::print(stderr, "usage: einstage_bench_first_call [--runs N] [--cache-dir DIR] [--json FILE]\n");
      return 2;
    }
  }
  // Before anything else: detect_machine() answers its OpenBLAS probe (this program re-executed) and exits there.
  const bench::Machine machine = bench::detect_machine();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  struct RemovedAtReturn {  // the cache directory this run made, if it made one
    std::string dir;
    ~RemovedAtReturn() {
      std::error_code ignored;
      if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }
  } made;
  if (cache_dir.empty()) {
    cache_dir = std::filesystem::temp_directory_path() / fmt::format("einstage-first-call-{}", ::getpid());
    std::filesystem::create_directories(cache_dir);
    made.dir = cache_dir;
    if (!spawn(self, cache_dir)) {  // compiles the step's kernels into the empty cache
      fmt::print(stderr, "the warming child failed\n");
      return 1;
    }
  }
  fmt::print("{}\nthe TRG step's first call in a fresh process, warm kernel cache, {} processes\n",
             machine.summary(), runs);
  fmt::print("{:>6} {:>9} {:>10} {:>7} {:>10} {:>10} {:>12} {:>12} {:>9}\n", "run", "first ms", "thread cpu", "faults",
             "second ms", "2nd rt ms", "anon us/flt", "file us/flt", "cpuid us");
  std::vector<double> first, cpu, faults, second, other, anon, file, cpuid, floor_ms;
  json all = json::array();
  for (int r = 0; r < runs; ++r) {
    std::optional<json> j = spawn(self, cache_dir);
    if (!j) {
      fmt::print(stderr, "child {} failed\n", r);
      return 1;
    }
    first.push_back((*j)["first_call_ms"].get<double>());
    cpu.push_back((*j)["thread_cpu_ms"].get<double>());
    faults.push_back((*j)["minor_faults"].get<double>());
    second.push_back((*j)["second_call_ms"].get<double>());
    other.push_back((*j)["other_runtime_first_call_ms"].get<double>());
    anon.push_back(j->value("anon_write_us", 0.0));
    file.push_back(j->value("file_read_us", 0.0));
    cpuid.push_back(j->value("cpuid_us", 0.0));
    floor_ms.push_back(faults.back() * anon.back() * 1e-3);
    fmt::print("{:>6} {:>9.3f} {:>10.3f} {:>7} {:>10.3f} {:>10.3f} {:>12.2f} {:>12.2f} {:>9.2f}\n", r, first.back(),
               cpu.back(), faults.back(), second.back(), other.back(), anon.back(), file.back(), cpuid.back());
    all.push_back(*j);
  }
  fmt::print("median {:>9.3f} {:>10.3f} {:>7} {:>10.3f} {:>10.3f} {:>12.2f} {:>12.2f} {:>9.2f}\n", median(first),
             median(cpu), median(faults), median(second), median(other), median(anon), median(file), median(cpuid));
  // A fault on a code page of a library already mapped costs about what a fresh anonymous page does here (populating
  // the libraries' text before the call removed 52 faults and 0.62 ms; docs/performance.md), so this is roughly the
  // faults' share of the call.
  fmt::print("faults x the cost of a fresh anonymous page, per process: median {:.3f} ms\n", median(floor_ms));
  if (!json_path.empty())
    std::ofstream(json_path) << json{{"machine", machine.summary()}, {"runs", all},
                                     {"median_first_call_ms", median(first)}, {"median_minor_faults", median(faults)}}
                                    .dump(1);
  return 0;
}
