// Layout and elementwise kernels (select among them) against element-by-element loops written here (through
// Tensor::at), on seeded random shapes with permuted, sliced (non-unit stride) and zero-extent operands, every dtype,
// 1 and 2 threads.
#include "KernelTestUtil.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Layout.h"
#include "runtime/kernels/Strided.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace einstage;
namespace k = einstage::kernels;

namespace {

std::vector<int64_t> multi_index(int64_t linear, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    idx[d] = linear % shape[d];
    linear /= shape[d];
  }
  return idx;
}

// A random tensor of `shape` that is a strided view: a permuted, step-2 slice of a larger tensor.
template <typename T>
Tensor random_view(kt::Rng& r, const Shape& shape) {
  const int rank = static_cast<int>(shape.size());
  std::vector<int> perm(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) perm[i] = i;
  for (int i = rank; i > 1; --i) std::swap(perm[i - 1], perm[static_cast<size_t>(r.uniform(0, i - 1))]);
  Shape base(static_cast<size_t>(rank));
  std::vector<int64_t> step(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    step[perm[i]] = r.uniform(1, 2);
    base[perm[i]] = shape[i] * step[perm[i]];
  }
  std::vector<T> data(static_cast<size_t>(element_count(base)));
  for (auto& v : data) v = kt::random_value<T>(r);
  Tensor t = Tensor::from_col_major<T>(base, data);
  for (int i = 0; i < rank; ++i) t = t.slice(i, 0, base[i], step[i]);
  // t has shape `base permuted`; undo: result axis i = t axis perm[i] must have extent shape[i].
  std::vector<int> inv(perm.begin(), perm.end());
  Tensor v = t.permute(inv);
  REQUIRE(v.shape() == shape);
  return v;
}

// A dense operand of random values; an integer one has no zero (it may be a divisor).
template <typename T> Tensor random_operand(kt::Rng& r, const Shape& s) {
  std::vector<T> v(static_cast<size_t>(element_count(s)));
  for (auto& e : v) e = kt::random_value<T>(r);
  if constexpr (std::is_same_v<T, int64_t>)
    for (auto& e : v) e = e == 0 ? 3 : e;
  return Tensor::from_col_major<T>(s, std::span<const T>(v));
}

Shape random_shape(kt::Rng& r, int rank) {
  Shape s;
  for (int i = 0; i < rank; ++i) s.push_back(r.uniform(0, 9) == 0 ? 0 : r.uniform(1, 6));
  return s;
}

template <typename T> bool same_bits(const T& a, const T& b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// A random reduction for the reduce kernels' tests: a strided source, reduced axes in descending order (deliberately
// not sorted), and the kept and reduced extents.
struct Reduction {
  Shape shape;
  Tensor src;
  std::vector<int> axes;
  std::vector<bool> reduced;
  Shape kept, rshape;
  // The source index of kept element ko and reduced element rq.
  std::vector<int64_t> index(const std::vector<int64_t>& ko, const std::vector<int64_t>& rq) const {
    std::vector<int64_t> idx;
    size_t ik = 0, ir = 0;
    for (size_t a = 0; a < shape.size(); ++a) idx.push_back(reduced[a] ? rq[ir++] : ko[ik++]);
    return idx;
  }
};

template <typename T> Reduction random_reduction(kt::Rng& r, uint64_t seed) {
  Reduction c;
  const int rank = static_cast<int>(r.uniform(0, 4));
  c.shape = random_shape(r, rank);
  if (seed % 7 == 0 && rank > 0) c.shape[0] = 300;  // long runs, several pieces
  c.src = random_view<T>(r, c.shape);
  for (int a = rank - 1; a >= 0; --a)
    if (r.uniform(0, 1)) c.axes.push_back(a);
  c.reduced.assign(static_cast<size_t>(rank), false);
  for (int a : c.axes) c.reduced[a] = true;
  for (int a = 0; a < rank; ++a) (c.reduced[a] ? c.rshape : c.kept).push_back(c.shape[a]);
  return c;
}

}  // namespace

