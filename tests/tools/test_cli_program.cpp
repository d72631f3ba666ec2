// `einstage grad PROGRAM` and `einstage show-program`, run as separate processes on programs saved by the test: the
// gradient of a traced program's scalar output matches the C++ ad::grad of the same program and central finite
// differences, from the IR text form and from JSON; the errors for inputs, outputs and --wrt names are one line
// with status 2; show-program prints the program as loaded (golden text), and with --lower partially lowered.
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Json.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"
#include "support/Cli.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace einstage;

namespace {

// loss(x: f64[2,3], w: f64[3], n: i64[2]) = sum(sin(x w) * n): one scalar output, an einsum, an integer parameter.
Program traced_loss(const ExtensionRegistry& registry) {
  TraceContext ctx("loss", &registry);
  TracedTensor x = ctx.parameter("x", DType::f64, {2, 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3});
  TracedTensor n = ctx.parameter("n", DType::i64, {2});
  TracedTensor y = einsum::einsum(ctx, "ij,j->i", {x, w});
  return ctx.finish({sum(sin(y) * convert(n, DType::f64))});
}

Tensor column_major(Shape shape, std::vector<double> v) {
  return Tensor::from_col_major<double>(std::move(shape), std::span<const double>(v));
}

void expect_error(const test::CliRun& r, const std::string& message) {
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "einstage: " + message + "\n");
}

}  // namespace

TEST_CASE("grad PROGRAM: a saved program's gradient matches ad::grad and finite differences, from .ir and .json") {
  test::TempDir dir;
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  const Program loss = traced_loss(rt.registry());
  std::ofstream(dir.file("loss.ir")) << print_program(loss);
  std::ofstream(dir.file("loss.json")) << program_to_json(loss);
  const Tensor x = column_major({2, 3}, {0.3, -0.7, 1.1, 0.2, -0.4, 0.9});
  const Tensor w = column_major({3}, {0.5, -1.2, 0.8});
  const Tensor n = Tensor::from_col_major<int64_t>({2}, {3, -2});
  write_npy(dir.file("x.npy"), x);
  write_npy(dir.file("w.npy"), w, NpyOrder::c);
  write_npy(dir.file("n.npy"), n);
  const std::string inputs = "--input x=x.npy --input w=w.npy --input n=n.npy";

  // The C++ API's gradient of the same program.
  const std::vector<Tensor> expected = rt.prepare(ad::grad(loss, {0, 1}, &rt.registry())).run({x, w, n});
  for (std::string file : {"loss.ir", "loss.json"}) {
    CAPTURE(file);
    test::CliRun r = test::run_cli("grad " + file + " " + inputs + " --wrt x,w -o g_", dir);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out == "g_x.npy: d/d x (x.npy), f64[2,3]\ng_w.npy: d/d w (w.npy), f64[3]\n");
    const Tensor gx = read_npy(dir.file("g_x.npy")), gw = read_npy(dir.file("g_w.npy"));
    CHECK(gx.shape() == Shape{2, 3});
    const std::vector<double> got_x = gx.to_col_major<double>(), got_w = gw.to_col_major<double>();
    const std::vector<double> want_x = expected[0].to_col_major<double>(), want_w = expected[1].to_col_major<double>();
    for (size_t k = 0; k < got_x.size(); ++k) CHECK(got_x[k] == doctest::Approx(want_x[k]).epsilon(1e-14));
    for (size_t k = 0; k < got_w.size(); ++k) CHECK(got_w[k] == doctest::Approx(want_w[k]).epsilon(1e-14));
  }

  // Central differences of the forward program, element by element.
  const Executable forward = rt.prepare(loss);
  auto value_at = [&](const Tensor& xs, const Tensor& ws) { return forward.run({xs, ws, n})[0].to_col_major<double>()[0]; };
  const double h = 1e-6;
  const std::vector<double> gx = read_npy(dir.file("g_x.npy")).to_col_major<double>();
  const std::vector<double> gw = read_npy(dir.file("g_w.npy")).to_col_major<double>();
  for (size_t k = 0; k < gx.size(); ++k) {
    std::vector<double> up = x.to_col_major<double>(), down = up;
    up[k] += h;
    down[k] -= h;
    const double fd = (value_at(column_major({2, 3}, up), w) - value_at(column_major({2, 3}, down), w)) / (2 * h);
    CHECK(gx[k] == doctest::Approx(fd).epsilon(1e-7));
  }
  for (size_t k = 0; k < gw.size(); ++k) {
    std::vector<double> up = w.to_col_major<double>(), down = up;
    up[k] += h;
    down[k] -= h;
    const double fd = (value_at(x, column_major({3}, up)) - value_at(x, column_major({3}, down))) / (2 * h);
    CHECK(gw[k] == doctest::Approx(fd).epsilon(1e-7));
  }

  // Without --wrt: every floating-point parameter (x and w, not the integer n), default prefix grad_.
  test::CliRun all = test::run_cli("grad loss.ir " + inputs, dir);
  CHECK(all.status == 0);
  CHECK(all.out == "grad_x.npy: d/d x (x.npy), f64[2,3]\ngrad_w.npy: d/d w (w.npy), f64[3]\n");
  CHECK(read_npy(dir.file("grad_w.npy")).to_col_major<double>() == gw);
}

