#include "runtime/jit/Jit.h"

#include "ir/Error.h"
#include "runtime/jit/MicroKernel.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace einstage;

TEST_CASE("jit: LLJIT compiles a trivial function for the host and calls it") {
  auto jit = Jit::create();
  MESSAGE("host cpu " << jit->host().cpu << ", llvm " << jit->host().llvm_version << ", " << jit->host().triple);
  CHECK(!jit->host().cpu.empty());
  CHECK(jit->host().llvm_version.rfind("19.", 0) == 0);
  const char* ir =
      "define i64 @ein_smoke_add(i64 %a, i64 %b) {\n"
      "  %s = add i64 %a, %b\n"
      "  %t = mul i64 %s, 3\n"
      "  ret i64 %t\n"
      "}\n";
  auto fn = reinterpret_cast<int64_t (*)(int64_t, int64_t)>(jit->compile_and_lookup(ir, "ein_smoke_add"));
  REQUIRE(reinterpret_cast<void*>(fn) != nullptr);
  CHECK(call_jit(fn, int64_t(2), int64_t(5)) == 21);
  CHECK(call_jit(fn, int64_t(-7), int64_t(1)) == -18);
}

TEST_CASE("jit: a JIT that only links compiled objects makes no target machine, and runs them") {
  // The process's first call with a warm kernel cache links cached objects only; Jit::create leaves LLVM's target
  // set-up and the target machine to the first compilation (docs/performance.md, "Start-up, first calls").
  auto compiler = Jit::create();
  const int64_t before_compile = Jit::target_machines_on_this_thread();
  const std::vector<char> object = compiler->compile_ir_text(
      "define i64 @ein_linked_only(i64 %a, i64 %b) {\n  %s = sub i64 %a, %b\n  ret i64 %s\n}\n", "ein_linked_only");
  CHECK(Jit::target_machines_on_this_thread() == before_compile + 1);
  auto linker = Jit::create();
  linker->add_object(object, "ein_linked_only");
  auto fn = reinterpret_cast<int64_t (*)(int64_t, int64_t)>(linker->lookup("ein_linked_only"));
  CHECK(call_jit(fn, int64_t(9), int64_t(4)) == 5);
  CHECK(Jit::target_machines_on_this_thread() == before_compile + 1);
}

TEST_CASE("jit: LLVM errors become einstage::Error at the Jit boundary") {
  auto jit = Jit::create();
  try {
    jit->compile_ir_text("define i64 @broken( {", "broken");
    FAIL("expected a parse error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
    CHECK(std::string(e.what()).find("cannot parse LLVM IR") != std::string::npos);
  }
  try {
    jit->lookup("ein_no_such_symbol");
    FAIL("expected a lookup error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::runtime);
    CHECK(std::string(e.what()).find("ein_no_such_symbol") != std::string::npos);
  }
}

#if defined(__x86_64__)
TEST_CASE("jit: call_jit calls code at the start of a page whose previous page is unreadable") {
  // Where the JIT places a kernel is up to LLVM; this is the layout that made clang's UBSan function check fault at
  // the call (it reads the 8 bytes before the callee). Fails (SEGV) in the clang ASan+UBSan build without call_jit.
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  void* region = ::mmap(nullptr, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  char* code = static_cast<char*>(region) + page;
  REQUIRE(::mprotect(code, page, PROT_READ | PROT_WRITE) == 0);
  const unsigned char store_one[] = {0xc6, 0x02, 0x01, 0xc3};  // mov byte ptr [rdx], 1; ret: sets *c = 1
  std::memcpy(code, store_one, sizeof store_one);
  REQUIRE(::mprotect(code, page, PROT_READ | PROT_EXEC) == 0);
  auto fn = reinterpret_cast<SpecialisedKernelFn>(reinterpret_cast<void*>(code));
  char c = 0;
  call_jit(fn, static_cast<const void*>(nullptr), static_cast<const void*>(nullptr), static_cast<void*>(&c));
  CHECK(c == 1);
  ::munmap(region, 2 * page);
}
#endif
