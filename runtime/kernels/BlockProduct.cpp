// Matrix products split by their operands' exact zeros (see BlockProduct.h).
#include "runtime/kernels/BlockProduct.h"

#include "runtime/kernels/HostIsa.h"
#include "runtime/kernels/Strided.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include <immintrin.h>

namespace einstage::kernels {

namespace {

// Most blocks a product is split into: a matrix whose nonzeros fall apart into more pieces than this is unusual
// enough (a diagonal, say) that the dense product is kept.
constexpr size_t kMaxBlocks = 64;

template <typename T> struct RealOf { using type = T; };
template <typename R> struct RealOf<std::complex<R>> { using type = R; };

// The index kinds of a product: rows (of A and C), contracted indices, columns (of B and C).
enum Kind : int { kRows = 0, kContracted = 1, kColumns = 2 };

// The fused offsets of one group of axes in the tensors that carry it (extent-1 axes dropped, the first axis
// varying fastest): the axes sorted by |stride in `key`| (ties by |stride in `tie`|, then by position), so a
// problem's k order is the JIT's (runtime/jit/GettLoops.h: fuse; k by B's strides, then A's).
struct Group {
  int64_t size = 1;
  std::vector<int64_t> off[2];  // offsets in the two tensors the group is read from (A or B, and the other)
};
Group fuse_group(const std::vector<ContractionProblem::Axis>& axes, int64_t ContractionProblem::Axis::*key,
                 int64_t ContractionProblem::Axis::*tie, int64_t ContractionProblem::Axis::*other) {
  std::vector<ContractionProblem::Axis> sorted;
  for (const ContractionProblem::Axis& ax : axes)
    if (ax.extent != 1) sorted.push_back(ax);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& x, const auto& y) {
    const int64_t kx = std::abs(x.*key), ky = std::abs(y.*key);
    return kx != ky ? kx < ky : std::abs(x.*tie) < std::abs(y.*tie);
  });
  Group g;
  std::vector<int64_t> extent, stride;
  for (const auto& ax : sorted) extent.push_back(ax.extent), g.size *= ax.extent;
  for (int t = 0; t < 2; ++t) {
    stride.clear();
    for (const auto& ax : sorted) stride.push_back(t == 0 ? ax.*key : ax.*other);
    offset_table(extent, stride, g.off[t]);
  }
  return g;
}

// One operand read as lines: line l is index l of kind `node`, its entries the indices of kind `entry`; entry e of
// line l is at data[line_off[l] + entry_off[e]]. `unit8[g]`: entries 8g to 8g + 7 are contiguous in memory.
template <typename T> struct Lines {
  const T* data;
  int64_t count, len;
  const int64_t* line_off;
  const int64_t* entry_off;
  std::vector<uint8_t> unit8;
  Kind node, entry;
};

// Lines whose entries are the group with the smaller innermost stride (a column-major A: one line per contracted
// index, entries the rows), so that the nonzero test reads memory in runs.
template <typename T>
Lines<T> make_lines(const T* data, const std::vector<int64_t>& x, Kind kx, const std::vector<int64_t>& y, Kind ky) {
  auto inner = [](const std::vector<int64_t>& t) { return t.size() > 1 ? std::abs(t[1] - t[0]) : INT64_MAX; };
  const bool x_entries = inner(x) <= inner(y);
  const std::vector<int64_t>& entries = x_entries ? x : y;
  const std::vector<int64_t>& lines = x_entries ? y : x;
  Lines<T> out{data, static_cast<int64_t>(lines.size()), static_cast<int64_t>(entries.size()), lines.data(),
               entries.data(), {}, x_entries ? ky : kx, x_entries ? kx : ky};
  out.unit8.resize(entries.size() / 8);
  for (size_t g = 0; g < out.unit8.size(); ++g)
    out.unit8[g] = entries[8 * g + 7] - entries[8 * g] == 7 &&
                   std::adjacent_find(entries.begin() + 8 * g, entries.begin() + 8 * g + 8,
                                      [](int64_t p, int64_t q) { return q != p + 1; }) == entries.begin() + 8 * g + 8;
  return out;
}

