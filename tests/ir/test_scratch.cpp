// ScratchAllocator (ir/Scratch.h): one byte limit over kept large and medium blocks and idle slots' buffers, reuse
// counted, leases exclusive, two allocators independent, storage that outlives its allocator still freed safely.
#include "ir/Scratch.h"
#include "ir/Tensor.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

using namespace einstage;

namespace {
constexpr size_t kMiB = size_t(1) << 20;
}

TEST_CASE("scratch: a freed large block comes back for the same size, counted as a reuse") {
  ScratchAllocator scratch(64 * kMiB);
  const void* first = nullptr;
  {
    Tensor t = Tensor::empty(DType::f64, {1024, 1024}, scratch);  // 8 MiB
    first = t.raw_data();
  }
  CHECK(scratch.stats().retained_bytes == 8 * kMiB);
  CHECK(scratch.stats().kept_blocks == 1);
  const ScratchStats before = scratch.stats();
  Tensor again = Tensor::empty(DType::f64, {1024, 1024}, scratch);
  CHECK(again.raw_data() == first);
  CHECK(scratch.stats().reuses == before.reuses + 1);
  CHECK(scratch.stats().fresh == before.fresh);
  CHECK(scratch.stats().retained_bytes == 0);  // in use again, so not retained
}

TEST_CASE("scratch: retained bytes never exceed the limit") {
  ScratchAllocator scratch(12 * kMiB);
  { Tensor a = Tensor::empty(DType::f64, {1024, 1024}, scratch); }  // 8 MiB kept
  CHECK(scratch.stats().retained_bytes == 8 * kMiB);
  { Tensor b = Tensor::empty(DType::f64, {1024, 1536}, scratch); }  // 12 MiB: the 8 MiB block makes room
  CHECK(scratch.stats().retained_bytes == 12 * kMiB);
  CHECK(scratch.stats().kept_blocks == 1);
  { Tensor c = Tensor::empty(DType::f64, {2048, 1024}, scratch); }  // 16 MiB: above the limit, not kept
  CHECK(scratch.stats().retained_bytes == 12 * kMiB);
  {
    ScratchAllocator::Lease lease = scratch.lease();
    std::memset(lease.buffer(0, 2 * kMiB), 1, 2 * kMiB);
  }  // 12 + 2 MiB > 12 MiB: the kept block goes first, the slot keeps its buffer
  CHECK(scratch.stats().retained_bytes == 2 * kMiB);
  CHECK(scratch.stats().kept_blocks == 0);
  CHECK(scratch.stats().limit_bytes == 12 * kMiB);
}

TEST_CASE("scratch: a zero limit keeps nothing") {
  ScratchAllocator scratch(0);
  { Tensor a = Tensor::empty(DType::f64, {1024, 1024}, scratch); }
  {
    ScratchAllocator::Lease lease = scratch.lease();
    (void)lease.buffer(0, 4096);
  }
  CHECK(scratch.stats().retained_bytes == 0);
  ScratchAllocator::Lease lease = scratch.lease();
  const uint64_t fresh = scratch.stats().fresh;
  (void)lease.buffer(0, 4096);
  CHECK(scratch.stats().fresh == fresh + 1);  // the released buffer was not kept
}

TEST_CASE("scratch: a lease's buffers and objects persist for the next lease of its slot; held leases are distinct") {
  ScratchAllocator scratch(64 * kMiB);
  std::byte* kept = nullptr;
  {
    ScratchAllocator::Lease lease = scratch.lease();
    kept = lease.buffer(1, 1000);
    lease.object<std::vector<int>>().assign({1, 2, 3});
  }
  CHECK(scratch.stats().retained_bytes == 1024);  // rounded to 64 bytes
  ScratchAllocator::Lease first = scratch.lease();
  const uint64_t reuses = scratch.stats().reuses;
  CHECK(first.buffer(1, 512) == kept);  // smaller fits: the same bytes
  CHECK(scratch.stats().reuses == reuses + 1);
  CHECK(first.object<std::vector<int>>() == std::vector<int>{1, 2, 3});
  ScratchAllocator::Lease second = scratch.lease();  // the first is held: another slot, empty
  CHECK(second.buffer(1, 512) != kept);
  CHECK(second.object<std::vector<int>>().empty());
  CHECK(reinterpret_cast<uintptr_t>(second.buffer(0, 100)) % 64 == 0);
}

