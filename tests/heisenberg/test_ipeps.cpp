// The Heisenberg iPEPS example (examples/heisenberg/Ipeps.h), first part: the rotated bond Hamiltonian against
// S·S conjugated by a π rotation about y (built here from the Pauli matrices), the C4v projection (idempotent,
// invariant under each of the eight symmetries, the traced and the concrete forms equal), the Néel product state's
// energy −1/2 per site at several χ (exact: a product state's reduced density matrix does not depend on the
// environment), and on a random C4v-symmetric D = 2 state the gradient of the energy through the converged CTMRG by
// the fixed-point adjoint (compiler/ad/FixedPoint.h) against central finite differences of the reconverged energy.
#include "examples/heisenberg/Ipeps.h"

#include "compiler/ad/Ad.h"
#include "compiler/ad/FixedPoint.h"
#include "HeisenbergTest.h"
#include "ir/Printer.h"
#include "support/ErrorOf.h"
#include "support/Golden.h"
#include "tests/Paths.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <complex>
#include <limits>

using namespace einstage;
using namespace einstage::heisenberg;
using einstage::test::error_of;

namespace {

using heisenberg_test::runtime;

Tensor random_state(int d, uint64_t seed) {
  test::SplitMix64 rng{seed};
  std::vector<double> v(size_t(2 * d * d * d * d));
  for (double& x : v) x = rng.symmetric();
  return Tensor::from_col_major<double>({2, d, d, d, d}, v);
}

double max_abs_diff(const Tensor& x, const Tensor& y) {
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

double dot(const Tensor& x, const Tensor& y) {
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

Tensor axpy(double alpha, const Tensor& x, const Tensor& y) {  // alpha x + y
  std::vector<double> a = x.to_col_major<double>(), b = y.to_col_major<double>();
  for (size_t i = 0; i < a.size(); ++i) b[i] += alpha * a[i];
  return Tensor::from_col_major<double>(y.shape(), b);
}

// The Néel state in the rotated frame: every site |↑⟩ (or any real spin direction), D virtual legs carrying index 0.
Tensor product_state(int d, double angle) {
  std::vector<double> v(size_t(2 * d * d * d * d), 0.0);
  v[0] = std::cos(angle);
  v[1] = std::sin(angle);
  return Tensor::from_col_major<double>({2, d, d, d, d}, v);
}

}  // namespace

TEST_CASE("heisenberg: the rotated bond Hamiltonian is S.S conjugated by a pi rotation about y on one site") {
  using cd = std::complex<double>;
  const cd i(0, 1);
  const std::array<std::array<std::array<cd, 2>, 2>, 3> spin = {{{{{0, 0.5}, {0.5, 0}}},       // Sx
                                                                 {{{0, -0.5 * i}, {0.5 * i, 0}}},  // Sy
                                                                 {{{0.5, 0}, {0, -0.5}}}}};      // Sz
  const double r[2][2] = {{0, -1}, {1, 0}};  // exp(-i pi Sy)
  Tensor h = rotated_bond_hamiltonian();
  for (int s1 = 0; s1 < 2; ++s1)
    for (int s2 = 0; s2 < 2; ++s2)
      for (int t1 = 0; t1 < 2; ++t1)
        for (int t2 = 0; t2 < 2; ++t2) {
          cd want = 0;  // sum_a Sa[s1,t1] (R Sa R^T)[s2,t2]
          for (int a = 0; a < 3; ++a)
            for (int u = 0; u < 2; ++u)
              for (int v = 0; v < 2; ++v) want += spin[a][s1][t1] * r[s2][u] * spin[a][u][v] * r[t2][v];
          CHECK(std::abs(want.imag()) < 1e-15);
          CHECK(std::abs(h.at<double>({s1, s2, t1, t2}) - want.real()) < 1e-15);
        }
}

TEST_CASE("heisenberg: the C4v projection is idempotent, invariant under the square's symmetries, traced = concrete") {
  const int d = 3;
  Tensor a = random_state(d, 11);
  Tensor p = c4v_symmetrize(a);
  CHECK(max_abs_diff(p, a) > 0.1);  // a random tensor is not symmetric
  CHECK(max_abs_diff(c4v_symmetrize(p), p) < 1e-15);
  // The rotations (u,l,d,r) -> (l,d,r,u) and a mirror (l <-> r) generate C4v; each leaves the projection alone.
  CHECK(max_abs_diff(p.permute({0, 2, 3, 4, 1}).contiguous(), p) < 1e-15);
  CHECK(max_abs_diff(p.permute({0, 1, 4, 3, 2}).contiguous(), p) < 1e-15);
  CHECK(max_abs_diff(p.permute({0, 2, 1, 4, 3}).contiguous(), p) < 1e-15);
  CHECK(max_abs_diff(p.permute({0, 2, 3, 4, 1}).contiguous(), a.permute({0, 2, 3, 4, 1}).contiguous()) > 0.1);

  TraceContext ctx("project", &runtime().registry());
  TracedTensor x = ctx.parameter("a", DType::f64, {2, d, d, d, d});
  Program traced = ctx.finish({c4v_symmetrize(x)});
  CHECK(max_abs_diff(runtime().prepare(traced).run({a}).at(0), p) < 1e-15);

  CHECK(error_of([&] { c4v_symmetrize(Tensor::zeros(DType::f64, {2, 2, 2, 3, 2})); }) ==
        "c4v_symmetrize: the iPEPS tensor is f64[2,2,2,3,2] but must be f64[2,D,D,D,D] (A[s,u,l,d,r], physical "
        "dimension 2, bond dimension D on all four virtual legs)");
}

TEST_CASE("heisenberg: the Neel product state has energy -1/2 per site at any chi") {
  for (int chi : {1, 2, 5}) {
    Ctmrg ctm(runtime(), 1, chi);
    for (double angle : {0.0, 0.3, 2.0}) {
      Tensor a = product_state(1, angle);
      CtmrgResult r = ctm.converge(a, initial_environment(a, chi));
      CAPTURE(chi);
      CAPTURE(angle);
      CHECK(r.steps < 50);
      CHECK(std::abs(ctm.energy(r.env, a) + 0.5) < 1e-14);
    }
  }
  // Embedded in D = 2 (every virtual leg on index 0): the same state.
  Ctmrg ctm(runtime(), 2, 4);
  Tensor a = product_state(2, 0.7);
  CtmrgResult r = ctm.converge(a, initial_environment(a, 4));
  CHECK(std::abs(ctm.energy(r.env, a) + 0.5) < 1e-14);
}

TEST_CASE("heisenberg: the energy gradient through CTMRG by the fixed-point adjoint equals finite differences") {
  const int d = 2, chi = 8;
  Ctmrg ctm(runtime(), d, chi);
  Tensor a = c4v_symmetrize(random_state(d, 2024));
  CtmrgOptions tight;
  tight.tolerance = 1e-13;
  CtmrgResult r = ctm.converge(a, initial_environment(a, chi), tight);
  const double e = ctm.energy(r.env, a);
  CAPTURE(e);
  CAPTURE(r.steps);
  CHECK(e > -0.67);  // above the ground-state energy per site of the square lattice (-0.6694)

  // dE/da = the energy's own derivative in a, plus the fixed point's: x_bar = dE/d(C, T) through the adjoint.
  const ExtensionRegistry* reg = &runtime().registry();
  Program energy_vjp = ad::grad(ctm.energy_program(), {0, 1, 2}, reg);
  std::vector<Tensor> g = runtime().prepare(energy_vjp).run({r.env.c, r.env.t, a});
  CHECK(r.fixed_point_change < 1e-12);
  ad::FixedPointAdjoint adjoint(ctm.step_program(), {0, 1}, {2}, reg, ad::preparer_of(runtime()));
  ad::FixedPointVjp fp = adjoint.vjp({r.env.c, r.env.t, a, r.gauge}, {g[0], g[1]});
  CHECK(fp.report.converged);
  CAPTURE(fp.report.gmres_iterations);
  Tensor grad = axpy(1.0, fp.cotangents.at(0), g[2]);
  Tensor direct_only = g[2];  // what the gradient would be with the environment held fixed

  // The unrolled alternative: reverse mode through 30 steps from the converged environment (the Neumann series cut
  // after 30 terms; CTMRG contracts by about 4 per step here).
  Program unrolled = ad::grad(trace_unrolled_energy(reg, d, chi, 30), {2}, reg);
  Tensor unrolled_grad = runtime().prepare(unrolled).run({r.env.c, r.env.t, a, r.gauge}).at(0);
  CHECK(max_abs_diff(unrolled_grad, grad) < 1e-8 * std::sqrt(dot(grad, grad)));

  // Along C4v-symmetric directions (the CTMRG assumes the symmetry), central differences of the reconverged energy.
  for (uint64_t seed : {1, 2}) {
    Tensor dir = c4v_symmetrize(random_state(d, 100 + seed));
    const double h = 1e-5;
    Tensor ap = axpy(h, dir, a), am = axpy(-h, dir, a);
    double ep = ctm.energy(ctm.converge(ap, r.env, tight).env, ap);
    double em = ctm.energy(ctm.converge(am, r.env, tight).env, am);
    double fd = (ep - em) / (2 * h);
    double ad_value = dot(grad, dir);
    CAPTURE(fd);
    CAPTURE(ad_value);
    CHECK(std::abs(fd - ad_value) < 1e-6 * std::max(1.0, std::abs(fd)));
    CHECK(std::abs(fd - dot(direct_only, dir)) > 1e-4);  // the environment's response matters
  }
}


TEST_CASE("heisenberg: bad input is a clear error") {
  Ctmrg ctm(runtime(), 2, 8);
  Tensor a = c4v_symmetrize(random_state(2, 5));
  CHECK(error_of([&] { initial_environment(a, 3); }) ==
        "heisenberg-ipeps: chi = 3 is below D^2 = 4 (D = 2); the environment must hold at least one double-layer bond: "
        "take chi >= D^2");
  CtmrgOptions one;
  one.max_steps = 1;
  CHECK(error_of([&] { ctm.converge(a, initial_environment(a, 8), one); }) ==
        "heisenberg-ipeps: CTMRG did not converge within 1 steps (D = 2, chi = 8): the corner spectrum still changed "
        "by 1 in the last step, tolerance 1e-10; raise the step cap or chi, or loosen the tolerance");
  CHECK(error_of([&] { ctm.converge(c4v_symmetrize(random_state(3, 5)), initial_environment(a, 8)); }) ==
        "heisenberg-ipeps: the iPEPS tensor has bond dimension 3 but this CTMRG was made for D = 2");
  std::vector<double> v = a.to_col_major<double>();
  v[3] = std::numeric_limits<double>::quiet_NaN();
  CHECK(error_of([&] { initial_environment(Tensor::from_col_major<double>({2, 2, 2, 2, 2}, v), 8); }) ==
        "heisenberg-ipeps: the iPEPS tensor gives a zero or non-finite boundary (|C| = nan, |T| = nan); check it for "
        "zeros or NaN");
  CHECK(error_of([&] { Ctmrg(runtime(), 0, 4); }) == "heisenberg-ipeps: D = 0 must be at least 1");
}

TEST_CASE("heisenberg: the traced CTMRG step's program (golden)") {
  // D = 2, chi = 4: the enlarged corner, eigh, the selection built from the moduli, the gauges, the two updates.
  // EINSTAGE_UPDATE_GOLDEN=1 rewrites the file; review its diff.
  Program step = trace_ctmrg_step(&runtime().registry(), 2, 4);
  test::check_golden_file(EINSTAGE_SOURCE_DIR "/tests/heisenberg/golden/ctmrg_step_d2_chi4.ir", print_program(step));
}

TEST_CASE("heisenberg: the forward CTMRG step (eigh with keep = chi) gives the differentiable step's outputs") {
  // Along a CTMRG run from the boundary start of random C4v-symmetric states (the first steps, with zero-padded
  // environments and exactly degenerate corner spectra, and later ones), at D = 2 and D = 3, every output of the
  // forward step equals the differentiable step's to rounding (the spectrum bit for bit: the same eigenvalues and
  // selection), with gauge ones and with a sign gauge.
  for (auto [d, chi, seed] : {std::array<int, 3>{2, 8, 11}, {2, 16, 12}, {3, 9, 13}, {3, 18, 14}}) {
    CAPTURE(d);
    CAPTURE(chi);
    INFO("seed ", seed);
    const ExtensionRegistry* reg = &runtime().registry();
    Executable full = runtime().prepare(trace_ctmrg_step(reg, d, chi));
    Executable forward = runtime().prepare(trace_ctmrg_step(reg, d, chi, StepKind::forward));
    Tensor a = c4v_symmetrize(random_state(d, uint64_t(seed)));
    CtmEnvironment env = initial_environment(a, chi);
    std::vector<double> signs(static_cast<size_t>(chi), 1.0);
    test::SplitMix64 rng{uint64_t(seed)};
    for (double& s : signs) s = rng.symmetric() < 0 ? -1.0 : 1.0;
    for (int step = 0; step < 12; ++step) {
      CAPTURE(step);
      for (const Tensor& gauge : {Tensor::from_col_major<double>({chi}, std::vector<double>(size_t(chi), 1.0)),
                                  Tensor::from_col_major<double>({chi}, signs)}) {
        std::vector<Tensor> want = full.run({env.c, env.t, a, gauge}), got = forward.run({env.c, env.t, a, gauge});
        for (size_t r = 0; r < 2; ++r) CHECK(max_abs_diff(got[r], want[r]) <= 1e-13);
        CHECK(bitwise_equal(got[2], want[2]));
      }
      std::vector<Tensor> next = forward.run({env.c, env.t, a, Tensor::from_col_major<double>({chi}, signs)});
      env = {next[0], next[1]};
    }
  }
  // It has no derivative: differentiating it names the eigh's keep and the fix.
  const std::string error = error_of([] {
    ad::vjp(trace_ctmrg_step(&runtime().registry(), 2, 4, StepKind::forward), ad::Outputs{0, 1}, {0, 1, 2},
            &runtime().registry());
  });
  CHECK(error.find("eigh with keep = 4: operand 0 (f64[16,16]) has a tangent, but only 4 of its 16 eigenvectors are "
                   "computed") != std::string::npos);
}