// Bits e to e + 7 of the result: x[e] != 0 for 8 contiguous entries (a nan counts as nonzero, -0 as zero), with the
// vector compares of the CPU: AVX-512 or AVX2 (HostIsa.h), else one entry at a time.
int vector_isa() { return host_isa().avx512f ? 2 : host_isa().avx2 ? 1 : 0; }
[[gnu::target("avx512f")]] uint64_t nonzero8_avx512(const double* x) {
  return _mm512_cmp_pd_mask(_mm512_loadu_pd(x), _mm512_setzero_pd(), _CMP_NEQ_UQ);
}
[[gnu::target("avx2")]] uint64_t nonzero8_avx2(const double* x) {
  const __m256d lo = _mm256_cmp_pd(_mm256_loadu_pd(x), _mm256_setzero_pd(), _CMP_NEQ_UQ);
  const __m256d hi = _mm256_cmp_pd(_mm256_loadu_pd(x + 4), _mm256_setzero_pd(), _CMP_NEQ_UQ);
  return uint64_t(static_cast<uint32_t>(_mm256_movemask_pd(lo))) |
         uint64_t(static_cast<uint32_t>(_mm256_movemask_pd(hi))) << 4;
}
[[gnu::target("avx2")]] uint64_t nonzero8_avx2(const float* x) {
  const __m256 ne = _mm256_cmp_ps(_mm256_loadu_ps(x), _mm256_setzero_ps(), _CMP_NEQ_UQ);
  return uint64_t(static_cast<uint32_t>(_mm256_movemask_ps(ne)));
}

// Bits 0 to 7: v[0..8) != 0, for contiguous entries of a real type on a CPU with vector compares.
template <typename T> uint64_t nonzero8(const T* v, int isa) {
  if constexpr (std::is_same_v<T, double>) return isa == 2 ? nonzero8_avx512(v) : nonzero8_avx2(v);
  else return nonzero8_avx2(v);
}

// The nonzero pattern of one f64 line on AVX-512, its compares inline (a call per 8 entries cost as much as the test);
// 8 entries that are not contiguous are gathered (the scalar loop cost ~1 ns per entry: a plaquette layout whose
// rows and contracted indices both have strides > 1 in A tested ~90 us slower than the others). Returns false when
// an entry is a nan or an infinity: x - x is +0 for a finite x and a nan otherwise, its bits or-ed together.
[[gnu::target("avx512f")]] bool line_bits_avx512(const Lines<double>& x, int64_t l, int64_t words, uint64_t* out) {
  const double* line = x.data + x.line_off[l];
  __m512i waste = _mm512_setzero_si512();
  bool finite = true;
  for (int64_t w = 0; w < words; ++w) {
    const int64_t e0 = w * 64, n = std::min<int64_t>(64, x.len - e0);
    uint64_t word = 0;
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) {
      const int64_t* at = x.entry_off + e0 + e;
      const __m512d v = x.unit8[static_cast<size_t>((e0 + e) / 8)]
                            ? _mm512_loadu_pd(line + *at)
                            : _mm512_mask_i64gather_pd(_mm512_setzero_pd(), 0xff, _mm512_loadu_si512(at), line,
                                                        sizeof(double));
      word |= uint64_t(_mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_NEQ_UQ)) << e;
      waste = _mm512_or_si512(waste, _mm512_castpd_si512(_mm512_sub_pd(v, v)));
    }
    for (; e < n; ++e) {
      const double v = line[x.entry_off[e0 + e]];
      word |= uint64_t(v != 0.0) << e;
      finite &= v - v == 0;
    }
    out[w] = word;
  }
  return finite && _mm512_test_epi64_mask(waste, waste) == 0;
}

