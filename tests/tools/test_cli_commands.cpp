// The einstage command line's einsum, plan, lower and run commands and the no-argument demonstration, run as a
// separate process: results checked against values computed here with plain loops, error cases pinned by their one
// line on stderr and their exit status; subscripts starting with '-' and `--`; -o onto symlinks, FIFOs, devices and
// directories; a saved program's derived constraints checked at run.
#include "ir/Npy.h"
#include "runtime/Cpus.h"
#include "support/Cli.h"
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

using namespace einstage;

namespace {

using Run = test::CliRun;
using test::run_cli;

// Deterministic small values: element k (column-major) is (k * 7 mod 11) - 5, as doubles.
Tensor values(Shape shape) {
  Tensor t = Tensor::empty(DType::f64, std::move(shape));
  for (int64_t k = 0; k < t.numel(); ++k) t.data<double>()[k] = static_cast<double>((k * 7) % 11 - 5);
  return t;
}

void expect_one_line_error(const Run& r, int status, const std::string& message) {
  CHECK(r.status == status);
  CHECK(r.out.empty());
  CHECK(r.err == "einstage: " + message + "\n");
}

}  // namespace

TEST_CASE("einsum: a matmul of a C-order and a Fortran-order file matches a loop, written to -o or printed") {
  test::TempDir dir;
  Tensor a = values({2, 3}), b = values({3, 4});
  write_npy(dir.file("a.npy"), a, NpyOrder::c);
  write_npy(dir.file("b.npy"), b, NpyOrder::fortran);
  Run r = run_cli("einsum 'ij,jk->ik' a.npy b.npy -o out.npy", dir);
  CHECK(r.status == 0);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  Tensor out = read_npy(dir.file("out.npy"));
  REQUIRE(out.shape() == Shape{2, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k) {
      double s = 0;
      for (int64_t j = 0; j < 3; ++j) s += a.at<double>({i, j}) * b.at<double>({j, k});
      CHECK(out.at<double>({i, k}) == s);
    }
  // Printed: a dot product of two vectors, a scalar.
  write_npy(dir.file("u.npy"), values({5}));
  Run p = run_cli("einsum 'i,i->' u.npy u.npy", dir);
  double dot = 0;
  for (int64_t k = 0; k < 5; ++k) dot += std::pow((k * 7) % 11 - 5, 2);
  CHECK(p.status == 0);
  CHECK(p.out == fmt::format("f64[]\n{}\n", dot));
}

TEST_CASE("einsum: three operands with an explicit path, --dtype, and --broadcast") {
  test::TempDir dir;
  Tensor a = values({2, 3}), b = values({3, 4}), c = values({4, 2});
  write_npy(dir.file("a.npy"), a);
  write_npy(dir.file("b.npy"), b);
  write_npy(dir.file("c.npy"), c);
  Run r = run_cli("einsum 'ij,jk,kl->il' a.npy b.npy c.npy --optimize 'path:(1,2),(0,1)' --dtype i64 -o out.npy", dir);
  CHECK(r.status == 0);
  Tensor out = read_npy(dir.file("out.npy"));
  CHECK(out.dtype() == DType::i64);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t l = 0; l < 2; ++l) {
      double s = 0;
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) s += a.at<double>({i, j}) * b.at<double>({j, k}) * c.at<double>({k, l});
      CHECK(out.at<int64_t>({i, l}) == static_cast<int64_t>(s));
    }
  write_npy(dir.file("col.npy"), values({2, 1}));
  Run refused = run_cli("einsum 'ij,ij->ij' col.npy a.npy", dir);
  expect_one_line_error(refused, 2,
                        "einsum \"ij,ij->ij\": label 'j' has extent 1 in operand 0 (axis 1) but 3 in operand 1 (axis "
                        "1); a length-1 axis broadcasts only under '...' or when the caller allows broadcasting "
                        "(allow_broadcast)");
  Run ok = run_cli("einsum 'ij,ij->ij' col.npy a.npy --broadcast -o out.npy", dir);
  CHECK(ok.status == 0);
  Tensor bc = read_npy(dir.file("out.npy")), col = values({2, 1});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(bc.at<double>({i, j}) == col.at<double>({i, 0}) * a.at<double>({i, j}));
}