TEST_CASE_TEMPLATE("copy and permute_copy reproduce every element", T, float, double, c64, c128, int64_t) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    kt::Rng r(seed);
    Shape shape = random_shape(r, static_cast<int>(r.uniform(0, 4)));
    Tensor src = random_view<T>(r, shape);
    Tensor dst = random_view<T>(r, shape);  // a strided destination
    ThreadPool pool(static_cast<int>(seed % 2 + 1));
    k::copy(src, dst, &pool);
    for (int64_t i = 0; i < element_count(shape); ++i) {
      auto idx = multi_index(i, shape);
      REQUIRE(same_bits(dst.at<T>(idx), src.at<T>(idx)));
    }
  }
  // Large transposes take the tiled path.
  kt::Rng r(99);
  Tensor src = random_view<T>(r, {70, 45, 3});
  std::vector<int> perm{1, 2, 0};
  Tensor out = k::permute_copy(src, perm);
  CHECK(out.is_col_major());
  CHECK(out.shape() == Shape{45, 3, 70});
  for (int64_t a = 0; a < 70; ++a)
    for (int64_t b = 0; b < 45; ++b)
      for (int64_t c = 0; c < 3; ++c) REQUIRE(same_bits(out.at<T>({b, c, a}), src.at<T>({a, b, c})));
}

TEST_CASE_TEMPLATE("reduce_sum sums in the documented order, at any thread count", T, float, double, c64, c128, int64_t) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    kt::Rng r(seed * 31);
    const Reduction c = random_reduction<T>(r, seed);
    const Tensor& src = c.src;
    const std::vector<int>& axes = c.axes;
    const Shape &kept = c.kept, &rshape = c.rshape;
    const bool accumulate = seed % 3 == 0;
    Tensor init = random_view<T>(r, kept);
    Tensor d1 = init.clone(), d2 = init.clone();
    k::reduce_sum(src, axes, d1, accumulate, nullptr);
    ThreadPool pool(2);
    k::reduce_sum(src, axes, d2, accumulate, &pool);
    CHECK(bitwise_equal(d1, d2));
    // The oracle sums in the documented order (lowest reduced axis fastest, from zero), in T, so bits must agree.
    for (int64_t o = 0; o < element_count(kept); ++o) {
      auto ko = multi_index(o, kept);
      using A = std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, T>;
      A sum = A(0);
      for (int64_t q = 0; q < element_count(rshape); ++q)
        sum += static_cast<A>(src.at<T>(c.index(ko, multi_index(q, rshape))));
      T want = accumulate ? static_cast<T>(static_cast<A>(init.at<T>(ko)) + sum) : static_cast<T>(sum);
      REQUIRE(same_bits(d1.at<T>(ko), want));
    }
  }
}

TEST_CASE("reduce_sum errors name the problem") {
  Tensor x = Tensor::zeros(DType::f64, {2, 3});
  Tensor bad = Tensor::zeros(DType::f64, {3});
  std::vector<int> ax{1};
  CHECK_THROWS_WITH_AS(k::reduce_sum(x, ax, bad), "reduce_sum: destination has shape [3] but reducing [2,3] gives [2]",
                       Error);
  std::vector<int> twice{0, 0};
  CHECK_THROWS_WITH_AS(k::reduce_sum(x, twice), "reduce_sum: axis 0 is listed twice", Error);
}

TEST_CASE_TEMPLATE("extract_diag and embed_diag are inverse on the diagonal", T, float, c128, int64_t) {
  kt::Rng r(5);
  Tensor x = random_view<T>(r, {4, 3, 4});
  Tensor d = k::extract_diag(x, 2, 0);  // keeps axis 2's position among the remaining axes: shape [3, 4]
  CHECK(d.shape() == Shape{3, 4});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(same_bits(d.at<T>({j, i}), x.at<T>({i, j, i})));
  Tensor e = Tensor::empty(dtype_v<T>, {3, 4, 4});
  k::embed_diag(d, 1, 2, e);
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 4; ++b) CHECK(same_bits(e.at<T>({j, a, b}), a == b ? d.at<T>({j, a}) : T(0)));
  CHECK_THROWS_WITH_AS(k::extract_diag(x, 0, 1),
                       "extract_diag: axes 0 and 1 have extents 4 and 3; a diagonal needs equal extents", Error);
}

