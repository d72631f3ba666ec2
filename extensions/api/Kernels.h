// The public kernel API: the kernels an extension module's executor runs its work on, the same ones the einsum
// extension uses (extensions/einsum/ includes nothing else from runtime/). Stage: extension API. Re-exports Extension.h
// and the runtime headers below, none of which includes a jit/ or LLVM header, so a module built against an installed einstage
// needs no LLVM headers and calls into the one libeinstage_runtime.so the host loaded (one JIT, one kernel cache).
//
// What it offers (all covered by kModuleAbiVersion, runtime/Module.h):
// - runtime/kernels/Contraction.h: ContractionProblem, a pairwise contraction over arbitrary element strides
//   (C[m, n, batch] (+)= sum_k A[m, k, batch] * B[k, n, batch]; every einsum step is one), and contract_portable,
//   the reference kernel;
// - runtime/Contract.h: contract(problem, context, pool), which runs it on the JIT (f32, f64, c64, c128) or the
//   portable kernel (i64, or with the JIT off), and StepKernel, a per-call-site handle that swaps in a
//   shape-specialised kernel for a hot, small, fixed-shape problem;
// - runtime/kernels/Layout.h: copy / permute, fill_zero, reduce_sum, extract and embed a diagonal, into a caller's
//   destination (so a module can point it at its own scratch);
// - runtime/kernels/Elementwise.h: unary (neg, conj, exp, log, sqrt) and binary (add, sub, mul, div) maps over
//   same-shape strided tensors, real_part and imag_part;
// - runtime/Context.h and runtime/ThreadPool.h: the ExecutionContext a PreparedOp::run receives and its pool; every
//   kernel takes a ThreadPool* (nullptr: the calling thread);
// - ir/Scratch.h: the context's ScratchAllocator (context.scratch()): outputs made with Tensor::empty(dtype, shape,
//   scratch) and per-call scratch leases whose buffers are kept for the next call, under the context's one limit.
// Every kernel gives the same bits at any thread count. Errors are einstage::Error (ir/Error.h). docs/extensions.md
// ("The kernel API") walks through a contraction; tests/consumer/ builds a module with it against an installed
// einstage.
#pragma once

#include "extensions/api/Extension.h"
#include "ir/Scratch.h"
#include "runtime/Context.h"
#include "runtime/Contract.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Contraction.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Layout.h"