TEST_CASE("plan: the report's flops are the ones counted by hand; --json parses") {
  test::TempDir dir;
  // (ij,jk) first: 10*100*5 + 10*5*50 = 7500 multiply-adds; the other order costs 100*5*50 + 10*100*50 = 75000.
  Run r = run_cli("plan 'ij,jk,kl->il' --shapes 10x100,100x5,5x50 --optimize optimal --json", dir);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["flops"].get<double>() == 7500.0);
  CHECK(j["naive_flops"].get<double>() == 2.0 * 10 * 100 * 5 * 50);
  CHECK(j["path"] == nlohmann::json::parse("[[0,1],[0,1]]"));
  Run l2r = run_cli("plan 'ij,jk,kl->il' --shapes 10x100,100x5,5x50 --optimize left-to-right --json", dir);
  CHECK(nlohmann::json::parse(l2r.out)["flops"].get<double>() == 7500.0);
  Run bad = run_cli("plan 'ij,jk,kl->il' --shapes 10x100,100x5,5x50 --optimize 'path:(1,2),(0,1)' --json", dir);
  CHECK(nlohmann::json::parse(bad.out)["flops"].get<double>() == 100.0 * 5 * 50 + 10 * 100 * 50);
  Run text = run_cli("plan 'bij,bjk->bik' --shapes 6x2x3,6x3x4", dir);
  CHECK(text.status == 0);
  CHECK(text.out.find("contraction: bij,bjk->bik") != std::string::npos);
  CHECK(text.out.find("1.4400e+02") != std::string::npos);  // 6*2*3*4 multiply-adds
}

TEST_CASE("plan: a budgeted search gives the same path in separate processes at 1 and 2 threads") {
  test::TempDir dir;
  // A 5x6 grid of tensors with bond dimension 3 (49 bonds, labels a..z A..W): its search space is large enough that
  // different seeds or trial sets give different trees.
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW";
  const int rows = 5, cols = 6;
  std::vector<std::string> terms(rows * cols);
  int next = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      if (c + 1 < cols) terms[r * cols + c] += letters[next], terms[r * cols + c + 1] += letters[next++];
      if (r + 1 < rows) terms[r * cols + c] += letters[next], terms[(r + 1) * cols + c] += letters[next++];
    }
  std::string subscripts, shapes;
  for (size_t i = 0; i < terms.size(); ++i) {
    subscripts += (i ? "," : "") + terms[i];
    for (size_t k = 0; k < terms[i].size(); ++k) shapes += k ? "x3" : (i ? ",3" : "3");
  }
  subscripts += "->";
  const std::string base = fmt::format("plan '{}' --shapes {} --optimize 'anneal(budget=0.05,seed=4)' --json "
                                       "--no-clock-guard", subscripts, shapes);
  Run one = run_cli(base + " --threads 1", dir);
  Run two = run_cli(base + " --threads 2", dir);
  REQUIRE(one.status == 0);
  REQUIRE(two.status == 0);
  CHECK(one.err.empty());
  const auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(two.out);
  CHECK(a["path"] == b["path"]);
  CHECK(a["flops"] == b["flops"]);
  // Another seed searches other trials (so the comparison above is not trivially true).
  Run other = run_cli(fmt::format("plan '{}' --shapes {} --optimize 'anneal(budget=0.05,seed=5)' --json "
                                  "--no-clock-guard", subscripts, shapes), dir);
  CHECK(nlohmann::json::parse(other.out)["path"] != a["path"]);
}

TEST_CASE("lower: the standard ops of docs/behaviour.md's lowering examples, in text, JSON and DOT") {
  test::TempDir dir;
  Run r = run_cli("lower 'bij,bjk->bik' --shapes 6x2x3,6x3x4", dir);
  CHECK(r.status == 0);
  CHECK(r.out ==
        "program @lowered(%a: f64[6,2,3], %b: f64[6,3,4]) -> (f64[6,2,4]) {\n"
        "  %0 = dot_general(%a, %b) {lhs_batch = [0], lhs_contracting = [2], rhs_batch = [0], rhs_contracting = [1]} "
        ": f64[2,4,6]\n"
        "  %1 = transpose(%0) {perm = [2, 0, 1]} : f64[6,2,4]\n"
        "  return %1\n"
        "}\n");
  Run batch_right = run_cli("lower 'ijb,jkb->ikb' --shapes 2x3x6,3x4x6", dir);
  CHECK(batch_right.out.find("transpose") == std::string::npos);  // batch on the right: no final transpose
  Run json = run_cli("lower 'iij,jk->ik' --shapes 2x2x3,3x4 --format json", dir);
  auto j = nlohmann::json::parse(json.out);
  REQUIRE(j["instructions"].size() == 2);
  CHECK(j["instructions"][0]["op"] == "extract_diag");
  CHECK(j["instructions"][1]["op"] == "dot_general");
  Run dot = run_cli("lower 'ij,kl->ijkl' --shapes 2x3,4x5 --format dot", dir);
  CHECK(dot.out.rfind("digraph \"lowered\" {", 0) == 0);
  CHECK(dot.out.find("broadcast_in_dim") != std::string::npos);
  CHECK(dot.out.find("mul") != std::string::npos);
}