TEST_CASE_TEMPLATE("elementwise kernels match the scalar operations", T, float, double, c64, c128, int64_t) {
  kt::Rng r(11);
  Shape shape{5, 3, 2};
  Tensor x = random_view<T>(r, shape), y = random_view<T>(r, shape);
  for (auto op : {k::BinaryOp::add, k::BinaryOp::sub, k::BinaryOp::mul, k::BinaryOp::div}) {
    CAPTURE(k::name(op));
    if (std::is_same_v<T, int64_t> && op == k::BinaryOp::div) continue;  // may hit zero; tested below
    Tensor out = k::binary(op, x, y);
    for (int64_t i = 0; i < element_count(shape); ++i) {
      auto idx = multi_index(i, shape);
      T a = x.at<T>(idx), b = y.at<T>(idx), want{};
      switch (op) {
        case k::BinaryOp::add: want = a + b; break;
        case k::BinaryOp::sub: want = a - b; break;
        case k::BinaryOp::mul: want = a * b; break;
        case k::BinaryOp::div: want = a / b; break;
      }
      CHECK(kt::distance(out.at<T>(idx), kt::widen(want)) <= 1e-6 * (kt::magnitude(want) + 1));
    }
  }
  Tensor neg = k::unary(k::UnaryOp::neg, x);
  Tensor conj = k::unary(k::UnaryOp::conj, x);
  for (int64_t i = 0; i < element_count(shape); ++i) {
    auto idx = multi_index(i, shape);
    CHECK(same_bits(neg.at<T>(idx), T(-x.at<T>(idx))));
    if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) CHECK(same_bits(conj.at<T>(idx), std::conj(x.at<T>(idx))));
    else CHECK(same_bits(conj.at<T>(idx), x.at<T>(idx)));
  }
  if constexpr (!std::is_same_v<T, int64_t>) {
    Tensor e = k::unary(k::UnaryOp::exp, x), l = k::unary(k::UnaryOp::log, e), s = k::unary(k::UnaryOp::sqrt, e);
    for (int64_t i = 0; i < element_count(shape); ++i) {
      auto idx = multi_index(i, shape);
      CHECK(same_bits(e.at<T>(idx), T(std::exp(x.at<T>(idx)))));
      CHECK(same_bits(l.at<T>(idx), T(std::log(e.at<T>(idx)))));
      CHECK(same_bits(s.at<T>(idx), T(std::sqrt(e.at<T>(idx)))));
    }
    // The trigonometric and hyperbolic ops against the standard library on every element (any strides).
    const std::pair<k::UnaryOp, T (*)(const T&)> trig[] = {
        {k::UnaryOp::sin, [](const T& v) { return T(std::sin(v)); }},
        {k::UnaryOp::cos, [](const T& v) { return T(std::cos(v)); }},
        {k::UnaryOp::tanh, [](const T& v) { return T(std::tanh(v)); }},
        {k::UnaryOp::sinh, [](const T& v) { return T(std::sinh(v)); }},
        {k::UnaryOp::cosh, [](const T& v) { return T(std::cosh(v)); }}};
    for (const auto& [op, oracle] : trig) {
      CAPTURE(k::name(op));
      Tensor r = k::unary(op, x);
      for (int64_t i = 0; i < element_count(shape); ++i) {
        auto idx = multi_index(i, shape);
        CHECK(same_bits(r.at<T>(idx), oracle(x.at<T>(idx))));
      }
    }
  }
  CHECK_THROWS_WITH_AS(k::unary(k::UnaryOp::tanh, Tensor::from_col_major<int64_t>({1}, {1})),
                       "tanh: needs a floating dtype but the operand is i64; convert it to f64 first", Error);
}