// Whether v is finite (every part of a complex v): v - v is 0 then, a nan otherwise.
template <typename T> bool finite(T v) {
  if constexpr (std::is_same_v<T, typename RealOf<T>::type>) return v - v == T(0);
  else return v.real() - v.real() == 0 && v.imag() - v.imag() == 0;
}

// The nonzero pattern of one line as 64-bit words (bit e: entry e is not zero); false when an entry is a nan or an
// infinity.
template <typename T> bool line_bits(const Lines<T>& x, int64_t l, int64_t words, uint64_t* out) {
  if constexpr (std::is_same_v<T, double>) {
    if (vector_isa() == 2) return line_bits_avx512(x, l, words, out);
  }
  const T* line = x.data + x.line_off[l];
  constexpr bool real = std::is_same_v<T, double> || std::is_same_v<T, float>;
  const int isa = real ? vector_isa() : 0;
  bool all_finite = true;
  for (int64_t w = 0; w < words; ++w) {
    const int64_t e0 = w * 64, n = std::min<int64_t>(64, x.len - e0);
    uint64_t word = 0;
    for (int64_t e = 0; e < n;) {
      if constexpr (real) {
        if (isa > 0 && e % 8 == 0 && e + 8 <= n && x.unit8[static_cast<size_t>((e0 + e) / 8)]) {
          word |= nonzero8(line + x.entry_off[e0 + e], isa) << e;
          e += 8;
          continue;
        }
      }
      word |= uint64_t(line[x.entry_off[e0 + e]] != T(0)) << e;
      ++e;
    }
    for (int64_t e = 0; e < n; ++e) all_finite &= finite(line[x.entry_off[e0 + e]]);
    out[w] = word;
  }
  return all_finite;
}

// Whether line 0 of an operand (entries at `entry` offsets from `line`) has no zero entry (then it joins every index
// of its entry kind into one block).
template <typename T> bool dense_line(const T* line, const std::vector<int64_t>& entry) {
  for (int64_t e : entry)
    if (line[e] == T(0)) return false;
  return !entry.empty();
}

bool intersects(const uint64_t* x, const uint64_t* y, int64_t words) {
  for (int64_t w = 0; w < words; ++w)
    if (x[w] & y[w]) return true;
  return false;
}
bool any(const uint64_t* x, int64_t words) {
  for (int64_t w = 0; w < words; ++w)
    if (x[w]) return true;
  return false;
}
std::vector<int64_t> indices(const std::vector<uint64_t>& x) {
  std::vector<int64_t> out;
  for (size_t w = 0; w < x.size(); ++w)
    for (uint64_t word = x[w]; word; word &= word - 1)
      out.push_back(static_cast<int64_t>(w) * 64 + std::countr_zero(word));
  return out;
}

// One block: the rows, contracted indices and columns of one component, as bit sets.
struct Block {
  std::array<std::vector<uint64_t>, 3> sets;
};

