// Matrix products split by their operands' exact zeros (see BlockProduct.h).
#include "runtime/kernels/BlockProduct.h"

#include "runtime/kernels/HostIsa.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <memory>
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

// One operand read as lines along its smaller stride: line l is index l of kind `node`, its entries the indices of
// kind `entry`; entry e of line l is at data[l * line_stride + e * entry_stride].
template <typename T> struct Lines {
  const T* data;
  int64_t count, len, line_stride, entry_stride;
  Kind node, entry;
};

// A's lines along its smaller stride (a column-major A: one line per contracted index, entries the rows).
template <typename T> Lines<T> lines_of_a(const T* a, const ContractionProblem& p) {
  const ContractionProblem::Axis &m = p.m[0], &k = p.k[0];
  if (std::abs(m.stride_a) <= std::abs(k.stride_a)) return {a, k.extent, m.extent, k.stride_a, m.stride_a, kContracted, kRows};
  return {a, m.extent, k.extent, m.stride_a, k.stride_a, kRows, kContracted};
}
template <typename T> Lines<T> lines_of_b(const T* b, const ContractionProblem& p) {
  const ContractionProblem::Axis &n = p.n[0], &k = p.k[0];
  if (std::abs(k.stride_b) <= std::abs(n.stride_b)) return {b, n.extent, k.extent, n.stride_b, k.stride_b, kColumns, kContracted};
  return {b, k.extent, n.extent, k.stride_b, n.stride_b, kContracted, kColumns};
}

// Bit e of the result: x[e] != 0, for 64 contiguous entries (a nan counts as nonzero, -0 as zero), with the vector
// compares of the CPU: AVX-512 or AVX2 (HostIsa.h), else one entry at a time.
int vector_isa() { return host_isa().avx512f ? 2 : host_isa().avx2 ? 1 : 0; }
[[gnu::target("avx512f")]] uint64_t nonzero_word_avx512(const double* x) {
  uint64_t word = 0;
  for (int g = 0; g < 8; ++g)
    word |= uint64_t(_mm512_cmp_pd_mask(_mm512_loadu_pd(x + 8 * g), _mm512_setzero_pd(), _CMP_NEQ_UQ)) << (8 * g);
  return word;
}
[[gnu::target("avx512f")]] uint64_t nonzero_word_avx512(const float* x) {
  uint64_t word = 0;
  for (int g = 0; g < 4; ++g)
    word |= uint64_t(_mm512_cmp_ps_mask(_mm512_loadu_ps(x + 16 * g), _mm512_setzero_ps(), _CMP_NEQ_UQ)) << (16 * g);
  return word;
}
[[gnu::target("avx2")]] uint64_t nonzero_word_avx2(const double* x) {
  uint64_t word = 0;
  for (int g = 0; g < 16; ++g) {
    const __m256d ne = _mm256_cmp_pd(_mm256_loadu_pd(x + 4 * g), _mm256_setzero_pd(), _CMP_NEQ_UQ);
    word |= uint64_t(static_cast<uint32_t>(_mm256_movemask_pd(ne))) << (4 * g);
  }
  return word;
}
[[gnu::target("avx2")]] uint64_t nonzero_word_avx2(const float* x) {
  uint64_t word = 0;
  for (int g = 0; g < 8; ++g) {
    const __m256 ne = _mm256_cmp_ps(_mm256_loadu_ps(x + 8 * g), _mm256_setzero_ps(), _CMP_NEQ_UQ);
    word |= uint64_t(static_cast<uint32_t>(_mm256_movemask_ps(ne))) << (8 * g);
  }
  return word;
}

