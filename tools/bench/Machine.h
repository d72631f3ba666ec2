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
// registers, XCR0), the core count from available_cpus() (affinity mask and cgroup quota). OpenBLAS picks its kernels
// ("core") from cpuid when it is loaded; Debian's 0.3.21 does not know newer CPUs and falls back to a slow generic
// core (on a Xeon with AVX-512 it picks "Prescott", SSE3 only). So: the core OpenBLAS picks by itself is read
// (openblas_get_corename() of libopenblas.so.0), and OPENBLAS_CORETYPE=SkylakeX is forced for the peers only when the
// CPU has AVX-512 (F, VL, BW, DQ) and OpenBLAS picked a core without AVX-512 kernels. Never on a CPU without AVX-512:
// SkylakeX kernels die there with "Illegal instruction". An OPENBLAS_CORETYPE the caller set is left alone.
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

/// The OPENBLAS_CORETYPE to force on peers: "SkylakeX" when the CPU has AVX-512 and OpenBLAS, left alone, picked a
/// core without it; "" when nothing is to be forced (no AVX-512, a right pick, no OpenBLAS, or the caller set
/// OPENBLAS_CORETYPE already).
inline std::string openblas_core_to_force(const Isa& isa, const std::optional<std::string>& detected, bool caller_set) {
  if (caller_set || !detected || !isa.avx512 || is_avx512_core(*detected)) return "";
  return "SkylakeX";
}

struct Machine {
  std::string cpu_model;
  Isa isa;
  int cores = 1;                          // available_cpus()
  std::optional<std::string> openblas;    // the core OpenBLAS picks by itself; nullopt: libopenblas.so.0 not found
  std::string caller_coretype;            // OPENBLAS_CORETYPE as the caller set it ("" = unset)
  std::string forced_core;                // what peers get as OPENBLAS_CORETYPE ("" = nothing forced)

  /// The core the peers run: the forced one, the caller's, or OpenBLAS's own pick.
  std::string peer_core() const {
    if (!forced_core.empty()) return forced_core;
    if (!caller_coretype.empty()) return caller_coretype;
    return openblas ? *openblas : "no OpenBLAS";
  }
  /// Prefix for a peer's shell command: "OPENBLAS_CORETYPE=SkylakeX " or "".
  std::string peer_env() const { return forced_core.empty() ? "" : "OPENBLAS_CORETYPE=" + forced_core + " "; }

  std::string openblas_text() const {
    if (!openblas) return "OpenBLAS not found (libopenblas.so.0)";
    if (!caller_coretype.empty())
      return fmt::format("OpenBLAS core {} (OPENBLAS_CORETYPE set by the caller)", caller_coretype);
    if (!forced_core.empty())
      return fmt::format("OpenBLAS core {} (forced: OpenBLAS picks {} on this AVX-512 CPU)", forced_core, *openblas);
    return fmt::format("OpenBLAS core {} (its own pick)", *openblas);
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
            {"openblas_forced", !forced_core.empty()}};
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

/// The core OpenBLAS picks in this process's environment (what openblas_get_corename() says), loading
/// libopenblas.so.0 if it is not linked in already; nullopt if it is not installed.
inline std::optional<std::string> read_openblas_core() {
  void* lib = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::nullopt;
  auto corename = reinterpret_cast<char* (*)()>(::dlsym(lib, "openblas_get_corename"));
  std::optional<std::string> core;
  if (corename) core = std::string(corename());
  return core;  // the library stays loaded: unloading OpenBLAS while its threads run is not safe
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
  ::signal(SIGPIPE, SIG_IGN);
  Machine m;
  m.cpu_model = read_cpu_model();
  m.isa = isa_from(read_cpuid());
  m.cores = available_cpus();
  if (const char* own = std::getenv("EINSTAGE_BENCH_OPENBLAS_OWN_CORE")) {  // re-executed: the first run's readings
    if (*own) m.openblas = std::string(own);
    if (const char* caller = std::getenv("EINSTAGE_BENCH_CALLER_CORETYPE")) m.caller_coretype = caller;
  } else {
    if (const char* caller = std::getenv("OPENBLAS_CORETYPE")) m.caller_coretype = caller;
    m.openblas = read_openblas_core();
  }
  m.forced_core = openblas_core_to_force(m.isa, m.openblas, !m.caller_coretype.empty());
  return m;
}

/// For a benchmark that links OpenBLAS, which reads OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS when it is loaded:
/// re-executes the program once with the forced core (if any) and `threads` OpenBLAS threads, handing the first
/// run's readings down. Returns in the re-executed process (or when exec fails, with the environment unchanged).
inline void reexec_with_openblas_env(const Machine& m, int threads, char** argv) {
  if (std::getenv("EINSTAGE_BENCH_OPENBLAS_OWN_CORE")) return;
  ::setenv("EINSTAGE_BENCH_OPENBLAS_OWN_CORE", m.openblas.value_or("").c_str(), 1);
  ::setenv("EINSTAGE_BENCH_CALLER_CORETYPE", m.caller_coretype.c_str(), 1);
  if (!m.forced_core.empty()) ::setenv("OPENBLAS_CORETYPE", m.forced_core.c_str(), 1);
  ::setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 1);
  ::execv("/proc/self/exe", argv);
  std::perror("re-exec");
}

}  // namespace einstage::bench
