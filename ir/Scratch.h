// ScratchAllocator: the one place that keeps freed memory for reuse, under one byte limit. It hands out tensor
// storage (large blocks of 4 MiB and more are 2 MiB-aligned with a huge-page hint, and the last two freed are kept
// for a later allocation of the same size; medium blocks of 4 KiB to 4 MiB are rounded to 4 KiB pages and the last
// 256 freed kept likewise, since malloc hands such sizes back to the system (munmap, and heap trimming once the
// free top of the heap passes 128 KiB) and a program's next run faults their pages in again) and per-call scratch leases (the einsum executor's arena and problem, the
// JIT GETT's packing buffers), whose buffers stay with the lease's slot between calls. Stage: ir (tensor storage
// lives here); an ExecutionContext (runtime/Context.h) owns one and routes its kernels' scratch and its einsum
// outputs through it. Depends on ir/Error.h.
//
//   ScratchAllocator& scratch = context.scratch();
//   Tensor out = Tensor::empty(DType::f64, {n, n}, scratch);    // storage from this allocator, returned to it
//   ScratchAllocator::Lease lease = scratch.lease();            // one slot, not shared with anyone until released
//   std::byte* pack = lease.buffer(0, bytes);                   // grows as needed, kept for the next lease
//
// Why: fresh pages from the system cost a page clear on first touch (a third of an elementwise 2048^2 product, half
// of the einsum-benchmark's str_nw_mera_closed_120), so memory that a loop will ask for again is kept warm.
//
// The limit (Config::scratch_cache_bytes: EINSTAGE_TENSOR_CACHE_MB, 1 GiB by default; 0 keeps nothing) bounds the
// bytes retained while unused: kept large blocks plus the buffers of idle slots. When a block or a lease comes back
// and the total would exceed the limit, the oldest kept blocks go first, then the returned slot's buffers. Memory in
// use (a live tensor, a held lease) is not retained memory and is never limited.
//
// Slots, not threads: a lease takes any idle slot (or makes one), so concurrent callers, pool workers and nested
// calls each get their own; there is no thread_local state. Two idle slots are parked where a lease takes them and
// its release gives them back without the mutex (one atomic exchange each); such a slot's buffers stay counted
// against the limit while it is leased, and a release whose buffers grew takes the locked path. Two allocators never share a block or a slot. Storage
// outlives its allocator safely: a block freed after the allocator is gone is returned to the system.
// Tensors made without an allocator use process_default(), the allocator of the default execution context: runtime
// installs it through install_default(), the one registration point, whenever the default context is replaced; until
// then (and in a program without runtime/) it is the built-in pool that the built-in default context shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <typeindex>
#include <utility>

namespace einstage {

struct ScratchStats {
  size_t limit_bytes = 0;     // the limit it was made with
  size_t retained_bytes = 0;  // kept now (kept blocks + idle and parked slots' buffers), <= limit_bytes
  size_t kept_blocks = 0;     // large blocks kept now (medium ones count in retained_bytes only)
  uint64_t reuses = 0;        // requests served from retained memory (a kept block, a slot buffer large enough)
  uint64_t fresh = 0;         // requests that took new memory from the system
};

class ScratchAllocator {
 public:
  /// Keeps at most `limit_bytes` of unused memory (0: none).
  explicit ScratchAllocator(size_t limit_bytes);
  /// Returns what it retains to the system; blocks and leases still out are freed when they come back.
  ~ScratchAllocator();
  ScratchAllocator(const ScratchAllocator&) = delete;
  ScratchAllocator& operator=(const ScratchAllocator&) = delete;

  /// Tensor storage of `bytes` (64-byte aligned; from 4 MiB on 2 MiB-aligned and possibly a kept block of the same
  /// rounded size). Uninitialised. Fails with the out-of-memory error naming `what`.
  std::shared_ptr<std::byte> allocate(size_t bytes, const char* what = "a tensor");

  struct Slot;
  struct State;
  /// Exclusive use of one slot until destroyed. Buffers and objects persist in the slot for later leases.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    /// At least `bytes` bytes, 64-byte aligned, for buffer `index` (0 to kBuffers - 1); contents are not kept
    /// when it grows. Throws the out-of-memory error for `bytes`.
    std::byte* buffer(int index, size_t bytes);
    /// The slot's object of type T (default-constructed on its first use in this slot, destroyed with the
    /// allocator): state a caller reuses across calls, e.g. a problem description whose vectors keep their capacity.
    template <typename T> T& object() {
      return *static_cast<T*>(object(typeid(T), [] { return static_cast<void*>(new T()); },
                                     [](void* p) { delete static_cast<T*>(p); }));
    }

   private:
    friend class ScratchAllocator;
    Lease(std::shared_ptr<State> state, Slot* slot) : state_(std::move(state)), slot_(slot) {}
    void* object(std::type_index type, void* (*make)(), void (*destroy)(void*));
    std::shared_ptr<State> state_;
    Slot* slot_ = nullptr;
  };
  static constexpr int kBuffers = 3;

  /// An idle slot (or a new one) for the caller's exclusive use.
  Lease lease();

  ScratchStats stats() const;

  /// The allocator of calls given none (Tensor::empty without one, the JIT's buffers without one): the installed
  /// one (install_default), else the built-in pool (Config::process().scratch_cache_bytes), which the built-in
  /// default context shares, made on first use and never destroyed (tensors may be freed during static
  /// destruction). The built-in pool throws on a bad EINSTAGE_TENSOR_CACHE_MB (no other variable is read here).
  static ScratchAllocator& process_default();
  /// The built-in pool itself, whatever is installed (the built-in default context's allocator).
  static ScratchAllocator& builtin_default();
  /// Makes `allocator` the one process_default() returns (nullptr: the built-in pool again), so there is one default
  /// allocator, the default context's, and no second hidden pool. runtime's set_default_context() is the only
  /// caller; the caller keeps `allocator` alive while it is installed and while calls that started on it run
  /// (storage it handed out outlives it safely).
  static void install_default(ScratchAllocator* allocator);

 private:
  std::shared_ptr<State> state_;
};

}  // namespace einstage
