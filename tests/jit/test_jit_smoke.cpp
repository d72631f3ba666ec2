#include "runtime/jit/Jit.h"

#include "ir/Error.h"

#include <doctest/doctest.h>

#include <string>

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
  CHECK(fn(2, 5) == 21);
  CHECK(fn(-7, 1) == -18);
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
