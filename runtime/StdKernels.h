// The standard ops' kernel bindings: one function per OpKind in a table indexed by the op's variant index (no string
// compares). Stage: runtime. Depends on ir/Ops.h and runtime/kernels; used by the interpreter (runtime/Interpreter.h).
//
// Each binding maps an op onto the shared kernels: dot_general becomes one ContractionProblem executed by contract()
// (JIT or portable, runtime/jit/Dispatch.h) straight from the operands' strides, block by block when the operands'
// exact zeros split a large matrix product (runtime/kernels/BlockProduct.h); transpose is a permuted view and
// reshape a view when the layout allows it (Tensor::reshape), otherwise a copy; broadcast_in_dim copies through a
// stride-0 view; reduce_sum, extract_diag and embed_diag are runtime/kernels/Layout.h; the arithmetic ops are
// runtime/kernels/Elementwise.h; convert is Tensor::astype; constant returns its (immutable) literal. Operands are
// never written; a result may share storage with an operand (views), so callers treat values as immutable.
#pragma once

#include "ir/Ops.h"
#include "ir/Tensor.h"

#include <span>

namespace einstage {

class ThreadPool;

/// Runs a standard op (kind(op) != OpKind::extension) on operands whose types satisfy the op's type rule;
/// `result_shape` is the result type's concrete shape (needed by reshape and broadcast_in_dim).
Tensor run_std_op(const Op& op, std::span<const Tensor> operands, const Shape& result_shape, ThreadPool* pool);

}  // namespace einstage