TEST_CASE("scratch: two allocators never share a block") {
  ScratchAllocator one(64 * kMiB), two(64 * kMiB);
  const void* freed = nullptr;
  {
    Tensor t = Tensor::empty(DType::f64, {1024, 1024}, one);
    freed = t.raw_data();
  }
  Tensor other = Tensor::empty(DType::f64, {1024, 1024}, two);
  CHECK(other.raw_data() != freed);
  CHECK(two.stats().reuses == 0);
  CHECK(one.stats().kept_blocks == 1);
}

TEST_CASE("scratch: storage outlives its allocator") {
  Tensor survivor;
  {
    ScratchAllocator scratch(64 * kMiB);
    survivor = Tensor::empty(DType::f64, {1024, 1024}, scratch);
    survivor.at<double>({1023, 1023}) = 2.5;
    { Tensor kept = Tensor::empty(DType::f64, {1024, 1024}, scratch); }
  }
  CHECK(survivor.at<double>({1023, 1023}) == 2.5);
  survivor = Tensor();  // its block goes back to the system, not to the destroyed allocator's cache
}

TEST_CASE("scratch: freed medium blocks (4 KiB to 4 MiB) come back for the same page-rounded size, under the limit") {
  ScratchAllocator scratch(64 * kMiB);
  std::vector<const void*> freed;
  {
    std::vector<Tensor> outputs;  // a gradient's outputs, say: seven 512 KiB matrices
    for (int k = 0; k < 7; ++k) outputs.push_back(Tensor::empty(DType::f64, {256, 256}, scratch));
    for (const Tensor& t : outputs) freed.push_back(t.raw_data());
  }
  CHECK(scratch.stats().retained_bytes == 7 * 512 * 1024);
  CHECK(scratch.stats().kept_blocks == 0);  // kept_blocks counts the large ones
  const ScratchStats before = scratch.stats();
  std::vector<Tensor> again;
  for (int k = 0; k < 7; ++k) {
    again.push_back(Tensor::empty(DType::f64, {256, 256}, scratch));
    CHECK(std::find(freed.begin(), freed.end(), again.back().raw_data()) != freed.end());
  }
  CHECK(scratch.stats().reuses == before.reuses + 7);
  CHECK(scratch.stats().fresh == before.fresh);
  CHECK(scratch.stats().retained_bytes == 0);
  { Tensor other = Tensor::empty(DType::f64, {300, 256}, scratch); }  // another size: fresh, then kept too
  CHECK(scratch.stats().fresh == before.fresh + 1);
  CHECK(scratch.stats().retained_bytes == 600 * 1024);  // 300 * 256 * 8 bytes, a whole number of 4 KiB pages

  // From one page on: an 8 KiB tensor (a grid's intermediate) comes back too.
  const void* page_block = nullptr;
  { Tensor t = Tensor::empty(DType::f64, {16, 64}, scratch); page_block = t.raw_data(); }
  const ScratchStats before_page = scratch.stats();
  CHECK(Tensor::empty(DType::f64, {16, 64}, scratch).raw_data() == page_block);
  CHECK(scratch.stats().reuses == before_page.reuses + 1);
  { Tensor tiny = Tensor::empty(DType::f64, {8, 8}, scratch); }
  CHECK(scratch.stats().fresh == before_page.fresh + 1);
  CHECK(scratch.stats().retained_bytes == before_page.retained_bytes + 512);  // small blocks are kept by size too

  ScratchAllocator small(1 * kMiB);  // the limit holds for medium blocks too
  {
    std::vector<Tensor> ts;
    for (int k = 0; k < 3; ++k) ts.push_back(Tensor::empty(DType::f64, {256, 256}, small));
  }
  CHECK(small.stats().retained_bytes <= 1 * kMiB);
  ScratchAllocator none(0);
  { Tensor t = Tensor::empty(DType::f64, {256, 256}, none); }
  CHECK(none.stats().retained_bytes == 0);
}

