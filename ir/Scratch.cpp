#include "ir/Scratch.h"

#include "ir/Config.h"
#include "ir/Size.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace einstage {

namespace {

constexpr size_t kHuge = size_t(2) << 20;   // huge-page size and the alignment of large blocks
constexpr size_t kLargeBytes = 2 * kHuge;   // storage from here on is a large block
constexpr size_t kPage = size_t(4) << 10;
constexpr size_t kMediumBytes = kPage;  // storage from here on (one 4 KiB page) is a medium block
constexpr size_t kSmallClasses = kMediumBytes / 64 - 1;  // small blocks: 64 bytes to 4 KiB - 64, in 64-byte steps

void* aligned(size_t alignment, size_t bytes, int64_t requested, std::string_view what) {
  void* p = std::aligned_alloc(alignment, bytes);
  if (!p) fail_out_of_memory(requested, what);
  return p;
}

}  // namespace

struct ScratchAllocator::Slot {
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  struct Object {
    std::type_index type;
    void* p;
    void (*destroy)(void*);
  };
  Buffer buffers[kBuffers];
  std::vector<Object> objects;
  size_t counted = 0;  // bytes of its buffers counted in State::idle_slot_bytes (kept while leased from a spare)

  size_t buffer_bytes() const {
    size_t total = 0;
    for (const Buffer& b : buffers) total += b.bytes;
    return total;
  }
  void free_buffers() {
    for (Buffer& b : buffers) {
      std::free(b.data);
      b = {};
    }
  }
  ~Slot() {
    free_buffers();
    for (const Object& o : objects) o.destroy(o.p);
  }
};

// Shared by the allocator, its leases and the deleters of its blocks, so whichever of them goes last frees it.
struct ScratchAllocator::State {
  // The last few freed large blocks (the newest kept, the oldest evicted), for an allocation of exactly the same
  // (2 MiB-rounded) size: the blocks worth keeping are those of the einsum running now (a suite that went from 32 MB
  // to 128 MB outputs kept two stale 32 MB blocks and faulted in every 128 MB output afresh: 11 ms -> 77 ms per call).
  // Medium blocks (4 KiB to 4 MiB, 4 KiB-rounded) have a tier of their own: a program run frees and asks again for
  // many of them (a gradient's outputs and intermediates), and malloc gives such sizes back to the system when
  // they are freed (heap trimming, munmap), so every run faulted their pages in afresh. From 64 KiB and 32 blocks
  // they went to one page and 256 blocks: the walks of a 4x4 grid of bond 8 free dozens of 4-32 KiB tensors per run,
  // whose heap pages were trimmed and faulted in again (value+grad 0.37 -> 0.29 ms, its HVP 1.40 -> 0.93 ms, the
  // same as with GLIBC_TUNABLES=glibc.malloc.trim_threshold=1073741824). A scan of 256 entries under the lock costs
  // far less than one fault.
  static constexpr size_t kLargeBlocks = 2, kMediumBlocks = 256, kBlocks = kLargeBlocks + kMediumBlocks;
  // Small blocks (under one page, 64-byte rounded) are kept per size, up to kSmallPerSize of each and kSmallBytes in
  // all: a run of a program over small tensors (an 8x8 grid of bond 2: a gradient walk frees some 200 tensors of
  // 16 bytes to 2 KiB per run) asked malloc for each again, and 64-byte aligned malloc of a small size splits and
  // consolidates chunks: aligned_alloc, free and malloc_consolidate were 10% of such a run.
  static constexpr size_t kSmallPerSize = 256, kSmallBytes = size_t(2) << 20;
  static size_t tier_begin(size_t bytes) { return bytes >= kLargeBytes ? 0 : kLargeBlocks; }
  static size_t tier_end(size_t bytes) { return bytes >= kLargeBytes ? kLargeBlocks : kBlocks; }

  explicit State(size_t limit_bytes) : limit(limit_bytes) {}

