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
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::chunk_count(int64_t n, int64_t min_chunk) const {
  if (n <= 0) return 0;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int64_t by_size = (n + min_chunk - 1) / min_chunk;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(size_, by_size)));
}

// Takes chunks of the current job until none is left; called by workers and by the submitting thread.
void ThreadPool::run_chunks() {
  RunningScope scope(this);
  std::unique_lock lock(mutex_);
  while (next_chunk_ < chunks_) {
    int c = next_chunk_++;
    const auto* fn = fn_;
    int64_t n = n_;
    int chunks = chunks_;
    lock.unlock();
    std::exception_ptr err;
    try {
      int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      (*fn)(begin, end);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    if (--unfinished_ == 0) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!stop_ && generation_.load(std::memory_order_relaxed) == seen) {
      lock.unlock();
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
      lock.lock();
    }
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.unlock();
    run_chunks();
    lock.lock();
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
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    next_chunk_ = 0;
    unfinished_ = chunks;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  spin_until([&] { return unfinished_.load(std::memory_order_acquire) == 0; });
  std::exception_ptr err;
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return unfinished_ == 0; });
    fn_ = nullptr;
    chunks_ = 0;
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
