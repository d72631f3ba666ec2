// Offsets of short-lived tensors in one arena, from the steps at which each is written and last read: the one
// buffer-assignment rule of the einsum executor (EinsumPlan's intermediates, Executor.h) and of the tree walks
// (EinsumVjpPlan's forward values and cotangents, TreeAd.h). Stage: einsum extension, prepare time only; depends on
// ir/Size.h.
//
// A tensor is live from the step that writes it to the last step that reads it, both included, so a step's result
// never shares bytes with its own operands. First fit over byte ranges: tensors are placed in the order they are
// written (ties in the order given), a tensor's bytes return to the free list once every later tensor is written
// after its last read, adjacent free blocks merge, and the arena grows at its end when no free block fits (a free
// block touching the end is extended). Like XLA's heap simulator with the first-fit heuristic, in the small.
//
//   std::vector<ArenaBuffer> b = {{.bytes = 256, .first = 0, .last = 1}, {.bytes = 128, .first = 1, .last = 2}};
//   ArenaLayout layout = lay_out_arena(b);   // offsets 0 and 256 (both live at step 1), layout.bytes == 384
#pragma once

#include "ir/Size.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace einstage::einsum {

// First fit over byte ranges [offset, offset + size); the arena grows at the end when no free block fits.
class FirstFit {
 public:
  int64_t allocate(int64_t size, std::string_view what) {
    if (size == 0) return 0;
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= size) {
        int64_t off = it->first;
        if (it->second == size) free_.erase(it);
        else {
          it->first += size;
          it->second -= size;
        }
        return off;
      }
    // A free block touching the end can be extended.
    if (!free_.empty() && free_.back().first + free_.back().second == end_) {
      int64_t off = free_.back().first;
      free_.pop_back();
      end_ = checked_add(off, size, what);
      return off;
    }
    int64_t off = end_;
    end_ = checked_add(end_, size, what);
    return off;
  }
  void release(int64_t off, int64_t size) {
    if (size == 0) return;
    auto it = std::lower_bound(free_.begin(), free_.end(), std::make_pair(off, int64_t(0)));
    it = free_.insert(it, {off, size});
    // coalesce with the next and the previous block
    if (it + 1 != free_.end() && it->first + it->second == (it + 1)->first) {
      it->second += (it + 1)->second;
      free_.erase(it + 1);
    }
    if (it != free_.begin() && (it - 1)->first + (it - 1)->second == it->first) {
      (it - 1)->second += it->second;
      free_.erase(it);
    }
  }
  int64_t end() const { return end_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> free_;  // sorted by offset
  int64_t end_ = 0;
};

/// One tensor to place: its bytes and the steps that write it (first) and last read it (last >= first).
struct ArenaBuffer {
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

struct ArenaLayout {
  std::vector<int64_t> offsets;  // per buffer, in the order given
  int64_t bytes = 0;             // the arena's size
};

/// Offsets such that any two buffers live at a common step have disjoint byte ranges; each offset is a multiple of
/// `align` (every size is rounded up to it). `what` names the arena in an overflow error.
inline ArenaLayout lay_out_arena(std::span<const ArenaBuffer> buffers, int64_t align = 64,
                                 std::string_view what = "the arena") {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].first < buffers[b].first; });
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  FirstFit fit;
  std::vector<size_t> live;  // placed buffers not yet released
  auto rounded = [&](size_t i) {
    const int64_t b = buffers[i].bytes;
    return b == 0 ? 0 : checked_add(b, align - 1 - (b + align - 1) % align, what);
  };
  for (size_t i : order) {
    // Release what was last read before this buffer is written.
    for (size_t j = 0; j < live.size();)
      if (buffers[live[j]].last < buffers[i].first) {
        fit.release(layout.offsets[live[j]], rounded(live[j]));
        live[j] = live.back();
        live.pop_back();
      } else {
        ++j;
      }
    layout.offsets[i] = fit.allocate(rounded(i), what);
    live.push_back(i);
  }
  layout.bytes = fit.end();
  return layout;
}

}  // namespace einstage::einsum