TEST_CASE("grad PROGRAM: unknown and missing inputs, a non-scalar output and bad --wrt names are one-line errors") {
  test::TempDir dir;
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  std::ofstream(dir.file("loss.ir")) << print_program(traced_loss(rt.registry()));
  std::ofstream(dir.file("vec.ir"))
      << "program @vec(%x: f64[2]) -> (f64[2]) {\n  %0 = neg(%x) : f64[2]\n  return %0\n}\n";
  write_npy(dir.file("x.npy"), column_major({2, 3}, {1, 2, 3, 4, 5, 6}));
  write_npy(dir.file("w.npy"), column_major({3}, {1, 2, 3}));
  write_npy(dir.file("n.npy"), Tensor::from_col_major<int64_t>({2}, {1, 1}));
  write_npy(dir.file("v.npy"), column_major({2}, {1, 2}));
  const std::string inputs = "--input x=x.npy --input w=w.npy --input n=n.npy";

  expect_error(test::run_cli("grad loss.ir " + inputs + " --input z=x.npy", dir),
               "grad: --input z=x.npy: @loss has no parameter 'z' (its parameters: x, w, n)");
  expect_error(test::run_cli("grad loss.ir --input x=x.npy --input n=n.npy", dir),
               "grad: no --input for parameter 'w' (f64[3]) of @loss; give --input w=FILE.npy");
  expect_error(test::run_cli("grad vec.ir --input x=v.npy", dir),
               "grad: @vec returns f64[2] but grad needs a scalar output; reduce it in the program first (e.g. with "
               "reduce_sum over every axis)");
  expect_error(test::run_cli("grad loss.ir " + inputs + " --wrt x,v", dir),
               "grad: --wrt names 'v' but @loss has no parameter 'v' (its parameters: x, w, n)");
  expect_error(test::run_cli("grad loss.ir " + inputs + " --wrt n", dir),
               "grad: --wrt names parameter 'n' of @loss, which is i64[2], but a gradient needs a floating-point "
               "parameter (f32, f64, c64 or c128); leave 'n' out of --wrt");
  expect_error(test::run_cli("grad loss.ir " + inputs + " --wrt w,w", dir), "grad: --wrt names parameter 'w' twice");
  expect_error(test::run_cli("grad loss.ir x.npy", dir),
               "grad: unexpected argument 'x.npy' after the program loss.ir; give a program's inputs as --input "
               "NAME=FILE.npy");
  expect_error(test::run_cli("grad loss.ir " + inputs + " --broadcast", dir),
               "grad: --optimize and --broadcast apply to 'grad SUBSCRIPTS' only; a saved program's einsums keep the "
               "options they were traced with");
  expect_error(test::run_cli("grad 'ij->' x.npy --input x=x.npy", dir),
               "grad: --input names a program's parameter, but no PROGRAM.ir or PROGRAM.json was given; for an einsum "
               "give the operand files after SUBSCRIPTS");
  // Nothing was written by the failed runs.
  CHECK(!std::filesystem::exists(dir.file("grad_x.npy")));
  CHECK(!std::filesystem::exists(dir.file("grad_w.npy")));
}

