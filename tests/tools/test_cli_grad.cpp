// `einstage grad`, run as a separate process: gradients written as .npy files, checked against sums written out in
// the test (not through einstage): the reference broadcast case, a three-operand einsum with a cotangent file and
// --wrt, a complex case (the adjoint cotangent), and the one-line usage errors.
#include "ir/Npy.h"
#include "support/Cli.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sys/wait.h>

#include <complex>
#include <cstdlib>
#include <string>
#include <vector>

using namespace einstage;

namespace {

using Run = test::CliRun;

// Runs `einstage grad ARGS` in `dir`; `env` prefixes VAR=value pairs.
Run run_grad_cli(const test::TempDir& dir, const std::string& args, const std::string& env = "") {
  return test::run_cli("grad " + args, dir, env);
}

// Deterministic values in [-1, 1).
std::vector<double> values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  for (double& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>(seed >> 11) * 0x1.0p-52 - 1;
  }
  return v;
}

}  // namespace

TEST_CASE("grad: the reference broadcast case a[2,1], b[3,2], ij,jk->ik gives a [2,1] gradient of 21s") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), Tensor::from_row_major<double>({2, 1}, {0.5, -1.5}), NpyOrder::c);
  write_npy(dir.file("b.npy"), Tensor::from_row_major<double>({3, 2}, {1, 2, 3, 4, 5, 6}), NpyOrder::c);
  Run r = run_grad_cli(dir, "'ij,jk->ik' a.npy b.npy --broadcast");
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out == "grad_0.npy: d/d operand 0 (a.npy), f64[2,1]\ngrad_1.npy: d/d operand 1 (b.npy), f64[3,2]\n");
  Tensor ga = read_npy(dir.file("grad_0.npy")), gb = read_npy(dir.file("grad_1.npy"));
  CHECK(ga.shape() == Shape{2, 1});
  CHECK(ga.to_col_major<double>() == std::vector<double>{21, 21});  // d/da[i,0] = sum of b
  CHECK(gb.to_col_major<double>() == std::vector<double>(6, -1.0));  // d/db[j,k] = sum of a
  // Without --broadcast the length-1 axis is refused, as by einsum itself.
  Run refused = run_grad_cli(dir, "'ij,jk->ik' a.npy b.npy");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("label 'j' has extent 1 in operand 0 (axis 1) but 3 in operand 1 (axis 0)") !=
        std::string::npos);
}

TEST_CASE("grad: three operands, a cotangent file, --wrt and -o") {
  test::TempDir dir;
  const int64_t I = 2, J = 3, K = 4, L = 2;
  std::vector<double> a = values(I * J, 1), b = values(J * K, 2), c = values(K * L, 3), g = values(I * L, 4);
  auto at = [](const std::vector<double>& v, int64_t rows, int64_t r, int64_t col) { return v[col * rows + r]; };
  write_npy(dir.file("a.npy"), Tensor::from_col_major<double>({I, J}, std::span<const double>(a)));
  write_npy(dir.file("b.npy"), Tensor::from_col_major<double>({J, K}, std::span<const double>(b)), NpyOrder::c);
  write_npy(dir.file("c.npy"), Tensor::from_col_major<double>({K, L}, std::span<const double>(c)));
  write_npy(dir.file("g.npy"), Tensor::from_col_major<double>({I, L}, std::span<const double>(g)));
  Run r = run_grad_cli(dir, "'ij,jk,kl->il' a.npy b.npy c.npy --wrt 2,1 --cotangent g.npy -o d_");
  CHECK(r.status == 0);
  CHECK(r.out == "d_2.npy: d/d operand 2 (c.npy), f64[4,2]\nd_1.npy: d/d operand 1 (b.npy), f64[3,4]\n");
  CHECK(!std::filesystem::exists(dir.file("d_0.npy")));
  // d/db[j,k] = sum_il a[i,j] g[i,l] c[k,l];  d/dc[k,l] = sum_ij a[i,j] b[j,k] g[i,l].
  Tensor db = read_npy(dir.file("d_1.npy")), dc = read_npy(dir.file("d_2.npy"));
  for (int64_t j = 0; j < J; ++j)
    for (int64_t k = 0; k < K; ++k) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i)
        for (int64_t l = 0; l < L; ++l) s += at(a, I, i, j) * at(g, I, i, l) * at(c, K, k, l);
      CHECK(db.at<double>({j, k}) == doctest::Approx(s).epsilon(1e-13));
    }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t l = 0; l < L; ++l) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i)
        for (int64_t j = 0; j < J; ++j) s += at(a, I, i, j) * at(b, J, j, k) * at(g, I, i, l);
      CHECK(dc.at<double>({k, l}) == doctest::Approx(s).epsilon(1e-13));
    }
  // The output and the gradients come from one walk of the planned tree (the einsum merged with its vjp, mode
  // value_vjp); --print-stages shows it, and what it keeps.
  Run stages = run_grad_cli(dir, "'ij,jk,kl->il' a.npy b.npy c.npy --wrt 2,1 --cotangent g.npy -o e_ --print-stages");
  CHECK(stages.status == 0);
  CHECK(stages.out.find("mode = value_vjp, plan = auto, slots = [1, 2]") != std::string::npos);
  CHECK(stages.out.find("einstage.einsum.v1(") == std::string::npos);
  CHECK(stages.out.find("einsum value (the forward phase runs to the root) and vjp \"ij,jk,kl->il\" over operands "
                        "[1, 2] dtype f64") != std::string::npos);
  CHECK(stages.out.find("forward keeps 0 (0 bytes): nothing") != std::string::npos);  // b and c are leaves
  CHECK(stages.out.find("reverse: ct operand 1 \"jk\" = ct node 3 \"jl\" x operand 2 \"kl\"") != std::string::npos);
  CHECK(read_npy(dir.file("e_1.npy")).to_col_major<double>() == db.to_col_major<double>());
  // Under a memory limit of 0 bytes the reverse pass recomputes what it would keep, with the same bits.
  Run limited = run_grad_cli(dir, "'ij,jk,kl->il' a.npy b.npy c.npy --cotangent g.npy -o f_ --print-stages",
                             "EINSTAGE_AD_KEEP_BYTES=0");
  CHECK(limited.status == 0);
  CHECK(limited.out.find("forward keeps 0 (0 bytes, limit 0 bytes): nothing") != std::string::npos);
  CHECK(limited.out.find("recomputes 1 when read (over the limit): node 3 \"jl\"") != std::string::npos);
  Run unlimited = run_grad_cli(dir, "'ij,jk,kl->il' a.npy b.npy c.npy --cotangent g.npy -o h_");
  CHECK(unlimited.status == 0);
  for (int k = 0; k < 3; ++k)
    CHECK(read_npy(dir.file(fmt::format("f_{}.npy", k))).to_col_major<double>() ==
          read_npy(dir.file(fmt::format("h_{}.npy", k))).to_col_major<double>());
}