TEST_CASE("run: a saved program with a symbolic dim on .npy inputs; --print-stages shows each stage") {
  test::TempDir dir;
  std::ofstream(dir.file("prog.ir")) <<
      "program @loss(%x: f64[n,3], %w: f64[3,4]) -> (f64[n,4], f64[]) {\n"
      "  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"} : f64[n,4]\n"
      "  %1 = mul(%0, %0) : f64[n,4]\n"
      "  %2 = reduce_sum(%1) {axes = [0, 1]} : f64[]\n"
      "  return %0, %2\n"
      "}\n";
  Tensor x = values({5, 3}), w = values({3, 4});
  write_npy(dir.file("x.npy"), x, NpyOrder::c);
  write_npy(dir.file("w.npy"), w);
  Run r = run_cli("run prog.ir --input x=x.npy --input w=w.npy -o y.npy -o loss.npy", dir);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  Tensor y = read_npy(dir.file("y.npy")), loss = read_npy(dir.file("loss.npy"));
  double total = 0;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t k = 0; k < 4; ++k) {
      double s = 0;
      for (int64_t j = 0; j < 3; ++j) s += x.at<double>({i, j}) * w.at<double>({j, k});
      CHECK(y.at<double>({i, k}) == s);
      total += s * s;
    }
  CHECK(loss.at<double>({}) == total);

  Run stages = run_cli("run prog.ir --input x=x.npy --input w=w.npy --print-stages", dir);
  CHECK(stages.status == 0);
  size_t traced = stages.out.find("== traced ==\nprogram @loss(%x: f64[n,3]");
  size_t lowered = stages.out.find("== lowered (for these input shapes) ==\nprogram @loss(%x: f64[5,3]");
  size_t planned = stages.out.find("== planned ==\n%0 = einstage.einsum.v1 on f64[5,3], f64[3,4]:\n");
  size_t outputs = stages.out.find("== outputs ==\noutput 0 (%0): f64[5,4]\n");
  CHECK(traced == 0);
  CHECK(lowered != std::string::npos);
  CHECK(planned != std::string::npos);
  CHECK(outputs != std::string::npos);
  CHECK((traced < lowered && lowered < planned && planned < outputs));
  CHECK(stages.out.find(fmt::format("output 1 (%2): f64[]\n{}\n", total)) != std::string::npos);
}

TEST_CASE("no arguments: the demonstration traces, plans, lowers and runs, and its numbers are right") {
  test::TempDir dir;
  Run r = run_cli("", dir);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  for (std::string part : {"1. Traced", "2. Planned", "3. Lowered", "4. Run on b = 2"}) {
    CAPTURE(part);
    CHECK(r.out.find(part) != std::string::npos);
  }
  CHECK(r.out.find("%0 = einstage.einsum.v1(%x, %w, %v) {broadcast = false, plan = auto, subscripts = "
                   "\"bij,jk,k->bi\"} : f64[b,3]") != std::string::npos);
  // The demo's data: element k (column-major) of each input is ((k + offset) mod 5 - 2) / 2, offsets 0, 1, 2.
  auto val = [](int64_t k, int offset) { return static_cast<double>((k + offset) % 5 - 2) / 2; };
  double loss = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i) {
      double y = 0;
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 5; ++k) y += val(b + 2 * i + 6 * j, 0) * val(j + 4 * k, 1) * val(k, 2);
      loss += y * y;
    }
  CHECK(r.out.find(fmt::format("loss = f64[]\n{}\n", loss)) != std::string::npos);
  CHECK(r.out.find("max |difference| 0 in y; the plan cache saw 1 miss and 1 hit") != std::string::npos);
}

