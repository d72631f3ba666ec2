// A hot prepared plan: the call that queues the step's specialised kernel returns while that job is still held at its
// start on the background thread (a job hook blocks it), no call after the first generates code on the calling
// thread, and the results are bitwise the same before and after the specialised kernel is swapped in.
#include "support/Random.h"

#include "extensions/einsum/exec/Executor.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/Specialise.h"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

// Holds every background job at its start until released; records whether it was entered and on which thread.
struct JobGate {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false, released = false, gave_up = false;
  std::thread::id job_thread;

  void hold() {
    std::unique_lock lock(mutex);
    entered = true;
    job_thread = std::this_thread::get_id();
    changed.notify_all();
    // Never hang the suite: a call that waited for this job would stop the test thread, and the release below would
    // then never come. The bound only ends such a deadlock; the checks use `gave_up`, not the time.
    if (!changed.wait_for(lock, std::chrono::seconds(60), [&] { return released; })) gave_up = true;
  }
  bool wait_entered() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(60), [&] { return entered; });
  }
  void release() {
    std::lock_guard lock(mutex);
    released = true;
    changed.notify_all();
  }
};

Tensor random_matrix(test::SplitMix64& rng, int64_t rows, int64_t cols) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (double& x : v) x = rng.symmetric();
  return Tensor::from_col_major<double>({rows, cols}, v);
}

}  // namespace

TEST_CASE("a hot prepared plan queues its specialised kernel without waiting for the compilation") {
  if (!jit_enabled()) return;
  // A shape no other test uses, so this plan's step is the one that gets queued here.
  const int64_t m = 11, k = 9, n = 13;
  test::SplitMix64 rng{911};
  const Tensor a = random_matrix(rng, m, k), b = random_matrix(rng, k, n);
  const std::vector<Tensor> ops = {a, b};
  const std::vector<es::TensorMeta> metas = {es::TensorMeta::of(a), es::TensorMeta::of(b)};
  const es::EinsumPlan plan = es::EinsumPlan::prepare("ij,jk->ik", metas);
  REQUIRE(plan.is_shortcut());

  // The oracle: the definitional loop, summed in k order (the kernels may differ in the last bits).
  std::vector<double> expect(static_cast<size_t>(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t l = 0; l < k; ++l) expect[i + m * j] += a.at<double>({i, l}) * b.at<double>({l, j});

  JobGate gate;
  set_specialise_job_hook([&] { gate.hold(); });
  Tensor out = Tensor::empty(DType::f64, {m, n});
  std::vector<double> first;
  int64_t codegens_after_first = 0;
  bool warm_after_first = false;
  for (int64_t call = 0; call < StepKernel::kHotCalls + 8; ++call) {
    plan.execute_into(ops, out);
    // The first call may compile the generic direct kernel (unless the disk cache has it); no later one compiles the
    // specialised kernel. The one code generation a later call may make is LLVM's warm-up, once, when nothing in the
    // process generated code before and the specialised kernel is not on disk (Specialise.h, Exit).
    if (call == 0) codegens_after_first = Jit::codegens_on_this_thread(), warm_after_first = jit_warmed_up();
    const int64_t warm_up = !warm_after_first && jit_warmed_up() ? 1 : 0;
    CHECK(Jit::codegens_on_this_thread() == codegens_after_first + warm_up);
    std::vector<double> got = out.to_col_major<double>();
    if (call == 0) {
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expect[i]).epsilon(1e-12));
      first = got;
    } else {
      CHECK(std::memcmp(got.data(), first.data(), got.size() * sizeof(double)) == 0);
    }
  }
  // Every call has returned; the job they queued now starts (or has started) and is held inside the hook.
  const bool entered = gate.wait_entered();
  CHECK(entered);
  {
    std::lock_guard lock(gate.mutex);
    CHECK(gate.job_thread != std::this_thread::get_id());
  }
  gate.release();
  wait_specialise_idle();
  set_specialise_job_hook({});
  CHECK_FALSE(gate.gave_up);

  // After the swap: the same bits.
  for (int call = 0; call < 4; ++call) {
    Tensor fresh = plan.execute(ops);
    std::vector<double> got = fresh.to_col_major<double>();
    CHECK(std::memcmp(got.data(), first.data(), got.size() * sizeof(double)) == 0);
  }
}

