// contract_portable against a naive loop on seeded random GETT problems: every dtype, odd and zero extents,
// permuted / padded / broadcast (stride 0) operands, accumulate and overwrite, and bitwise equality at 1, 2 and 3
// threads.
#include "KernelTestUtil.h"
#include "ir/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Contraction.h"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

using namespace einstage;
using Axis = ContractionProblem::Axis;

namespace {

// One operand's storage: axes laid out in a random order with random gaps, some broadcast (stride 0).
struct Operand {
  std::vector<int64_t> strides;  // per listed axis
  int64_t size = 1;              // elements to allocate
};

Operand layout(kt::Rng& r, const std::vector<int64_t>& extents, bool allow_broadcast) {
  Operand op;
  const size_t n = extents.size();
  op.strides.assign(n, 0);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(r.uniform(0, static_cast<int64_t>(i) - 1))]);
  int64_t s = r.uniform(1, 2);  // a gap of 2 makes the innermost stride non-unit
  for (size_t idx : order) {
    if (allow_broadcast && r.uniform(0, 9) == 0) continue;  // stride 0: the same value along this axis
    op.strides[idx] = s;
    s *= std::max<int64_t>(extents[idx], 1) + r.uniform(0, 1);
  }
  op.size = s + 1;
  return op;
}

template <typename T>
void check_random(uint64_t seed) {
  kt::Rng r(seed);
  CAPTURE(seed);
  auto extents = [&](int count) {
    std::vector<int64_t> e;
    for (int i = 0; i < count; ++i) {
      int64_t kind = r.uniform(0, 19);
      e.push_back(kind == 0 ? 0 : kind < 4 ? 1 : kind < 16 ? r.uniform(2, 7) : r.uniform(8, 40));
    }
    return e;
  };
  auto em = extents(static_cast<int>(r.uniform(0, 3))), en = extents(static_cast<int>(r.uniform(0, 3)));
  auto ek = extents(static_cast<int>(r.uniform(0, 3))), eb = extents(static_cast<int>(r.uniform(0, 2)));
  // Keep the iteration space modest so the naive loop stays fast.
  int64_t total = 1;
  for (auto* g : {&em, &en, &ek, &eb})
    for (auto& e : *g) {
      if (total * e > 200000) e = 1;
      total *= std::max<int64_t>(e, 1);
    }
  // A has axes m, k, batch; B has k, n, batch; C has m, n, batch.
  std::vector<int64_t> ea, eb_, ec;
  ea.insert(ea.end(), em.begin(), em.end());
  ea.insert(ea.end(), ek.begin(), ek.end());
  ea.insert(ea.end(), eb.begin(), eb.end());
  eb_.insert(eb_.end(), ek.begin(), ek.end());
  eb_.insert(eb_.end(), en.begin(), en.end());
  eb_.insert(eb_.end(), eb.begin(), eb.end());
  ec.insert(ec.end(), em.begin(), em.end());
  ec.insert(ec.end(), en.begin(), en.end());
  ec.insert(ec.end(), eb.begin(), eb.end());
  Operand la = layout(r, ea, true), lb = layout(r, eb_, true), lc = layout(r, ec, false);
  std::vector<T> a(static_cast<size_t>(la.size)), b(static_cast<size_t>(lb.size)), c0(static_cast<size_t>(lc.size));
  for (auto& v : a) v = kt::random_value<T>(r);
  for (auto& v : b) v = kt::random_value<T>(r);
  for (auto& v : c0) v = kt::random_value<T>(r);
  const bool accumulate = r.uniform(0, 1) == 1;

  ContractionProblem p;
  p.dtype = dtype_v<T>;
  p.accumulate = accumulate;
  size_t ia = 0, ib = 0, ic = 0;
  for (int64_t e : em) p.m.push_back(Axis{e, la.strides[ia++], 0, lc.strides[ic++]});
  for (int64_t e : ek) p.k.push_back(Axis{e, la.strides[ia++], lb.strides[ib++], 0});
  for (int64_t e : en) p.n.push_back(Axis{e, 0, lb.strides[ib++], lc.strides[ic++]});
  for (int64_t e : eb) p.batch.push_back(Axis{e, la.strides[ia++], lb.strides[ib++], lc.strides[ic++]});
  p.a = a.data();
  p.b = b.data();

  // Naive reference: every (m, n, batch) point, sum over k in a wide type.
  std::vector<kt::Wide<T>> want(c0.size());
  std::vector<double> scale(c0.size(), 0.0);
  std::vector<bool> written(c0.size(), false);
  std::vector<int64_t> out_ext, k_ext = ek;
  out_ext.insert(out_ext.end(), em.begin(), em.end());
  out_ext.insert(out_ext.end(), en.begin(), en.end());
  out_ext.insert(out_ext.end(), eb.begin(), eb.end());
  auto count = [](const std::vector<int64_t>& e) {
    int64_t t = 1;
    for (int64_t x : e) t *= x;
    return t;
  };
  const int64_t nout = count(out_ext), nk = count(k_ext);
  std::vector<int64_t> oi(out_ext.size()), ki(k_ext.size());
  for (int64_t o = 0; o < nout; ++o) {
    int64_t rest = o;
    for (size_t d = 0; d < out_ext.size(); ++d) {
      oi[d] = rest % out_ext[d];
      rest /= out_ext[d];
    }
    int64_t offa = 0, offb = 0, offc = 0;
    size_t d = 0;
    for (size_t i = 0; i < em.size(); ++i, ++d) { offa += oi[d] * p.m[i].stride_a; offc += oi[d] * p.m[i].stride_c; }
    for (size_t i = 0; i < en.size(); ++i, ++d) { offb += oi[d] * p.n[i].stride_b; offc += oi[d] * p.n[i].stride_c; }
    for (size_t i = 0; i < eb.size(); ++i, ++d) {
      offa += oi[d] * p.batch[i].stride_a;
      offb += oi[d] * p.batch[i].stride_b;
      offc += oi[d] * p.batch[i].stride_c;
    }
    kt::Wide<T> sum{};
    double sc = 0;
    for (int64_t kk = 0; kk < nk; ++kk) {
      int64_t rest2 = kk, ka = 0, kb = 0;
      for (size_t i = 0; i < k_ext.size(); ++i) {
        int64_t x = rest2 % k_ext[i];
        rest2 /= k_ext[i];
        ka += x * p.k[i].stride_a;
        kb += x * p.k[i].stride_b;
      }
      sum += kt::widen(a[static_cast<size_t>(offa + ka)]) * kt::widen(b[static_cast<size_t>(offb + kb)]);
      sc += kt::magnitude(a[static_cast<size_t>(offa + ka)]) * kt::magnitude(b[static_cast<size_t>(offb + kb)]);
    }
    if (accumulate) {
      sum += kt::widen(c0[static_cast<size_t>(offc)]);
      sc += kt::magnitude(c0[static_cast<size_t>(offc)]);
    }
    want[static_cast<size_t>(offc)] = sum;
    scale[static_cast<size_t>(offc)] = sc;
    written[static_cast<size_t>(offc)] = true;
  }

  std::vector<T> first;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    std::vector<T> c = c0;
    p.c = c.data();
    contract_portable(p, &pool);
    if (threads == 1) {
      first = c;
      for (size_t i = 0; i < c.size(); ++i) {
        if (!written[i]) {
          CHECK(std::memcmp(&c[i], &c0[i], sizeof(T)) == 0);  // untouched padding
          continue;
        }
        double err = kt::distance(c[i], want[i]);
        if (!(err <= kt::tolerance<T>() * (scale[i] + 1))) {
          FAIL_CHECK("element " << i << " differs by " << err << " (scale " << scale[i] << ")");
          return;
        }
      }
    } else {
      CHECK(std::memcmp(c.data(), first.data(), c.size() * sizeof(T)) == 0);
    }
  }
}

}  // namespace

