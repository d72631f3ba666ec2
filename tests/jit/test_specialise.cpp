// StepKernel: hot small steps get a shape-specialised kernel compiled in the background; calls never wait for it and
// results are bitwise the same before and after the swap.
#include "ProblemGen.h"

#include "ir/Error.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Specialise.h"

#include <doctest/doctest.h>

#include <string>

using namespace einstage;
using namespace einstage::testing;

namespace {

// Runs the step once on a fresh copy of C and returns C's bytes.
std::vector<unsigned char> run_once(StepKernel& step, OwnedProblem& op) {
  op.c.bytes = op.c_initial;
  op.bind();
  step.run(op.p);
  return op.c.bytes;
}

}  // namespace

TEST_CASE("jit specialise: calls never wait for the background compile, and the swap keeps the bits") {
  if (!jit_enabled()) return;
  struct Shape {
    int64_t m, n, k, batch;
    DType dtype;
    bool accumulate;
  };
  // Every shape must run on the direct path on any CPU: A at most 18 KiB, under five sixths of the smallest L1d the
  // blocking model assumes (32 KiB fallback; a Zen 4 core has 32 KiB, where a 64 x 64 f64 A, 32 KiB, is not direct).
  for (const Shape& sh : {Shape{16, 16, 16, 1, DType::f64, false}, Shape{13, 17, 5, 1, DType::f64, true},
                          Shape{48, 48, 48, 3, DType::f64, false}, Shape{16, 16, 16, 1, DType::f32, true}}) {
    CAPTURE(sh.m);
    CAPTURE(sh.n);
    CAPTURE(sh.k);
    CAPTURE(sh.batch);
    OwnedProblem op = matmul_problem(sh.m, sh.n, sh.k, sh.batch, sh.dtype, sh.accumulate, 4000 + uint64_t(sh.m + sh.n));
    // The reference: contract() itself.
    OwnedProblem ref = op;
    ref.bind();
    contract(ref.p);
    if (sh.dtype == DType::f64) check_against_oracle<double>(ref);
    else check_against_oracle<float>(ref);

    StepKernel step;
    set_specialise_paused(true);  // the background thread may not start: a waiting call would hang here
    for (int64_t call = 0; call < 3 * StepKernel::kHotCalls; ++call) CHECK(run_once(step, op) == ref.c.bytes);
    CHECK(step.state() == StepKernel::State::queued);
    CHECK(step.specialised_calls() == 0);
    set_specialise_paused(false);
    wait_specialise_idle();
    REQUIRE(step.state() == StepKernel::State::ready);
    for (int call = 0; call < 4; ++call) CHECK(run_once(step, op) == ref.c.bytes);
    CHECK(step.specialised_calls() == 4);

    // A different problem through the same handle (other strides) is not given the specialised kernel.
    OwnedProblem other = matmul_problem(sh.m, sh.n, sh.k + 1, sh.batch, sh.dtype, sh.accumulate, 99);
    OwnedProblem other_ref = other;
    other_ref.bind();
    contract(other_ref.p);
    CHECK(run_once(step, other) == other_ref.c.bytes);
    CHECK(step.specialised_calls() == 4);
  }
}

TEST_CASE("jit specialise: steps off the direct path stay generic") {
  if (!jit_enabled()) return;
  OwnedProblem op = matmul_problem(300, 40, 300, 1, DType::f64, false, 7);  // A too large for the direct path
  OwnedProblem ref = op;
  ref.bind();
  contract(ref.p);
  StepKernel step;
  for (int64_t call = 0; call < 2 * StepKernel::kHotCalls; ++call) CHECK(run_once(step, op) == ref.c.bytes);
  wait_specialise_idle();
  CHECK(step.state() == StepKernel::State::generic);
  CHECK(step.specialised_calls() == 0);
}

// The kernel API's contraction entry points are public (runtime/Contract.h): a null operand pointer is an
// einstage::Error on every path, including a hot step's specialised kernel, which is called without contract().
TEST_CASE("jit specialise: a null operand is refused by contract() and by a step before and after the swap") {
  OwnedProblem op = matmul_problem(16, 16, 16, 1, DType::f64, false, 4242);
  const std::string null_a = "contract: operand A (m, k, batch axes) [16,16] has 256 elements but "
                             "ContractionProblem::a is null; point it at the operand's first element";
  const std::string null_c = "contract: output C (m, n, batch axes) [16,16] has 256 elements but "
                             "ContractionProblem::c is null; point it at the output's first element";
  op.bind();
  ContractionProblem p = op.p;
  p.a = nullptr;
  CHECK_THROWS_WITH_AS(contract(p), null_a.c_str(), Error);
  p = op.p;
  p.c = nullptr;
  CHECK_THROWS_WITH_AS(contract(p), null_c.c_str(), Error);
  StepKernel step;
  p = op.p;
  p.a = nullptr;
  CHECK_THROWS_WITH_AS(step.run(p), null_a.c_str(), Error);
  if (!jit_enabled()) return;
  for (int64_t call = 0; call < StepKernel::kHotCalls; ++call) run_once(step, op);
  wait_specialise_idle();
  REQUIRE(step.state() == StepKernel::State::ready);
  const int64_t specialised = step.specialised_calls();  // the last call above may have found the kernel ready
  CHECK_THROWS_WITH_AS(step.run(p), null_a.c_str(), Error);
  CHECK(step.specialised_calls() == specialised);
  run_once(step, op);
  CHECK(step.specialised_calls() == specialised + 1);
}
