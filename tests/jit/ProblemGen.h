// Test helper for the jit suite: seeded random ContractionProblems and column-major matmuls over owned buffers, and
// an independent definitional oracle (a plain loop over every index, summed in double precision). Used by the jit
// suite's tests only.
#pragma once

#include "ir/DType.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/kernels/Contraction.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace einstage::testing {

/// The jit suite's kernel cache: in memory, so these tests never touch the user's cache directory.
inline KernelCache& memory_cache() {
  static KernelCache cache("");
  return cache;
}

// The shared test stream (tests/support/Random.h) with a seeded constructor; uniform() is in [-1, 1) here.
struct SplitMix64 : einstage::test::SplitMix64 {
  explicit SplitMix64(uint64_t seed) : einstage::test::SplitMix64{seed} {}
  double uniform() { return symmetric(); }
};

/// One tensor's storage: bytes plus the element offset of index (0, ..., 0).
struct Storage {
  std::vector<unsigned char> bytes;
  int64_t origin = 0;
  int64_t elements = 0;
};

/// A random problem with its own buffers. Axes get random layouts: a random axis order, optional gaps between axes
/// (non-contiguous views), optionally a negative stride.
struct OwnedProblem {
  ContractionProblem p;
  Storage a, b, c;
  std::vector<unsigned char> c_initial;

  void bind() {
    size_t es = size_of(p.dtype);
    p.a = a.bytes.data() + a.origin * es;
    p.b = b.bytes.data() + b.origin * es;
    p.c = c.bytes.data() + c.origin * es;
  }
};

/// One tensor's bytes copied next to an inaccessible page: ending at it (`guard_after`) or starting right after it,
/// so that generated code reading one element outside the tensor faults instead of reading a neighbour (ASan does
/// not see the JIT's loads). The mapping is released with the object.
class GuardedBytes {
 public:
  GuardedBytes(const std::vector<unsigned char>& bytes, bool guard_after) {
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes.size() + page - 1) / page + 1;
    size_ = (data_pages + 2) * page;
    base_ = static_cast<unsigned char*>(::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base_ != MAP_FAILED);
    REQUIRE(::mprotect(base_, page, PROT_NONE) == 0);
    REQUIRE(::mprotect(base_ + size_ - page, page, PROT_NONE) == 0);
    data_ = guard_after ? base_ + size_ - page - bytes.size() : base_ + page;
    if (!bytes.empty()) std::memcpy(data_, bytes.data(), bytes.size());
  }
  ~GuardedBytes() { ::munmap(base_, size_); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  unsigned char* data() { return data_; }

 private:
  unsigned char* base_ = nullptr;
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

inline const char* kGroupNames[] = {"m", "n", "k", "batch"};

/// Lays out the axes listed in `which` (pointers to stride members) in a random order with random gaps.
inline Storage layout(SplitMix64& rng, std::vector<std::pair<ContractionProblem::Axis*, int64_t ContractionProblem::Axis::*>> axes,
                      size_t elem_size, bool allow_gaps, bool allow_negative, const ContractionProblem::Axis* first = nullptr) {
  for (size_t i = axes.size(); i > 1; --i) std::swap(axes[i - 1], axes[static_cast<size_t>(rng.below(int64_t(i)))]);
  if (first) {  // this axis gets stride 1 (a unit-stride batch axis in every tensor)
    auto it = std::find_if(axes.begin(), axes.end(), [&](const auto& entry) { return entry.first == first; });
    std::rotate(axes.begin(), it, it + 1);
  }
  int64_t stride = 1, lo = 0, hi = 0;
  bool empty = false;
  for (auto& [axis, member] : axes) {
    bool pinned = first && axis == first;
    if (allow_gaps && !pinned && rng.below(4) == 0) stride += rng.below(5);  // a gap before this axis
    int64_t s = stride;
    if (allow_negative && !pinned && rng.below(8) == 0) s = -s;
    axis->*member = s;
    if (axis->extent == 0) empty = true;
    int64_t span = (std::max<int64_t>(axis->extent, 1) - 1) * s;
    (span < 0 ? lo : hi) += span;
    stride *= std::max<int64_t>(axis->extent, 1);
  }
  if (allow_gaps && rng.below(3) == 0) hi += rng.below(7);  // trailing slack
  Storage st;
  st.elements = empty ? 1 : hi - lo + 1;
  st.origin = -lo;
  st.bytes.resize(static_cast<size_t>(st.elements) * elem_size);
  return st;
}

template <typename T>
T random_value(SplitMix64& rng) {
  if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) {
    using R = typename T::value_type;
    R re = R(rng.uniform());
    R im = R(rng.uniform());
    return T(re, im);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return rng.below(11) - 5;
  } else {
    return T(rng.uniform());
  }
}

