// One kernel binding per standard op, in the order of ir/Ops.h, gathered into a table indexed by OpKind.
#include "runtime/StdKernels.h"

#include "runtime/Contract.h"
#include "runtime/kernels/BlockProduct.h"
#include "runtime/kernels/Contraction.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Layout.h"

#include <algorithm>
#include <array>
#include <complex>
#include <type_traits>

namespace einstage {
namespace {

struct KernelArgs {
  std::span<const Tensor> in;
  const Shape& result_shape;
  ThreadPool* pool;
};

std::vector<int> to_int(const Axes& axes) { return {axes.begin(), axes.end()}; }

// ---- dot_general: one GETT problem over the operands' own strides (no transpose pass), or, for a large matrix
// product whose operands' exact zeros split it (block-diagonal factors up to a permutation), its blocks' products
// (runtime/kernels/BlockProduct.h) ----
Tensor kernel(const DotGeneral& op, const KernelArgs& a) {
  const Tensor &lhs = a.in[0], &rhs = a.in[1];
  Tensor out = Tensor::empty(lhs.dtype(), a.result_shape);
  ContractionProblem p;
  p.dtype = lhs.dtype();
  auto in = [](const Axes& axes, int64_t x) { return std::find(axes.begin(), axes.end(), x) != axes.end(); };
  size_t pos = 0;
  for (int i = 0; i < lhs.rank(); ++i)
    if (!in(op.lhs_contracting, i) && !in(op.lhs_batch, i))
      p.m.push_back({lhs.extent(i), lhs.strides()[i], 0, out.strides()[pos++]});
  for (int j = 0; j < rhs.rank(); ++j)
    if (!in(op.rhs_contracting, j) && !in(op.rhs_batch, j))
      p.n.push_back({rhs.extent(j), 0, rhs.strides()[j], out.strides()[pos++]});
  for (size_t t = 0; t < op.lhs_batch.size(); ++t) {
    auto l = static_cast<size_t>(op.lhs_batch[t]), r = static_cast<size_t>(op.rhs_batch[t]);
    p.batch.push_back({lhs.shape()[l], lhs.strides()[l], rhs.strides()[r], out.strides()[pos++]});
  }
  for (size_t t = 0; t < op.lhs_contracting.size(); ++t) {
    auto l = static_cast<size_t>(op.lhs_contracting[t]), r = static_cast<size_t>(op.rhs_contracting[t]);
    p.k.push_back({lhs.shape()[l], lhs.strides()[l], rhs.strides()[r], 0});
  }
  EIN_ASSERT(pos == out.shape().size(), "dot_general result rank");
  p.a = lhs.raw_data();
  p.b = rhs.raw_data();
  p.c = out.raw_data();
  if (!kernels::block_product(p, [&](const ContractionProblem& block) { contract(block, a.pool); }))
    contract(p, a.pool);
  return out;
}

// ---- layout ----
Tensor kernel(const Transpose& op, const KernelArgs& a) {
  std::vector<int> perm = to_int(op.perm);
  return a.in[0].permute(perm);  // a view: later kernels read any strides
}

Tensor kernel(const Reshape&, const KernelArgs& a) { return a.in[0].reshape(a.result_shape); }

Tensor kernel(const BroadcastInDim& op, const KernelArgs& a) {
  const Tensor& x = a.in[0];
  // Stride-0 view over x's memory (x outlives this call), then one copy into owned storage.
  Strides strides(a.result_shape.size(), 0);
  for (size_t i = 0; i < op.dims.size(); ++i) {
    auto r = static_cast<size_t>(op.dims[i]);
    strides[r] = (x.shape()[i] == 1 && a.result_shape[r] != 1) ? 0 : x.strides()[i];
  }
  Tensor out = Tensor::empty(x.dtype(), a.result_shape);
  if (out.numel() == 0) return out;
  Tensor view = Tensor::view_of(x.dtype(), a.result_shape, strides, const_cast<void*>(x.raw_data()));
  kernels::copy(view, out, a.pool);
  return out;
}

Tensor kernel(const ReduceSum& op, const KernelArgs& a) {
  std::vector<int> axes = to_int(op.axes);
  return kernels::reduce_sum(a.in[0], axes, a.pool);
}

Tensor kernel(const ReduceMax& op, const KernelArgs& a) {
  std::vector<int> axes = to_int(op.axes);
  return kernels::reduce_max(a.in[0], axes, a.pool);
}

Tensor kernel(const FirstMaxMask& op, const KernelArgs& a) {
  std::vector<int> axes = to_int(op.axes);
  return kernels::first_max_mask(a.in[0], axes, a.pool);
}

Tensor kernel(const ExtractDiag& op, const KernelArgs& a) {
  return kernels::extract_diag(a.in[0], static_cast<int>(op.axis_a), static_cast<int>(op.axis_b), a.pool);
}

Tensor kernel(const EmbedDiag& op, const KernelArgs& a) {
  Tensor out = Tensor::empty(a.in[0].dtype(), a.result_shape);
  kernels::embed_diag(a.in[0], static_cast<int>(op.axis_a), static_cast<int>(op.axis_b), out, a.pool);
  return out;
}

// `t` narrowed to `extents[i]` elements from start[i] by stride[i] along every axis: a view of t's storage. An
// empty axis takes nothing, wherever it starts (the type rule does not check its start either).
Tensor strided_window(Tensor t, const Axes& start, const Shape& extents, const Axes& stride) {
  for (size_t i = 0; i < extents.size(); ++i) {
    const int64_t n = extents[i], s = start[i];
    const int axis = static_cast<int>(i);
    t = n == 0 ? t.slice(axis, 0, 0) : t.slice(axis, s, s + (n - 1) * stride[i] + 1, stride[i]);
  }
  return t;
}

Tensor kernel(const Slice& op, const KernelArgs& a) {  // a view, like transpose
  return strided_window(a.in[0], op.start, a.result_shape, op.stride);
}

Tensor kernel(const Pad& op, const KernelArgs& a) {
  Tensor out = Tensor::zeros(a.in[0].dtype(), a.result_shape);
  strided_window(out, op.start, a.in[0].shape(), op.stride).copy_from(a.in[0]);
  return out;
}

// ---- elementwise ----
Tensor binary(kernels::BinaryOp op, const KernelArgs& a) { return kernels::binary(op, a.in[0], a.in[1], a.pool); }
Tensor unary(kernels::UnaryOp op, const KernelArgs& a) { return kernels::unary(op, a.in[0], a.pool); }

Tensor kernel(const Add&, const KernelArgs& a) { return binary(kernels::BinaryOp::add, a); }
Tensor kernel(const Sub&, const KernelArgs& a) { return binary(kernels::BinaryOp::sub, a); }
Tensor kernel(const Mul&, const KernelArgs& a) { return binary(kernels::BinaryOp::mul, a); }
Tensor kernel(const Div&, const KernelArgs& a) { return binary(kernels::BinaryOp::div, a); }
Tensor kernel(const Select& op, const KernelArgs& a) {
  return kernels::select(op.cmp, a.in[0], a.in[1], a.in[2], a.in[3], a.pool);
}
Tensor kernel(const Neg&, const KernelArgs& a) { return unary(kernels::UnaryOp::neg, a); }
Tensor kernel(const Conj&, const KernelArgs& a) {
  return is_complex(a.in[0].dtype()) ? unary(kernels::UnaryOp::conj, a) : a.in[0];  // identity on reals
}
Tensor kernel(const Exp&, const KernelArgs& a) { return unary(kernels::UnaryOp::exp, a); }
Tensor kernel(const Log&, const KernelArgs& a) { return unary(kernels::UnaryOp::log, a); }
Tensor kernel(const Sqrt&, const KernelArgs& a) { return unary(kernels::UnaryOp::sqrt, a); }
Tensor kernel(const Sin&, const KernelArgs& a) { return unary(kernels::UnaryOp::sin, a); }
Tensor kernel(const Cos&, const KernelArgs& a) { return unary(kernels::UnaryOp::cos, a); }
Tensor kernel(const Tanh&, const KernelArgs& a) { return unary(kernels::UnaryOp::tanh, a); }
Tensor kernel(const Sinh&, const KernelArgs& a) { return unary(kernels::UnaryOp::sinh, a); }
Tensor kernel(const Cosh&, const KernelArgs& a) { return unary(kernels::UnaryOp::cosh, a); }
Tensor kernel(const Abs&, const KernelArgs& a) { return kernels::absolute(a.in[0], a.pool); }
Tensor kernel(const Sign&, const KernelArgs& a) { return unary(kernels::UnaryOp::sign, a); }
Tensor kernel(const StopGradient&, const KernelArgs& a) { return a.in[0]; }  // the identity on values
Tensor kernel(const Pow& op, const KernelArgs& a) { return kernels::power(a.in[0], op.exponent, a.pool); }

// real / imag: one part of each complex element; on real dtypes the identity / zeros (ir/Ops.h).
Tensor kernel(const Real&, const KernelArgs& a) { return kernels::real_part(a.in[0]); }
Tensor kernel(const Imag&, const KernelArgs& a) { return kernels::imag_part(a.in[0]); }

Tensor kernel(const Convert& op, const KernelArgs& a) {
  return a.in[0].dtype() == op.dtype ? a.in[0] : a.in[0].astype(op.dtype);
}

Tensor kernel(const Constant& op, const KernelArgs&) { return op.value; }

// ---- the table: entry k runs the op whose variant index is k ----
using StdKernel = Tensor (*)(const Op&, const KernelArgs&);

template <typename S> Tensor bind(const Op& op, const KernelArgs& a) { return kernel(*std::get_if<S>(&op), a); }

constexpr std::array<StdKernel, kStdOpCount> kKernels = {
#define EIN_KERNEL_(Struct, e) &bind<Struct>,
    EIN_STD_OPS(EIN_KERNEL_)
#undef EIN_KERNEL_
};

}  // namespace

Tensor run_std_op(const Op& op, std::span<const Tensor> operands, const Shape& result_shape, ThreadPool* pool) {
  EIN_ASSERT(op.index() < kStdOpCount, "run_std_op called with an extension op");
  return kKernels[op.index()](op, KernelArgs{operands, result_shape, pool});
}

}  // namespace einstage