TEST_CASE("einsum, plan, lower, run: --help, and bad arguments or files give one line and a non-zero status") {
  test::TempDir dir;
  for (std::string cmd : {"einsum", "plan", "lower", "run", "show-program", "demo"}) {
    CAPTURE(cmd);
    Run h = run_cli(cmd + " --help", dir);
    CHECK(h.status == 0);
    CHECK(h.out.rfind("usage: einstage ", 0) == 0);
  }
  Run list = run_cli("--help", dir);
  for (std::string cmd : {"\n  einsum  ", "\n  plan    ", "\n  lower   ", "\n  run     ", "\n  show-program ", "\n  demo    "})
    CHECK(list.out.find(cmd) != std::string::npos);

  write_npy(dir.file("a.npy"), values({2, 3}));
  expect_one_line_error(run_cli("einsum", dir), 2,
                        "einsum: no subscripts given; usage: einstage einsum SUBSCRIPTS A.npy [B.npy ...]");
  expect_one_line_error(run_cli("einsum 'ij->i' a.npy --frobnicate", dir), 2,
                        "einsum: unknown option '--frobnicate'; run 'einstage einsum --help'");
  expect_one_line_error(run_cli("einsum 'ij->i' missing.npy", dir), 2,
                        "cannot open 'missing.npy' for reading: No such file or directory");
  expect_one_line_error(run_cli("einsum 'ij->i' a.npy --dtype f16", dir), 2,
                        "einsum: bad --dtype value 'f16'; expected f32, f64, c64, c128 or i64");
  expect_one_line_error(run_cli("einsum 'ij->i' a.npy --optimize", dir), 2, "einsum: option --optimize needs a value");
  Run bad_order = run_cli("einsum 'ij->i' a.npy --optimize sideways", dir);
  CHECK(bad_order.status == 2);
  CHECK(bad_order.err.rfind("einstage: einsum: bad --optimize value 'sideways': expected auto, greedy, optimal, "
                            "anneal, left-to-right, path:(0,1),(0,1) or a plan spec", 0) == 0);
  CHECK(std::count(bad_order.err.begin(), bad_order.err.end(), '\n') == 1);
  Run bad_string = run_cli("einsum 'ij-i' a.npy", dir);
  CHECK(bad_string.status == 2);
  CHECK(bad_string.err.rfind("einstage: einsum \"ij-i\": ", 0) == 0);
  CHECK(std::count(bad_string.err.begin(), bad_string.err.end(), '\n') == 1);

  expect_one_line_error(run_cli("plan 'ij,jk->ik'", dir), 2, "plan: --shapes is required, e.g. --shapes 6x2x3,6x3x4");
  expect_one_line_error(run_cli("plan 'ij,jk->ik' --shapes 2x3,3xq", dir), 2,
                        "plan: bad --shapes value '2x3,3xq': 'q' is not an extent; expected e.g. 6x2x3,6x3x4");
  expect_one_line_error(run_cli("lower 'ij,jk->ik' --shapes 2x3,3x4 --format svg", dir), 2,
                        "lower: bad --format value 'svg'; expected text, json or dot");

  std::ofstream(dir.file("p.ir")) << "program @p(%x: f64[2]) -> (f64[2]) {\n  %0 = neg(%x) : f64[2]\n  return %0\n}\n";
  expect_one_line_error(run_cli("run nothing.ir", dir), 2,
                        "cannot read program file 'nothing.ir': no such file or not readable");
  expect_one_line_error(run_cli("run p.ir", dir), 2,
                        "run: no --input for parameter 'x' (f64[2]) of @p; give --input x=FILE.npy");
  expect_one_line_error(run_cli("run p.ir --input x=a.npy --input y=a.npy", dir), 2,
                        "run: --input y=a.npy: @p has no parameter 'y' (its parameters: x)");
  expect_one_line_error(run_cli("run p.ir --input x=a.npy", dir), 2,
                        "@p: input 0 (%x) has shape [2,3] but the parameter has type f64[2]");
  std::ofstream(dir.file("bad.ir")) << "program @p(\n";
  Run parse = run_cli("run bad.ir", dir);
  CHECK(parse.status == 2);
  CHECK(parse.err.rfind("einstage: bad.ir: line 1: ", 0) == 0);
  CHECK(std::count(parse.err.begin(), parse.err.end(), '\n') == 1);
}

TEST_CASE("huge extents: zero-size .npy files work like NumPy, sizes beyond 64 bits are clear errors") {
  test::TempDir dir;
  write_npy(dir.file("z.npy"), Tensor::empty(DType::f64, {0, int64_t{1} << 59}));  // np.empty((0, 2**59))
  Run zero = run_cli("einsum 'ij,kj->' z.npy z.npy", dir);
  CHECK(zero.status == 0);
  CHECK(zero.err.empty());
  CHECK(zero.out == "f64[]\n0\n");
  Run empty = run_cli("einsum 'ij,kj->ik' z.npy z.npy", dir);
  CHECK(empty.status == 0);
  CHECK(empty.out == "f64[0,0]\n[]\n");

  // A header-only file NumPy itself refuses to make (np.empty((0, 2**62, 2**62)): "array is too big").
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  test::write_file_bytes(dir.file("big.npy"), std::string("\x93NUMPY\x01\x00", 8) + char(dict.size() & 0xff) +
                                                  char(dict.size() >> 8) + dict);
  expect_one_line_error(run_cli("show big.npy", dir), 2,
                        "'big.npy': the header's shape [0,4611686018427387904,4611686018427387904] has more elements "
                        "than fit in 64 bits (counting its non-zero extents only, as NumPy does)");
  const std::string m = "9223372036854775807";
  expect_one_line_error(run_cli(fmt::format("lower 'i,j,k,l->ijkl' --shapes {0},{0},{0},{0}", m), dir), 2,
                        fmt::format("lowering 'einstage.einsum.v1' at %0 in @lowered: einsum \"i,j,k,l->ijkl\": step "
                                    "0: the result of shape [{0},{0}] has more elements than fit in 64 bits", m));
}

