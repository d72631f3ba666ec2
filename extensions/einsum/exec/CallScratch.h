// The scratch of one einsum call (private to extensions/einsum/exec/, used by ExecutorRun.cpp): the arena and
// workspace bytes and the slot's reused problem, leased from the context's ScratchAllocator.
//
// State reused across calls, so a call allocates nothing: the ContractionProblem being filled and the scratch (arena
// + workspace) bytes, in a lease of the context's ScratchAllocator (ir/Scratch.h), whose slot keeps them for the next
// call within the allocator's limit. A plan stays immutable; each call running it holds a slot of its own (a call
// nested in another, e.g. from a task a waiting thread picks up, takes another slot). Scratch larger than
// kKeepScratchBytes (up to kReusedScratchBytes) is allocated per call as large-block storage from the same allocator
// (2 MiB-aligned with a huge-page hint; freed blocks are kept for a later call of the same size), not kept in the
// slot: fresh pages from the system cost a page clear on first touch, which was a third of a call of the
// einsum-benchmark's str_nw_mera_open_26 (hundreds of MB of intermediates).
#pragma once

#include "extensions/api/Kernels.h"
#include "ir/Scratch.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>

namespace einstage::einsum::executor {

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using ScratchBytes = std::unique_ptr<std::byte[], AlignedFree>;

// `what` says what the scratch holds, for the out-of-memory error.
using ScratchWhat = std::function<std::string()>;

constexpr int64_t kKeepScratchBytes = int64_t(256) << 10;
// Scratch up to this size goes through the allocator's large blocks, which it can hand back warm on the next call.
// Larger scratch would hardly be kept, and fresh huge-page-hinted blocks of a GB or more cost more than plain ones
// when memory is fragmented (gm_queen5_5_3, 1.3 GB of scratch: 2.4 s -> 4.9 s beside the benchmark's peer
// processes), so it is a plain allocation.
constexpr int64_t kReusedScratchBytes = int64_t(512) << 20;

// The name of a prepared plan (or of one step of it) that a leased slot remembers, so that the next call of the same
// plan reuses what the slot holds (ExecutorSlot::problem_of, the tree walks' views of their arena). Unique in the
// process and never 0 (a slot's "none"), on purpose not per context: a prepared plan belongs to no context and may run
// on any context's slots, so a per-context count would give two plans one name in one slot. The number carries no
// setting, cache content or failure, and no result depends on its value (issue 38: an identity, not process state).
uint64_t next_plan_identity();

// What a slot keeps for the executor besides its bytes.
struct ExecutorSlot {
  ContractionProblem problem;
  uint64_t problem_of = 0;  // StepExec::id whose problem `problem` holds (0: none)
};

class CallScratch {
 public:
  // Allocates `scratch_bytes`; a failure is the out-of-memory error naming what the scratch holds.
  CallScratch(ScratchAllocator& allocator, int64_t scratch_bytes, const ScratchWhat& what);
  CallScratch(const CallScratch&) = delete;
  CallScratch& operator=(const CallScratch&) = delete;

  ExecutorSlot& slot() { return *state_; }
  std::byte* base() { return base_; }
  static std::byte* empty_base() { return empty_; }

 private:
  ScratchAllocator::Lease lease_;
  ExecutorSlot* state_ = nullptr;
  std::shared_ptr<std::byte> large_;  // scratch above kKeepScratchBytes, for this call only
  ScratchBytes huge_;                 // scratch above kReusedScratchBytes
  std::byte* base_ = nullptr;
  alignas(64) static inline std::byte empty_[64];
};


}  // namespace einstage::einsum::executor
