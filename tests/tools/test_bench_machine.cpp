// tools/bench/Machine.h: the ISA read from cpuid words, and when the benchmarks force an OpenBLAS core on their peers
// (fake cpuid words and core names stand for the CPUs we have met: a Xeon with AVX-512 that Debian's OpenBLAS 0.3.21
// calls "Prescott", an AMD Zen 3 with AVX2 and FMA only, an OS that does not save the AVX-512 registers).
#include "tools/bench/Machine.h"

#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>

using namespace einstage::bench;

namespace {

constexpr uint32_t kFma = 1u << 12, kOsxsave = 1u << 27, kAvx = 1u << 28;
constexpr uint32_t kAvx2 = 1u << 5, kAvx512F = 1u << 16, kAvx512Dq = 1u << 17, kAvx512Bw = 1u << 30,
                   kAvx512Vl = 1u << 31;
constexpr uint64_t kXcrAvx = 0x7, kXcrAvx512 = 0xe7;

const CpuidWords kXeonAvx512{kFma | kOsxsave | kAvx, kAvx2 | kAvx512F | kAvx512Dq | kAvx512Bw | kAvx512Vl, kXcrAvx512};
const CpuidWords kZen3{kFma | kOsxsave | kAvx, kAvx2, kXcrAvx};

}  // namespace

TEST_CASE("bench machine: the ISA comes from cpuid, counting only what the OS saves") {
  CHECK(isa_from(kXeonAvx512) == Isa{true, true, true});
  CHECK(isa_text(isa_from(kXeonAvx512)) == "AVX-512, AVX2, FMA");
  CHECK(isa_from(kZen3) == Isa{true, true, false});
  CHECK(isa_text(isa_from(kZen3)) == "AVX2, FMA");
  // AVX-512 in cpuid but the OS does not save ZMM state (XCR0 without bits 5-7): no AVX-512.
  CHECK(isa_from(CpuidWords{kXeonAvx512.leaf1_ecx, kXeonAvx512.leaf7_ebx, kXcrAvx}) == Isa{true, true, false});
  // No OSXSAVE: no AVX at all.
  CHECK(isa_text(isa_from(CpuidWords{kFma | kAvx, kAvx2, 0})) == "SSE only");
  // AVX512F without VL/BW/DQ (Knights Landing) is not enough for OpenBLAS's SkylakeX kernels.
  CHECK(!isa_from(CpuidWords{kXeonAvx512.leaf1_ecx, kAvx2 | kAvx512F, kXcrAvx512}).avx512);
}

TEST_CASE("bench machine: SkylakeX is forced only on an AVX-512 CPU that OpenBLAS misdetects") {
  const Isa xeon = isa_from(kXeonAvx512), zen3 = isa_from(kZen3);
  CHECK(openblas_core_to_force(xeon, "Prescott") == "SkylakeX");  // Debian 0.3.21 on a newer Xeon
  CHECK(openblas_core_to_force(xeon, "Haswell") == "SkylakeX");
  CHECK(openblas_core_to_force(xeon, "SkylakeX").empty());        // a right pick stays
  CHECK(openblas_core_to_force(xeon, "Cooperlake").empty());      // what it picks on Zen 4 and Zen 5
  CHECK(openblas_core_to_force(xeon, "SapphireRapids").empty());
  CHECK(openblas_core_to_force(xeon, std::nullopt).empty());      // no OpenBLAS
  CHECK(openblas_core_to_force(zen3, "Zen").empty());             // never without AVX-512: SIGILL there
  CHECK(openblas_core_to_force(zen3, "Prescott").empty());
}