TEST_CASE("einsum, plan, run: --threads defaults to every CPU or EINSTAGE_NUM_THREADS, and --help says which") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), values({2, 3}));
  std::ofstream(dir.file("p.ir"))
      << "program @p(%x: f64[2,3]) -> (f64[2,3]) {\n  %0 = neg(%x) : f64[2,3]\n  return %0\n}\n";
  const std::string unset = "env -u EINSTAGE_NUM_THREADS", three = "env EINSTAGE_NUM_THREADS=3",
                    bad = "env EINSTAGE_NUM_THREADS=abc";
  const std::string every_cpu =
      fmt::format("(default {}: every CPU this process may use, or EINSTAGE_NUM_THREADS)", available_cpus());
  for (std::string cmd : {"einsum", "plan", "run"}) {
    CAPTURE(cmd);
    CHECK(run_cli(cmd + " --help", dir, unset).out.find(every_cpu) != std::string::npos);
    CHECK(run_cli(cmd + " --help", dir, three).out.find("(default 3: from EINSTAGE_NUM_THREADS)") != std::string::npos);
    Run help = run_cli(cmd + " --help", dir, bad);  // help still prints, naming the bad value
    CHECK(help.status == 0);
    CHECK(help.out.find("(EINSTAGE_NUM_THREADS='abc' is not a count from 1 to 1024)") != std::string::npos);
  }
  const std::string bad_message =
      "environment variable EINSTAGE_NUM_THREADS is 'abc'; expected a whole number of threads from 1 to 1024, or unset "
      "it to use every CPU this process may use";
  expect_one_line_error(run_cli("einsum 'ij->i' a.npy", dir, bad), 2, bad_message);
  expect_one_line_error(run_cli("plan 'ij,jk->ik' --shapes 2x3,3x4", dir, bad), 2, bad_message);
  expect_one_line_error(run_cli("run p.ir --input x=a.npy", dir, bad), 2, bad_message);
  // An explicit --threads needs no default, so the bad variable is never read.
  Run explicit_count = run_cli("einsum 'ij->i' a.npy --threads 2", dir, bad);
  CHECK(explicit_count.status == 0);
  CHECK(explicit_count.out == run_cli("einsum 'ij->i' a.npy", dir, three).out);
  CHECK(run_cli("run p.ir --input x=a.npy --threads 1", dir, bad).status == 0);
  expect_one_line_error(run_cli("einsum 'ij->i' a.npy --threads 0", dir), 2,
                        "einsum: bad --threads value '0'; expected a count from 1 to 1024");
  expect_one_line_error(run_cli("run p.ir --input x=a.npy --threads many", dir), 2,
                        "run: bad --threads value 'many'; expected a count from 1 to 1024");
}

TEST_CASE("subscripts may start with '-' as in NumPy's einsum('->', s); '--' ends the options") {
  test::TempDir dir;
  write_npy(dir.file("s.npy"), Tensor::scalar<double>(2.5));
  write_npy(dir.file("-m.npy"), values({2, 3}));
  Run scalar = run_cli("einsum '->' s.npy", dir);
  CHECK(scalar.status == 0);
  CHECK(scalar.err.empty());
  CHECK(scalar.out == "f64[]\n2.5\n");
  CHECK(run_cli("einsum -- '->' s.npy", dir).out == "f64[]\n2.5\n");
  CHECK(run_cli("plan '->' --shapes scalar", dir).status == 0);
  CHECK(run_cli("lower '->' --shapes scalar", dir).status == 0);
  // A malformed string starting with "->" is reported by the notation parser, not as an unknown option.
  Run bad = run_cli("einsum '->i' s.npy", dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.rfind("einstage: einsum \"->i\": ", 0) == 0);
  // After '--' an argument starting with '-' is a file, and -h is no request for help.
  Run file = run_cli("einsum 'ij->' -- -m.npy", dir);
  CHECK(file.status == 0);
  CHECK(file.out == "f64[]\n-2\n");  // values({2, 3}) holds -5, 2, -2, 5, 1, -3
  expect_one_line_error(run_cli("einsum 'ij->' s.npy -- -h", dir), 2,
                        "cannot open '-h' for reading: No such file or directory");
  expect_one_line_error(run_cli("einsum 'ij->' -m.npy", dir), 2,
                        "einsum: unknown option '-m.npy'; run 'einstage einsum --help'");
  Run show = run_cli("show -- -m.npy", dir);
  CHECK(show.status == 0);
  CHECK(show.out.rfind("-m.npy\n", 0) == 0);
}

TEST_CASE("-o follows symlinks, writes through devices, refuses a FIFO nobody reads, an empty path, directories") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), values({2, 3}));
  std::filesystem::create_symlink("real.npy", dir.file("link.npy"));
  Run linked = run_cli("einsum 'ij->j' a.npy -o link.npy", dir);
  CHECK(linked.status == 0);
  CHECK(std::filesystem::is_symlink(dir.file("link.npy")));
  CHECK(read_npy(dir.file("real.npy")).to_col_major<double>() == std::vector<double>{-3, 3, -2});

  REQUIRE(::mkfifo(dir.file("fifo.npy").c_str(), 0666) == 0);
  expect_one_line_error(run_cli("einsum 'ij->j' a.npy -o fifo.npy", dir), 2,
                        "cannot write 'fifo.npy': it is a FIFO and no process is reading it");
  CHECK(std::filesystem::is_fifo(dir.file("fifo.npy")));
  CHECK(run_cli("einsum 'ij->j' a.npy -o /dev/null", dir).status == 0);
  expect_one_line_error(run_cli("einsum 'ij->j' a.npy -o /dev/full", dir), 2,
                        "cannot write '/dev/full': writing 152 bytes to a character device failed after 0: No space "
                        "left on device");
  CHECK(std::filesystem::is_character_file("/dev/full"));

  expect_one_line_error(run_cli("einsum 'ij->j' a.npy -o ''", dir), 2,
                        "cannot write '': the path is empty; give a file name");
  std::filesystem::create_directory(dir.file("sub"));
  expect_one_line_error(run_cli("einsum 'ij->j' a.npy -o sub/", dir), 2,
                        "cannot write 'sub/': the path ends in '/', so it names a directory; give a file name");
  expect_one_line_error(run_cli("einsum 'ij->j' a.npy -o sub", dir), 2,
                        "cannot write 'sub': it is a directory; give a file name");
  CHECK(std::filesystem::is_empty(dir.file("sub")));
}

