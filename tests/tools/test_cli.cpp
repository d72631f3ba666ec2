// The `einstage` command line, run as a separate process on the .npy fixtures: stdout, stderr and exit status.
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

// Runs the built binary with the given (already shell-quoted) arguments.
Run run_cli(const std::string& args) {
  einstage::test::TempDir dir;
  std::string cmd = fmt::format("'{}' {} >'{}' 2>'{}'", EINSTAGE_CLI_PATH, args, dir.file("out"), dir.file("err"));
  int raw = std::system(cmd.c_str());
  Run r;
  REQUIRE(WIFEXITED(raw));
  r.status = WEXITSTATUS(raw);
  r.out = einstage::test::read_file_bytes(dir.file("out"));
  r.err = einstage::test::read_file_bytes(dir.file("err"));
  return r;
}

std::string fixture(const std::string& name) { return std::string(EINSTAGE_TEST_DATA_DIR) + "/" + name; }

}  // namespace

TEST_CASE("no arguments and --help print the command list") {
  for (std::string args : {"--help", "-h", "help"}) {
    CAPTURE(args);
    Run r = run_cli(args);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("usage: einstage <command> [arguments]\n") == 0);
    CHECK(r.out.find("\n  show         print .npy files") != std::string::npos);
  }
}

TEST_CASE("show prints the stored order, the memory layout and the values") {
  Run r = run_cli(fmt::format("show '{}' '{}'", fixture("matrix_c.npy"), fixture("matrix_f.npy")));
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out == fmt::format(
                     "{}\n"
                     "  file:   .npy 1.0, dtype <f8, shape (2, 3), C order (fortran_order False: last index fastest)\n"
                     "  memory: f64[2,3], column-major, strides [1,2]\n"
                     "[[0, 1, 2],\n"
                     " [3, 4, 5]]\n"
                     "\n"
                     "{}\n"
                     "  file:   .npy 1.0, dtype <f8, shape (2, 3), Fortran order (fortran_order True: first index "
                     "fastest)\n"
                     "  memory: f64[2,3], column-major, strides [1,2]\n"
                     "[[0, 1, 2],\n"
                     " [3, 4, 5]]\n",
                     fixture("matrix_c.npy"), fixture("matrix_f.npy")));
}

TEST_CASE("show: every dtype, rank 0, rank 1, version 3") {
  Run r = run_cli(fmt::format("show '{}' '{}' '{}' '{}'", fixture("c128_f.npy"), fixture("f64_scalar.npy"),
                              fixture("i64_vector.npy"), fixture("f64_v3_c.npy")));
  CHECK(r.status == 0);
  CHECK(r.out.find("  file:   .npy 1.0, dtype <c16, shape (2, 3, 4), Fortran order") != std::string::npos);
  CHECK(r.out.find("  memory: c128[2,3,4], column-major, strides [1,2,6]\n[[[   0-3j,  1-2.5j,    2-2j,  3-1.5j],\n") !=
        std::string::npos);
  CHECK(r.out.find("shape (), C order (fortran_order False: last index fastest)\n  memory: f64[], column-major, "
                   "strides []\n2.5\n") != std::string::npos);
  CHECK(r.out.find("dtype <i8, shape (5,), C order") != std::string::npos);
  CHECK(r.out.find("[0, 1, 2, 3, 4]\n") != std::string::npos);
  CHECK(r.out.find(".npy 3.0, dtype <f8, shape (3, 2), C order") != std::string::npos);
  for (std::string d : {"f32", "f64", "c64", "i64"}) {
    Run one = run_cli(fmt::format("show '{}'", fixture(d + "_c.npy")));
    CAPTURE(d);
    CHECK(one.status == 0);
    CHECK(one.out.find(fmt::format("  memory: {}[2,3,4], column-major, strides [1,2,6]\n", d)) != std::string::npos);
  }
}

TEST_CASE("show --help") {
  Run r = run_cli("show --help");
  CHECK(r.status == 0);
  CHECK(r.out.find("usage: einstage show A.npy [B.npy ...]\n") == 0);
}

TEST_CASE("bad arguments and bad files: one line on stderr, status 2, nothing on stdout") {
  struct Case {
    std::string args, err;
  };
  const Case cases[] = {
      {"frobnicate", "einstage: unknown command 'frobnicate'; run 'einstage --help' for the list\n"},
      {"--frobnicate", "einstage: unknown option '--frobnicate'; run 'einstage --help' for the usage\n"},
      {"show", "einstage: show: no .npy files given; usage: einstage show A.npy [B.npy ...]\n"},
      {"show --wide x.npy", "einstage: show: unknown option '--wide'; run 'einstage show --help'\n"},
      {fmt::format("show '{}'", fixture("absent.npy")),
       fmt::format("einstage: cannot open '{}' for reading: No such file or directory\n", fixture("absent.npy"))},
      {fmt::format("show '{}'", fixture("make_npy_fixtures.py")),
       fmt::format("einstage: '{}': not a .npy file: it starts with bytes [23 21 2f 75 73 72 2f 62] but a .npy file "
                   "starts with \\x93NUMPY\n", fixture("make_npy_fixtures.py"))},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    Run r = run_cli(c.args);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == c.err);
  }
  // A good file before a bad one: nothing is printed for either.
  Run r = run_cli(fmt::format("show '{}' '{}'", fixture("matrix_c.npy"), fixture("make_npy_fixtures.py")));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find(fmt::format("einstage: '{}': not a .npy file", fixture("make_npy_fixtures.py"))) == 0);
}

TEST_CASE("show: bool, int32 and big-endian files are widened and byte-swapped on reading") {
  Run r = run_cli(fmt::format("show '{}' '{}' '{}'", fixture("i32.npy"), fixture("bool.npy"),
                              fixture("f64_big_endian.npy")));
  CHECK(r.status == 0);
  CHECK(r.out.find("  file:   .npy 1.0, dtype <i4, shape (2, 3), C order (fortran_order False: last index fastest)\n"
                   "  memory: i64[2,3], column-major, strides [1,2]\n[[0, 1, 2],\n [3, 4, 5]]\n") != std::string::npos);
  CHECK(r.out.find("dtype |b1, shape (3,), C order (fortran_order False: last index fastest)\n  memory: i64[3], "
                   "column-major, strides [1]\n[1, 0, 1]\n") != std::string::npos);
  CHECK(r.out.find("dtype >f8, shape (2, 3), C order (fortran_order False: last index fastest)\n  memory: f64[2,3], "
                   "column-major, strides [1,2]\n[[0, 1, 2],\n [3, 4, 5]]\n") != std::string::npos);
}
