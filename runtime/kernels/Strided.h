// Strided loop nests for the portable kernels: index spaces over several tensors that share a shape but not strides.
// Stage: runtime (kernel internals). Depends on ir/Error.h, ir/Size.h (every element count is a checked_product)
// and runtime/ThreadPool.h only; no Tensor, no dtype.
//
// A LoopNest normalises a shape and the strides of up to four tensors once per call (extent-1 axes dropped, axes
// ordered so the first tensor's smallest stride is innermost, adjacent axes fused where every tensor allows), so the
// kernels' inner loops are one pointer stride per element and never recompute multi-indices. Offsets of a multi-axis
// group can also be tabulated (offset_table) so packing reads through a table instead of index arithmetic.
#pragma once

#include "ir/Error.h"
#include "ir/Size.h"
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <span>
#include <vector>

namespace einstage::kernels {

template <int NT>
struct LoopNest {
  std::vector<int64_t> extent;                 // extent[0] is the innermost (fastest) axis
  std::vector<std::array<int64_t, NT>> stride;  // stride[axis][tensor]
  int64_t total = 1;                            // product of extents (0 if any is 0)

  int64_t inner() const { return extent.empty() ? 1 : extent[0]; }
  int64_t outer_count() const { return extent.empty() ? 1 : (extent[0] == 0 ? 0 : total / extent[0]); }
};

/// Builds the loop nest for `shape` where tensor t has strides[t] (each of shape.size() entries).
template <int NT>
LoopNest<NT> make_loop_nest(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, NT>& strides) {
  LoopNest<NT> nest;
  std::vector<int> axes;
  nest.total = checked_product(shape, "loop nest");
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) axes.push_back(static_cast<int>(i));
  if (nest.total == 0) {
    nest.extent = {0};
    nest.stride = {std::array<int64_t, NT>{}};
    return nest;
  }
  // Innermost = smallest |stride| of tensor 0 (the destination by convention), ties by the next tensors, then by
  // axis number so the order is deterministic.
  std::stable_sort(axes.begin(), axes.end(), [&](int x, int y) {
    for (int t = 0; t < NT; ++t) {
      int64_t sx = std::llabs((*strides[t])[x]), sy = std::llabs((*strides[t])[y]);
      if (sx != sy) return sx < sy;
    }
    return false;
  });
  for (int ax : axes) {
    std::array<int64_t, NT> st;
    for (int t = 0; t < NT; ++t) st[t] = (*strides[t])[ax];
    if (!nest.extent.empty()) {
      bool fuse = true;
      for (int t = 0; t < NT; ++t)
        if (st[t] != nest.stride.back()[t] * nest.extent.back()) fuse = false;
      if (fuse) {
        nest.extent.back() *= shape[ax];
        continue;
      }
    }
    nest.extent.push_back(shape[ax]);
    nest.stride.push_back(st);
  }
  return nest;
}

/// Calls run(offsets, n, inner_strides) for each run of the innermost axis whose outer linear index lies in
/// [outer_begin, outer_end). offsets[t] is tensor t's element offset at the run's start.
template <int NT, typename Run>
void for_each_run(const LoopNest<NT>& nest, int64_t outer_begin, int64_t outer_end, Run&& run) {
  if (nest.total == 0 || outer_begin >= outer_end) return;
  const int rank = static_cast<int>(nest.extent.size());
  std::array<int64_t, NT> inner_stride{};
  if (rank > 0) inner_stride = nest.stride[0];
  if (rank <= 1) {
    run(std::array<int64_t, NT>{}, nest.inner(), inner_stride);
    return;
  }
  // Odometer over axes 1..rank-1, started at outer_begin by one division per axis, then incremented.
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  std::array<int64_t, NT> off{};
  int64_t rest = outer_begin;
  for (int a = 1; a < rank; ++a) {
    idx[a] = rest % nest.extent[a];
    rest /= nest.extent[a];
    for (int t = 0; t < NT; ++t) off[t] += idx[a] * nest.stride[a][t];
  }
  for (int64_t o = outer_begin; o < outer_end; ++o) {
    run(off, nest.extent[0], inner_stride);
    for (int a = 1; a < rank; ++a) {
      if (++idx[a] < nest.extent[a]) {
        for (int t = 0; t < NT; ++t) off[t] += nest.stride[a][t];
        break;
      }
      idx[a] = 0;
      for (int t = 0; t < NT; ++t) off[t] -= (nest.extent[a] - 1) * nest.stride[a][t];
    }
  }
}

/// Element offsets of every point of a multi-axis group, linearised with the first axis fastest:
/// table[i] = sum_a index_a(i) * stride[a]. The size is the product of the extents. This form fills `table` in place
/// (a caller that keeps it across calls allocates nothing once it is large enough); the one below returns it.
inline void offset_table(std::span<const int64_t> extent, std::span<const int64_t> stride,
                         std::vector<int64_t>& table) {
  const int64_t total = checked_product(extent, "offset table");
  table.resize(static_cast<size_t>(total));  // a reused table keeps its capacity: no allocation once it is large enough
  if (total == 0) return;
  table[0] = 0;
  int64_t filled = 1;
  size_t a = 0;
  // The first axis on its own (a loop the compiler vectorises; a one-axis group of a matrix-vector step filled its
  // table one element per pass of the general loop below, a sixth of a 256 x 256 step's one-shot time).
  if (!extent.empty()) {
    for (int64_t i = 1; i < extent[0]; ++i) table[static_cast<size_t>(i)] = i * stride[0];
    filled = extent[0];
    a = 1;
  }
  // Each further axis replicates the table built so far, shifted by its stride: no per-element division.
  for (; a < extent.size(); ++a) {
    for (int64_t i = 1; i < extent[a]; ++i)
      for (int64_t j = 0; j < filled; ++j) table[static_cast<size_t>(i * filled + j)] = table[static_cast<size_t>(j)] + i * stride[a];
    filled *= extent[a];
  }
}