// The components of the nonzeros of A and B (at most kMaxBlocks; nothing when there are more, or when an entry of A
// or B is a nan or an infinity: 0 * inf must stay nan, so such a product stays dense): every line with a
// nonzero entry joins its own index and its entries' indices to one block, merging the blocks it touches. Lines are
// read in the order of their offsets, so that strided entries (gathered) come from cache lines the previous lines
// loaded; the components do not depend on the order; their order in the result does (the blocks' products do not
// depend on it), and so may, with more than kMaxBlocks along the way, whether the product is split at all.
template <typename T>
std::optional<std::vector<Block>> components(const std::array<Lines<T>, 2>& operands, const int64_t (&words)[3]) {
  std::vector<Block> blocks;
  std::vector<uint64_t> bits;
  std::vector<size_t> hits;
  std::vector<int64_t> order;
  for (const Lines<T>& x : operands) {
    const int64_t we = words[x.entry];
    bits.resize(static_cast<size_t>(we));
    order.resize(static_cast<size_t>(x.count));
    std::iota(order.begin(), order.end(), int64_t(0));
    std::sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return x.line_off[p] < x.line_off[q]; });
    for (int64_t l : order) {
      if (!line_bits(x, l, we, bits.data())) return std::nullopt;
      if (!any(bits.data(), we)) continue;
      const uint64_t node_bit = uint64_t(1) << (l % 64);
      hits.clear();
      for (size_t h = 0; h < blocks.size(); ++h)
        if ((blocks[h].sets[x.node][static_cast<size_t>(l / 64)] & node_bit) ||
            intersects(blocks[h].sets[x.entry].data(), bits.data(), we))
          hits.push_back(h);
      if (hits.empty()) {
        if (blocks.size() == kMaxBlocks) return std::nullopt;
        Block& fresh = blocks.emplace_back();
        for (int kind = 0; kind < 3; ++kind) fresh.sets[kind].assign(static_cast<size_t>(words[kind]), 0);
        hits.push_back(blocks.size() - 1);
      }
      Block& into = blocks[hits[0]];
      into.sets[x.node][static_cast<size_t>(l / 64)] |= node_bit;
      for (int64_t w = 0; w < we; ++w) into.sets[x.entry][static_cast<size_t>(w)] |= bits[static_cast<size_t>(w)];
      for (size_t h = hits.size(); h-- > 1;) {  // merge the others into the first, erasing from the back
        for (int kind = 0; kind < 3; ++kind)
          for (size_t w = 0; w < into.sets[kind].size(); ++w) into.sets[kind][w] |= blocks[hits[h]].sets[kind][w];
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(hits[h]));
      }
    }
  }
  return blocks;
}

// Elements of A, B and C: what a split reads or writes (about once or twice each) whatever its blocks.
double elements(int64_t M, int64_t N, int64_t K) {
  return double(M) * double(K) + double(K) * double(N) + double(M) * double(N);
}
double macs_of(const ContractionProblem& p) {
  double macs = 1;
  for (const auto* group : {&p.m, &p.n, &p.k})
    for (const ContractionProblem::Axis& ax : *group) macs *= double(ax.extent);
  return macs;
}

// The blocks of a product: its fused rows, columns and contracted indices (offset tables) and each block's indices.
struct Part {
  std::vector<int64_t> rows, ks, cols;
  size_t a_at = 0, b_at = 0;  // where the gathered path puts the block's A and B
};
struct Split {
  Group rows, cols, ks;
  std::vector<Part> parts;
  size_t a_size = 0, b_size = 0, c_max = 0;  // the gathered path's buffers
};