TEST_CASE("run: a saved program that lists no constraint still checks the one its instructions derive") {
  test::TempDir dir;
  std::ofstream(dir.file("mm.ir")) <<
      "program @mm(%a: f64[n,k], %b: f64[j,4]) -> (f64[n,4]) {\n"
      "  %0 = dot_general(%a, %b) {lhs_batch = [], lhs_contracting = [1], rhs_batch = [], rhs_contracting = [0]} : "
      "f64[n,4]\n"
      "  return %0\n"
      "}\n";
  std::ofstream(dir.file("mm.json")) << R"({"format": "einstage.ir", "version": 1, "name": "mm",
      "params": [{"name": "a", "type": "f64[n,k]"}, {"name": "b", "type": "f64[j,4]"}],
      "instructions": [{"result": "%0", "op": "dot_general", "operands": ["%a", "%b"], "attributes":
        {"lhs_batch": [], "lhs_contracting": [1], "rhs_batch": [], "rhs_contracting": [0]}, "type": "f64[n,4]"}],
      "constraints": [], "outputs": ["%0"]})";
  write_npy(dir.file("a.npy"), values({2, 3}));
  write_npy(dir.file("b.npy"), values({5, 4}));
  for (std::string file : {"mm.ir", "mm.json"}) {
    CAPTURE(file);
    expect_one_line_error(run_cli("run " + file + " --input a=a.npy --input b=b.npy", dir), 2,
                          "@mm: shape constraint k == j at %0 does not hold: k = 3 but j = 5 ('dot_general' "
                          "contracting pair 0: lhs axis 1 vs rhs axis 0)");
  }
}

TEST_CASE("a newline in subscripts is echoed escaped by einsum, plan and lower, so the message keeps its reason") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), Tensor::zeros(DType::f64, {2, 3}));
  const std::string reason = "character U+000A cannot be a label (control or white-space character)";
  expect_one_line_error(run_cli("einsum \"$(printf 'ij,j\\nk->ik')\" a.npy a.npy", dir), 2,
                        "einsum \"ij,j\\nk->ik\": " + reason);
  expect_one_line_error(run_cli("plan \"$(printf 'ij,j\\nk->ik')\" --shapes 2x3,3x4", dir), 2,
                        "einsum \"ij,j\\nk->ik\": " + reason);
  expect_one_line_error(run_cli("lower \"$(printf 'ij,jk->i\\nk')\" --shapes 2x3,3x4", dir), 2,
                        "einsum \"ij,jk->i\\nk\": " + reason);
}

