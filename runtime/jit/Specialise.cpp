#include "runtime/jit/Specialise.h"

#include "ir/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/JitState.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/WarmUp.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>
#include <thread>

namespace einstage {

struct StepKernel::Shared {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> specialised{0};
  std::atomic<int> state{int(State::generic)};
  // Written once before `kernel` is published (release) and read after it is seen (acquire).
  ContractionProblem signature;
  DirectSchedule schedule;
  int64_t element_bytes = 0;
  double macs = 0;          // multiply-adds of one call, all batch entries
  uint64_t context_id = 0;  // JitState::id() of the context whose JIT holds `kernel`
  std::atomic<SpecialisedKernelFn> kernel{nullptr};
  std::atomic<uint64_t> kernel_geometry{0};  // a caller's geometry value seen to match `signature`

  // The JIT set-up of the problems this step ran (Gett.h: GettPlan), so that a call of a problem seen before only
  // checks it and runs: `plan` is the current one, made by the first JIT call and replaced when a call's problem (or
  // context) differs. Replaced plans stay alive in `plans` until the handle dies, since another thread may still be
  // running one; after kMaxPlans, or once a plan's tables were too large to keep, calls that match no plan go back to
  // contract(), which sets up per call.
  struct Prepared {
    uint64_t context_id = 0;
    GettPlan plan;
    mutable std::atomic<uint64_t> geometry{0};  // 2 x a caller's geometry value seen to match, + the direct switch
    Prepared(const ContractionProblem& p, JitState& jit)
        : context_id(jit.id()), plan(p, jit.kernels(), jit.scratch(), jit.config().jit_direct, &jit.tuning()) {}
  };
  static constexpr size_t kMaxPlans = 4;
  static constexpr size_t kMaxPlanBytes = size_t(1) << 18;  // a step with larger tables is not set-up bound
  std::atomic<const Prepared*> plan{nullptr};
  std::atomic<bool> plans_closed{false};
  std::mutex plans_mutex;
  std::vector<std::unique_ptr<Prepared>> plans;

  // Runs p on a plan of this handle when it may (true); false sends the call to contract().
  bool run_prepared(const ContractionProblem& p, JitState& jit, ThreadPool* pool, uint64_t geometry);
};

bool StepKernel::Shared::run_prepared(const ContractionProblem& p, JitState& jit, ThreadPool* pool, uint64_t geometry) {
  if (!jit_enabled(jit) || p.dtype == DType::i64) return false;
  const bool direct = jit.config().jit_direct;
  const Prepared* current = plan.load(std::memory_order_acquire);
  const uint64_t seen = geometry ? 2 * geometry + direct : 0;  // the caller's geometry value and the switch
  const bool known = current && seen && current->context_id == jit.id() &&
                     current->geometry.load(std::memory_order_relaxed) == seen;
  if (!known && (!current || current->context_id != jit.id() || !current->plan.matches(p, direct))) {
    if (plans_closed.load(std::memory_order_relaxed)) return false;
    std::lock_guard lock(plans_mutex);
    current = plan.load(std::memory_order_relaxed);
    if (!current || current->context_id != jit.id() || !current->plan.matches(p, direct)) {
      if (plans.size() >= kMaxPlans) {
        plans_closed.store(true, std::memory_order_relaxed);
        return false;
      }
      std::unique_ptr<Prepared> made;
      try {
        made = std::make_unique<Prepared>(p, jit);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::runtime) return false;  // no JIT kernel: contract() falls back and says so
        throw;                                            // a bad problem: contract() would refuse it the same way
      }
      if (made->plan.table_bytes() > kMaxPlanBytes) {
        plans_closed.store(true, std::memory_order_relaxed);
        made->plan.run(p, pool);
        jit.calls().jit.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      current = made.get();
      plans.push_back(std::move(made));
      plan.store(current, std::memory_order_release);
    }
  }
  if (seen && !known) current->geometry.store(seen, std::memory_order_relaxed);  // current matches p
  current->plan.run(p, pool);
  jit.calls().jit.fetch_add(1, std::memory_order_relaxed);  // as contract() counts its JIT calls
  return true;
}

// What the background cache calls instead of the warm-up when the process is not warmed up: the statics a warm-up
// makes would be younger than every exit handler, and an exit() on another thread would destroy them under this
// thread's running job (the header's Exit). run_step warms up on its own thread before queueing a kernel that must be
// generated; a job that still finds no warm-up (its file was on disk but unusable) fails, and its step stays on
// contract().
[[noreturn]] static void refuse_warm_up() {
  fail(ErrorKind::runtime, "jit: the specialiser does not warm LLVM's code generator up on its own thread");
}

// The background compiler: one thread, a FIFO of jobs, and its own kernel cache (its own JIT and lock, so a
// compilation here never holds a lock that a foreground call takes).
struct Specialiser::Impl {
  Impl(std::string dir, void (*warm)()) : cache_dir(std::move(dir)), warm_up(warm) {}

  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stop || (!paused && !jobs.empty()); });
      if (stop) return;
      auto job = std::move(jobs.front());
      jobs.pop_front();
      running = true;
      std::function<void()> job_hook = hook;
      lock.unlock();
      try {
        if (job_hook) job_hook();
        if (!cache) cache = std::make_unique<KernelCache>(cache_dir, JitTarget{}, warm_up ? &refuse_warm_up : nullptr);
        job(*cache);
      } catch (const Error&) {
        // The job marks its handle failed; the step keeps running on contract().
      }
      lock.lock();
      running = false;
      idle.notify_all();
    }
  }

  std::string cache_dir;
  void (*warm_up)();
  std::mutex mutex, join_mutex;
  std::condition_variable wake, idle;
  std::deque<std::function<void(KernelCache&)>> jobs;
  std::function<void()> hook;
  bool paused = false, running = false, stop = false;
  std::unique_ptr<KernelCache> cache;  // used on the background thread only
  std::thread thread;
};

