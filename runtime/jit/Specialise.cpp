#include "runtime/jit/Specialise.h"

#include "ir/Error.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/MicroKernel.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace einstage {

struct StepKernel::Shared {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> specialised{0};
  std::atomic<int> state{int(State::generic)};
  // Written once before `kernel` is published (release) and read after it is seen (acquire).
  ContractionProblem signature;
  DirectSchedule schedule;
  std::atomic<SpecialisedKernelFn> kernel{nullptr};
};

namespace {

bool disabled_by_env() {
  const char* value = std::getenv("EINSTAGE_JIT_SPECIALISE");
  return value && std::strcmp(value, "0") == 0;
}

bool same_axes(const std::vector<ContractionProblem::Axis>& x, const std::vector<ContractionProblem::Axis>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].extent != y[i].extent || x[i].stride_a != y[i].stride_a || x[i].stride_b != y[i].stride_b ||
        x[i].stride_c != y[i].stride_c)
      return false;
  return true;
}

bool same_problem(const ContractionProblem& x, const ContractionProblem& y) {
  return x.dtype == y.dtype && x.accumulate == y.accumulate && same_axes(x.m, y.m) && same_axes(x.n, y.n) &&
         same_axes(x.k, y.k) && same_axes(x.batch, y.batch);
}

bool warm_up_code_generator() {
  try {
    std::unique_ptr<Jit> jit = Jit::create();
    // An 8x8x8 f64 product takes the direct path: compiling its specialised kernel runs the same generator,
    // optimisation pipeline and code generator as the worker's jobs.
    ContractionProblem p;
    p.dtype = DType::f64;
    p.m = {{8, 1, 0, 1}};
    p.n = {{8, 0, 8, 8}};
    p.k = {{8, 8, 1, 0}};
    DirectSchedule schedule;
    if (direct_schedule(p, jit->host().has_avx512, schedule)) compile_specialised_kernel(*jit, schedule.kernel);
    compile_micro_kernel(*jit, default_micro_kernel(DType::f64, jit->host().has_avx512));
    return true;
  } catch (const Error&) {
    return false;  // no JIT here: specialisation jobs fail and their steps stay on contract()
  }
}

// The background compiler: one thread, a FIFO of jobs, and its own kernel cache (its own JIT and lock, so a
// compilation here never holds a lock that a foreground call takes).
class Specialiser {
 public:
  static Specialiser& instance() {
    // Order of destruction at exit: function-local statics die in reverse order of construction, and LLVM's code
    // generator creates some of its own lazily on first use. If the first code generation of the process happened
    // on our worker (every other kernel came from the disk cache), those statics would be younger than this object
    // and destroyed before ~Specialiser joins a worker that is still compiling: a crash at exit. Generating one
    // micro-kernel here first makes them older than the Specialiser. It costs one codegen (a few ms), once per
    // process, on the call that first queues a specialisation; never on a step's first call.
    static const bool warmed = warm_up_code_generator();
    (void)warmed;
    static Specialiser s;
    return s;
  }

  void submit(std::function<void(KernelCache&)> job) {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    jobs_.push_back(std::move(job));
    wake_.notify_all();
  }

  void set_paused(bool paused) {
    std::lock_guard lock(mutex_);
    paused_ = paused;
    wake_.notify_all();
  }

  void wait_idle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return (jobs_.empty() || paused_) && !running_; });
  }

  ~Specialiser() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      wake_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || (!paused_ && !jobs_.empty()); });
      if (stop_) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
      lock.unlock();
      try {
        if (!cache_) cache_ = std::make_unique<KernelCache>(KernelCache::default_cache_dir());
        job(*cache_);
      } catch (const Error&) {
        // The job marks its handle failed; the step keeps running on contract().
      }
      lock.lock();
      running_ = false;
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void(KernelCache&)>> jobs_;
  bool paused_ = false, running_ = false, stop_ = false;
  std::unique_ptr<KernelCache> cache_;  // created on the background thread, destroyed after it is joined
  std::thread thread_;                  // last member: joined in the destructor before the others go
};

void queue(const std::shared_ptr<StepKernel::Shared>& shared) {
  Specialiser::instance().submit([shared](KernelCache& cache) {
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

void StepKernel::run(const ContractionProblem& p, ThreadPool* pool) {
  Shared& s = *shared_;
  if (SpecialisedKernelFn fn = s.kernel.load(std::memory_order_acquire); fn && same_problem(p, s.signature)) {
    const DirectSchedule& d = s.schedule;
    const size_t elt = size_of(p.dtype);
    for (size_t bt = 0; bt < d.batch_a.size(); ++bt)
      fn(static_cast<const char*>(p.a) + d.batch_a[bt] * int64_t(elt), static_cast<const char*>(p.b) + d.batch_b[bt] * int64_t(elt),
         static_cast<char*>(p.c) + d.batch_c[bt] * int64_t(elt));
    s.specialised.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (s.state.load(std::memory_order_relaxed) == int(State::generic) &&
      s.calls.fetch_add(1, std::memory_order_relaxed) + 1 == kHotCalls && jit_enabled() && !disabled_by_env()) {
    // Only this call (the kHotCalls-th) gets here: it records the problem and queues the compilation.
    DirectSchedule schedule;
    bool avx512 = KernelCache::process_default().host().has_avx512;
    if (direct_schedule(p, avx512, schedule)) {
      s.signature = p;
      s.signature.a = s.signature.b = nullptr;
      s.signature.c = nullptr;
      s.schedule = std::move(schedule);
      s.state.store(int(State::queued));
      queue(shared_);
    }
  }
  contract(p, pool);
}

StepKernel::State StepKernel::state() const { return State(shared_->state.load()); }
int64_t StepKernel::specialised_calls() const { return shared_->specialised.load(); }

void set_specialise_paused(bool paused) { Specialiser::instance().set_paused(paused); }
void wait_specialise_idle() { Specialiser::instance().wait_idle(); }

}  // namespace einstage