TEST_CASE_TEMPLATE("contract_portable matches a naive loop on random strided problems", T, float, double, c64, c128,
                   int64_t) {
  for (uint64_t seed = 1; seed <= 150; ++seed) check_random<T>(seed * 7919 + 17);
}

TEST_CASE_TEMPLATE("contract_portable blocked path: larger matrices, odd tails, transposed operands", T, float, double,
                   c64, c128, int64_t) {
  // Sizes that exceed the cache blocks and do not divide the register tile.
  for (auto [M, N, K, ta, tb] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool, bool>>{
           {131, 67, 300, false, false}, {97, 133, 129, true, false}, {45, 258, 77, false, true}, {9, 9, 9, true, true}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    kt::Rng r(static_cast<uint64_t>(M * 1000 + N));
    std::vector<T> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
    for (auto& v : a) v = kt::random_value<T>(r);
    for (auto& v : b) v = kt::random_value<T>(r);
    ContractionProblem p;
    p.dtype = dtype_v<T>;
    p.m = {Axis{M, ta ? K : 1, 0, 1}};
    p.k = {Axis{K, ta ? 1 : M, tb ? N : 1, 0}};
    p.n = {Axis{N, 0, tb ? 1 : K, M}};
    p.a = a.data();
    p.b = b.data();
    std::vector<T> c1(static_cast<size_t>(M * N)), c2(c1.size());
    p.c = c1.data();
    contract_portable(p, nullptr);
    ThreadPool pool(2);
    p.c = c2.data();
    contract_portable(p, &pool);
    CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(T)) == 0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        kt::Wide<T> s{};
        double sc = 0;
        for (int64_t k = 0; k < K; ++k) {
          T av = a[static_cast<size_t>(ta ? i * K + k : k * M + i)], bv = b[static_cast<size_t>(tb ? k * N + j : j * K + k)];
          s += kt::widen(av) * kt::widen(bv);
          sc += kt::magnitude(av) * kt::magnitude(bv);
        }
        REQUIRE(kt::distance(c1[static_cast<size_t>(j * M + i)], s) <= kt::tolerance<T>() * (sc + 1));
      }
  }
}

