// One einsum call's scratch: kept in the lease's slot, large blocks of the allocator, or a plain allocation by size
// (see CallScratch.h).
#include "extensions/einsum/exec/CallScratch.h"

#include "ir/Size.h"

#include <atomic>

namespace einstage::einsum::executor {

namespace {

ScratchBytes allocate_scratch(int64_t bytes, const ScratchWhat& what) {
  void* p = ::operator new[](static_cast<size_t>(bytes), std::align_val_t(64), std::nothrow);
  if (!p) fail_out_of_memory(bytes, what());
  return ScratchBytes(static_cast<std::byte*>(p));
}

}  // namespace

uint64_t next_plan_identity() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

CallScratch::CallScratch(ScratchAllocator& allocator, int64_t scratch_bytes, const ScratchWhat& what)
    : lease_(allocator.lease()), state_(&lease_.object<ExecutorSlot>()) {
  if (scratch_bytes <= 0) {
    base_ = empty_;  // zero-size intermediates still need a non-null address
  } else if (scratch_bytes > kKeepScratchBytes && scratch_bytes <= kReusedScratchBytes) {
    try {
      large_ = allocator.allocate(static_cast<size_t>(scratch_bytes));
    } catch (const Error&) {
      fail_out_of_memory(scratch_bytes, what());
    }
    base_ = large_.get();
  } else if (scratch_bytes > kKeepScratchBytes) {
    huge_ = allocate_scratch(scratch_bytes, what);
    base_ = huge_.get();
  } else {
    try {
      base_ = lease_.buffer(0, static_cast<size_t>(scratch_bytes));
    } catch (const Error&) {
      fail_out_of_memory(scratch_bytes, what());
    }
  }
}

}  // namespace einstage::einsum::executor
