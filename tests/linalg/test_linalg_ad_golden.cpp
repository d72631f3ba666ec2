// The printed jvp and vjp programs of every linalg AD rule (svd thin, full and truncated; qr tall and wide; eigh;
// inv_upper; gap_factors with and without the diagonal mask), real and complex, against one golden file. The golden
// pins the order of the instructions each rule emits: a rule that writes b.sub(mm(x, y), mm(z, w)) leaves the order
// of the two products to the compiler (gcc evaluates a call's arguments right to left, clang left to right), so the
// same program would print and schedule differently under the two. The file is checked in the gcc and clang builds.
#include "LinalgTestUtil.h"

#include "compiler/ad/Ad.h"
#include "ir/Printer.h"
#include "support/Golden.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <filesystem>

using namespace einstage;
using namespace einstage::linalg_test;

using linalg::LinalgKind;
using linalg::LinalgPayload;

namespace {

struct Case {
  std::string name;
  std::shared_ptr<LinalgPayload> payload;
  std::vector<Shape> shapes;
};

std::string programs_of(const Case& c, DType dtype) {
  Builder b(c.name, registry());
  std::vector<Value> params;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    std::vector<Dim> dims(c.shapes[i].begin(), c.shapes[i].end());
    params.push_back(b.parameter(fmt::format("x{}", i), {dtype, dims}));
  }
  Program p = b.finish(b.extension_results(c.payload, params));
  std::vector<int> wrt;
  for (size_t i = 0; i < params.size(); ++i) wrt.push_back(static_cast<int>(i));
  return fmt::format("# {} {}\n{}{}\n", c.name, name(dtype), print_program(ad::jvp(p, wrt, registry())),
                     print_program(ad::vjp(p, wrt, registry())));
}

}  // namespace

TEST_CASE("golden: the jvp and vjp programs of every linalg rule, the same under every compiler") {
  const std::vector<Case> matrix_cases = {
      {"svd_thin", std::make_shared<LinalgPayload>(LinalgKind::svd), {{4, 3}}},
      {"svd_full", std::make_shared<LinalgPayload>(LinalgKind::svd, true), {{3, 4}}},
      {"svd_keep", std::make_shared<LinalgPayload>(LinalgKind::svd, false, linalg::kDefaultEps, 2), {{4, 3}}},
      {"qr_tall", std::make_shared<LinalgPayload>(LinalgKind::qr), {{4, 3}}},
      {"qr_wide", std::make_shared<LinalgPayload>(LinalgKind::qr), {{3, 4}}},
      {"eigh", std::make_shared<LinalgPayload>(LinalgKind::eigh), {{3, 3, 2}}},
      {"inv_upper", std::make_shared<LinalgPayload>(LinalgKind::inv_upper), {{3, 3}}},
  };
  const std::vector<Case> real_cases = {
      {"gap_factors", std::make_shared<LinalgPayload>(LinalgKind::gap_factors, false, 1e-3), {{3}, {4}}},
      {"gap_factors_diagonal", std::make_shared<LinalgPayload>(LinalgKind::gap_factors, false, 1e-3, 0, true),
       {{4}, {4}}},
  };
  std::string text;
  for (const Case& c : matrix_cases)
    for (DType dtype : {DType::f64, DType::c128}) text += programs_of(c, dtype);
  for (const Case& c : real_cases) text += programs_of(c, DType::f64);
  test::check_golden_file(std::filesystem::path(EINSTAGE_SOURCE_DIR) / "tests" / "linalg" / "golden" / "ad_rules.ir",
                          text);
}