TEST_CASE("show-program: prints a saved program as loaded, before lowering, from .ir and .json") {
  test::TempDir dir;
  // Hand-written, its attributes in another order: show-program prints the program the parser built.
  std::ofstream(dir.file("p.ir"))
      << "program @p(%x: f64[n,3], %y: f64[3]) -> (f64[n]) {\n"
         "  %0 = einstage.einsum.v1(%x, %y) {subscripts = \"ij,j->i\", plan = greedy, broadcast = false} : f64[n]\n"
         "  %1 = neg(%0) : f64[n]\n"
         "  return %1\n"
         "}\n";
  test::CliRun r = test::run_cli("show-program p.ir", dir);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out ==
        "program @p(%x: f64[n,3], %y: f64[3]) -> (f64[n]) {\n"
        "  %0 = einstage.einsum.v1(%x, %y) {broadcast = false, plan = greedy, subscripts = \"ij,j->i\"} : f64[n]\n"
        "  %1 = neg(%0) : f64[n]\n"
        "  return %1\n"
        "}\n");
  // The JSON form of the same program prints the same text.
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  const Program loss = traced_loss(rt.registry());
  std::ofstream(dir.file("loss.json")) << program_to_json(loss);
  test::CliRun json = test::run_cli("show-program loss.json", dir);
  CHECK(json.status == 0);
  CHECK(json.out == print_program(loss));

  expect_error(test::run_cli("show-program", dir),
               "show-program: no program file given; usage: einstage show-program PROGRAM.json|PROGRAM.ir");
  expect_error(test::run_cli("show-program p.ir loss.json", dir),
               "show-program: unexpected argument 'loss.json'; give one program file");
  expect_error(test::run_cli("show-program nothing.ir", dir),
               "cannot read program file 'nothing.ir': no such file or not readable");
  test::CliRun help = test::run_cli("show-program --help", dir);
  CHECK(help.status == 0);
  CHECK(help.out.rfind("usage: einstage show-program ", 0) == 0);
}

TEST_CASE("a saved program with an svd: show-program, run and grad use the linalg module linked into the CLI") {
  // The nuclear norm sum(S) of a 3x2 matrix; its gradient is U Vh (the thin factors), here from NumPy's
  // np.linalg.svd of the same matrix: u, s, vh = svd(A, full_matrices=False); s.sum(), u @ vh.
  test::TempDir dir;
  const std::string text =
      "program @nuclear(%a: f64[3,2]) -> (f64[]) {\n"
      "  %0, %1, %2 = einstage.linalg.v1(%a) {eps = 1e-12, full = false, op = svd} : f64[3,2], f64[2], f64[2,2]\n"
      "  %3 = reduce_sum(%1) {axes = [0]} : f64[]\n"
      "  return %3\n"
      "}\n";
  std::ofstream(dir.file("nuclear.ir")) << text;
  write_npy(dir.file("a.npy"), Tensor::from_row_major<double>({3, 2}, {2, 1, 0.5, 3, 1, -1}));

  test::CliRun shown = test::run_cli("show-program nuclear.ir", dir);
  CHECK(shown.status == 0);
  CHECK(shown.err.empty());
  CHECK(shown.out == text);

  test::CliRun value = test::run_cli("run nuclear.ir --input a=a.npy", dir);
  CHECK(value.status == 0);
  CHECK(value.err.empty());
  const std::string head = "output 0 (%3): f64[]\n";  // then the value; LAPACK's last bits may vary by CPU
  REQUIRE(value.out.starts_with(head));
  CHECK(std::stod(value.out.substr(head.size())) == doctest::Approx(5.531970724290515).epsilon(1e-13));

  test::CliRun grad = test::run_cli("grad nuclear.ir --input a=a.npy -o g_", dir);
  CHECK(grad.status == 0);
  CHECK(grad.err.empty());
  CHECK(grad.out == "g_a.npy: d/d a (a.npy), f64[3,2]\n");
  const Tensor g = read_npy(dir.file("g_a.npy"));
  REQUIRE(g.shape() == Shape{3, 2});
  const std::vector<double> want = {0.8527266304979054,  0.18706473737662455, 0.04000505521687054,
                                    0.9075474169450855,  0.520823280198556,   -0.375984667275831};  // row-major
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) CHECK(g.at<double>({i, j}) == doctest::Approx(want[i * 2 + j]).epsilon(1e-12));
}

