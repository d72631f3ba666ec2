#include "runtime/kernels/Elementwise.h"

#include "runtime/ThreadPool.h"
#include "runtime/kernels/Strided.h"

#include <cmath>
#include <complex>
#include <type_traits>

namespace einstage::kernels {
namespace {

template <typename T> constexpr bool kComplex = std::is_same_v<T, c64> || std::is_same_v<T, c128>;

template <typename T> T apply(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::neg:
      if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(0u - static_cast<uint64_t>(x));
      else return -x;
    case UnaryOp::conj:
      if constexpr (kComplex<T>) return std::conj(x);
      else return x;
    case UnaryOp::exp:
      if constexpr (!std::is_same_v<T, int64_t>) return std::exp(x);
      break;
    case UnaryOp::log:
      if constexpr (!std::is_same_v<T, int64_t>) return std::log(x);
      break;
    case UnaryOp::sqrt:
      if constexpr (!std::is_same_v<T, int64_t>) return std::sqrt(x);
      break;
    case UnaryOp::sin:
      if constexpr (!std::is_same_v<T, int64_t>) return std::sin(x);
      break;
    case UnaryOp::cos:
      if constexpr (!std::is_same_v<T, int64_t>) return std::cos(x);
      break;
    case UnaryOp::tanh:
      if constexpr (!std::is_same_v<T, int64_t>) return std::tanh(x);
      break;
    case UnaryOp::sinh:
      if constexpr (!std::is_same_v<T, int64_t>) return std::sinh(x);
      break;
    case UnaryOp::cosh:
      if constexpr (!std::is_same_v<T, int64_t>) return std::cosh(x);
      break;
    case UnaryOp::sign:
      if constexpr (kComplex<T>) return x == T(0) ? T(0) : x / std::abs(x);
      else if constexpr (std::is_same_v<T, int64_t>) return (x > 0) - (x < 0);
      else return std::isnan(x) ? x : static_cast<T>((x > 0) - (x < 0));
  }
  return x;  // unreachable: i64 is refused before the loop for every op but neg, conj and sign
}

bool takes_integers(UnaryOp op) { return op == UnaryOp::neg || op == UnaryOp::conj || op == UnaryOp::sign; }

// d[i] = f(s[i]) over same-shape strided tensors; In and Out are the element types of x and out.
template <typename In, typename Out, typename F> void map_elements(const Tensor& x, Tensor& out, ThreadPool* pool, F f) {
  auto nest = make_loop_nest<2>(out.shape(), {&out.strides(), &x.strides()});
  Out* d = static_cast<Out*>(out.raw_data());
  const In* s = static_cast<const In*>(x.raw_data());
  parallel_runs(pool, nest, 4096, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    for (int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] = f(s[off[1] + i * st[1]]);
  });
}

template <typename T> T apply(BinaryOp op, T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    const uint64_t a = static_cast<uint64_t>(x), b = static_cast<uint64_t>(y);
    switch (op) {
      case BinaryOp::add: return static_cast<int64_t>(a + b);
      case BinaryOp::sub: return static_cast<int64_t>(a - b);
      case BinaryOp::mul: return static_cast<int64_t>(a * b);
      case BinaryOp::div: return (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;  // wraps like the others
    }
  } else {
    switch (op) {
      case BinaryOp::add: return x + y;
      case BinaryOp::sub: return x - y;
      case BinaryOp::mul:
        if constexpr (kComplex<T>)
          return T(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
        else return x * y;
      case BinaryOp::div: return x / y;
    }
  }
  return x;
}

// d[i] = f(a[i], b[i]) over one run of n elements with strides st = {d, a, b}. The stride patterns of the common
// cases get their own loops, which the compiler vectorises: every operand contiguous, and one operand broadcast along
// the run (stride 0: a row or column vector spread over a matrix). The element operation is the same in every loop,
// so the results do not depend on which loop ran.
template <typename T, typename F>
void binary_run(T* d, const T* a, const T* b, int64_t n, const std::array<int64_t, 3>& st, F f) {
  if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
  } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
    const T y = *b;
    for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], y);
  } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
    const T x = *a;
    for (int64_t i = 0; i < n; ++i) d[i] = f(x, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * st[0]] = f(a[i * st[1]], b[i * st[2]]);
  }
}

