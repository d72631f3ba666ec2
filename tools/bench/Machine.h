// Machine: what every benchmark program states about the machine it ran on, and the one place that decides how its
// peer processes load OpenBLAS. Part of tools/bench/ (header-only, not part of any library); tested by
// tests/tools/test_bench_machine.cpp on fake cpuid registers and core names.
//
//   bench::Machine m = bench::detect_machine();
//   fmt::print("{}\n", m.summary());    // "cpu: Intel(R) Xeon(R) Processor; ISA AVX-512, AVX2, FMA; 2 cores; ..."
//   report["machine"] = m.to_json();
//   std::string cmd = m.peer_env() + "/usr/bin/python3 peers.py";
//
// The CPU model comes from /proc/cpuinfo, the ISA from cpuid (an extension counts only when the OS saves its
// registers, XCR0), the core count from available_cpus() (affinity mask and cgroup quota). Peers run at their best:
// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE as the caller's environment sets them are reported but never handed to a peer
// (some machines set Haswell on an AVX-512 CPU, which would put NumPy, torch and the OpenBLAS column on AVX2 kernels).
// OpenBLAS picks its kernels ("core") from cpuid when it is loaded; the core it picks by itself is read in a child
// process with both variables unset (openblas_get_corename() of libopenblas.so.0). Debian's 0.3.21 does not know
// some newer CPUs and falls back to a slow generic core (on a Xeon with AVX-512 it picks "Prescott", SSE3 only), so
// OPENBLAS_CORETYPE=SkylakeX is forced for the peers only when the CPU has AVX-512 (F, VL, BW, DQ) and OpenBLAS's own
// pick has no AVX-512 kernels. Never on a CPU without AVX-512: SkylakeX kernels die there with "Illegal instruction".
#pragma once

#include "runtime/Cpus.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cpuid.h>
#include <dlfcn.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::bench {

/// The cpuid / xgetbv words the ISA is read from.
struct CpuidWords {
  uint32_t leaf1_ecx = 0;  // FMA bit 12, OSXSAVE bit 27, AVX bit 28
  uint32_t leaf7_ebx = 0;  // AVX2 bit 5, AVX512F 16, AVX512DQ 17, AVX512BW 30, AVX512VL 31
  uint64_t xcr0 = 0;       // OS-saved state: SSE|AVX = 0x6, opmask|ZMM = 0xe0
};

struct Isa {
  bool avx2 = false, fma = false, avx512 = false;  // avx512: F, VL, BW and DQ, as OpenBLAS's SkylakeX kernels need
  bool operator==(const Isa&) const = default;
};