template <typename T>
void fill(SplitMix64& rng, Storage& s) {
  T* data = reinterpret_cast<T*>(s.bytes.data());
  for (int64_t i = 0; i < s.elements; ++i) data[i] = random_value<T>(rng);
}

/// Sizes A, B and C for the element counts already set, fills them from `rng` in that order (C only when `fill_c`;
/// otherwise zeros) and keeps C's start as c_initial. bind() it, and each copy of it, before use.
template <typename T>
void allocate_and_fill(OwnedProblem& op, SplitMix64& rng, bool fill_c = true) {
  for (Storage* s : {&op.a, &op.b, &op.c}) s->bytes.assign(size_t(s->elements) * sizeof(T), 0);
  fill<T>(rng, op.a);
  fill<T>(rng, op.b);
  if (fill_c) fill<T>(rng, op.c);
  op.c_initial = op.c.bytes;
}

/// The problem over the given axes (T's dtype) with operands of a, b and c elements, filled from `rng`
/// (allocate_and_fill), not yet bound.
template <typename T>
OwnedProblem filled_problem(std::vector<ContractionProblem::Axis> m, std::vector<ContractionProblem::Axis> n,
                            std::vector<ContractionProblem::Axis> k, std::vector<ContractionProblem::Axis> batch,
                            bool accumulate, int64_t a, int64_t b, int64_t c, SplitMix64& rng) {
  OwnedProblem op;
  op.p.dtype = dtype_v<T>;
  op.p.m = std::move(m), op.p.n = std::move(n), op.p.k = std::move(k), op.p.batch = std::move(batch);
  op.p.accumulate = accumulate;
  op.a.elements = a, op.b.elements = b, op.c.elements = c;
  allocate_and_fill<T>(op, rng);
  return op;
}

/// Every case (a struct with axes m, n, k, optionally batch, and operand sizes a, b, c) overwriting, then
/// accumulating, its problem filled by filled_problem from one stream seeded with `seed`; check(problem, case).
template <typename T, typename Case, typename Check>
void for_each_filled(const std::vector<Case>& cases, uint64_t seed, Check check) {
  SplitMix64 rng(seed);
  for (const Case& cs : cases)
    for (bool accumulate : {false, true}) {
      std::vector<ContractionProblem::Axis> batch;
      if constexpr (requires { cs.batch; }) batch = cs.batch;
      OwnedProblem op = filled_problem<T>(cs.m, cs.n, cs.k, batch, accumulate, cs.a, cs.b, cs.c, rng);
      check(op, cs);
    }
}

/// Column-major (batched) matmul ijb,jkb->ikb: A m x k, B k x n, C m x n per batch entry, entries one after another,
/// filled from a stream seeded with `seed` (allocate_and_fill) and bound. Copies must be bound again.
inline OwnedProblem matmul_problem(int64_t m, int64_t n, int64_t k, int64_t batch, DType dtype, bool accumulate,
                                   uint64_t seed) {
  OwnedProblem op;
  op.p.dtype = dtype;
  op.p.m = {{m, 1, 0, 1}};
  op.p.k = {{k, m, 1, 0}};
  op.p.n = {{n, 0, k, m}};
  if (batch > 1) op.p.batch = {{batch, m * k, k * n, m * n}};
  op.p.accumulate = accumulate;
  op.a.elements = m * k * batch;
  op.b.elements = k * n * batch;
  op.c.elements = m * n * batch;
  SplitMix64 rng(seed);
  dispatch_dtype(dtype, [&](auto zero) { allocate_and_fill<decltype(zero)>(op, rng); });
  op.bind();
  return op;
}