void check_operand(const Tensor& t, const Tensor& out, const char* what, std::string_view op) {
  if (!t.defined()) fail(ErrorKind::invalid_argument, "{}: {} is undefined", op, what);
  if (t.dtype() != out.dtype())
    fail(ErrorKind::dtype, "{}: {} has dtype {} but the result has {}", op, what, name(t.dtype()), name(out.dtype()));
  if (t.shape() != out.shape())
    fail(ErrorKind::shape, "{}: {} has shape {} but the result has {}", op, what, shape_to_string(t.shape()),
         shape_to_string(out.shape()));
}

}  // namespace

std::string_view name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::conj: return "conj";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::sin: return "sin";
    case UnaryOp::cos: return "cos";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sinh: return "sinh";
    case UnaryOp::cosh: return "cosh";
    case UnaryOp::sign: return "sign";
  }
  return "?";
}

std::string_view name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
  }
  return "?";
}

void unary(UnaryOp op, const Tensor& x, Tensor& out, ThreadPool* pool) {
  if (!out.defined()) fail(ErrorKind::invalid_argument, "{}: the result is undefined", name(op));
  check_operand(x, out, "the operand", name(op));
  if (x.dtype() == DType::i64 && !takes_integers(op))
    fail(ErrorKind::dtype, "{}: needs a floating dtype but the operand is i64; convert it to f64 first", name(op));
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map_elements<T, T>(x, out, pool, [op](T v) { return apply<T>(op, v); });
  });
}

Tensor unary(UnaryOp op, const Tensor& x, ThreadPool* pool) {
  if (!x.defined()) fail(ErrorKind::invalid_argument, "{}: the operand is undefined", name(op));
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  unary(op, x, out, pool);
  return out;
}

void binary(BinaryOp op, const Tensor& x, const Tensor& y, Tensor& out, ThreadPool* pool) {
  if (!out.defined()) fail(ErrorKind::invalid_argument, "{}: the result is undefined", name(op));
  check_operand(x, out, "the left operand", name(op));
  check_operand(y, out, "the right operand", name(op));
  auto nest = make_loop_nest<3>(out.shape(), {&out.strides(), &x.strides(), &y.strides()});
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(out.raw_data());
    const T* a = static_cast<const T*>(x.raw_data());
    const T* b = static_cast<const T*>(y.raw_data());
    if constexpr (std::is_same_v<T, int64_t>) {
      if (op == BinaryOp::div) {  // refuse before writing anything
        bool zero = false;
        for_each_run(nest, 0, nest.outer_count(), [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
          for (int64_t i = 0; i < n; ++i) zero = zero || b[off[2] + i * st[2]] == 0;
        });
        if (zero) fail(ErrorKind::invalid_argument, "div: integer division by zero (the right operand has a 0 element)");
      }
    }
    // The op is chosen once per call, not per element, and each run takes a loop for its strides (binary_run).
    auto run_all = [&](auto f) {
      parallel_runs(pool, nest, 4096, [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
        binary_run(d + off[0], a + off[1], b + off[2], n, st, f);
      });
    };
    switch (op) {
      case BinaryOp::add: run_all([](T x, T y) { return apply<T>(BinaryOp::add, x, y); }); break;
      case BinaryOp::sub: run_all([](T x, T y) { return apply<T>(BinaryOp::sub, x, y); }); break;
      case BinaryOp::mul: run_all([](T x, T y) { return apply<T>(BinaryOp::mul, x, y); }); break;
      case BinaryOp::div: run_all([](T x, T y) { return apply<T>(BinaryOp::div, x, y); }); break;
    }
  });
}

Tensor absolute(const Tensor& x, ThreadPool* pool) {
  if (!x.defined()) fail(ErrorKind::invalid_argument, "abs: the operand is undefined");
  Tensor out = Tensor::empty(real_part_type(x.dtype()), x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kComplex<T>) {
      map_elements<T, typename T::value_type>(x, out, pool, [](T v) { return std::abs(v); });
    } else if constexpr (std::is_same_v<T, int64_t>) {  // wraps like neg: abs(INT64_MIN) is INT64_MIN
      map_elements<T, T>(x, out, pool, [](T v) { return v < 0 ? static_cast<T>(0u - static_cast<uint64_t>(v)) : v; });
    } else {
      map_elements<T, T>(x, out, pool, [](T v) { return std::abs(v); });
    }
  });
  return out;
}