// binary() has a loop per stride pattern of a run (all contiguous, one operand spread along the run, any other):
// each pattern, and a result that is its own left operand, gives the scalar operation's bits on every element.
TEST_CASE_TEMPLATE("binary kernel: every stride pattern gives the scalar operation's bits", T, float, double, int64_t) {
  kt::Rng r(23);
  const Shape shape{37, 5};
  auto dense = [&](const Shape& s) { return random_operand<T>(r, s); };
  Tensor x = dense(shape), y = dense(shape), col = dense({1, 5}), row = dense({37, 1}), xt = dense({5, 37});
  Tensor spread_col = Tensor::view_of(dtype_v<T>, shape, {0, 1}, col.raw_data());  // stride 0 along the run
  Tensor spread_row = Tensor::view_of(dtype_v<T>, shape, {1, 0}, row.raw_data());
  const std::pair<Tensor, Tensor> cases[] = {{x, y}, {x, spread_col}, {spread_col, y}, {spread_row, x},
                                             {xt.transpose(), y}, {spread_col, spread_row}};
  for (auto op : {k::BinaryOp::add, k::BinaryOp::sub, k::BinaryOp::mul, k::BinaryOp::div}) {
    CAPTURE(k::name(op));
    auto scalar = [op](T a, T b) {
      switch (op) {
        case k::BinaryOp::add: return T(a + b);
        case k::BinaryOp::sub: return T(a - b);
        case k::BinaryOp::mul: return T(a * b);
        case k::BinaryOp::div: return T(a / b);
      }
      return T{};
    };
    for (size_t c = 0; c < std::size(cases); ++c) {
      CAPTURE(c);
      const auto& [a, b] = cases[c];
      Tensor out = k::binary(op, a, b);
      for (int64_t j = 0; j < 5; ++j)
        for (int64_t i = 0; i < 37; ++i) CHECK(same_bits(out.at<T>({i, j}), scalar(a.at<T>({i, j}), b.at<T>({i, j}))));
    }
    Tensor in_place = x.clone();
    k::binary(op, in_place, y, in_place);
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t i = 0; i < 37; ++i) CHECK(same_bits(in_place.at<T>({i, j}), scalar(x.at<T>({i, j}), y.at<T>({i, j}))));
  }
}

TEST_CASE("elementwise errors: i64 transcendental and division by zero leave the result untouched") {
  Tensor x = Tensor::from_col_major<int64_t>({3}, {7, -7, 9});
  Tensor y = Tensor::from_col_major<int64_t>({3}, {2, 2, 0});
  CHECK_THROWS_WITH_AS(k::unary(k::UnaryOp::exp, x),
                       "exp: needs a floating dtype but the operand is i64; convert it to f64 first", Error);
  Tensor out = Tensor::from_col_major<int64_t>({3}, {1, 1, 1});
  CHECK_THROWS_WITH_AS(k::binary(k::BinaryOp::div, x, y, out),
                       "div: integer division by zero (the right operand has a 0 element)", Error);
  CHECK(out.to_col_major<int64_t>() == std::vector<int64_t>{1, 1, 1});
  Tensor ok = Tensor::from_col_major<int64_t>({3}, {2, 2, 4});
  CHECK(k::binary(k::BinaryOp::div, x, ok).to_col_major<int64_t>() == std::vector<int64_t>{3, -3, 2});
  Tensor f = Tensor::zeros(DType::f64, {3});
  CHECK_THROWS_WITH_AS(k::binary(k::BinaryOp::add, x, f), "add: the right operand has dtype f64 but the result has i64",
                       Error);
}

