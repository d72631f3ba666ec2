// The program the Ising TRG example runs (examples/ising/Trg.h): jvp(value_and_grad(f)) of the traced TRG at χ = 2,
// one step, printed, against a golden file. It pins the output of the whole derivative pipeline (jvp, linearize,
// transpose, the inliner, DCE and CSE after each, the einsum family's merged walks) on a program with SVDs, slices,
// max and einsums, so a change that should only make those passes faster is checked to leave their result alone.
// The same program twice in one process prints identically (no dependence on addresses or hash-table order).
// EINSTAGE_UPDATE_GOLDEN=1 rewrites the golden (then review the diff).
#include "examples/ising/Trg.h"

#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "ir/Printer.h"
#include "support/Golden.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

using namespace einstage;

TEST_CASE("the Ising TRG derivative program at chi 2, one step, is the golden one, and prints the same twice") {
  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  rt.add_module(linalg::module_descriptor());
  const ExtensionRegistry* r = &rt.registry();
  auto derivatives = [&] { return ad::jvp(ad::value_and_grad(ising::trace_ising_trg(r, 2, 1), {0}, r), {0}, r); };
  const std::string text = print_program(derivatives());
  CHECK(print_program(derivatives()) == text);
  test::check_golden_file(std::string(EINSTAGE_SOURCE_DIR) + "/tests/ising/golden/trg_chi2_steps1_derivatives.ir",
                          text);
}