// The cube graph's 8 tensors (bond 4, 64 elements each): the best tree keeps 4^4-element intermediates, so a limit of
// one operand (512 bytes of f64) needs slicing. Integer values: every sum is exact, so any order gives the same bits.
TEST_CASE("plan and einsum --max-memory: sliced plan, same result, pinned errors") {
  test::TempDir dir;
  const std::string cube = "abc,ade,bfg,dfh,cij,eik,gjl,hkl->";
  std::string files;
  for (int k = 0; k < 8; ++k) {
    Tensor t = values({4, 4, 4});
    for (int64_t e = 0; e < 64; ++e) t.data<double>()[e] = static_cast<double>((e * (k + 3)) % 5 - 2);
    write_npy(dir.file(fmt::format("t{}.npy", k)), t);
    files += fmt::format(" t{}.npy", k);
  }
  Run plan = run_cli("plan '" + cube + "' --shapes 4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4 --max-memory 512B "
                     "--json", dir);
  REQUIRE(plan.status == 0);
  auto j = nlohmann::json::parse(plan.out);
  CHECK(j["max_elements"].get<double>() == 64.0);
  CHECK(j["num_slices"].get<double>() >= 4.0);
  CHECK(j["sc"].get<double>() <= 6.0);
  CHECK(j["overhead"].get<double>() >= 1.0);
  CHECK(j["total_flops"].get<double>() == j["num_slices"].get<double>() * j["slice_flops"].get<double>());
  Run text = run_cli("plan '" + cube + "' --shapes 4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4 --max-memory 512B",
                     dir);
  CHECK(text.out.find("       slices: ") != std::string::npos);
  CHECK(text.out.find("     overhead: 2.0104x (over the same tree unsliced: ") != std::string::npos);
  // Plain auto does not search; at 2.01x it says that a budgeted search may do better, and a search that does
  // (1.51x here) gets no note.
  CHECK(text.err == "plan: note: the sliced plan does 2.01x the unsliced flops; a tree search with a larger budget often "
                    "finds a much cheaper sliced tree, e.g. --optimize 'auto(quality=high,budget=60)' "
                    "(docs/planning.md, \"Deep cuts need budget\")\n");
  Run searched = run_cli("plan '" + cube + "' --shapes 4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4 --max-memory 512B "
                         "--optimize 'auto(quality=high,budget=1)' --no-clock-guard --json", dir);
  REQUIRE(searched.status == 0);
  CHECK(nlohmann::json::parse(searched.out)["overhead"].get<double>() < 2.0);
  CHECK(searched.err.empty());
  // f32 halves the bytes per element: the same 512B hold 128 elements.
  Run f32 = run_cli("plan '" + cube + "' --shapes 4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4,4x4x4 --max-memory 512B "
                    "--dtype f32 --json", dir);
  CHECK(nlohmann::json::parse(f32.out)["max_elements"].get<double>() == 128.0);

  REQUIRE(run_cli("einsum '" + cube + "'" + files + " -o whole.npy", dir).status == 0);
  Run one = run_cli("einsum '" + cube + "'" + files + " --max-memory 512B --threads 1 -o one.npy", dir);
  REQUIRE(one.status == 0);
  REQUIRE(run_cli("einsum '" + cube + "'" + files + " --max-memory 512B --threads 2 -o two.npy", dir).status == 0);
  // einsum says what plan says, before it contracts; with slicing at no more than 2x it has nothing to say.
  CHECK(one.err == "einsum: note: the sliced plan does 2.01x the unsliced flops; a tree search with a larger budget "
                   "often finds a much cheaper sliced tree, e.g. --optimize 'auto(quality=high,budget=60)' "
                   "(docs/planning.md, \"Deep cuts need budget\")\n");
  Run roomy = run_cli("einsum '" + cube + "'" + files + " --max-memory 2KiB -o roomy.npy", dir);
  CHECK(roomy.status == 0);
  CHECK(roomy.err.empty());
  const double whole = read_npy(dir.file("whole.npy")).to_col_major<double>()[0];
  CHECK(whole != 0.0);
  CHECK(read_npy(dir.file("one.npy")).to_col_major<double>()[0] == whole);
  CHECK(read_npy(dir.file("two.npy")).to_col_major<double>()[0] == whole);

  expect_one_line_error(run_cli("einsum '" + cube + "'" + files + " --max-memory 12MB", dir), 2,
                        "einsum: --max-memory \"12MB\" is not a memory size; write a whole number followed by B, KiB, "
                        "MiB or GiB, e.g. 256MiB");
  expect_one_line_error(run_cli("plan 'ij,jk' --shapes 2x2,2x2 --max-memory 4B", dir), 2,
                        "plan: --max-memory 4B is smaller than one f64 element (8 bytes); give at least 8B");
  Run small = run_cli("einsum '" + cube + "'" + files + " --max-memory 256B", dir);
  CHECK(small.status != 0);
  CHECK(small.err == "einstage: operand 0 ('abc') has 64 elements (512B) but the memory limit is 32 elements (256B); "
                     "every operand is read whole, so raise the limit to at least 512B\n");
}

TEST_CASE("einsum --time: one line on stderr with the read and einsum times; the result is unchanged") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), values({2, 3}));
  write_npy(dir.file("b.npy"), values({3, 4}));
  Run plain = run_cli("einsum 'ij,jk->ik' a.npy b.npy", dir);
  Run timed = run_cli("einsum 'ij,jk->ik' a.npy b.npy --time --threads 2", dir);
  CHECK(timed.status == 0);
  CHECK(timed.out == plain.out);
  CHECK(std::regex_match(timed.err, std::regex("einsum: time: read [0-9.]+ s, plan and contract [0-9.]+ s on 2 "
                                               "threads\n")));
}