// p's blocks when it splits (the rules of BlockProduct.h), else nothing.
template <typename T> std::optional<Split> find_split(const ContractionProblem& p) {
  using Axis = ContractionProblem::Axis;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  // Rows: offsets in A and C; columns: in B and C; contracted indices: in B and A, in the JIT's k order.
  Split split;
  split.rows = fuse_group(p.m, &Axis::stride_a, &Axis::stride_c, &Axis::stride_c);
  split.cols = fuse_group(p.n, &Axis::stride_b, &Axis::stride_c, &Axis::stride_c);
  split.ks = fuse_group(p.k, &Axis::stride_b, &Axis::stride_a, &Axis::stride_a);
  const std::vector<int64_t>&ma = split.rows.off[0], &nb = split.cols.off[0];
  const std::vector<int64_t>&kb = split.ks.off[0], &ka = split.ks.off[1];
  const int64_t M = split.rows.size, N = split.cols.size, K = split.ks.size;
  if (macs_of(p) < kBlockSplitMacsPerElement * elements(M, N, K)) return std::nullopt;  // even splitting it all away
  // A column of A without zeros joins every row, a row of B without zeros every column: one block.
  if (dense_line(a + ka[0], ma) || dense_line(b + kb[0], nb)) return std::nullopt;
  const std::array<Lines<T>, 2> operands{make_lines(a, ma, kRows, ka, kContracted),
                                         make_lines(b, nb, kColumns, kb, kContracted)};
  const int64_t words[3] = {(M + 63) / 64, (K + 63) / 64, (N + 63) / 64};
  std::optional<std::vector<Block>> blocks = components(operands, words);
  if (!blocks || blocks->size() < 2) return std::nullopt;

  // Each block's rows, contracted indices and columns (ascending: the dense product's k order); blocks without
  // rows or columns add nothing to C (their A or B entries are zeros or meet only zeros, all finite).
  double work = 0;
  for (const Block& x : *blocks) {
    Part part{indices(x.sets[kRows]), indices(x.sets[kContracted]), indices(x.sets[kColumns]), split.a_size,
              split.b_size};
    if (part.rows.empty() || part.ks.empty() || part.cols.empty()) continue;
    work += double(part.rows.size()) * double(part.ks.size()) * double(part.cols.size());
    split.a_size += part.rows.size() * part.ks.size();
    split.b_size += part.ks.size() * part.cols.size();
    split.c_max = std::max(split.c_max, part.rows.size() * part.cols.size());
    split.parts.push_back(std::move(part));
  }
  const double macs = double(M) * double(N) * double(K);
  if (split.parts.size() < 2 || work > 0.5 * macs || macs - work < kBlockSplitMacsPerElement * elements(M, N, K))
    return std::nullopt;
  return split;
}

// C = 0 at every row and column (blocks then overwrite theirs).
template <typename T> void zero_c(const ContractionProblem& p, const Split& split) {
  T* c = static_cast<T*>(p.c);
  const std::vector<int64_t>&mc = split.rows.off[1], &nc = split.cols.off[1];
  const int64_t M = split.rows.size, N = split.cols.size;
  bool packed = true;  // C's elements are c[0, M N) (the usual dense output): one fill
  for (int64_t i = 0; i < M && packed; ++i) packed = mc[static_cast<size_t>(i)] == i;
  for (int64_t j = 0; j < N && packed; ++j) packed = nc[static_cast<size_t>(j)] == j * M;
  if (packed) return std::fill(c, c + M * N, T(0));
  for (int64_t j = 0; j < N; ++j) {
    T* col = c + nc[static_cast<size_t>(j)];
    for (int64_t i = 0; i < M; ++i) col[mc[static_cast<size_t>(i)]] = T(0);
  }
}

// table[index[i]] for every i.
std::vector<int64_t> pick(const std::vector<int64_t>& index, const std::vector<int64_t>& table) {
  std::vector<int64_t> out(index.size());
  for (size_t i = 0; i < index.size(); ++i) out[i] = table[static_cast<size_t>(index[i])];
  return out;
}