TEST_CASE("bench machine: what the table and the JSON say, and the peers' environment") {
  Machine m;
  m.cpu_model = "Intel(R) Xeon(R) Processor";
  m.isa = isa_from(kXeonAvx512);
  m.cores = 2;
  m.openblas = "Prescott";
  m.forced_core = openblas_core_to_force(m.isa, m.openblas);
  CHECK(m.summary() == "cpu: Intel(R) Xeon(R) Processor; ISA AVX-512, AVX2, FMA; 2 cores available; OpenBLAS core "
                       "SkylakeX (forced: OpenBLAS picks Prescott on this AVX-512 CPU)");
  CHECK(m.peer_env() == "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX ");
  CHECK(m.to_json()["openblas_peer_core"] == "SkylakeX");
  CHECK(m.to_json()["openblas_own_core"] == "Prescott");

  // An AVX-512 machine whose environment sets Haswell (and an L2 size): the peers never see either.
  Machine guest;
  guest.cpu_model = "AMD EPYC";
  guest.isa = isa_from(kXeonAvx512);
  guest.openblas = "Cooperlake";
  guest.caller_coretype = "Haswell";
  guest.caller_l2_size = "512";
  guest.forced_core = openblas_core_to_force(guest.isa, guest.openblas);
  CHECK(guest.peer_core() == "Cooperlake");
  CHECK(guest.peer_env() == "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ");
  CHECK(guest.summary() == "cpu: AMD EPYC; ISA AVX-512, AVX2, FMA; 1 cores available; OpenBLAS core Cooperlake (its "
                           "own pick); the environment's OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 not used for "
                           "peers");
  CHECK(guest.to_json()["environment_openblas_coretype"] == "Haswell");
  // The shell prefix really removes them: a child started through it sees neither.
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  ::setenv("OPENBLAS_L2_SIZE", "512", 1);
  CHECK(std::system((guest.peer_env() + "sh -c 'test -z \"${OPENBLAS_CORETYPE+x}${OPENBLAS_L2_SIZE+x}\"'").c_str()) ==
        0);
  CHECK(std::system((m.peer_env() + "sh -c 'test \"$OPENBLAS_CORETYPE\" = SkylakeX && test -z \"${OPENBLAS_L2_SIZE+x}\"'")
                        .c_str()) == 0);
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("OPENBLAS_L2_SIZE");

  Machine zen;
  zen.cpu_model = "AMD EPYC 7B13";
  zen.isa = isa_from(kZen3);
  zen.openblas = "Zen";
  zen.forced_core = openblas_core_to_force(zen.isa, zen.openblas);
  CHECK(zen.peer_env() == "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ");
  CHECK(zen.summary() == "cpu: AMD EPYC 7B13; ISA AVX2, FMA; 1 cores available; OpenBLAS core Zen (its own pick)");
  zen.openblas.reset();
  CHECK(zen.to_json()["openblas_peer_core"] == "no OpenBLAS");
}

TEST_CASE("bench machine: a peer that fails is described, not fatal") {
  CHECK(peer_failure(std::system("exit 3")) == "exit status 3");
  CHECK(peer_failure(std::system("kill -ILL $$")) == "killed by signal 4");  // what a SkylakeX kernel gets on Zen
  CHECK(peer_failure(std::system("exec 2>/dev/null; sh -c 'kill -ILL $$'")) == "killed by signal 4");
  CHECK(peer_failure(-1) == "could not be started");
  // This host: whatever it is, detection gives a model, at least one core, and never forces without AVX-512.
  const Machine here = detect_machine();
  CHECK(!here.cpu_model.empty());
  CHECK(here.cores >= 1);
  if (!here.isa.avx512) CHECK(here.forced_core.empty());
}

TEST_CASE("bench machine: OpenBLAS's own pick is read without the caller's OPENBLAS_CORETYPE") {
  const std::optional<std::string> own = read_openblas_own_core();
  if (!own) return;  // libopenblas.so.0 not installed here
  ::setenv("OPENBLAS_CORETYPE", own->find("Prescott") == std::string::npos ? "Prescott" : "Nehalem", 1);
  const Machine forced_by_caller = detect_machine();
  ::unsetenv("OPENBLAS_CORETYPE");
  CHECK(forced_by_caller.openblas == own);  // the caller's core does not leak into the reading
  CHECK(!forced_by_caller.caller_coretype.empty());
}