inline std::vector<int64_t> offset_table(const std::vector<int64_t>& extent, const std::vector<int64_t>& stride) {
  std::vector<int64_t> table;
  offset_table(extent, stride, table);
  return table;
}

}  // namespace einstage::kernels

namespace einstage::kernels {

/// Tile edge of parallel_runs' transposed traversal (elements along each of the two tiled axes).
inline constexpr int64_t kTransposeTile = 32;

/// The axis that parallel_runs tiles against the innermost one, or 0 for none: for the first tensor t >= 1 that reads
/// axis 0 with a |stride| above 1 (a transposed operand: a run along axis 0 touches one cache line per element of
/// t), the axis of at least kTransposeTile positions along which t's non-zero |stride| is smallest, if that is
/// smaller than along axis 0, which must be at least kTransposeTile long too.
template <int NT>
int transposed_axis(const LoopNest<NT>& nest) {
  const int rank = static_cast<int>(nest.extent.size());
  if (nest.total == 0 || rank < 2 || nest.extent[0] < kTransposeTile) return 0;
  for (int t = 1; t < NT; ++t) {
    const int64_t s0 = std::llabs(nest.stride[0][t]);
    if (s0 <= 1) continue;
    int best = 0;
    for (int a = 1; a < rank; ++a) {
      const int64_t s = std::llabs(nest.stride[a][t]);
      if (s != 0 && nest.extent[a] >= kTransposeTile && (best == 0 || s < std::llabs(nest.stride[best][t]))) best = a;
    }
    if (best != 0 && std::llabs(nest.stride[best][t]) < s0) return best;
  }
  return 0;
}

/// Runs fn(offsets, n, inner_strides) over every innermost run of `nest`, cutting runs longer than `piece` into
/// pieces, and spreading the (run, piece) units over the pool. The cut depends on the nest and `piece` only. When a
/// tensor reads the nest transposed (transposed_axis), the runs are visited in kTransposeTile x kTransposeTile tiles
/// of the innermost axis and that tensor's fastest one instead (runs of at most kTransposeTile elements, never longer
/// than `piece`), so both tensors stay in cache within a tile. fn must treat its runs independently (every caller
/// computes each element, or each kept element of a reduction, within one call), so the visiting order never changes
/// a result.
template <int NT, typename Fn>
void parallel_runs(ThreadPool* pool, const LoopNest<NT>& nest, int64_t piece, Fn&& fn) {
  if (nest.total == 0) return;
  if (const int t = piece >= kTransposeTile ? transposed_axis(nest) : 0; t != 0) {
    // Outer positions over the remaining axes (a nest whose innermost axis is a dummy of extent 1).
    LoopNest<NT> rest;
    rest.extent.push_back(1);
    rest.stride.push_back(std::array<int64_t, NT>{});
    for (int a = 1; a < static_cast<int>(nest.extent.size()); ++a)
      if (a != t) {
        rest.extent.push_back(nest.extent[a]);
        rest.stride.push_back(nest.stride[a]);
        rest.total *= nest.extent[a];
      }
    const int64_t e0 = nest.extent[0], et = nest.extent[t];
    const std::array<int64_t, NT> s0 = nest.stride[0], st = nest.stride[t];
    const int64_t tblocks = (et + kTransposeTile - 1) / kTransposeTile;
    parallel_for(pool, rest.outer_count() * tblocks, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t o = u / tblocks, jb = (u % tblocks) * kTransposeTile, jlen = std::min(kTransposeTile, et - jb);
        for_each_run(rest, o, o + 1, [&](const std::array<int64_t, NT>& off, int64_t, const std::array<int64_t, NT>&) {
          for (int64_t ib = 0; ib < e0; ib += kTransposeTile) {
            const int64_t ilen = std::min(kTransposeTile, e0 - ib);
            for (int64_t j = jb; j < jb + jlen; ++j) {
              std::array<int64_t, NT> start;
              for (int k = 0; k < NT; ++k) start[k] = off[k] + j * st[k] + ib * s0[k];
              fn(start, ilen, s0);
            }
          }
        });
      }
    }, std::max<int64_t>(1, (int64_t(1) << 14) / (kTransposeTile * e0)));
    return;
  }
  const int64_t inner = nest.inner();
  const int64_t pieces = (inner + piece - 1) / piece;
  const int64_t units = nest.outer_count() * pieces;
  const int64_t min_units = std::max<int64_t>(1, (int64_t(1) << 14) / std::min(inner, piece));
  parallel_for(pool, units, [&](int64_t u0, int64_t u1) {
    const int64_t o0 = u0 / pieces, o1 = (u1 - 1) / pieces + 1;
    int64_t o = o0;
    for_each_run(nest, o0, o1, [&](const std::array<int64_t, NT>& off, int64_t n, const std::array<int64_t, NT>& st) {
      const int64_t q0 = (o == o0) ? u0 % pieces : 0;
      const int64_t q1 = (o == o1 - 1) ? (u1 - 1) % pieces + 1 : pieces;
      for (int64_t q = q0; q < q1; ++q) {
        std::array<int64_t, NT> start = off;
        const int64_t b = q * piece, len = std::min(piece, n - b);
        for (int t = 0; t < NT; ++t) start[t] += b * st[t];
        fn(start, len, st);
      }
      ++o;
    });
  }, min_units);
}

}  // namespace einstage::kernels