inline Isa isa_from(const CpuidWords& w) {
  auto bit = [](uint64_t word, int b) { return ((word >> b) & 1) != 0; };
  const bool os_avx = bit(w.leaf1_ecx, 27) && (w.xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (w.xcr0 & 0xe0) == 0xe0;
  Isa isa;
  isa.fma = os_avx && bit(w.leaf1_ecx, 12) && bit(w.leaf1_ecx, 28);
  isa.avx2 = os_avx && bit(w.leaf1_ecx, 28) && bit(w.leaf7_ebx, 5);
  isa.avx512 =
      os_avx512 && bit(w.leaf7_ebx, 16) && bit(w.leaf7_ebx, 17) && bit(w.leaf7_ebx, 30) && bit(w.leaf7_ebx, 31);
  return isa;
}

/// "AVX-512, AVX2, FMA", "AVX2, FMA", "SSE only".
inline std::string isa_text(const Isa& isa) {
  std::vector<std::string> parts;
  if (isa.avx512) parts.push_back("AVX-512");
  if (isa.avx2) parts.push_back("AVX2");
  if (isa.fma) parts.push_back("FMA");
  if (parts.empty()) return "SSE only";
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// OpenBLAS cores whose kernels use AVX-512.
inline bool is_avx512_core(std::string_view core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

/// The OPENBLAS_CORETYPE to force on peers: "SkylakeX" when the CPU has AVX-512 and OpenBLAS, left alone (neither
/// variable set), picks a core without it; "" when nothing is to be forced (no AVX-512, a right pick, no OpenBLAS).
inline std::string openblas_core_to_force(const Isa& isa, const std::optional<std::string>& own_pick) {
  if (!own_pick || !isa.avx512 || is_avx512_core(*own_pick)) return "";
  return "SkylakeX";
}

struct Machine {
  std::string cpu_model;
  Isa isa;
  int cores = 1;                          // available_cpus()
  std::optional<std::string> openblas;    // the core OpenBLAS picks by itself; nullopt: libopenblas.so.0 not found
  std::string caller_coretype;            // OPENBLAS_CORETYPE as the caller's environment set it ("" = unset)
  std::string caller_l2_size;             // OPENBLAS_L2_SIZE likewise: reported, never handed to a peer
  std::string forced_core;                // what peers get as OPENBLAS_CORETYPE ("" = OpenBLAS's own pick)

  /// The core the peers run: the forced one, else OpenBLAS's own pick.
  std::string peer_core() const {
    if (!forced_core.empty()) return forced_core;
    return openblas ? *openblas : "no OpenBLAS";
  }
  /// Prefix for a peer's shell command: the caller's OpenBLAS variables removed, the forced core set if any:
  /// "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX ".
  std::string peer_env() const {
    return "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE " +
           (forced_core.empty() ? std::string() : "OPENBLAS_CORETYPE=" + forced_core + " ");
  }
  /// The same for a peer started without a shell: sets or unsets the variables in this (child) process.
  void apply_peer_env() const {
    ::unsetenv("OPENBLAS_CORETYPE");
    ::unsetenv("OPENBLAS_L2_SIZE");
    if (!forced_core.empty()) ::setenv("OPENBLAS_CORETYPE", forced_core.c_str(), 1);
  }

  std::string openblas_text() const {
    if (!openblas) return "OpenBLAS not found (libopenblas.so.0)";
    std::string caller;
    if (!caller_coretype.empty() || !caller_l2_size.empty())
      caller = fmt::format("; the environment's OPENBLAS_CORETYPE={} OPENBLAS_L2_SIZE={} not used for peers",
                           caller_coretype.empty() ? "(unset)" : caller_coretype,
                           caller_l2_size.empty() ? "(unset)" : caller_l2_size);
    if (!forced_core.empty())
      return fmt::format("OpenBLAS core {} (forced: OpenBLAS picks {} on this AVX-512 CPU){}", forced_core, *openblas,
                         caller);
    return fmt::format("OpenBLAS core {} (its own pick){}", *openblas, caller);
  }
  /// One line for a table's heading.
  std::string summary() const {
    return fmt::format("cpu: {}; ISA {}; {} cores available; {}", cpu_model, isa_text(isa), cores, openblas_text());
  }
  nlohmann::json to_json() const {
    return {{"cpu_model", cpu_model},
            {"isa", isa_text(isa)},
            {"cores", cores},
            {"openblas_own_core", openblas ? nlohmann::json(*openblas) : nlohmann::json(nullptr)},
            {"openblas_peer_core", peer_core()},
            {"openblas_forced", !forced_core.empty()},
            {"environment_openblas_coretype", caller_coretype},
            {"environment_openblas_l2_size", caller_l2_size}};
  }
};

inline CpuidWords read_cpuid() {
  CpuidWords w;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) w.leaf1_ecx = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) w.leaf7_ebx = b;
  if ((w.leaf1_ecx >> 27) & 1) {  // OSXSAVE: xgetbv is available
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    w.xcr0 = (uint64_t(hi) << 32) | lo;
  }
  return w;
}

inline std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

/// The core OpenBLAS picks by itself: openblas_get_corename() of libopenblas.so.0 loaded in a child process whose
/// environment has neither OPENBLAS_CORETYPE nor OPENBLAS_L2_SIZE. When this process has OpenBLAS loaded already
/// (a benchmark linking it), the child re-executes this program with EINSTAGE_BENCH_OPENBLAS_PROBE set, and
/// detect_machine() answers the probe before anything else. nullopt if OpenBLAS is not installed.
inline std::optional<std::string> read_openblas_own_core() {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], 1);
    ::unsetenv("OPENBLAS_CORETYPE");
    ::unsetenv("OPENBLAS_L2_SIZE");
    if (::dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD)) {  // loaded with the caller's variables: start afresh
      ::setenv("EINSTAGE_BENCH_OPENBLAS_PROBE", "1", 1);
      char* const args[] = {const_cast<char*>("einstage-openblas-probe"), nullptr};
      ::execv("/proc/self/exe", args);
      std::_Exit(1);
    }
    void* lib = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    auto corename = lib ? reinterpret_cast<char* (*)()>(::dlsym(lib, "openblas_get_corename")) : nullptr;
    if (!corename) std::_Exit(1);
    std::fputs(corename(), stdout);
    std::fflush(stdout);
    std::_Exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, size_t(n));
  ::close(fds[0]);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty())
    return std::nullopt;
  return out;
}