TEST_CASE("a prepared plan called with operands and outputs of changing layouts") {
  // The executor keeps each thread's last problem and rewrites only the strides taken from the call's tensors; every
  // call must still see its own tensors' strides (here a hyperedge label and a diagonal, too).
  const int64_t m = 5, k = 4, n = 3;
  test::SplitMix64 rng{912};
  auto dense = [&](int64_t r, int64_t c) { return random_matrix(rng, r, c); };
  const Tensor a = dense(m, k), b = dense(k, n);
  // The same values in other layouts: a transposed copy viewed back, and every other element of a larger tensor.
  const Tensor a_t = a.transpose().contiguous().transpose();
  Tensor a_wide = Tensor::zeros(DType::f64, {2 * m, k});
  a_wide.slice(0, 0, 2 * m, 2).copy_from(a);
  const Tensor a_strided = a_wide.slice(0, 0, 2 * m, 2);
  const Tensor b_t = b.transpose().contiguous().transpose();
  const std::vector<es::TensorMeta> metas = {es::TensorMeta::of(a), es::TensorMeta::of(b)};
  const es::EinsumPlan plan = es::EinsumPlan::prepare("ij,jk->ki", metas);

  std::vector<double> expect(static_cast<size_t>(n * m), 0.0);  // out[k, i], column-major
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t l = 0; l < k; ++l) expect[c + n * i] += a.at<double>({i, l}) * b.at<double>({l, c});

  Tensor out_dense = Tensor::empty(DType::f64, {n, m});
  Tensor out_t_base = Tensor::empty(DType::f64, {m, n});
  Tensor out_t = out_t_base.transpose();
  // Twice: while the step's kernel is set up per geometry, and once its specialised kernel (compiled for the
  // strides of one layout) is in (the executor tells the handle when its problem's strides are those of an earlier
  // call; a call with other strides must not run a kernel of another layout).
  int combo = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) wait_specialise_idle();
    for (int round = 0; round < 3 * StepKernel::kHotCalls; ++round) {
      const Tensor& lhs = round % 3 == 0 ? a : round % 3 == 1 ? a_t : a_strided;
      const Tensor& rhs = round % 2 == 0 ? b : b_t;
      Tensor& out = (round / 2) % 2 == 0 ? out_dense : out_t;
      CAPTURE(round);
      plan.execute_into(std::vector<Tensor>{lhs, rhs}, out);
      const std::vector<double> got = out.to_col_major<double>();
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expect[i]).epsilon(1e-12));
      ++combo;
    }
  }
  CHECK(combo == 6 * StepKernel::kHotCalls);

  // A diagonal and a label on three tensors: "iij,jk,ik->ik" runs two steps with one intermediate.
  const Tensor d = Tensor::from_col_major<double>({3, 3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18});
  const Tensor e = Tensor::from_col_major<double>({2, 2}, std::vector<double>{1, -1, 2, 0.5});
  const Tensor f = Tensor::from_col_major<double>({3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6});
  const std::vector<es::TensorMeta> metas3 = {es::TensorMeta::of(d), es::TensorMeta::of(e), es::TensorMeta::of(f)};
  const es::EinsumPlan plan3 = es::EinsumPlan::prepare("iij,jk,ik->ik", metas3);
  std::vector<double> expect3(6, 0.0);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t j = 0; j < 2; ++j)
        expect3[i + 3 * c] += d.at<double>({i, i, j}) * e.at<double>({j, c}) * f.at<double>({i, c});
  const Tensor f_t = f.transpose().contiguous().transpose();
  for (int round = 0; round < 2 * StepKernel::kHotCalls; ++round) {
    CAPTURE(round);
    const Tensor got = plan3.execute(std::vector<Tensor>{d, e, round % 2 ? f_t : f});
    const std::vector<double> values = got.to_col_major<double>();
    for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == doctest::Approx(expect3[i]).epsilon(1e-12));
  }
}