// Under mpirun without --mpi every rank would contract everything and write the same -o: refused, rank 0 saying so
// (the launcher's environment is set by hand, so this runs with or without MPI built in); --mpi outside a launcher
// runs as one rank and says so.
TEST_CASE("einsum under an MPI launcher without --mpi is refused; --mpi outside one is noted") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), values({2, 3}));
  write_npy(dir.file("b.npy"), values({3, 4}));
  const std::string clean = "env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE -u PMIX_RANK";
  Run plain = run_cli("einsum 'ij,jk->ik' a.npy b.npy", dir, clean);
  REQUIRE(plain.status == 0);
  expect_one_line_error(
      run_cli("einsum 'ij,jk->ik' a.npy b.npy -o c.npy", dir, clean + " OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4"), 2,
      "einsum: started by an MPI launcher as rank 0 of 4 without --mpi: every rank would contract the whole problem "
      "and write 'c.npy'; add --mpi to spread the slices over the ranks, or run einstage without mpirun");
  expect_one_line_error(run_cli("einsum 'ij,jk->ik' a.npy b.npy", dir, clean + " PMI_RANK=0 PMI_SIZE=2"), 2,
                        "einsum: started by an MPI launcher as rank 0 of 2 without --mpi: every rank would contract "
                        "the whole problem; add --mpi to spread the slices over the ranks, or run einstage without "
                        "mpirun");
  Run other = run_cli("einsum 'ij,jk->ik' a.npy b.npy -o c.npy", dir, clean + " OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4");
  CHECK(other.status == 2);
  CHECK(other.err.empty());  // rank 0 alone speaks
  CHECK_FALSE(std::filesystem::exists(dir.file("c.npy")));
  // A launcher job of one rank is one process: nothing to refuse.
  CHECK(run_cli("einsum 'ij,jk->ik' a.npy b.npy", dir, clean + " OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1").out ==
        plain.out);
#if defined(EINSTAGE_CLI_HAS_MPI)
  Run single = run_cli("einsum 'ij,jk->ik' a.npy b.npy --mpi", dir, clean + " ASAN_OPTIONS=detect_leaks=0");
  CHECK(single.status == 0);
  CHECK(single.out == plain.out);
  CHECK(single.err == "einsum: note: --mpi outside an MPI launcher (no mpirun environment): running as one rank\n");
#endif
}

// The cube graph again with values that make the order of additions visible in the bits.
std::string cube_files(const test::TempDir& dir) {
  std::string files;
  for (int k = 0; k < 8; ++k) {
    Tensor t = values({4, 4, 4});
    for (int64_t e = 0; e < 64; ++e) t.data<double>()[e] = std::sin(0.731 * static_cast<double>(e) + k) + 0.25;
    write_npy(dir.file(fmt::format("s{}.npy", k)), t);
    files += fmt::format(" s{}.npy", k);
  }
  return files;
}

#if defined(EINSTAGE_MPIEXEC)
TEST_CASE("einsum --mpi: mpirun with 1, 2 and 4 ranks gives the bits of the one-process sliced run") {
  test::TempDir dir;
  const std::string cube = "einsum 'abc,ade,bfg,dfh,cij,eik,gjl,hkl->' " + cube_files(dir) + " --max-memory 512B";
  REQUIRE(run_cli(cube + " -o single.npy", dir).status == 0);
  const Tensor single = read_npy(dir.file("single.npy"));
  const std::string mpirun = fmt::format(
      "env ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader '{}' --oversubscribe -np",
      EINSTAGE_MPIEXEC);
  for (int ranks : {1, 2, 4}) {
    CAPTURE(ranks);
    Run r = run_cli(cube + " --mpi --threads 1 -o mpi.npy", dir, fmt::format("{} {}", mpirun, ranks));
    CHECK(r.status == 0);
    CHECK(r.out.empty());  // only rank 0 writes, and it writes the file
    const Tensor got = read_npy(dir.file("mpi.npy"));
    CHECK(got.to_col_major<double>() == single.to_col_major<double>());
  }
  // --time: rank 0 alone prints the times, and the result is still written.
  Run timed = run_cli(cube + " --mpi --threads 1 --time -o timed.npy", dir, fmt::format("{} 2", mpirun));
  CHECK(timed.status == 0);
  // Rank 0 alone also prints the note on the plan's 2.01x (plain auto does not search).
  CHECK(std::regex_match(timed.err, std::regex("einsum: note: the sliced plan does 2\\.01x [^\n]*\n"
                                               "einsum: time: read [0-9.]+ s, plan [0-9.]+ s, contract [0-9.]+ s on "
                                               "2 ranks x 1 threads\n")));
  CHECK(read_npy(dir.file("timed.npy")).to_col_major<double>() == single.to_col_major<double>());
  // Printing: rank 0 only.
  Run printed = run_cli(cube + " --mpi", dir, fmt::format("{} 2", mpirun));
  CHECK(printed.status == 0);
  CHECK(printed.out == run_cli(cube, dir).out);
  // A rank that fails ends the job with its message instead of leaving the others waiting.
  Run failed = run_cli(cube + " missing.npy --mpi", dir, fmt::format("{} 2", mpirun));
  CHECK(failed.status != 0);
  CHECK(failed.err.find("einstage: rank ") != std::string::npos);
  CHECK(failed.err.find("missing.npy") != std::string::npos);
}
#elif !defined(EINSTAGE_CLI_HAS_MPI)
TEST_CASE("einsum --mpi without MPI says that distribution needs it") {
  test::TempDir dir;
  expect_one_line_error(run_cli("einsum 'abc,ade,bfg,dfh,cij,eik,gjl,hkl->' " + cube_files(dir) + " --mpi", dir), 2,
                        "einsum: --mpi distributes the slices over MPI ranks, and this einstage was built without "
                        "MPI; install OpenMPI (libopenmpi-dev) and rebuild to use it");
}
#endif
