// ThreadPool: a small fixed-size pool of worker threads, owned by whoever creates it (an ExecutionContext, an
// EinsumPlan's caller, a test), and default_pool(), the pool of default_context() that one-shot einsum() calls and
// Runtimes left at the default thread count share. Stage: runtime. Depends on the standard library.
//
// Every kernel that may run in parallel takes a `ThreadPool*` (nullptr = run inline on the calling thread). The only parallel primitive is a *static* partition of an index range into contiguous chunks that
// depends on n and the chunk count only, never on timing; callers split independent work (output tiles, batch
// entries), never a reduction, so a result is bitwise the same at any thread count. Nested calls from inside a task
// and concurrent calls from several outside threads are safe: a nested call runs inline, concurrent calls take turns.
// Between jobs a worker, and the caller waiting for the last chunk, poll for kSpinMicros before sleeping on a
// condition variable: a kernel's back-to-back steps (two per KC step of a GEMM) then hand work over without a futex
// sleep and wake-up each, and so does a gradient walk whose threaded steps (cotangent products) are a few serial
// steps apart (chain7's forward matrix-vector products, 15 us each); an idle pool still sleeps after that short,
// bounded poll. The poll yields the CPU every few microseconds, so on a machine busy with other processes it does
// not hold a CPU that the thread it waits for, or another process, is queued on (docs/performance.md, 2026-12-06).
// The hand-over itself takes no lock: a job is published with one atomic store, chunks are claimed by a
// compare-exchange on (job number, next chunk) and counted down by an atomic, and the mutex is taken only by a thread
// going to sleep, by the one waking it, and for an exception. With a mutex per claim, the two threads of a small
// packed GEMM (three jobs per call) met on it and woke each other through futex system calls, several microseconds
// each on the KVM guest of docs/performance.md (2026-12-06, issue 39).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace einstage {

class ThreadPool {
 public:
  /// A pool that runs work on `threads` threads in total: the calling thread plus threads - 1 workers.
  /// threads <= 1 starts no worker and runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Number of threads that share work (>= 1, counting the caller).
  int size() const { return size_; }

  /// Runs fn(begin, end) over the chunks of [0, n) and returns when all are done. The range is cut into
  /// chunk_count(n, min_chunk) contiguous chunks, chunk c = [c*n/C, (c+1)*n/C): the cut depends on n, min_chunk and
  /// size() only. Each chunk runs exactly once, on some thread. The first exception thrown by fn is rethrown here
  /// (after every started chunk has finished). n <= 0 does nothing.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn, int64_t min_chunk = 1);

  /// How many chunks parallel_for uses for n items: min(size(), ceil(n / min_chunk), kMaxChunks), at least 1 when
  /// n > 0.
  int chunk_count(int64_t n, int64_t min_chunk = 1) const;

  /// The most chunks one job has: the chunk count and the next chunk share one 64-bit word with the job's number.
  static constexpr int64_t kMaxChunks = 0xFFFF;

  /// How long a worker polls for the next job, and the caller for the last chunk, before sleeping. 200 us: at 50,
  /// chain7's value+grad (2 threads) woke a sleeping worker between its steps, 245 us median against 190 at 200.
  static constexpr int kSpinMicros = 200;

 private:
  void worker_loop();
  void run_chunks(uint32_t job);

  int size_ = 1;
  std::vector<std::thread> workers_;

  std::mutex submit_mutex_;  // one parallel_for at a time from outside threads
  std::mutex mutex_;         // taken to sleep on wake_ or done_, to wake a sleeper, and for error_
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<bool> stop_{false};
  uint32_t job_ = 0;  // the last job's number, written by the submitting thread only (under submit_mutex_)
  // The current job's number (high 32 bits), its chunk count (16 bits) and its next unclaimed chunk (low 16 bits):
  // workers notice a new job by the number changing and claim a chunk by a compare-exchange on the whole word, so a
  // thread late from an older job claims nothing of a newer one and never reads a newer job's count as its own. The
  // job's fields below are written before the word is published.
  std::atomic<uint64_t> claim_{0};
  std::atomic<const std::function<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int> unfinished_{0};           // chunks of the current job not finished yet
  std::atomic<int> sleepers_{0};             // workers asleep on wake_
  std::atomic<bool> caller_sleeps_{false};  // the submitting thread is asleep on done_
  std::exception_ptr error_;                 // the job's first exception (under mutex_)
};

/// default_context()'s pool (runtime/Context.h): default_threads() threads, started on first use and never
/// destroyed, so it is intact for calls made while the process exits. Throws what default_threads() throws.
ThreadPool& default_pool();

/// parallel_for on pool, or inline fn(0, n) when pool is nullptr or has one thread.
void parallel_for(ThreadPool* pool, int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn,
                  int64_t min_chunk = 1);

}  // namespace einstage