Specialiser::Specialiser(std::string cache_dir, void (*warm_up)())
    : impl_(std::make_unique<Impl>(std::move(cache_dir), warm_up)) {}

Specialiser::~Specialiser() { shutdown(); }

void Specialiser::submit(std::function<void(KernelCache&)> job) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (s.stop) return;  // after shutdown: the step stays on contract()
  if (!s.thread.joinable()) s.thread = std::thread([&s] { s.loop(); });
  s.jobs.push_back(std::move(job));
  s.wake.notify_all();
}

void Specialiser::shutdown() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    s.stop = true;
    s.jobs.clear();
    s.wake.notify_all();
    s.idle.notify_all();
  }
  std::lock_guard join_lock(s.join_mutex);
  if (!s.thread.joinable()) return;
  if (s.thread.get_id() == std::this_thread::get_id()) s.thread.detach();  // exit() called from a job
  else s.thread.join();
}

void Specialiser::set_paused(bool paused) {
  std::lock_guard lock(impl_->mutex);
  impl_->paused = paused;
  impl_->wake.notify_all();
  impl_->idle.notify_all();
}

void Specialiser::set_job_hook(std::function<void()> hook) {
  std::lock_guard lock(impl_->mutex);
  impl_->hook = std::move(hook);
}

void Specialiser::wait_idle() {
  Impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  s.idle.wait(lock, [&] { return (s.jobs.empty() || s.paused || s.stop) && !s.running; });
}

namespace {

void queue(JitState& jit, const std::shared_ptr<StepKernel::Shared>& shared) {
  // The specialiser's thread never makes LLVM's lazily made statics (refuse_warm_up): when this kernel must be
  // generated and the process has not warmed the code generator up, this thread does it first (once per process).
  if (!code_generator_warmed_up()) {
    const SpecialisedKernelSpec& spec = shared->schedule.kernel;
    try {
      if (!jit.kernels().has_cached_file(spec.symbol(), spec.describe())) jit.warm_up_now();
    } catch (const Error&) {
      shared->state.store(int(StepKernel::State::failed));  // the step keeps running on contract()
      return;
    }
  }
  jit.specialiser().submit([shared](KernelCache& cache) {
    try {
      const SpecialisedKernelSpec& spec = shared->schedule.kernel;
      void* fn = cache.compiled_function(spec.symbol(), spec.describe(),
                                         [&](Jit& jit) { return compile_specialised_kernel(jit, spec); });
      shared->kernel.store(reinterpret_cast<SpecialisedKernelFn>(fn), std::memory_order_release);
      shared->state.store(int(StepKernel::State::ready));
    } catch (const Error&) {
      shared->state.store(int(StepKernel::State::failed));
      throw;
    }
  });
}

}  // namespace