  const size_t limit;
  mutable std::mutex mutex;
  std::atomic<bool> closed{false};  // the allocator is gone: nothing more is kept
  void* block[kBlocks] = {};
  size_t size[kBlocks] = {};
  uint64_t age[kBlocks] = {};  // when each block was given back (larger = newer)
  uint64_t clock = 0;
  size_t block_bytes = 0;       // kept blocks
  size_t idle_slot_bytes = 0;   // buffers of idle slots
  std::vector<void*> small[kSmallClasses];  // kept small blocks by size (64 * (index + 1) bytes), newest last
  size_t small_bytes = 0;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<Slot*> idle;
  // Idle slots taken and given back without the mutex: a lease is one exchange and its release one compare-exchange
  // when its buffers did not grow (a slot here stays counted in idle_slot_bytes while leased, so its release needs no
  // limit check). Two, for the executor's lease and the GETT's nested in it. The two locked round trips per lease
  // were some 3% of the value+grad of an 8x8 grid of bond 2 (a few hundred einsum calls of microseconds each); this
  // took it from 156.6 to 151.9 us (docs/performance-log.md).
  static constexpr size_t kSpares = 2;
  std::atomic<Slot*> spare[kSpares] = {};
  std::atomic<uint64_t> reuses{0};
  std::atomic<uint64_t> fresh{0};

  size_t retained() const { return block_bytes + idle_slot_bytes + small_bytes; }

  ~State() {
    for (void* p : block) std::free(p);
    for (const std::vector<void*>& list : small)
      for (void* p : list) std::free(p);
  }

  // Under the lock: every kept small block moved to `out` (the limit needs their room).
  void evict_small(std::vector<void*>& out) {
    for (std::vector<void*>& list : small) {
      out.insert(out.end(), list.begin(), list.end());
      list.clear();
    }
    small_bytes = 0;
  }

  void* take_small(size_t bytes) {
    std::lock_guard lock(mutex);
    std::vector<void*>& list = small[bytes / 64 - 1];
    if (list.empty()) return nullptr;
    void* p = list.back();
    list.pop_back();
    small_bytes -= bytes;
    return p;
  }

  void give_small(void* p, size_t bytes) {
    {
      std::lock_guard lock(mutex);
      std::vector<void*>& list = small[bytes / 64 - 1];
      if (!closed && list.size() < kSmallPerSize && small_bytes + bytes <= kSmallBytes &&
          retained() + bytes <= limit) {
        list.push_back(p);
        small_bytes += bytes;
        return;
      }
    }
    std::free(p);
  }

  // Under the lock: the oldest kept block among [begin, end), removed (nullptr when none is kept).
  void* evict_oldest(size_t begin = 0, size_t end = kBlocks) {
    size_t oldest = end;
    for (size_t i = begin; i < end; ++i)
      if (block[i] && (oldest == end || age[i] < age[oldest])) oldest = i;
    if (oldest == end) return nullptr;
    void* p = block[oldest];
    block_bytes -= size[oldest];
    block[oldest] = nullptr;
    return p;
  }

  void* take_block(size_t bytes) {
    std::lock_guard lock(mutex);
    for (size_t i = tier_begin(bytes); i < tier_end(bytes); ++i)
      if (block[i] && size[i] == bytes) {
        void* p = block[i];
        block[i] = nullptr;
        block_bytes -= bytes;
        return p;
      }
    return nullptr;
  }

  // The freed block replaces the oldest kept ones when its tier's slots or the limit are full.
  void give_block(void* p, size_t bytes) {
    std::vector<void*> to_free;
    {
      std::lock_guard lock(mutex);
      if (closed || bytes > limit) {
        to_free.push_back(p);
      } else {
        for (;;) {
          const size_t begin = tier_begin(bytes), end = tier_end(bytes);
          size_t free_slot = end;
          for (size_t i = begin; i < end && free_slot == end; ++i)
            if (!block[i]) free_slot = i;
          if (free_slot != end && retained() + bytes <= limit) {
            block[free_slot] = p, size[free_slot] = bytes, age[free_slot] = ++clock, block_bytes += bytes;
            break;
          }
          void* evicted = free_slot == end ? evict_oldest(begin, end) : evict_oldest();
          if (!evicted && free_slot != end && small_bytes > 0) {  // the small blocks make room last
            evict_small(to_free);
            continue;
          }
          if (!evicted) {  // the idle slots' buffers leave no room: not kept
            to_free.push_back(p);
            break;
          }
          to_free.push_back(evicted);
        }
      }
    }
    for (void* q : to_free) std::free(q);
  }