TEST_CASE_TEMPLATE("abs, sign and pow match their definitions on strided views", T, float, double, c64, c128, int64_t) {
  constexpr bool kComplex = std::is_same_v<T, c64> || std::is_same_v<T, c128>;
  kt::Rng r(12);
  Shape shape{4, 3, 2};
  Tensor x = random_view<T>(r, shape);
  Tensor a = k::absolute(x), s = k::unary(k::UnaryOp::sign, x);
  CHECK(a.dtype() == real_part_type(x.dtype()));
  for (int64_t i = 0; i < element_count(shape); ++i) {
    auto idx = multi_index(i, shape);
    T v = x.at<T>(idx);
    if constexpr (kComplex) {
      using R = typename T::value_type;
      const double modulus = std::sqrt(double(v.real()) * v.real() + double(v.imag()) * v.imag());
      CHECK(std::abs(a.at<R>(idx) - modulus) <= kt::tolerance<T>() * modulus);
      const std::complex<double> unit(v.real() / modulus, v.imag() / modulus);
      CHECK(std::abs(std::complex<double>(s.at<T>(idx)) - unit) <= kt::tolerance<T>());
    } else {
      CHECK(a.at<T>(idx) == (v < 0 ? T(-v) : v));
      CHECK(s.at<T>(idx) == (v > 0 ? T(1) : v < 0 ? T(-1) : T(0)));
    }
  }
  if constexpr (!std::is_same_v<T, int64_t>) {
    // pow against repeated multiplication (integer exponents, any sign) and exp(p log x) (positive real part).
    Tensor p3 = k::power(x, 3), pm2 = k::power(x, -2);
    Tensor shifted = Tensor::empty(x.dtype(), shape);  // real parts in [1, 3): away from the branch cut
    for (int64_t i = 0; i < element_count(shape); ++i) {
      auto idx = multi_index(i, shape);
      shifted.at<T>(idx) = x.at<T>(idx) + T(2);
    }
    Tensor p25 = k::power(shifted, 2.5);
    for (int64_t i = 0; i < element_count(shape); ++i) {
      auto idx = multi_index(i, shape);
      auto v = kt::widen(x.at<T>(idx));
      auto w = kt::widen(shifted.at<T>(idx));
      auto cube = v * v * v, inverse_square = kt::Wide<T>(1) / (v * v), p = std::exp(kt::Wide<T>(2.5) * std::log(w));
      CHECK(kt::distance(p3.at<T>(idx), cube) <= kt::tolerance<T>() * (std::abs(cube) + 1));
      CHECK(kt::distance(pm2.at<T>(idx), inverse_square) <= 10 * kt::tolerance<T>() * (std::abs(inverse_square) + 1));
      CHECK(kt::distance(p25.at<T>(idx), p) <= kt::tolerance<T>() * (std::abs(p) + 1));
    }
  } else {
    CHECK_THROWS_WITH_AS(k::power(x, 2), "pow: needs a floating dtype but the operand is i64; convert it to f64 first",
                         Error);
  }
}

TEST_CASE("sign keeps nan and gives 0 at 0; abs of the most negative i64 wraps like neg") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor s = k::unary(k::UnaryOp::sign, Tensor::from_col_major<double>({4}, {0.0, -0.0, nan, -3.5}));
  CHECK(s.at<double>({0}) == 0.0);
  CHECK(s.at<double>({1}) == 0.0);
  CHECK(std::isnan(s.at<double>({2})));
  CHECK(s.at<double>({3}) == -1.0);
  Tensor z = k::unary(k::UnaryOp::sign, Tensor::from_col_major<c128>({2}, {c128(0, 0), c128(0, -2)}));
  CHECK(z.at<c128>({0}) == c128(0, 0));
  CHECK(z.at<c128>({1}) == c128(0, -1));
  Tensor i = k::absolute(Tensor::from_col_major<int64_t>({2}, {INT64_MIN, -4}));
  CHECK(i.to_col_major<int64_t>() == std::vector<int64_t>{INT64_MIN, 4});
}

