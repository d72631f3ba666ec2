// ThreadPool: the static partition, inline mode, nested calls, exceptions, handover with and without sleeping.
#include "runtime/ThreadPool.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

using einstage::ThreadPool;

TEST_CASE("thread pool covers every index exactly once with a partition independent of timing") {
  for (int threads : {0, 1, 2, 3, 5}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == std::max(1, threads));
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex m;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        {
          std::lock_guard lock(m);
          chunks.emplace_back(b, e);
        }
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) CHECK(h.load() == 1);
      std::sort(chunks.begin(), chunks.end());
      int c = pool.chunk_count(n);
      CHECK(static_cast<int>(chunks.size()) == c);
      for (int i = 0; i < c; ++i) {
        CHECK(chunks[i].first == n * i / c);
        CHECK(chunks[i].second == n * (i + 1) / c);
      }
    }
  }
}

TEST_CASE("thread pool min_chunk limits the number of chunks") {
  ThreadPool pool(4);
  CHECK(pool.chunk_count(10, 8) == 2);
  CHECK(pool.chunk_count(10, 100) == 1);
  CHECK(pool.chunk_count(100, 1) == 4);
  CHECK(pool.chunk_count(0, 1) == 0);
}

TEST_CASE("thread pool runs nested calls inline and rethrows the first exception") {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(10, [&](int64_t bb, int64_t ee) {
        for (int64_t j = bb; j < ee; ++j) sum += i * 10 + j;
      });
  });
  CHECK(sum.load() == 39 * 40 / 2);
  CHECK_THROWS_WITH_AS(pool.parallel_for(8, [](int64_t b, int64_t) {
    if (b == 0) throw std::runtime_error("chunk failed");
  }),
                       "chunk failed", std::runtime_error);
  // The pool still works after an exception.
  std::atomic<int> count{0};
  pool.parallel_for(8, [&](int64_t b, int64_t e) { count += static_cast<int>(e - b); });
  CHECK(count.load() == 8);
  // nullptr pool runs inline.
  int64_t total = 0;
  einstage::parallel_for(nullptr, 5, [&](int64_t b, int64_t e) { total += e - b; });
  CHECK(total == 5);
}

TEST_CASE("thread pool hands over back-to-back jobs and jobs after an idle pause alike") {
  // Jobs that follow each other at once meet a worker still polling for the next job; jobs after a pause longer
  // than ThreadPool::kSpinMicros meet it asleep on the condition variable. Both must run every chunk exactly once
  // (a lost wake-up would hang here), and an exception must not leave the next job's handover stuck.
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    for (int job = 0; job < 400; ++job) {
      CAPTURE(job);
      if (job % 50 == 49) std::this_thread::sleep_for(std::chrono::microseconds(4 * ThreadPool::kSpinMicros));
      const int64_t n = 1 + job % 7;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      if (job % 97 == 0) {
        CHECK_THROWS_AS(pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          throw std::runtime_error("chunk failed");
        }), std::runtime_error);
      } else {
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      }
      for (auto& h : hits) CHECK(h.load() == 1);
    }
  }
}

TEST_CASE("thread pool: a worker late from an older job claims nothing of a newer one") {
  // Back-to-back tiny jobs on more workers than chunks: workers often see a job's number only after it has finished
  // and the next one is published, so their claims of the old job must fail and leave the new one's chunks (and its
  // function) to claims made under the new number: a chunk claimed with an old job's function would leave the new
  // job's indices unvisited. Every job checks that each of its indices ran exactly once.
  ThreadPool pool(4);
  for (int job = 0; job < 5000; ++job) {
    CAPTURE(job);
    const int64_t n = 1 + job % 9;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    }, 1 + job % 3);
    for (auto& h : hits) CHECK(h.load() == 1);
  }
}