/// A random problem: 0-2 axes per group, extents from a list of odd sizes (sometimes 0), total work bounded.
template <typename T>
void poison_output(OwnedProblem& op);

/// Gives op's A (its m, k and batch axes), B (n, k, batch) and C (m, n, batch) random layouts with layout() and sets
/// the strides in op.p's axes; `first`, if given, gets stride 1 in all three.
inline void lay_out_operands(SplitMix64& rng, OwnedProblem& op, bool allow_gaps, bool allow_negative,
                             const ContractionProblem::Axis* first = nullptr) {
  using Ax = ContractionProblem::Axis;
  ContractionProblem& p = op.p;
  std::vector<std::pair<Ax*, int64_t Ax::*>> la, lb, lc;
  for (Ax& ax : p.m) la.push_back({&ax, &Ax::stride_a}), lc.push_back({&ax, &Ax::stride_c});
  for (Ax& ax : p.n) lb.push_back({&ax, &Ax::stride_b}), lc.push_back({&ax, &Ax::stride_c});
  for (Ax& ax : p.k) la.push_back({&ax, &Ax::stride_a}), lb.push_back({&ax, &Ax::stride_b});
  for (Ax& ax : p.batch)
    la.push_back({&ax, &Ax::stride_a}), lb.push_back({&ax, &Ax::stride_b}), lc.push_back({&ax, &Ax::stride_c});
  const size_t es = size_of(p.dtype);
  op.a = layout(rng, la, es, allow_gaps, allow_negative, first);
  op.b = layout(rng, lb, es, allow_gaps, allow_negative, first);
  op.c = layout(rng, lc, es, allow_gaps, allow_negative, first);
}

/// With lane_batch, batch axis 0 exists and has stride 1 in A, B and C (the JIT's lane-kernel layout).
inline OwnedProblem random_problem(uint64_t seed, DType dtype, bool allow_zero = true, bool lane_batch = false) {
  SplitMix64 rng(seed);
  OwnedProblem op;
  ContractionProblem& p = op.p;
  p.dtype = dtype;
  static const int64_t kExtents[] = {1, 2, 3, 5, 7, 8, 13, 16, 24, 31, 33, 49, 97};
  auto make_group = [&](std::vector<ContractionProblem::Axis>& group, int max_axes, int64_t budget) {
    int count = static_cast<int>(rng.below(max_axes + 1));
    int64_t product = 1;
    for (int i = 0; i < count; ++i) {
      ContractionProblem::Axis ax;
      do ax.extent = kExtents[rng.below(std::size(kExtents))];
      while (product * ax.extent > budget && ax.extent > 1);
      if (allow_zero && rng.below(40) == 0) ax.extent = 0;
      product *= std::max<int64_t>(ax.extent, 1);
      group.push_back(ax);
    }
  };
  make_group(p.m, 2, 200);
  make_group(p.n, 2, 120);
  make_group(p.k, 3, 300);
  make_group(p.batch, 2, 6);
  if (lane_batch) {
    static const int64_t kLanes[] = {2, 3, 8, 13, 17, 33};
    p.batch.insert(p.batch.begin(), ContractionProblem::Axis{kLanes[rng.below(std::size(kLanes))], 0, 0, 0});
  }
  p.accumulate = rng.below(2) == 0;
  lay_out_operands(rng, op, true, true, lane_batch ? &p.batch[0] : nullptr);
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    fill<T>(rng, op.a);
    fill<T>(rng, op.b);
    fill<T>(rng, op.c);
    if constexpr (!std::is_same_v<T, int64_t>) {
      if (!p.accumulate) poison_output<T>(op);
    }
  });
  op.c_initial = op.c.bytes;
  op.bind();
  return op;
}

template <typename T> struct wide { using type = double; };
template <> struct wide<c64> { using type = std::complex<double>; };
template <> struct wide<c128> { using type = std::complex<double>; };
template <> struct wide<int64_t> { using type = int64_t; };