TEST_CASE("contract_portable with a zero k extent writes zeros or leaves C unchanged") {
  std::vector<double> a(1), b(1), c{1, 2, 3, 4, 5, 6};
  ContractionProblem p;
  p.dtype = DType::f64;
  p.m = {Axis{2, 1, 0, 1}};
  p.n = {Axis{3, 0, 1, 2}};
  p.k = {Axis{0, 1, 1, 0}};
  p.a = a.data();
  p.b = b.data();
  p.c = c.data();
  p.accumulate = true;
  contract_portable(p);
  CHECK(c == std::vector<double>{1, 2, 3, 4, 5, 6});
  p.accumulate = false;
  contract_portable(p);
  CHECK(c == std::vector<double>(6, 0.0));
}

TEST_CASE("contract_portable i64 is exact and wraps instead of overflowing") {
  std::vector<int64_t> a{INT64_MAX, 3}, b{2, 1};
  int64_t c = 0;
  ContractionProblem p;
  p.dtype = DType::i64;
  p.k = {Axis{2, 1, 1, 0}};
  p.a = a.data();
  p.b = b.data();
  p.c = &c;
  contract_portable(p);
  CHECK(c == static_cast<int64_t>(static_cast<uint64_t>(INT64_MAX) * 2u + 3u));
}

// Sizes go through ir/Size.h: a problem whose operand would not fit in 64 bits is refused before any offset table
// is built, a zero-size problem with huge extents has no flops, and m*n*k beyond 64 bits (broadcast operands) is an
// error instead of signed overflow.
TEST_CASE("contract_portable: sizes beyond 64 bits are refused naming the operand") {
  double a = 1, b = 1, c = 0;
  ContractionProblem p;
  p.dtype = DType::f64;
  p.a = &a, p.b = &b, p.c = &c;
  p.m = {Axis{int64_t(1) << 32, 0, 0, 0}};
  p.n = {Axis{int64_t(1) << 32, 0, 0, 0}};
  CHECK_THROWS_WITH_AS(contract_portable(p),
                       "contract_portable: output C (m, n, batch axes) [4294967296,4294967296] has more elements than "
                       "fit in 64 bits",
                       Error);
  p.m = {Axis{3, 0, 0, 0}};
  p.n = {Axis{-1, 0, 0, 0}};
  CHECK_THROWS_WITH_AS(contract_portable(p),
                       "contract_portable: operand B (k, n, batch axes) [-1]: extent -1 of axis 0 is negative; extents "
                       "must be >= 0",
                       Error);
  // Broadcast operands (stride 0) whose m*n*k does not fit: refused, not run for 2^64 steps.
  p.m = {Axis{int64_t(1) << 22, 0, 0, 0}};
  p.n = {Axis{int64_t(1) << 21, 0, 0, 0}};
  p.k = {Axis{int64_t(1) << 21, 0, 0, 0}};
  CHECK_THROWS_WITH_AS(p.flops(), "contraction flops (m, n, k, batch axes) [4194304,2097152,2097152] has more "
                                  "elements than fit in 64 bits",
                       Error);
  p.k = {Axis{int64_t(1) << 21, 0, 0, 0}, Axis{int64_t(1) << 21, 0, 0, 0}};
  CHECK_THROWS_WITH_AS(p.check_sizes("contract"), "contract: operand A (m, k, batch axes) [4194304,2097152,2097152] "
                                                   "has more elements than fit in 64 bits",
                       Error);
  // A zero extent: no flops whatever the others are.
  p.k = {Axis{0, 0, 0, 0}, Axis{int64_t(1) << 62, 0, 0, 0}};
  CHECK(p.flops() == 0);
  p.m = {Axis{2, 0, 0, 0}};
  p.n = {Axis{3, 0, 0, 0}};
  p.k = {Axis{4, 0, 0, 0}};
  CHECK(p.flops() == 48);
}

TEST_CASE("contract_portable: a null pointer is refused when its tensor has elements, accepted when it has none") {
  std::vector<double> a(6, 1.0), c(4, 0.0);
  ContractionProblem p;
  p.dtype = DType::f64;
  p.m = {Axis{2, 1, 0, 1}};
  p.n = {Axis{2, 0, 3, 2}};
  p.k = {Axis{3, 2, 1, 0}};
  p.a = a.data();
  p.b = nullptr;
  p.c = c.data();
  CHECK_THROWS_WITH_AS(contract_portable(p),
                       "contract_portable: operand B (k, n, batch axes) [3,2] has 6 elements but ContractionProblem::b "
                       "is null; point it at the operand's first element",
                       Error);
  CHECK(c == std::vector<double>(4, 0.0));
  // No columns: B and C have no elements, so their pointers are never read.
  p.n = {Axis{0, 0, 3, 2}};
  p.c = nullptr;
  CHECK_NOTHROW(contract_portable(p));
}