TEST_CASE_TEMPLATE("reduce_max and first_max_mask take the first maximum, at any thread count", T, float, double,
                   int64_t) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    kt::Rng r(seed * 17);
    Reduction c = random_reduction<T>(r, seed);
    const Tensor& src = c.src;
    const Shape &shape = c.shape, &kept = c.kept, &rshape = c.rshape;
    if (seed % 2 == 0)  // small integers in the values: ties, so "first" is tested
      for (int64_t i = 0; i < element_count(shape); ++i)
        c.src.at<T>(multi_index(i, shape)) = static_cast<T>(r.uniform(-2, 2));
    ThreadPool pool(2);
    Tensor m1 = k::reduce_max(src, c.axes, nullptr), m2 = k::reduce_max(src, c.axes, &pool);
    Tensor f1 = k::first_max_mask(src, c.axes, nullptr), f2 = k::first_max_mask(src, c.axes, &pool);
    CHECK(bitwise_equal(m1, m2));
    CHECK(bitwise_equal(f1, f2));
    REQUIRE(m1.shape() == kept);
    REQUIRE(f1.shape() == shape);
    // Oracle: scan each slice in column-major order of the reduced axes; a strictly larger value replaces the best.
    Tensor want_mask = Tensor::zeros(src.dtype(), shape);
    for (int64_t o = 0; o < element_count(kept); ++o) {
      auto ko = multi_index(o, kept);
      T best = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      std::vector<int64_t> best_idx;
      bool found = false;  // (a rank-0 slice's index is the empty vector)
      for (int64_t q = 0; q < element_count(rshape); ++q) {
        const std::vector<int64_t> idx = c.index(ko, multi_index(q, rshape));
        if (!found || src.at<T>(idx) > best) {
          best = src.at<T>(idx);
          best_idx = idx;
          found = true;
        }
      }
      REQUIRE(same_bits(m1.at<T>(ko), best));
      if (found) want_mask.at<T>(best_idx) = T(1);
    }
    CHECK(bitwise_equal(f1, want_mask));
  }
}

TEST_CASE("reduce_max: nan wins and its first position is marked; an empty extent gives -inf; complex is refused") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_col_major<double>({2, 3}, {1.0, 5.0, nan, 2.0, 7.0, 3.0});
  std::vector<int> cols{1};
  Tensor m = k::reduce_max(x, cols);
  CHECK(std::isnan(m.at<double>({0})));  // row 0 is 1, nan, 7
  CHECK(m.at<double>({1}) == 5.0);        // row 1 is 5, 2, 3
  CHECK(k::first_max_mask(x, cols).to_col_major<double>() == std::vector<double>{0, 1, 1, 0, 0, 0});
  std::vector<int> first{0};
  Tensor e = k::reduce_max(Tensor::zeros(DType::f64, {0, 2}), first);
  CHECK(e.to_col_major<double>() == std::vector<double>{-INFINITY, -INFINITY});
  CHECK(k::reduce_max(Tensor::zeros(DType::i64, {0}), first).at<int64_t>({}) == INT64_MIN);
  CHECK_THROWS_WITH_AS(k::reduce_max(Tensor::zeros(DType::c128, {2}), first),
                       "reduce_max: the tensor has dtype c128; expected a real dtype (f32, f64, i64)", Error);
  std::vector<int> twice{0, 0};
  CHECK_THROWS_WITH_AS(k::first_max_mask(x, twice), "first_max_mask: axis 0 is listed twice", Error);
}

namespace {
// The definition of a <cmp> b, written out here apart from ir/Comparison.h: IEEE order on reals (a nan makes every
// comparison false but ne), both parts equal for complex eq.
template <typename T> bool holds(Comparison cmp, T a, T b) {
  if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) {
    const bool equal = a.real() == b.real() && a.imag() == b.imag();
    REQUIRE((cmp == Comparison::eq || cmp == Comparison::ne));
    return cmp == Comparison::eq ? equal : !equal;
  } else {
    switch (cmp) {
      case Comparison::lt: return a < b;
      case Comparison::le: return a < b || a == b;
      case Comparison::gt: return b < a;
      case Comparison::ge: return b < a || a == b;
      case Comparison::eq: return a == b;
      case Comparison::ne: return !(a == b);
    }
    return false;
  }
}