StepKernel::StepKernel() : shared_(std::make_shared<Shared>()) {}
StepKernel::~StepKernel() = default;

void run_step(const std::shared_ptr<StepKernel::Shared>& shared, const ContractionProblem& p, JitState& jit,
              ThreadPool* pool, uint64_t geometry) {
  using State = StepKernel::State;
  StepKernel::Shared& s = *shared;
  const bool known = geometry && s.kernel_geometry.load(std::memory_order_relaxed) == geometry;
  if (SpecialisedKernelFn fn = s.kernel.load(std::memory_order_acquire);
      fn && s.context_id == jit.id() && (known || same_geometry(p, s.signature))) {
    if (geometry && !known) s.kernel_geometry.store(geometry, std::memory_order_relaxed);
    if (p.a == nullptr || p.b == nullptr || p.c == nullptr) p.check("contract");  // contract() would refuse it too
    const DirectSchedule& d = s.schedule;
    const int64_t elt = s.element_bytes;
    // Batch entries are independent (contract_jit splits them the same way): bij,bjk->bik at b=64, 64^2 ran on one
    // thread here at any pool size.
    auto entries = [&](int64_t b0, int64_t b1) {
      for (int64_t bt = b0; bt < b1; ++bt)
        call_jit(fn, static_cast<const char*>(p.a) + d.batch_a[bt] * elt,
                 static_cast<const char*>(p.b) + d.batch_b[bt] * elt, static_cast<char*>(p.c) + d.batch_c[bt] * elt);
    };
    const auto batch = static_cast<int64_t>(d.batch_a.size());
    // One entry (every grid step) runs here: no pool call and no std::function around the kernel.
    if (s.macs >= kMinThreadedMacs && batch > 1) parallel_for(pool, batch, entries);
    else entries(0, batch);
    // A statistic, not a synchronisation: a plain load and store (no locked add, which would wait for the kernel's
    // stores to drain: ~5% of a 16x16 call). Concurrent calls of one step may undercount.
    s.specialised.store(s.specialised.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  if (s.state.load(std::memory_order_relaxed) == int(State::generic) &&
      s.calls.fetch_add(1, std::memory_order_relaxed) + 1 == StepKernel::kHotCalls && jit_enabled(jit) &&
      jit.config().jit_specialise) {
    // Only this call (the kHotCalls-th) gets here: it records the problem and queues the compilation, on the context
    // whose JIT will hold the kernel (a kernel is only called through that context).
    DirectSchedule schedule;
    bool avx512 = false;
    try {
      avx512 = jit.kernels().host().has_avx512;
    } catch (const Error&) {
      return contract_on(p, jit, pool);  // no JIT here: contract() falls back and says so
    }
    if (jit.config().jit_direct && direct_schedule(p, avx512, schedule)) {  // else contract() packs
      s.signature = p;
      s.signature.a = s.signature.b = nullptr;
      s.signature.c = nullptr;
      s.schedule = std::move(schedule);
      s.element_bytes = static_cast<int64_t>(size_of(p.dtype));
      s.macs = 1;
      for (const auto* group : {&p.m, &p.n, &p.k, &p.batch})
        s.macs *= double(ContractionProblem::group_size(*group, "contract: axis group"));
      s.context_id = jit.id();
      s.state.store(int(State::queued));
      queue(jit, shared);
    }
  }
  if (!s.run_prepared(p, jit, pool, geometry)) contract_on(p, jit, pool);
}

StepKernel::State StepKernel::state() const { return State(shared_->state.load()); }
int64_t StepKernel::specialised_calls() const { return shared_->specialised.load(); }

}  // namespace einstage
