#include "runtime/jit/Specialise.h"

#include "ir/Config.h"
#include "ir/Error.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <unistd.h>

namespace einstage {

struct StepKernel::Shared {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> specialised{0};
  std::atomic<int> state{int(State::generic)};
  // Written once before `kernel` is published (release) and read after it is seen (acquire).
  ContractionProblem signature;
  DirectSchedule schedule;
  int64_t element_bytes = 0;
  std::atomic<SpecialisedKernelFn> kernel{nullptr};
};

namespace {

bool disabled_by_env() { return !Config::process().jit_specialise; }

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

// The background compiler: one thread, a FIFO of jobs, and its own kernel cache (its own JIT and lock, so a
// compilation here never holds a lock that a foreground call takes).
//
// Exit. LLVM's code generator makes some function-local statics lazily on its first use (TargetLibraryInfo's name
// table, SDNode's value-type lists, the pass print lists, ...). When the first code generation of a process runs on
// the worker, those statics are younger than anything made before it and die first at exit; a worker still compiling
// then touches freed memory. So the worker must be stopped (its running job finished, the rest dropped) before any
// LLVM static dies, without ever making a foreground call wait for a compilation:
//   - the Specialiser is never destroyed (no destructor of ours runs LLVM code after its statics are gone; the
//     worker's Jit and cache are left to the operating system at exit);
//   - after each job that generated code, the worker registers shutdown() with atexit: handlers and static
//     destructors run in reverse order of registration, so that registration is younger than every static the job
//     made and runs before them;
//   - exit() runs the exiting thread's thread_local destructors before any atexit handler or static destructor; the
//     main thread gets a thread_local whose destructor calls shutdown(), which covers a job that is making its first
//     statics while main() returns. It is made by a static initialiser (kExitGuardArmed below: static initialisers
//     of a linked-in runtime run on the main thread), not only when the main thread queues a job: jobs queued only
//     from other threads (a pool running a hot plan) left the first compilation unguarded, and a process exiting
//     during it crashed (the runtime suite: 1 of 120 stress runs with a cold kernel cache, and once under ctest).
//     When main queues a job the guard is made there too, for a runtime whose initialisers ran on another thread (a
//     module dlopen'ed from one).
//     Left uncovered: exit() called from a thread other than main during the process's first background compilation.
class Specialiser;
std::atomic<Specialiser*> g_specialiser{nullptr};

struct MainThreadExit {
  void touch() {}
  ~MainThreadExit();  // shuts the specialiser down, if one was made
};

void touch_exit_guard() {
  static thread_local MainThreadExit guard;
  guard.touch();
}

class Specialiser {
 public:
  static Specialiser& instance() {
    static Specialiser* s = [] {
      auto* made = new Specialiser;  // never destroyed: see above
      g_specialiser.store(made);
      return made;
    }();
    return *s;
  }

  void submit(std::function<void(KernelCache&)> job) {
    std::lock_guard lock(mutex_);
    if (stop_) return;  // after shutdown (at exit): the step stays on contract()
    if (is_main_thread()) touch_exit_guard();  // not after shutdown: the guard's destructor may already have run
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    jobs_.push_back(std::move(job));
    wake_.notify_all();
  }

  void set_paused(bool paused) {
    std::lock_guard lock(mutex_);
    paused_ = paused;
    wake_.notify_all();
  }

  void set_job_hook(std::function<void()> hook) {
    std::lock_guard lock(mutex_);
    hook_ = std::move(hook);
  }

  void wait_idle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return (jobs_.empty() || paused_ || stop_) && !running_; });
  }

  // Finishes the running job, drops the queued ones and joins the worker. Idempotent; called at exit.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      wake_.notify_all();
    }
    std::lock_guard join_lock(join_mutex_);
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  static bool is_main_thread() { return ::gettid() == ::getpid(); }

  static void shutdown_at_exit() { instance().shutdown(); }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || (!paused_ && !jobs_.empty()); });
      if (stop_) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
      std::function<void()> hook = hook_;
      lock.unlock();
      int64_t compiled_before = 0, compiled_after = 0;
      try {
        if (hook) hook();
        if (!cache_) cache_ = std::make_unique<KernelCache>(KernelCache::default_cache_dir());
        compiled_before = cache_->stats().kernels_compiled;
        job(*cache_);
      } catch (const Error&) {
        // The job marks its handle failed; the step keeps running on contract().
      }
      if (cache_) compiled_after = cache_->stats().kernels_compiled;
      if (compiled_after != compiled_before) std::atexit(shutdown_at_exit);  // younger than the statics just made
      lock.lock();
      running_ = false;
      idle_.notify_all();
    }
  }

  std::mutex mutex_, join_mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void(KernelCache&)>> jobs_;
  std::function<void()> hook_;
  bool paused_ = false, running_ = false, stop_ = false;
  std::unique_ptr<KernelCache> cache_;  // used on the background thread only
  std::thread thread_;
};

MainThreadExit::~MainThreadExit() {
  if (Specialiser* s = g_specialiser.load()) s->shutdown();
}

// Arms the main thread's exit guard while static initialisers run (see the comment above Specialiser).
const bool kExitGuardArmed = [] {
  if (::gettid() == ::getpid()) touch_exit_guard();
  return true;
}();

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
    const int64_t elt = s.element_bytes;
    for (size_t bt = 0; bt < d.batch_a.size(); ++bt)
      call_jit(fn, static_cast<const char*>(p.a) + d.batch_a[bt] * elt,
               static_cast<const char*>(p.b) + d.batch_b[bt] * elt, static_cast<char*>(p.c) + d.batch_c[bt] * elt);
    // A statistic, not a synchronisation: a plain load and store (no locked add, which would wait for the kernel's
    // stores to drain: ~5% of a 16x16 call). Concurrent calls of one step may undercount.
    s.specialised.store(s.specialised.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
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
      s.element_bytes = static_cast<int64_t>(size_of(p.dtype));
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
void set_specialise_job_hook(std::function<void()> hook) { Specialiser::instance().set_job_hook(std::move(hook)); }

}  // namespace einstage
