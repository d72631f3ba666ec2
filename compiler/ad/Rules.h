// The AD rule table of the standard ops (JAX's ad.primitive_jvps / ad.primitive_transposes, indexed by OpKind) and
// the symbolic-zero Tangent type the transformations pass around. Stage: compiler (AD). Depends on ir only; never
// on runtime/ or extensions/ (extension families bring their rules through ExtensionSemantics::linearize/transpose).
//
// The rules live in compiler/ad/StdRules.cpp, one block per op in the order of the EIN_STD_OPS table (ir/Ops.h),
// not in ir/Ops.cpp: a rule emits instructions through the Builder and is part of a compiler transformation, and ir
// must not depend on compiler passes. The table is found by the op's variant index (OpKind), like the runtime's
// kernel table, so there are no string compares. Conventions every rule follows (docs/ad.md):
// - A tangent or cotangent is a Value or a symbolic zero (std::nullopt); a rule never materialises zeros and
//   returns nullopt when its result is zero, so unused paths create no instructions.
// - Integer values have no tangent (the transformations never hand a rule an i64 tangent).
// - Complex numbers: transposes are adjoints for the real inner product <a, b> = Re sum(conj(a) * b), so a
//   transpose multiplies by the conjugate of the other factor (mul, div, dot_general, einsum).
// - A rule emits only ops that themselves have rules, so transformed programs can be transformed again (grad of
//   grad, jvp of grad).
#pragma once

#include "ir/Program.h"

#include <optional>
#include <span>
#include <vector>

namespace einstage::ad {

/// A Value or a symbolic zero (JAX's ad.Zero): nullopt means "exactly zero, not materialised".
using Tangent = std::optional<Value>;

/// Forward rule of a standard op: the tangent of `inst`'s result (nullopt = zero) given the primal operands, their
/// tangents (nullopt = zero; at least one is a Value) and the primal result, all values of `b`.
using StdLinearizeRule = Tangent (*)(Builder& b, const Instruction& inst, std::span<const Value> primals,
                                     std::span<const Tangent> tangents, const Value& primal_out);
/// Transpose rule of a standard op that is linear in the operands marked `linear`: the cotangent of each operand
/// (nullopt for non-linear operands and for zeros). Non-linear operands are values of `b`; a linear operand is a
/// placeholder with id -1 that carries only its type (it has no value in the transposed program).
using StdTransposeRule = std::vector<Tangent> (*)(Builder& b, const Instruction& inst, std::span<const Value> operands,
                                                  std::span<const bool> linear, const Value& cotangent);

struct StdAdRules {
  StdLinearizeRule linearize = nullptr;  // every standard op has one (a test checks)
  StdTransposeRule transpose = nullptr;  // only ops linear in some operand
};

/// The rules of a standard op (asserts kind != extension). An empty slot means "not implemented"; the
/// transformations report it with the op's name.
const StdAdRules& std_ad_rules(OpKind kind);

}  // namespace einstage::ad
