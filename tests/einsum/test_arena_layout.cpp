// The arena layout rule (extensions/einsum/exec/ArenaLayout.h) against a brute-force oracle: on 500 seeded random sets of
// buffers (each written at one step and last read at a later or the same one), any two live at a common step have
// disjoint byte ranges, every offset is aligned and inside the arena, and the arena is at least the bytes live at
// the busiest step and at most all bytes together; a pinned example shows that a dead buffer's space is reused.
#include "support/Random.h"

#include "extensions/einsum/exec/ArenaLayout.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace einstage;
using einsum::ArenaBuffer;
using einsum::lay_out_arena;

TEST_CASE("arena layout: a buffer written after another's last read takes its space") {
  const std::vector<ArenaBuffer> b = {{256, 0, 1}, {128, 1, 2}, {192, 2, 3}, {64, 4, 4}};
  const einsum::ArenaLayout layout = lay_out_arena(b);
  // 0 and 1 are live together at step 1; 2 is written at step 2, after 0's last read; 3 after all.
  CHECK(layout.offsets == std::vector<int64_t>{0, 256, 0, 0});
  CHECK(layout.bytes == 384);
  // Sizes round up to the alignment; zero-size buffers take no bytes.
  const einsum::ArenaLayout rounded = lay_out_arena(std::vector<ArenaBuffer>{{1, 0, 0}, {0, 0, 0}, {65, 0, 0}});
  CHECK(rounded.offsets == std::vector<int64_t>{0, 0, 64});
  CHECK(rounded.bytes == 192);
}

TEST_CASE("arena layout: no two buffers live at one step overlap, on 500 seeded random sets") {
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    INFO("seed " << seed);
    test::SplitMix64 rng{seed};
    const int count = 1 + static_cast<int>(rng.next() % 40);
    const int64_t align = int64_t{1} << (rng.next() % 7);  // 1 .. 64
    std::vector<ArenaBuffer> buffers;
    for (int i = 0; i < count; ++i) {
      ArenaBuffer b;
      b.bytes = rng.next() % 5 == 0 ? 0 : static_cast<int64_t>(rng.next() % 1000);
      b.first = static_cast<int>(rng.next() % 30);
      b.last = b.first + static_cast<int>(rng.next() % 10);
      buffers.push_back(b);
    }
    const einsum::ArenaLayout layout = lay_out_arena(buffers, align);
    REQUIRE(layout.offsets.size() == buffers.size());
    auto rounded = [&](const ArenaBuffer& b) { return (b.bytes + align - 1) / align * align; };
    int64_t total = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      CHECK(layout.offsets[i] % align == 0);
      CHECK(layout.offsets[i] >= 0);
      CHECK(layout.offsets[i] + buffers[i].bytes <= layout.bytes);
      total += rounded(buffers[i]);
    }
    // Brute force over steps: the buffers live at step s are those with first <= s <= last.
    int64_t busiest = 0;
    for (int s = 0; s < 40; ++s) {
      std::vector<size_t> live;
      int64_t bytes = 0;
      for (size_t i = 0; i < buffers.size(); ++i)
        if (buffers[i].first <= s && s <= buffers[i].last && buffers[i].bytes > 0) {
          live.push_back(i);
          bytes += rounded(buffers[i]);
        }
      busiest = std::max(busiest, bytes);
      for (size_t x = 0; x < live.size(); ++x)
        for (size_t y = x + 1; y < live.size(); ++y) {
          const int64_t a0 = layout.offsets[live[x]], a1 = a0 + buffers[live[x]].bytes;
          const int64_t b0 = layout.offsets[live[y]], b1 = b0 + buffers[live[y]].bytes;
          CHECK_MESSAGE((a1 <= b0 || b1 <= a0), "buffers " << live[x] << " and " << live[y] << " overlap at step " << s);
        }
    }
    CHECK(layout.bytes >= busiest);
    CHECK(layout.bytes <= total);
  }
}