// select over strided views of compared type C and selected type V, checked element by element at 1 and 2 threads.
template <typename C, typename V> void check_select(kt::Rng& r, const Shape& shape, bool ties) {
  Tensor a = random_view<C>(r, shape), b = random_view<C>(r, shape);
  if (ties)  // b takes a's value at every other element, so eq, le and ge meet equal values
    for (int64_t i = 0; i < element_count(shape); i += 2) b.at<C>(multi_index(i, shape)) = a.at<C>(multi_index(i, shape));
  Tensor x = random_view<V>(r, shape), y = random_view<V>(r, shape);
  ThreadPool pool(2);
  for (Comparison cmp : kAllComparisons) {
    if ((std::is_same_v<C, c64> || std::is_same_v<C, c128>) && is_ordered(cmp)) continue;
    CAPTURE(name(cmp));
    Tensor s1 = k::select(cmp, a, b, x, y), s2 = k::select(cmp, a, b, x, y, &pool);
    REQUIRE(s1.shape() == shape);
    REQUIRE(s1.dtype() == dtype_v<V>);
    CHECK(bitwise_equal(s1, s2));
    for (int64_t i = 0; i < element_count(shape); ++i) {
      const std::vector<int64_t> idx = multi_index(i, shape);
      const V want = holds(cmp, a.at<C>(idx), b.at<C>(idx)) ? x.at<V>(idx) : y.at<V>(idx);
      CHECK(same_bits(s1.at<V>(idx), want));
    }
  }
}
}  // namespace

TEST_CASE_TEMPLATE("select takes x where a <cmp> b holds and y elsewhere, on strided views at any thread count", T,
                   float, double, int64_t, c128) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    kt::Rng r(seed * 29);
    const Shape shape = random_shape(r, static_cast<int>(r.uniform(0, 3)));
    check_select<T, T>(r, shape, seed % 2 == 0);
    check_select<T, c64>(r, shape, seed % 2 == 1);  // the selected dtype differs from the compared one
  }
}

TEST_CASE("select: nan compares false except under ne, -0 equals 0; operands that do not fit are refused") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = Tensor::from_col_major<double>({3}, {nan, 1.0, -0.0});
  Tensor b = Tensor::from_col_major<double>({3}, {1.0, nan, 0.0});
  Tensor x = Tensor::from_col_major<int64_t>({3}, {1, 1, 1}), y = Tensor::from_col_major<int64_t>({3}, {0, 0, 0});
  auto picks = [&](Comparison c) { return k::select(c, a, b, x, y).to_col_major<int64_t>(); };
  CHECK(picks(Comparison::lt) == std::vector<int64_t>{0, 0, 0});
  CHECK(picks(Comparison::le) == std::vector<int64_t>{0, 0, 1});
  CHECK(picks(Comparison::gt) == std::vector<int64_t>{0, 0, 0});
  CHECK(picks(Comparison::ge) == std::vector<int64_t>{0, 0, 1});
  CHECK(picks(Comparison::eq) == std::vector<int64_t>{0, 0, 1});
  CHECK(picks(Comparison::ne) == std::vector<int64_t>{1, 1, 0});
  Tensor z = Tensor::from_col_major<c128>({3}, {c128(1, 2), c128(1, -2), c128(0, 0)});
  Tensor zc = Tensor::from_col_major<c128>({3}, {c128(1, -2), c128(1, 2), c128(-0.0, 0)});
  CHECK(k::select(Comparison::eq, z, zc, x, y).to_col_major<int64_t>() == std::vector<int64_t>{0, 0, 1});
  CHECK_THROWS_WITH_AS(k::select(Comparison::lt, z, z, x, y),
                       "select: cmp = lt needs real compared operands but a is c128", Error);
  CHECK_THROWS_WITH_AS(k::select(Comparison::eq, a, x, x, y),
                       "select: b has dtype i64 but a has f64; the compared operands share a dtype", Error);
  CHECK_THROWS_WITH_AS(k::select(Comparison::eq, a, b, x, a), "select: y has dtype f64 but the result has i64", Error);
  Tensor short_b = Tensor::from_col_major<double>({2}, {1.0, 2.0});
  CHECK_THROWS_WITH_AS(k::select(Comparison::eq, a, short_b, x, y), "select: b has shape [2] but x has [3]", Error);
}