  // A lease's slot comes back: its buffers stay with it within the limit (older kept blocks make room first).
  void release(Slot* slot) {
    if (!closed && slot->buffer_bytes() == slot->counted)
      for (std::atomic<Slot*>& s : spare) {
        Slot* empty = nullptr;
        if (s.compare_exchange_strong(empty, slot)) {
          if (closed) drain_spares();  // the destructor may have drained before the slot arrived
          return;
        }
      }
    std::vector<void*> to_free;
    {
      std::lock_guard lock(mutex);
      if (!closed) idle_slot_bytes -= slot->counted;
      slot->counted = 0;
      size_t bytes = slot->buffer_bytes();
      while (!closed && retained() + bytes > limit) {
        void* evicted = evict_oldest();
        if (!evicted) {
          evict_small(to_free);
          break;
        }
        to_free.push_back(evicted);
      }
      if (closed || retained() + bytes > limit) {
        slot->free_buffers();
        bytes = 0;
      }
      idle_slot_bytes += bytes;
      slot->counted = bytes;
      if (!park(slot)) idle.push_back(slot);
    }
    for (void* q : to_free) std::free(q);
  }

  bool park(Slot* slot) {
    for (std::atomic<Slot*>& s : spare) {
      Slot* empty = nullptr;
      if (s.compare_exchange_strong(empty, slot)) return true;
    }
    return false;
  }

  // Under the lock once closed: the parked slots' buffers go, the slots join the idle list.
  void drain_spares_locked() {
    for (std::atomic<Slot*>& s : spare)
      if (Slot* slot = s.exchange(nullptr)) {
        slot->free_buffers();
        slot->counted = 0;
        idle.push_back(slot);
      }
  }
  void drain_spares() {
    std::lock_guard lock(mutex);
    drain_spares_locked();
  }
};

ScratchAllocator::ScratchAllocator(size_t limit_bytes) : state_(std::make_shared<State>(limit_bytes)) {}

ScratchAllocator::~ScratchAllocator() {
  std::lock_guard lock(state_->mutex);
  state_->closed = true;
  state_->drain_spares_locked();
  while (void* p = state_->evict_oldest()) std::free(p);
  std::vector<void*> small;
  state_->evict_small(small);
  for (void* p : small) std::free(p);
  for (Slot* s : state_->idle) {
    s->free_buffers();
    s->counted = 0;
  }
  state_->idle_slot_bytes = 0;
}

std::shared_ptr<std::byte> ScratchAllocator::allocate(size_t bytes, const char* what) {
  const auto requested = static_cast<int64_t>(bytes);
  if (!fits_in_memory(requested)) fail_out_of_memory(requested, what);
  size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  if (rounded < kMediumBytes) {
    void* p = state_->take_small(rounded);
    if (p) {
      state_->reuses.fetch_add(1, std::memory_order_relaxed);
    } else {
      state_->fresh.fetch_add(1, std::memory_order_relaxed);
      p = aligned(64, rounded, requested, what);
    }
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                      [state = state_, rounded](std::byte* q) { state->give_small(q, rounded); });
  }
  // Large tensors come from fresh pages, whose first touch faults once per 4 KiB page: for a bandwidth-bound step
  // (an elementwise or outer product into a new output) the faults cost more than the arithmetic. Align to 2 MiB
  // and ask for transparent huge pages (as NumPy's allocator does); with THP set to "madvise" that is 512x fewer
  // faults. Only a hint: nothing depends on it succeeding.
  // Medium blocks (kept in a tier of their own, State) are rounded to whole pages.
  const bool large = rounded >= kLargeBytes;
  const size_t unit = large ? kHuge : kPage;
  rounded = (rounded + unit - 1) / unit * unit;
  void* p = state_->take_block(rounded);
  if (p) {
    state_->reuses.fetch_add(1, std::memory_order_relaxed);
  } else {
    state_->fresh.fetch_add(1, std::memory_order_relaxed);
    p = aligned(large ? kHuge : 64, rounded, requested, what);
#if defined(__linux__)
    if (large) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  }
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                    [state = state_, rounded](std::byte* q) { state->give_block(q, rounded); });
}