Tensor power(const Tensor& x, double exponent, ThreadPool* pool) {
  if (!x.defined()) fail(ErrorKind::invalid_argument, "pow: the operand is undefined");
  if (!is_floating(x.dtype()))
    fail(ErrorKind::dtype, "pow: needs a floating dtype but the operand is {}; convert it to f64 first",
         name(x.dtype()));
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kComplex<T>) {
      using R = typename T::value_type;
      map_elements<T, T>(x, out, pool, [p = static_cast<R>(exponent)](T v) { return T(std::pow(v, p)); });
    } else if constexpr (!std::is_same_v<T, int64_t>) {
      map_elements<T, T>(x, out, pool, [p = static_cast<T>(exponent)](T v) { return std::pow(v, p); });
    }
  });
  return out;
}

Tensor select(Comparison cmp, const Tensor& a, const Tensor& b, const Tensor& x, const Tensor& y, ThreadPool* pool) {
  for (auto [t, what] : {std::pair{&a, "a"}, std::pair{&b, "b"}, std::pair{&x, "x"}, std::pair{&y, "y"}})
    if (!t->defined()) fail(ErrorKind::invalid_argument, "select: operand {} is undefined", what);
  if (b.dtype() != a.dtype())
    fail(ErrorKind::dtype, "select: b has dtype {} but a has {}; the compared operands share a dtype", name(b.dtype()),
         name(a.dtype()));
  if (is_ordered(cmp) && is_complex(a.dtype()))
    fail(ErrorKind::dtype, "select: cmp = {} needs real compared operands but a is {}", name(cmp), name(a.dtype()));
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  check_operand(y, out, "y", "select");
  for (auto [t, what] : {std::pair{&a, "a"}, std::pair{&b, "b"}})
    if (t->shape() != out.shape())
      fail(ErrorKind::shape, "select: {} has shape {} but x has {}", what, shape_to_string(t->shape()),
           shape_to_string(out.shape()));
  auto nest = make_loop_nest<5>(out.shape(), {&out.strides(), &a.strides(), &b.strides(), &x.strides(), &y.strides()});
  dispatch_dtype(a.dtype(), [&](auto compared) {
    using C = decltype(compared);  // complex only under eq and ne (checked above)
    dispatch_dtype(out.dtype(), [&](auto selected) {
      using T = decltype(selected);
      const C* pa = static_cast<const C*>(a.raw_data());
      const C* pb = static_cast<const C*>(b.raw_data());
      const T* px = static_cast<const T*>(x.raw_data());
      const T* py = static_cast<const T*>(y.raw_data());
      T* d = static_cast<T*>(out.raw_data());
      parallel_runs(pool, nest, 4096,
                    [&](const std::array<int64_t, 5>& off, int64_t n, const std::array<int64_t, 5>& st) {
        for (int64_t i = 0; i < n; ++i)
          d[off[0] + i * st[0]] = compare(cmp, pa[off[1] + i * st[1]], pb[off[2] + i * st[2]])
                                      ? px[off[3] + i * st[3]] : py[off[4] + i * st[4]];
      });
    });
  });
  return out;
}

Tensor binary(BinaryOp op, const Tensor& x, const Tensor& y, ThreadPool* pool) {
  if (!x.defined()) fail(ErrorKind::invalid_argument, "{}: the left operand is undefined", name(op));
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  binary(op, x, y, out, pool);
  return out;
}

namespace {

template <bool kImag> Tensor complex_part(const Tensor& x) {
  if (!is_complex(x.dtype())) return kImag ? Tensor::zeros(x.dtype(), x.shape()) : x;
  Tensor src = x.contiguous();
  Tensor out = Tensor::empty(real_part_type(x.dtype()), x.shape());
  auto run = [&](auto zero) {
    using C = decltype(zero);
    using R = typename C::value_type;
    const C* s = src.data<C>();
    R* d = out.data<R>();
    for (int64_t i = 0, n = src.numel(); i < n; ++i) d[i] = kImag ? s[i].imag() : s[i].real();
  };
  if (x.dtype() == DType::c64) run(c64{});
  else run(c128{});
  return out;
}

}  // namespace

Tensor real_part(const Tensor& x) { return complex_part<false>(x); }
Tensor imag_part(const Tensor& x) { return complex_part<true>(x); }

}  // namespace einstage::kernels