// parallel_runs (Strided.h) visits a nest whose operand is transposed in 32 x 32 tiles of the two axes: every
// element must still get the scalar operation's bits, for binary ops, unary ops, copies, select and a reduction over
// a third axis, at 1 and 2 threads, on seeded shapes whose two tiled extents are not multiples of the tile. The
// nests are checked to take the tiled traversal, so the test covers it.
TEST_CASE_TEMPLATE("transposed operands take the tiled traversal and keep every element's bits", T, float, double,
                   int64_t) {
  for (uint64_t seed = 700; seed < 706; ++seed) {
    kt::Rng r(seed);
    const int64_t e0 = r.uniform(32, 75), e1 = r.uniform(32, 75), e2 = r.uniform(1, 3);
    INFO("seed " << seed << ": shape [" << e0 << ", " << e1 << ", " << e2 << "]");
    const Shape shape{e0, e1, e2};
    auto dense = [&](const Shape& s) { return random_operand<T>(r, s); };
    Tensor x = dense(shape);
    Tensor yt = dense({e1, e0, e2}).permute({1, 0, 2});  // transposed in its first two axes
    Tensor zt = dense({e2, e1, e0}).permute({2, 1, 0});
    const Tensor out_like = Tensor::empty(dtype_v<T>, shape);
    for (const Tensor* t : {&yt, &zt}) {
      auto nest = k::make_loop_nest<3>(shape, {&out_like.strides(), &x.strides(), &t->strides()});
      REQUIRE(k::transposed_axis(nest) != 0);
    }
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ThreadPool pool(threads);
      for (auto op : {k::BinaryOp::add, k::BinaryOp::sub, k::BinaryOp::mul, k::BinaryOp::div}) {
        CAPTURE(k::name(op));
        Tensor a = k::binary(op, x, yt, &pool), b = k::binary(op, zt, x, &pool);
        for (int64_t i = 0; i < element_count(shape); ++i) {
          auto idx = multi_index(i, shape);
          const T xv = x.at<T>(idx), yv = yt.at<T>(idx), zv = zt.at<T>(idx);
          T want_a{}, want_b{};
          switch (op) {
            case k::BinaryOp::add: want_a = T(xv + yv), want_b = T(zv + xv); break;
            case k::BinaryOp::sub: want_a = T(xv - yv), want_b = T(zv - xv); break;
            case k::BinaryOp::mul: want_a = T(xv * yv), want_b = T(zv * xv); break;
            case k::BinaryOp::div: want_a = T(xv / yv), want_b = T(zv / xv); break;
          }
          REQUIRE(same_bits(a.at<T>(idx), want_a));
          REQUIRE(same_bits(b.at<T>(idx), want_b));
        }
      }
      Tensor neg = k::unary(k::UnaryOp::neg, yt, &pool);
      Tensor copied = Tensor::empty(dtype_v<T>, shape);
      k::copy(zt, copied, &pool);
      Tensor chosen = k::select(Comparison::lt, x, yt, zt, x, &pool);
      for (int64_t i = 0; i < element_count(shape); ++i) {
        auto idx = multi_index(i, shape);
        REQUIRE(same_bits(neg.at<T>(idx), T(-yt.at<T>(idx))));
        REQUIRE(same_bits(copied.at<T>(idx), zt.at<T>(idx)));
        REQUIRE(same_bits(chosen.at<T>(idx), x.at<T>(idx) < yt.at<T>(idx) ? zt.at<T>(idx) : x.at<T>(idx)));
      }
      // A sum over the last axis of a source transposed in the kept ones: each kept element sums in axis order.
      const std::vector<int> last{2};
      Tensor sums = k::reduce_sum(zt, last, &pool);
      for (int64_t j = 0; j < e1; ++j)
        for (int64_t i = 0; i < e0; ++i) {
          using A = std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, T>;
          A sum = A(0);  // the documented order: from zero, along the reduced axis
          for (int64_t c = 0; c < e2; ++c) sum += static_cast<A>(zt.at<T>({i, j, c}));
          const T want = static_cast<T>(sum);
          REQUIRE(same_bits(sums.at<T>({i, j}), want));
        }
    }
  }
}