TEST_CASE("scratch: freed small blocks (under 4 KiB) come back for the same 64-byte-rounded size, under the limit") {
  ScratchAllocator scratch(64 * kMiB);
  std::vector<const void*> freed;
  {
    std::vector<Tensor> walk;  // a gradient walk's small tensors: 16 bytes to 2 KiB
    for (int64_t n : {2, 4, 8, 16, 32, 64, 128, 256, 2, 2}) walk.push_back(Tensor::empty(DType::f64, {n}, scratch));
    for (const Tensor& t : walk) freed.push_back(t.raw_data());
  }
  const size_t kept = 64 * 5 + 128 + 256 + 512 + 1024 + 2048;  // rounded to 64 bytes each
  CHECK(scratch.stats().retained_bytes == kept);
  const ScratchStats before = scratch.stats();
  std::vector<Tensor> again;
  for (int64_t n : {2, 4, 8, 16, 32, 64, 128, 256, 2, 2}) {
    again.push_back(Tensor::empty(DType::f64, {n}, scratch));
    CHECK(std::find(freed.begin(), freed.end(), again.back().raw_data()) != freed.end());
    CHECK(reinterpret_cast<uintptr_t>(again.back().raw_data()) % 64 == 0);
  }
  CHECK(scratch.stats().reuses == before.reuses + 10);
  CHECK(scratch.stats().fresh == before.fresh);
  CHECK(scratch.stats().retained_bytes == 0);
  { Tensor other = Tensor::empty(DType::f64, {24}, scratch); }  // 192 bytes: another size, fresh
  CHECK(scratch.stats().fresh == before.fresh + 1);

  // Under the limit, and they make room when a larger block or a slot's buffers need it.
  ScratchAllocator tight(1 * kMiB);
  { Tensor t = Tensor::empty(DType::f64, {100}, tight); }
  CHECK(tight.stats().retained_bytes == 832);
  { Tensor t = Tensor::empty(DType::f64, {128, 1024}, tight); }  // exactly the limit: the small block goes
  CHECK(tight.stats().retained_bytes == 1 * kMiB);
  {
    ScratchAllocator::Lease lease = tight.lease();
    (void)lease.buffer(0, 1 * kMiB);
  }
  CHECK(tight.stats().retained_bytes <= 1 * kMiB);
  ScratchAllocator none(0);
  { Tensor t = Tensor::empty(DType::f64, {8}, none); }
  CHECK(none.stats().retained_bytes == 0);
}

TEST_CASE("scratch: a released slot is taken again without the lock; its bytes stay under the limit") {
  ScratchAllocator scratch(3 * kMiB);
  std::byte* kept = nullptr;
  {
    ScratchAllocator::Lease lease = scratch.lease();
    kept = lease.buffer(0, kMiB);
  }
  CHECK(scratch.stats().retained_bytes == kMiB);
  {
    ScratchAllocator::Lease lease = scratch.lease();  // the parked slot: its bytes stay counted while leased
    CHECK(lease.buffer(0, kMiB) == kept);
    CHECK(scratch.stats().retained_bytes == kMiB);
    ScratchAllocator::Lease nested = scratch.lease();  // another slot, empty
    CHECK(nested.buffer(0, 64) != kept);
  }
  CHECK(scratch.stats().retained_bytes == kMiB + 64);
  {
    ScratchAllocator::Lease lease = scratch.lease();
    (void)lease.buffer(0, 2 * kMiB);  // grows: its release counts the new size against the limit again
    (void)lease.buffer(1, 2 * kMiB);
  }
  CHECK(scratch.stats().retained_bytes <= 3 * kMiB);
  // The allocator goes while a parked slot is leased: its buffers are freed when it comes back.
  auto short_lived = std::make_unique<ScratchAllocator>(kMiB);
  { (void)short_lived->lease().buffer(0, 4096); }
  ScratchAllocator::Lease held = short_lived->lease();
  short_lived.reset();
  CHECK(held.buffer(0, 4096) != nullptr);
}

TEST_CASE("scratch: leases taken and returned from several threads at once stay exclusive and come back") {
  ScratchAllocator scratch(64 * kMiB);
  std::vector<int> clashes(4, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        ScratchAllocator::Lease lease = scratch.lease();
        ScratchAllocator::Lease nested = scratch.lease();
        auto* mine = reinterpret_cast<int*>(lease.buffer(0, 256));
        auto* inner = reinterpret_cast<int*>(nested.buffer(0, 256));
        std::fill(mine, mine + 64, t);
        std::fill(inner, inner + 64, -1 - t);
        std::this_thread::yield();
        clashes[t] += std::count(mine, mine + 64, t) != 64 || std::count(inner, inner + 64, -1 - t) != 64;
      }
    });
  for (std::thread& w : workers) w.join();
  for (int t = 0; t < 4; ++t) CHECK(clashes[t] == 0);
  // Every slot came back with its buffer: each of the (2 to 8) slots keeps 256 bytes, and leasing them all at once
  // takes no fresh memory.
  const size_t retained = scratch.stats().retained_bytes;
  CHECK(retained % 256 == 0);
  CHECK(retained >= 2 * 256);
  CHECK(retained <= 8 * 256);
  const uint64_t fresh = scratch.stats().fresh;
  std::vector<ScratchAllocator::Lease> all;
  all.reserve(retained / 256);
  for (size_t i = 0; i < retained / 256; ++i) {
    all.push_back(scratch.lease());
    (void)all.back().buffer(0, 256);
  }
  CHECK(scratch.stats().fresh == fresh);
}