TEST_CASE("a plan run both as C = A.B and as C += A.B keeps a specialised kernel for each") {
  // The tangent walk runs a reverse step's plan both ways; one kernel handle for both saw two geometries in turn and,
  // once it had set up four, set the kernel up anew on every call. Each way has its handle now.
  if (!jit_enabled()) return;
  const int64_t m = 7, k = 6, n = 5;  // a shape no other test uses
  test::SplitMix64 rng{913};
  const Tensor a = random_matrix(rng, m, k), b = random_matrix(rng, k, n), start = random_matrix(rng, m, n);
  const std::vector<Tensor> ops = {a, b};
  const es::EinsumPlan plan =
      es::EinsumPlan::prepare("ij,jk->ik", std::vector<es::TensorMeta>{es::TensorMeta::of(a), es::TensorMeta::of(b)});
  std::vector<double> expect_set(static_cast<size_t>(m * n), 0.0), expect_add = start.to_col_major<double>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += a.at<double>({i, l}) * b.at<double>({l, j});
      expect_set[static_cast<size_t>(i + m * j)] = sum;
      expect_add[static_cast<size_t>(i + m * j)] += sum;
    }
  std::vector<double> first_set, first_add;
  auto round = [&] {
    Tensor set = Tensor::empty(DType::f64, {m, n});
    plan.execute_into(ops, set);
    Tensor add = start.clone();
    plan.accumulate_into(ops, add, default_context());
    const std::vector<double> got_set = set.to_col_major<double>(), got_add = add.to_col_major<double>();
    if (first_set.empty()) {
      for (size_t i = 0; i < got_set.size(); ++i) {
        CHECK(got_set[i] == doctest::Approx(expect_set[i]).epsilon(1e-12));
        CHECK(got_add[i] == doctest::Approx(expect_add[i]).epsilon(1e-12));
      }
      first_set = got_set;
      first_add = got_add;
    }
    CHECK(std::memcmp(got_set.data(), first_set.data(), got_set.size() * sizeof(double)) == 0);
    CHECK(std::memcmp(got_add.data(), first_add.data(), got_add.size() * sizeof(double)) == 0);
  };
  for (int64_t call = 0; call < StepKernel::kHotCalls + 2; ++call) round();
  wait_specialise_idle();
  const int64_t before = plan.specialised_calls();
  for (int call = 0; call < 8; ++call) round();
  CHECK(plan.specialised_calls() - before == 16);  // both ways of all 8 rounds
}

TEST_CASE("one plan run from several threads at once with operands of different layouts") {
  // A step's problem is filled in place by one call at a time; a call that finds it taken fills its thread's own.
  // Threads with different strides must each see their own.
  const int64_t m = 6, k = 5, n = 4;
  test::SplitMix64 rng{914};
  const Tensor a = random_matrix(rng, m, k), b = random_matrix(rng, k, n), c = random_matrix(rng, n, 3);
  const Tensor a_t = a.transpose().contiguous().transpose();
  Tensor b_wide = Tensor::zeros(DType::f64, {k, 3 * n});
  b_wide.slice(1, 0, 3 * n, 3).copy_from(b);
  const Tensor b_strided = b_wide.slice(1, 0, 3 * n, 3);
  const std::vector<es::TensorMeta> metas = {es::TensorMeta::of(a), es::TensorMeta::of(b), es::TensorMeta::of(c)};
  es::EinsumOptions options;
  options.plan = es::PlanSpec::left_to_right_plan();
  const es::EinsumPlan plan = es::EinsumPlan::prepare("ij,jk,kl->li", metas, options);
  // Per thread: its operands, its output (whose column stride differs) and the result of one call alone.
  auto operands_of = [&](int t) { return std::vector<Tensor>{t % 2 ? a_t : a, t / 2 ? b_strided : b, c}; };
  std::vector<Tensor> want;
  const Tensor reference = plan.execute(operands_of(0));
  for (int t = 0; t < 4; ++t) {
    want.push_back(plan.execute(operands_of(t)));
    const std::vector<double> got = want.back().to_col_major<double>(), ref = reference.to_col_major<double>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(ref[i]).epsilon(1e-12));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      const std::vector<Tensor> ops = operands_of(t);
      Tensor out_base = Tensor::empty(DType::f64, {3 + t, m});
      Tensor out = out_base.slice(0, 0, 3);
      for (int call = 0; call < 300; ++call) {
        plan.execute_into(ops, out);
        mismatches[static_cast<size_t>(t)] += !bitwise_equal(out, want[static_cast<size_t>(t)]);
      }
    });
  for (std::thread& w : workers) w.join();
  for (int t = 0; t < 4; ++t) CHECK(mismatches[static_cast<size_t>(t)] == 0);

  // A plan without scratch (one step) takes no lease unless its step is held: then the call leases a slot for its
  // problem alone.
  const es::EinsumPlan pair = es::EinsumPlan::prepare("ij,jk->ki", std::vector<es::TensorMeta>{metas[0], metas[1]});
  REQUIRE(pair.scratch_bytes() == 0);
  std::vector<Tensor> pair_want;
  for (int t = 0; t < 4; ++t) pair_want.push_back(pair.execute(std::vector<Tensor>{t % 2 ? a_t : a, t / 2 ? b_strided : b}));
  std::vector<int> pair_mismatches(4, 0);
  workers.clear();
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      const std::vector<Tensor> ops = {t % 2 ? a_t : a, t / 2 ? b_strided : b};
      for (int call = 0; call < 300; ++call)
        pair_mismatches[static_cast<size_t>(t)] += !bitwise_equal(pair.execute(ops), pair_want[static_cast<size_t>(t)]);
    });
  for (std::thread& w : workers) w.join();
  for (int t = 0; t < 4; ++t) CHECK(pair_mismatches[static_cast<size_t>(t)] == 0);
}