ScratchAllocator::Lease ScratchAllocator::lease() {
  for (std::atomic<Slot*>& s : state_->spare)
    if (Slot* slot = s.exchange(nullptr)) return Lease(state_, slot);
  std::lock_guard lock(state_->mutex);
  Slot* slot = nullptr;
  if (!state_->idle.empty()) {
    slot = state_->idle.back();
    state_->idle.pop_back();
    state_->idle_slot_bytes -= slot->counted;
    slot->counted = 0;
  } else {
    state_->slots.push_back(std::make_unique<Slot>());
    slot = state_->slots.back().get();
  }
  return Lease(state_, slot);
}

ScratchAllocator::Lease::Lease(Lease&& other) noexcept
    : state_(std::move(other.state_)), slot_(std::exchange(other.slot_, nullptr)) {}

ScratchAllocator::Lease::~Lease() {
  if (slot_) state_->release(slot_);
}

std::byte* ScratchAllocator::Lease::buffer(int index, size_t bytes) {
  Slot::Buffer& b = slot_->buffers[index];
  if (b.data && b.bytes >= bytes) {
    state_->reuses.fetch_add(1, std::memory_order_relaxed);
    return static_cast<std::byte*>(b.data);
  }
  std::free(b.data);
  b = {};
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  b.data = aligned(64, rounded, static_cast<int64_t>(bytes), "scratch");
  b.bytes = rounded;
  state_->fresh.fetch_add(1, std::memory_order_relaxed);
  return static_cast<std::byte*>(b.data);
}

void* ScratchAllocator::Lease::object(std::type_index type, void* (*make)(), void (*destroy)(void*)) {
  for (const Slot::Object& o : slot_->objects)
    if (o.type == type) return o.p;
  slot_->objects.reserve(slot_->objects.size() + 1);  // so nothing throws after make()
  slot_->objects.push_back({type, make(), destroy});
  return slot_->objects.back().p;
}

ScratchStats ScratchAllocator::stats() const {
  std::lock_guard lock(state_->mutex);
  ScratchStats s;
  s.limit_bytes = state_->limit;
  s.retained_bytes = state_->retained();
  for (size_t i = 0; i < State::kLargeBlocks; ++i) s.kept_blocks += state_->block[i] != nullptr;
  s.reuses = state_->reuses.load();
  s.fresh = state_->fresh.load();
  return s;
}

namespace {

// What install_default() made the default (nullptr: the built-in pool); constant-initialised, so it is there before
// any static constructor asks.
std::atomic<ScratchAllocator*> g_installed_default{nullptr};

}  // namespace

void ScratchAllocator::install_default(ScratchAllocator* allocator) {
  g_installed_default.store(allocator, std::memory_order_release);
}

ScratchAllocator& ScratchAllocator::process_default() {
  if (ScratchAllocator* installed = g_installed_default.load(std::memory_order_acquire)) return *installed;
  return builtin_default();
}

ScratchAllocator& ScratchAllocator::builtin_default() {
  // Never deleted: tensors freed during static destruction still return their blocks to it. The options are made
  // inside the initialiser: every Tensor::empty comes here, and building them on each call took ~7% of a prepared
  // 16x16 matmul's execute() on a Zen 5 (docs/performance.md).
  static ScratchAllocator* const allocator = [] {
    // Every other field is given explicitly, so only EINSTAGE_TENSOR_CACHE_MB is read: a bad EINSTAGE_NUM_THREADS is
    // the error of whatever resolves the thread count, not of every tensor (`einstage einsum --threads 2` needs none).
    ConfigOptions only_the_limit;
    only_the_limit.threads = 0;
    only_the_limit.kernel_cache_dir = "";
    only_the_limit.jit = only_the_limit.jit_specialise = only_the_limit.jit_direct = true;
    only_the_limit.dump_passes = false;
    only_the_limit.ad_keep_bytes = -1;
    return new ScratchAllocator(Config::process(only_the_limit).scratch_cache_bytes);
  }();
  return *allocator;
}

}  // namespace einstage