// The nonzero pattern of one line as 64-bit words (bit e: entry e is not zero).
template <typename T> void line_bits(const Lines<T>& x, int64_t l, int64_t words, uint64_t* out) {
  const T* line = x.data + l * x.line_stride;
  for (int64_t w = 0; w < words; ++w) {
    const int64_t e0 = w * 64, n = std::min<int64_t>(64, x.len - e0);
    uint64_t word = 0;
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
      if (x.entry_stride == 1 && n == 64 && vector_isa() > 0) {
        out[w] = vector_isa() == 2 ? nonzero_word_avx512(line + e0) : nonzero_word_avx2(line + e0);
        continue;
      }
    }
    for (int64_t e = 0; e < n; ++e) word |= uint64_t(line[(e0 + e) * x.entry_stride] != T(0)) << e;
    out[w] = word;
  }
}

// Whether line 0 of x has no zero entry (then it joins every index of its entry kind into one block).
template <typename T> bool dense_line(const Lines<T>& x) {
  for (int64_t e = 0; e < x.len; ++e)
    if (x.data[e * x.entry_stride] == T(0)) return false;
  return x.len > 0;
}

// Whether v[0, count) holds a nan or an infinity: x - x is 0 for a finite x and nan otherwise, summed in independent
// lanes so that the loop vectorises.
template <typename T> bool has_non_finite(const T* v, size_t count) {
  using R = typename RealOf<T>::type;
  const R* r = reinterpret_cast<const R*>(v);  // std::complex<R> is an array of two R
  const auto n = static_cast<int64_t>(count * (sizeof(T) / sizeof(R)));
  constexpr int kLanes = 16;
  R lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += r[i + l] - r[i + l];
  R sum = 0;
  for (; i < n; ++i) sum += r[i] - r[i];
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum != sum;
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

// The components of the nonzeros of A and B (at most kMaxBlocks; nothing when there are more): every line with a
// nonzero entry joins its own index and its entries' indices to one block, merging the blocks it touches.
template <typename T>
std::optional<std::vector<Block>> components(const std::array<Lines<T>, 2>& operands, const int64_t (&words)[3]) {
  std::vector<Block> blocks;
  std::vector<uint64_t> bits;
  std::vector<size_t> hits;
  for (const Lines<T>& x : operands) {
    const int64_t we = words[x.entry];
    bits.resize(static_cast<size_t>(we));
    for (int64_t l = 0; l < x.count; ++l) {
      line_bits(x, l, we, bits.data());
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

template <typename T>
bool run_blocks(const ContractionProblem& p, const std::function<void(const ContractionProblem&)>& dense) {
  const ContractionProblem::Axis &m = p.m[0], &n = p.n[0], &k = p.k[0];
  const int64_t M = m.extent, N = n.extent, K = k.extent;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  T* c = static_cast<T*>(p.c);
  const std::array<Lines<T>, 2> operands{lines_of_a(a, p), lines_of_b(b, p)};
  // A column of A without zeros joins every row, a row of B without zeros every column: one block.
  const Lines<T> a_column{a, 1, M, 0, m.stride_a, kContracted, kRows}, b_row{b, 1, N, 0, n.stride_b, kContracted, kColumns};
  if (dense_line(a_column) || dense_line(b_row)) return false;
  const int64_t words[3] = {(M + 63) / 64, (K + 63) / 64, (N + 63) / 64};
  std::optional<std::vector<Block>> blocks = components(operands, words);
  if (!blocks || blocks->size() < 2) return false;

  // Each block's rows, contracted indices and columns (ascending: the dense product's k order); blocks without
  // rows or columns add nothing to C.
  struct Part {
    std::vector<int64_t> rows, ks, cols;
    size_t a_at, b_at;
  };
  std::vector<Part> parts;
  double work = 0;
  size_t a_size = 0, b_size = 0, c_max = 0;
  for (const Block& x : *blocks) {
    Part part{indices(x.sets[kRows]), indices(x.sets[kContracted]), indices(x.sets[kColumns]), a_size, b_size};
    if (part.rows.empty() || part.ks.empty() || part.cols.empty()) continue;
    work += double(part.rows.size()) * double(part.ks.size()) * double(part.cols.size());
    a_size += part.rows.size() * part.ks.size();
    b_size += part.ks.size() * part.cols.size();
    c_max = std::max(c_max, part.rows.size() * part.cols.size());
    parts.push_back(std::move(part));
  }
  if (parts.size() < 2 || work > 0.5 * double(M) * double(N) * double(K)) return false;

  // Every nonzero entry is in some block: gather them all, and keep the dense product for a nan or an infinity.
  // The gathered operands and one block's product, in one buffer of this call's (no state kept between calls).
  const std::unique_ptr<T[]> gathered = std::make_unique_for_overwrite<T[]>(a_size + b_size + c_max);
  const std::span<T> ga(gathered.get(), a_size), gb(gathered.get() + a_size, b_size),
      gc(gathered.get() + a_size + b_size, c_max);
  for (const Part& x : parts) {
    const auto mi = static_cast<int64_t>(x.rows.size()), kc = static_cast<int64_t>(x.ks.size());
    T* to = ga.data() + x.a_at;
    for (int64_t s = 0; s < kc; ++s) {
      const T* col = a + x.ks[static_cast<size_t>(s)] * k.stride_a;
      for (int64_t r = 0; r < mi; ++r) to[s * mi + r] = col[x.rows[static_cast<size_t>(r)] * m.stride_a];
    }
    T* tb = gb.data() + x.b_at;
    for (size_t t = 0; t < x.cols.size(); ++t) {
      const T* col = b + x.cols[t] * n.stride_b;
      for (int64_t s = 0; s < kc; ++s) tb[static_cast<int64_t>(t) * kc + s] = col[x.ks[static_cast<size_t>(s)] * k.stride_b];
    }
  }
  if (has_non_finite(ga.data(), a_size) || has_non_finite(gb.data(), b_size)) return false;

  for (int64_t j = 0; j < N; ++j) {
    T* col = c + j * n.stride_c;
    if (m.stride_c == 1) std::fill(col, col + M, T(0));
    else for (int64_t i = 0; i < M; ++i) col[i * m.stride_c] = T(0);
  }
  for (const Part& x : parts) {
    const auto mi = static_cast<int64_t>(x.rows.size()), kc = static_cast<int64_t>(x.ks.size());
    const auto nj = static_cast<int64_t>(x.cols.size());
    ContractionProblem q;
    q.dtype = p.dtype;
    q.m = {{mi, 1, 0, 1}};
    q.n = {{nj, 0, kc, mi}};
    q.k = {{kc, mi, 1, 0}};
    q.a = ga.data() + x.a_at;
    q.b = gb.data() + x.b_at;
    q.c = gc.data();
    dense(q);
    for (int64_t t = 0; t < nj; ++t) {
      T* col = c + x.cols[static_cast<size_t>(t)] * n.stride_c;
      for (int64_t r = 0; r < mi; ++r) col[x.rows[static_cast<size_t>(r)] * m.stride_c] = gc[static_cast<size_t>(t * mi + r)];
    }
  }
  return true;
}

}  // namespace

bool block_product(const ContractionProblem& p, const std::function<void(const ContractionProblem&)>& dense) {
  if (p.accumulate || p.m.size() != 1 || p.n.size() != 1 || p.k.size() != 1) return false;
  for (const ContractionProblem::Axis& ax : p.batch)
    if (ax.extent != 1) return false;
  const double macs = double(p.m[0].extent) * double(p.n[0].extent) * double(p.k[0].extent);
  if (!(macs >= kMinBlockProductMacs)) return false;
  switch (p.dtype) {
    case DType::f32: return run_blocks<float>(p, dense);
    case DType::f64: return run_blocks<double>(p, dense);
    case DType::c64: return run_blocks<std::complex<float>>(p, dense);
    case DType::c128: return run_blocks<std::complex<double>>(p, dense);
    default: return false;
  }
}

}  // namespace einstage::kernels
