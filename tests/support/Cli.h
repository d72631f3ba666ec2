// Running the built `einstage` binary from a test of the tools suite: one child process in a temporary directory,
// its exit status, stdout and stderr. Only the tools suite defines EINSTAGE_CLI_PATH (tests/CMakeLists.txt).
#pragma once

#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace einstage::test {

struct CliRun {
  int status = -1;
  std::string out, err;
};

/// Runs the binary with the given (already shell-quoted) arguments, in directory `cwd`, under `env` (an `env`
/// command line such as "env -u NAME", or VAR=value pairs, or nothing).
inline CliRun run_cli(const std::string& args, const TempDir& cwd, const std::string& env = "") {
  std::string out = cwd.file(".stdout"), err = cwd.file(".stderr");
  std::string cmd =
      fmt::format("cd '{}' && {} '{}' {} >'{}' 2>'{}'", cwd.path().string(), env, EINSTAGE_CLI_PATH, args, out, err);
  int raw = std::system(cmd.c_str());
  CliRun r;
  REQUIRE(WIFEXITED(raw));
  r.status = WEXITSTATUS(raw);
  r.out = read_file_bytes(out);
  r.err = read_file_bytes(err);
  return r;
}

}  // namespace einstage::test