template <typename T>
bool run_gathered(const ContractionProblem& p, const std::function<void(const ContractionProblem&)>& dense) {
  const std::optional<Split> found = find_split<T>(p);
  if (!found) return false;
  const Split& split = *found;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  T* c = static_cast<T*>(p.c);
  const std::vector<int64_t>&mc = split.rows.off[1], &nc = split.cols.off[1], &nb = split.cols.off[0];
  // The gathered operands and one block's product, in one buffer of this call's (no state kept between calls).
  const std::unique_ptr<T[]> gathered =
      std::make_unique_for_overwrite<T[]>(split.a_size + split.b_size + split.c_max);
  T* const ga = gathered.get();
  T* const gb = ga + split.a_size;
  T* const gc = gb + split.b_size;
  for (const Part& x : split.parts) {
    const auto mi = static_cast<int64_t>(x.rows.size()), kc = static_cast<int64_t>(x.ks.size());
    T* to = ga + x.a_at;
    const std::vector<int64_t> row_at = pick(x.rows, split.rows.off[0]), ka_at = pick(x.ks, split.ks.off[1]);
    for (int64_t s = 0; s < kc; ++s) {
      const T* col = a + ka_at[static_cast<size_t>(s)];
      for (int64_t r = 0; r < mi; ++r) to[s * mi + r] = col[row_at[static_cast<size_t>(r)]];
    }
    T* tb = gb + x.b_at;
    const std::vector<int64_t> kb_at = pick(x.ks, split.ks.off[0]);
    for (size_t t = 0; t < x.cols.size(); ++t) {
      const T* col = b + nb[static_cast<size_t>(x.cols[t])];
      for (int64_t s = 0; s < kc; ++s) tb[static_cast<int64_t>(t) * kc + s] = col[kb_at[static_cast<size_t>(s)]];
    }
  }
  bool zeroed = false;
  for (const Part& x : split.parts) {
    const auto mi = static_cast<int64_t>(x.rows.size()), kc = static_cast<int64_t>(x.ks.size());
    const auto nj = static_cast<int64_t>(x.cols.size());
    ContractionProblem q;
    q.dtype = p.dtype;
    q.m = {{mi, 1, 0, 1}};
    q.n = {{nj, 0, kc, mi}};
    q.k = {{kc, mi, 1, 0}};
    q.a = ga + x.a_at;
    q.b = gb + x.b_at;
    q.c = gc;
    dense(q);
    if (!zeroed) zero_c<T>(p, split), zeroed = true;  // after the first block: C untouched if `dense` throws there
    const std::vector<int64_t> row_at = pick(x.rows, mc);
    for (int64_t t = 0; t < nj; ++t) {
      T* col = c + nc[static_cast<size_t>(x.cols[static_cast<size_t>(t)])];
      const T* from = gc + t * mi;
      for (int64_t r = 0; r < mi; ++r) col[row_at[static_cast<size_t>(r)]] = from[r];
    }
  }
  return true;
}

template <typename T> bool run_in_place(const ContractionProblem& p, const BlockRunner& run) {
  const std::optional<Split> found = find_split<T>(p);
  if (!found) return false;
  const Split& split = *found;
  std::vector<BlockTables> blocks;
  for (const Part& x : split.parts)
    blocks.push_back({pick(x.rows, split.rows.off[0]), pick(x.rows, split.rows.off[1]),
                      pick(x.cols, split.cols.off[0]), pick(x.cols, split.cols.off[1]), pick(x.ks, split.ks.off[1]),
                      pick(x.ks, split.ks.off[0])});
  run(blocks, [&] { zero_c<T>(p, split); });
  return true;
}

// Calls f<T>() for p's dtype (f32, f64, c64, c128) when p is a candidate (see BlockProduct.h); false otherwise.
template <template <typename> class F, typename... Args> bool dispatch(const ContractionProblem& p, Args&&... args) {
  if (p.accumulate) return false;
  for (const ContractionProblem::Axis& ax : p.batch)
    if (ax.extent != 1) return false;
  if (!(macs_of(p) >= kMinBlockProductMacs)) return false;
  switch (p.dtype) {
    case DType::f32: return F<float>::run(p, args...);
    case DType::f64: return F<double>::run(p, args...);
    case DType::c64: return F<std::complex<float>>::run(p, args...);
    case DType::c128: return F<std::complex<double>>::run(p, args...);
    default: return false;
  }
}
template <typename T> struct Gathered {
  static bool run(const ContractionProblem& p, const std::function<void(const ContractionProblem&)>& dense) {
    return run_gathered<T>(p, dense);
  }
};
template <typename T> struct InPlace {
  static bool run(const ContractionProblem& p, const BlockRunner& runner) { return run_in_place<T>(p, runner); }
};

}  // namespace

bool block_product(const ContractionProblem& p, const std::function<void(const ContractionProblem&)>& dense) {
  return dispatch<Gathered>(p, dense);
}

bool block_product_in_place(const ContractionProblem& p, const BlockRunner& run) {
  return dispatch<InPlace>(p, run);
}

}  // namespace einstage::kernels
