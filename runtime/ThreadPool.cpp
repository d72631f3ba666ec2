#include "runtime/ThreadPool.h"

#include "runtime/Context.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace einstage {

namespace {
// The pool whose chunk this thread is running now, so a nested parallel_for on it runs inline instead of
// waiting for workers that are all busy (which would deadlock).
thread_local const ThreadPool* tl_running_in = nullptr;

// Polls `done` for ThreadPool::kSpinMicros; true as soon as it holds, false when the time is up. Between rounds of
// 64 pauses it yields the CPU (sched_yield, as OpenBLAS's waiting threads do), so a thread the system has queued on
// this CPU, the pool's other thread included, runs instead of waiting for the poll to end; with nothing else to run
// the yield returns at once.
template <typename Pred>
bool spin_until(Pred done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

struct RunningScope {
  const ThreadPool* saved;
  explicit RunningScope(const ThreadPool* pool) : saved(tl_running_in) { tl_running_in = pool; }
  ~RunningScope() { tl_running_in = saved; }
};
}  // namespace

ThreadPool::ThreadPool(int threads) : size_(std::max(1, threads)) {
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::chunk_count(int64_t n, int64_t min_chunk) const {
  if (n <= 0) return 0;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int64_t by_size = (n + min_chunk - 1) / min_chunk;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({size_, by_size, kMaxChunks})));
}

// Claims and runs chunks of job `job` until none is left; called by workers and by the submitting thread. A claim is
// a compare-exchange from (job, chunks, c) to (job, chunks, c + 1). The chunk count travels in the claimed word, not
// in a field of its own: a thread late from an older job holds a state whose next chunk is already past that job's
// count, so it stops before reading anything else, and a claim that succeeds proves that its job was still
// unfinished from the state's load to the exchange, so no newer job can have overwritten fn_ and n_ in between.
void ThreadPool::run_chunks(uint32_t job) {
  RunningScope scope(this);
  uint64_t state = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (uint32_t(state >> 32) != job) return;
    const int chunks = static_cast<int>((state >> 16) & 0xFFFF);
    const int c = static_cast<int>(state & 0xFFFF);
    if (c >= chunks) return;
    const auto* fn = fn_.load(std::memory_order_relaxed);
    const int64_t n = n_.load(std::memory_order_relaxed);
    if (!claim_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    try {
      (*fn)(n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    // Sequentially consistent with the submitter's store of caller_sleeps_: one of them sees the other's write.
    if (unfinished_.fetch_sub(1) == 1 && caller_sleeps_.load()) {
      std::lock_guard lock(mutex_);
      done_.notify_all();
    }
    state = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  auto fresh = [&] { return uint32_t(claim_.load() >> 32) != seen; };
  for (;;) {
    if (!spin_until([&] { return fresh() || stop_.load(std::memory_order_relaxed); })) {
      std::unique_lock lock(mutex_);
      sleepers_.fetch_add(1);  // before the check: the submitter reads sleepers_ after publishing (no lost wake-up)
      wake_.wait(lock, [&] { return stop_.load() || fresh(); });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = uint32_t(claim_.load(std::memory_order_acquire) >> 32);
    run_chunks(seen);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  int chunks = chunk_count(n, min_chunk);
  if (chunks == 1 || tl_running_in == this) {
    // Inline, but through the same partition so a nested call sees the same chunk boundaries.
    for (int c = 0; c < chunks; ++c) fn(n * c / chunks, n * (c + 1) / chunks);
    return;
  }
  std::lock_guard submit(submit_mutex_);
  fn_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  unfinished_.store(chunks, std::memory_order_relaxed);
  const uint32_t job = ++job_;
  claim_.store(uint64_t(job) << 32 | uint64_t(chunks) << 16);  // publishes fn_, n_, unfinished_; before sleepers_
  if (sleepers_.load() > 0) {
    { std::lock_guard lock(mutex_); }  // a worker between its check and its wait holds mutex_ until it waits
    wake_.notify_all();
  }
  run_chunks(job);
  if (!spin_until([&] { return unfinished_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(mutex_);
    caller_sleeps_.store(true);
    done_.wait(lock, [&] { return unfinished_.load() == 0; });
    caller_sleeps_.store(false);
  }
  std::exception_ptr err;
  {
    std::lock_guard lock(mutex_);
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

void parallel_for(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  if (pool == nullptr || pool->size() <= 1) {
    fn(0, n);
    return;
  }
  pool->parallel_for(n, fn, min_chunk);
}

ThreadPool& default_pool() { return default_context().pool(); }

}  // namespace einstage