TEST_CASE("show-program --lower and run --print-stages lower partially: einsums become standard ops, the svd stays") {
  test::TempDir dir;
  std::ofstream(dir.file("p.ir"))
      << "program @p(%a: f64[n,3], %b: f64[3,2]) -> (f64[2]) {\n"
         "  %0 = einstage.einsum.v1(%a, %b) {broadcast = false, plan = auto, subscripts = \"ij,jk->ik\"} : f64[n,2]\n"
         "  %1 = reshape(%0) {shape = [4, 2]} : f64[4,2]\n"
         "  %2, %3, %4 = einstage.linalg.v1(%1) {eps = 1e-12, full = false, op = svd} : f64[4,2], f64[2], f64[2,2]\n"
         "  return %3\n"
         "}\n";
  const std::string lowered =
      "program @p(%a: f64[4,3], %b: f64[3,2]) -> (f64[2]) {\n"
      "  %0 = dot_general(%a, %b) {lhs_batch = [], lhs_contracting = [1], rhs_batch = [], rhs_contracting = [0]} "
      ": f64[4,2]\n"
      "  %1 = reshape(%0) {shape = [4, 2]} : f64[4,2]\n"
      "  %2, %3, %4 = einstage.linalg.v1(%1) {eps = 1e-12, full = false, op = svd} : f64[4,2], f64[2], f64[2,2]\n"
      "  return %3\n"
      "}\n";
  const std::string kept =
      "kept 'einstage.linalg.v1' at %2 (%2 in the lowered program): module 'einstage.linalg' registers no lowering "
      "rule\n";
  test::CliRun shown = test::run_cli("show-program p.ir --lower --bind n=4", dir);
  CHECK(shown.status == 0);
  CHECK(shown.out == lowered);
  CHECK(shown.err == kept);

  // run --print-stages: the same lowered stage for inputs with n = 4, then the list of kept ops.
  write_npy(dir.file("a.npy"), column_major({4, 3}, {1, 0, 2, -1, 0.5, 1, 3, 0, -2, 1, 1, 0.25}));
  write_npy(dir.file("b.npy"), column_major({3, 2}, {1, 2, 0, -1, 0.5, 1}));
  test::CliRun stages = test::run_cli("run p.ir --input a=a.npy --input b=b.npy --print-stages", dir);
  CHECK(stages.status == 0);
  CHECK(stages.out.find("== lowered (for these input shapes) ==\n" + lowered + kept + "\n== planned ==") !=
        std::string::npos);

  // einsum needs every symbol's value; the message says which one is missing.
  test::CliRun unbound = test::run_cli("show-program p.ir --lower", dir);
  CHECK(unbound.status != 0);
  CHECK(unbound.err.find("lower_to_standard_ops needs a value for every symbol") != std::string::npos);
  expect_error(test::run_cli("show-program p.ir --lower --bind n", dir),
               "show-program: --bind \"n\" is not NAME=N; give a symbol's name and its value, a whole number >= 0 "
               "(e.g. --bind n=5)");
  expect_error(test::run_cli("show-program p.ir --lower --bind n=4 --bind n=5", dir),
               "show-program: --bind gives symbol 'n' twice; give each symbol once");
  expect_error(test::run_cli("show-program p.ir --bind n=4", dir),
               "show-program: --bind gives symbol values for --lower; add --lower or drop --bind");
}
