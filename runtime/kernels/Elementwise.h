// Elementwise kernels over same-shape strided Tensors: neg, conj, exp, log, sqrt, sin, cos, tanh, sinh, cosh, sign,
// add, sub, mul, div, abs, pow by a constant, select by a comparison, and the real or imaginary part of complex
// elements. Stage: runtime (the standard ops' kernels for the IR interpreter). Depends on ir/Tensor.h and
// ir/Comparison.h only.
//
// Operands share dtype and shape; broadcasting is expressed by the caller as stride-0 views (BroadcastInDim), so
// these kernels never reshape. The destination may be one of the operands when it has the same strides (in place).
// Semantics: complex mul uses the plain formula (ar*br - ai*bi, ar*bi + ai*br), like the contraction kernel; complex
// div uses std::complex's scaled division; i64 add/sub/mul wrap modulo 2^64, i64 div truncates toward zero and fails
// on a zero divisor (before writing anything); every unary op but neg, conj and sign needs a floating dtype; conj of a
// real is a copy; sign is -1, 0 or 1 (nan stays nan) and x/|x| for complex (0 at 0); abs of i64 wraps like neg.
#pragma once

#include "ir/Comparison.h"
#include "ir/Tensor.h"

#include <string_view>

namespace einstage {
class ThreadPool;
}

namespace einstage::kernels {

enum class UnaryOp { neg, conj, exp, log, sqrt, sin, cos, tanh, sinh, cosh, sign };
enum class BinaryOp { add, sub, mul, div };

std::string_view name(UnaryOp op);   // "neg", "conj", "exp", "log", "sqrt", "sin", ...
std::string_view name(BinaryOp op);  // "add", "sub", "mul", "div"

/// out = op(x), elementwise; out has x's dtype and shape.
void unary(UnaryOp op, const Tensor& x, Tensor& out, ThreadPool* pool = nullptr);
Tensor unary(UnaryOp op, const Tensor& x, ThreadPool* pool = nullptr);

/// out = op(x, y), elementwise; x, y and out share dtype and shape.
void binary(BinaryOp op, const Tensor& x, const Tensor& y, Tensor& out, ThreadPool* pool = nullptr);
Tensor binary(BinaryOp op, const Tensor& x, const Tensor& y, ThreadPool* pool = nullptr);

/// |x| elementwise: the modulus of complex elements (c64 -> f32, c128 -> f64), std::abs of real ones.
Tensor absolute(const Tensor& x, ThreadPool* pool = nullptr);
/// x^exponent elementwise (std::pow with the exponent in x's precision; principal branch for complex); floating x.
Tensor power(const Tensor& x, double exponent, ThreadPool* pool = nullptr);

/// out = (a <cmp> b) ? x : y elementwise (ir/Comparison.h's compare, so nan compares false except under ne). a and b
/// share a dtype (real for lt, le, gt, ge), x and y share the result's dtype, and all four share one shape.
Tensor select(Comparison cmp, const Tensor& a, const Tensor& b, const Tensor& x, const Tensor& y,
              ThreadPool* pool = nullptr);

/// The real (imaginary) part of each element of x, as a fresh column-major tensor of the real dtype (c64 -> f32,
/// c128 -> f64) and x's shape. On a real dtype, real_part is x itself and imag_part zeros of x's dtype.
Tensor real_part(const Tensor& x);
Tensor imag_part(const Tensor& x);

}  // namespace einstage::kernels