/// Calls fn(offset_a, offset_b, offset_c) ... over the odometer of a group list. Generic nested loop.
inline void odometer(const std::vector<ContractionProblem::Axis>& axes, const auto& fn) {
  std::vector<int64_t> idx(axes.size(), 0);
  for (const auto& ax : axes)
    if (ax.extent == 0) return;
  while (true) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (size_t i = 0; i < axes.size(); ++i) {
      oa += idx[i] * axes[i].stride_a;
      ob += idx[i] * axes[i].stride_b;
      oc += idx[i] * axes[i].stride_c;
    }
    fn(oa, ob, oc);
    size_t d = 0;
    for (; d < axes.size(); ++d) {
      if (++idx[d] < axes[d].extent) break;
      idx[d] = 0;
    }
    if (d == axes.size()) return;
  }
}

/// Sets every element C covers to NaN: an overwriting contraction must never read them (gaps keep their values and
/// are checked to stay unchanged).
template <typename T>
void poison_output(OwnedProblem& op) {
  T* c = reinterpret_cast<T*>(op.c.bytes.data()) + op.c.origin;
  const T nan = T(std::numeric_limits<double>::quiet_NaN());
  odometer(op.p.batch, [&](int64_t, int64_t, int64_t bc) {
    odometer(op.p.n, [&](int64_t, int64_t, int64_t nc) {
      odometer(op.p.m, [&](int64_t, int64_t, int64_t mc) { c[bc + nc + mc] = nan; });
    });
  });
}

/// Definitional oracle: writes the expected C (as T) into `expected` (a copy of C's initial storage) and the sum of
/// |a||b| per element into `magnitude` (indexed like C's storage) for tolerances.
template <typename T>
void oracle(const OwnedProblem& op, std::vector<T>& expected, std::vector<double>& magnitude) {
  const ContractionProblem& p = op.p;
  using W = typename wide<T>::type;
  const T* a = reinterpret_cast<const T*>(op.a.bytes.data()) + op.a.origin;
  const T* b = reinterpret_cast<const T*>(op.b.bytes.data()) + op.b.origin;
  expected.assign(reinterpret_cast<const T*>(op.c_initial.data()),
                  reinterpret_cast<const T*>(op.c_initial.data()) + op.c.elements);
  magnitude.assign(static_cast<size_t>(op.c.elements), 0.0);
  odometer(p.batch, [&](int64_t ba, int64_t bb, int64_t bc) {
    odometer(p.n, [&](int64_t, int64_t nb, int64_t nc) {
      odometer(p.m, [&](int64_t ma, int64_t, int64_t mc) {
        W sum{};
        double mag = 0;
        odometer(p.k, [&](int64_t ka, int64_t kb, int64_t) {
          W x = W(a[ba + ma + ka]), y = W(b[bb + nb + kb]);
          sum += x * y;
          if constexpr (!std::is_same_v<T, int64_t>) mag += std::abs(x) * std::abs(y);
        });
        int64_t at = op.c.origin + bc + mc + nc;
        if (p.accumulate) {
          W prev = W(expected[at]);
          if constexpr (!std::is_same_v<T, int64_t>) mag += std::abs(prev);
          sum += prev;
        }
        expected[at] = T(sum);
        magnitude[at] = mag;
      });
    });
  });
}

template <typename T>
double epsilon() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, c64>) return std::numeric_limits<float>::epsilon();
  else if constexpr (std::is_same_v<T, int64_t>) return 0;
  else return std::numeric_limits<double>::epsilon();
}

/// Checks op's C against the oracle: every element within a k-scaled tolerance, gaps untouched.
template <typename T>
void check_against_oracle(const OwnedProblem& op) {
  std::vector<T> expected;
  std::vector<double> magnitude;
  oracle<T>(op, expected, magnitude);
  int64_t k_total = 1;
  for (const auto& ax : op.p.k) k_total *= ax.extent;
  const T* got = reinterpret_cast<const T*>(op.c.bytes.data());
  int64_t bad = 0;
  for (int64_t i = 0; i < op.c.elements; ++i) {
    double tol = epsilon<T>() * 4.0 * double(k_total + 2) * magnitude[static_cast<size_t>(i)];
    double err = std::abs(typename wide<T>::type(got[i]) - typename wide<T>::type(expected[static_cast<size_t>(i)]));
    if (!(err <= tol)) {
      if (bad++ < 3) {
        INFO("storage element " << i << " error " << err << " tolerance " << tol);
        CHECK(err <= tol);
      }
    }
  }
  CHECK(bad == 0);
}

}  // namespace einstage::testing
