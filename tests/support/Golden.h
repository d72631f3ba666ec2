// Golden files: check_golden_file(path, actual) compares a printed result with the file checked into the tree, or
// rewrites the file when the environment has EINSTAGE_UPDATE_GOLDEN=1 (then review the diff before committing). The
// one update/compare rule of the suites that keep goldens (ir, compiler, ad). Test-only; depends on doctest.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace einstage::test {

inline bool update_goldens() {
  const char* v = std::getenv("EINSTAGE_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

inline void check_golden_file(const std::filesystem::path& path, const std::string& actual) {
  if (update_goldens()) {
    std::ofstream(path, std::ios::binary) << actual;
    MESSAGE("rewrote " << path.string());
    return;
  }
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing golden " << path.string() << " (run with EINSTAGE_UPDATE_GOLDEN=1)");
  std::stringstream expected;
  expected << in.rdbuf();
  CHECK_MESSAGE(actual == expected.str(),
                "golden " << path.string() << " differs (run with EINSTAGE_UPDATE_GOLDEN=1 and review):\n" << actual);
}

}  // namespace einstage::test