TEST_CASE("grad: complex operands give the adjoint cotangent (the other operand conjugated)") {
  test::TempDir dir;
  using c128 = std::complex<double>;
  write_npy(dir.file("x.npy"), Tensor::from_col_major<c128>({2}, {c128(1, 2), c128(-1, 0.5)}));
  write_npy(dir.file("y.npy"), Tensor::from_col_major<c128>({2}, {c128(0, 1), c128(3, -1)}));
  Run r = run_grad_cli(dir, "'i,i->' x.npy y.npy --wrt 0");
  CHECK(r.status == 0);
  Tensor gx = read_npy(dir.file("grad_0.npy"));
  CHECK(gx.at<c128>({0}) == std::conj(c128(0, 1)));
  CHECK(gx.at<c128>({1}) == std::conj(c128(3, -1)));
}

TEST_CASE("grad: usage errors are one line with status 2") {
  test::TempDir dir;
  write_npy(dir.file("a.npy"), Tensor::from_col_major<double>({2, 2}, {1, 2, 3, 4}));
  write_npy(dir.file("g.npy"), Tensor::from_col_major<double>({3}, {1, 2, 3}));
  struct Case {
    std::string args, err;
  };
  const std::vector<Case> cases = {
      {"'ij->i' a.npy --wrt 1", "einstage: grad: --wrt names operand 1 but 1 operand file was given (indices 0..0)\n"},
      {"'ij->i' a.npy --wrt 0,x", "einstage: grad: --wrt '0,x' is not a comma-separated list of operand indices "
                                  "(e.g. 0,1)\n"},
      {"'ij->i' a.npy --wrt 0,0", "einstage: grad: --wrt names operand 0 twice\n"},
      {"'ij->i'", "einstage: grad: expected SUBSCRIPTS and at least one .npy file; usage: einstage grad SUBSCRIPTS "
                  "A.npy [B.npy ...] [--wrt 0,1]\n"},
      {"'ij->i' a.npy --cotangent g.npy", "einstage: grad: the cotangent g.npy is f64[3] but the output of \"ij->i\" "
                                          "is f64[2]; give a cotangent of the output's shape and dtype\n"},
      {"'ij->i' a.npy -o ''", "einstage: grad: the output prefix (-o) is empty; give one such as grad_ (the files "
                              "are PREFIX0.npy, PREFIX1.npy, ...) or a directory such as out/\n"},
      {"'ij->i' a.npy --output=", "einstage: grad: the output prefix (-o) is empty; give one such as grad_ (the "
                                  "files are PREFIX0.npy, PREFIX1.npy, ...) or a directory such as out/\n"},
      {"'ij->i' a.npy --cotangent \"$(printf 'g\\n\\377.npy')\"", "einstage: cannot open 'g\\n\\xff.npy' for reading: No such "
                                                    "file or directory\n"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    Run r = run_grad_cli(dir, c.args);
    CHECK(r.status == 2);
    CHECK(r.err == c.err);
    CHECK(r.out.empty());
  }
}