/// Why a peer's shell command failed, from its popen/system status: "killed by signal 4" (the shell reports a
/// child killed by signal N as status 128 + N) or "exit status 1".
inline std::string peer_failure(int status) {
  if (status == -1) return "could not be started";
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : status;
  return code > 128 ? fmt::format("killed by signal {}", code - 128) : fmt::format("exit status {}", code);
}

/// Runs a peer's shell command and reads its standard output as one JSON value. nullopt when it fails, with `why`
/// saying so ("the NumPy script failed: killed by signal 4"), so the caller marks its columns and prints the rest.
inline std::optional<nlohmann::json> run_peer_json(const std::string& command, std::string_view what,
                                                   std::string& why) {
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (pipe)
    if (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    else break;
  const int status = pipe ? ::pclose(pipe) : -1;
  if (status != 0) {
    why = fmt::format("{} failed: {}", what, peer_failure(status));
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception&) {
    why = fmt::format("{} printed no JSON", what);
    return std::nullopt;
  }
}

/// Detects the machine. Also ignores SIGPIPE, so a peer process that dies only fails its column: a write to its pipe
/// returns an error instead of killing the benchmark.
inline Machine detect_machine() {
  if (std::getenv("EINSTAGE_BENCH_OPENBLAS_PROBE")) {  // read_openblas_own_core()'s re-executed child
    void* lib = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    auto corename = lib ? reinterpret_cast<char* (*)()>(::dlsym(lib, "openblas_get_corename")) : nullptr;
    if (corename) std::fputs(corename(), stdout);
    std::fflush(stdout);
    std::_Exit(corename ? 0 : 1);
  }
  ::signal(SIGPIPE, SIG_IGN);
  Machine m;
  m.cpu_model = read_cpu_model();
  m.isa = isa_from(read_cpuid());
  m.cores = available_cpus();
  if (const char* own = std::getenv("EINSTAGE_BENCH_OPENBLAS_OWN_CORE")) {  // re-executed: the first run's readings
    if (*own) m.openblas = std::string(own);
    if (const char* caller = std::getenv("EINSTAGE_BENCH_CALLER_CORETYPE")) m.caller_coretype = caller;
    if (const char* caller = std::getenv("EINSTAGE_BENCH_CALLER_L2_SIZE")) m.caller_l2_size = caller;
  } else {
    if (const char* caller = std::getenv("OPENBLAS_CORETYPE")) m.caller_coretype = caller;
    if (const char* caller = std::getenv("OPENBLAS_L2_SIZE")) m.caller_l2_size = caller;
    m.openblas = read_openblas_own_core();
  }
  m.forced_core = openblas_core_to_force(m.isa, m.openblas);
  return m;
}

/// For a benchmark that links OpenBLAS, which reads OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE and OPENBLAS_NUM_THREADS when
/// it is loaded: re-executes the program once with the peers' environment (apply_peer_env) and `threads` OpenBLAS
/// threads, handing the first run's readings down. Returns in the re-executed process (or when exec fails, with the
/// environment unchanged).
inline void reexec_with_openblas_env(const Machine& m, int threads, char** argv) {
  if (std::getenv("EINSTAGE_BENCH_OPENBLAS_OWN_CORE")) return;
  ::setenv("EINSTAGE_BENCH_OPENBLAS_OWN_CORE", m.openblas.value_or("").c_str(), 1);
  ::setenv("EINSTAGE_BENCH_CALLER_CORETYPE", m.caller_coretype.c_str(), 1);
  ::setenv("EINSTAGE_BENCH_CALLER_L2_SIZE", m.caller_l2_size.c_str(), 1);
  m.apply_peer_env();
  ::setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 1);
  ::execv("/proc/self/exe", argv);
  std::perror("re-exec");
}

}  // namespace einstage::bench
