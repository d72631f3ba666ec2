// Automatic differentiation as Program -> Program transformations (JAX's design: jvp rules per op, linearize =
// jvp + partial evaluation, vjp = linearize + transpose, never a hand-written vjp per op). Stage: compiler (AD);
// depends on ir only. Extension families take part through the linearize / transpose slots of their
// ExtensionSemantics, found in the registry the caller gives (the one the program was built with). docs/ad.md has
// the conventions with examples.
//
//   Program f = ...;                                   // @f(%x: f64[n,3], %w: f64[3]) -> (f64[])
//   Program df = ad::grad(f, {0, 1}, &registry);       // @f_grad(%x, %w) -> (f64[n,3], f64[3])
//   Program hvp = ad::jvp(df, {0}, &registry);         // Hessian-vector products: jvp of grad
//   Program d2 = ad::grad(ad::grad(g, {0}, &r), {0}, &r);  // second derivative of a scalar g(x: f64[])
//
// Every result is an ordinary verified Program (simplified by DCE), so the transformations compose. `wrt` lists
// parameter indices (distinct, in any order; the results follow that order); integer parameters cannot be
// differentiated. Parameter names of added inputs: tangents `t_<param>`, output cotangents `ct_<k>` (k = output
// index), residuals `r<k>` (made unique against the program's own names by appending `_`).
//
// Complex numbers: jvp is the ordinary (R-linear) derivative; vjp and transpose give adjoints for the real inner
// product <a, b> = Re sum(conj(a) * b), so <vjp(c), t> = <c, jvp(t)> holds for every c and t (for real programs
// this is the plain dot product). grad follows JAX: the output must be a real scalar (a complex output fails, as
// JAX's grad does without holomorphic=True; take real() or abs-squared first, or call vjp with a cotangent), and for a
// complex parameter z = x + iy the gradient is df/dx - i df/dy, i.e. the conjugate of vjp's cotangent (use conj(grad)
// for gradient descent, as JAX's docs say).
#pragma once

#include "ir/Extension.h"
#include "ir/Program.h"

#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

namespace einstage::ad {

/// Forward mode. Parameters: the program's own, then one tangent per `wrt` entry (same type). Outputs: the program's
/// outputs, then their tangents (zeros materialised only here, at the outputs).
Program jvp(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry = nullptr);

/// The result of linearize: `primal` computes the outputs and the residuals the linear part needs; `linear` is the
/// derivative as a program linear in its tangent inputs.
struct Linearized {
  /// Parameters: the program's own. Outputs: the program's outputs, then the residuals (num_residuals of them).
  Program primal;
  /// Parameters: the residuals (in primal's order), then one tangent per `wrt` entry. Outputs: the output tangents.
  /// Linear in the tangents (transpose it with linear_inputs = the last wrt.size() parameters).
  Program linear;
  int num_outputs = 0;
  int num_residuals = 0;
};

/// jvp followed by partial evaluation (JAX's linearize): every instruction that does not depend on a tangent goes to
/// `primal`, the rest to `linear`; primal values the linear part reads become residuals (constants are recomputed
/// in `linear` instead of being passed).
Linearized linearize(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry = nullptr);

/// Transposes a program that is linear in the parameters `linear_inputs` (indices). Parameters of the result: the
/// other parameters (in order), then one cotangent `ct_<k>` per output. Outputs: the cotangent of each linear input,
/// in the order of linear_inputs. An instruction that depends on a linear input must be linear in it (mul of two
/// linear values, exp of one, ... fail naming the op); instructions that do not are computed forward first.
Program transpose(const Program& linear_program, std::span<const int> linear_inputs,
                  const ExtensionRegistry* registry = nullptr);

/// Reverse mode = linearize + transpose, inlined into one program. Parameters: the program's own, then one
/// cotangent `ct_<k>` per output (same type). Outputs: the program's outputs, then the cotangent of each `wrt`
/// parameter.
Program vjp(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry = nullptr);

/// The gradient of a program with one real scalar output (f32 or f64). Parameters: the program's own. Outputs: one
/// gradient per `wrt` entry, each of its parameter's type (JAX's convention for complex parameters, see above).
Program grad(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry = nullptr);
/// Like grad, with the value first: outputs (value, gradients...).
Program value_and_grad(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry = nullptr);

// ---- one output, or some outputs, of a program with several (no retracing) ----
// `ad::grad(f, 1, {0}, &registry)` differentiates output 1 of f; `ad::vjp(f, ad::Outputs{0, 2}, {0}, &registry)`
// takes cotangents for outputs 0 and 2 only (named ct_0 and ct_2, after the outputs they belong to). The other
// outputs and what only they need are dropped first (select_outputs). An index out of range, or one selected twice,
// fails naming the program, its outputs and the valid range.

/// Output indices of a program (distinct, in any order; the results follow that order).
struct Outputs {
  explicit Outputs(std::initializer_list<int> indices) : indices(indices) {}
  explicit Outputs(std::vector<int> indices) : indices(std::move(indices)) {}
  std::vector<int> indices;
};

/// `program` with only the outputs `outputs` (in that order), instructions only the others need removed (DCE; the
/// program's shape constraints are kept, so it accepts the same inputs). `transform` names the caller in errors.
Program select_outputs(const Program& program, const Outputs& outputs, std::string_view transform = "select_outputs");
/// The gradient of output `output` of `program` (a real scalar), the other outputs ignored. Parameters and outputs as
/// grad's.
Program grad(const Program& program, int output, std::span<const int> wrt, const ExtensionRegistry* registry = nullptr);
/// Like grad of one output, with that output's value first.
Program value_and_grad(const Program& program, int output, std::span<const int> wrt,
                       const ExtensionRegistry* registry = nullptr);
/// vjp of the selected outputs: parameters the program's own, then one cotangent `ct_<k>` per selected output k;
/// outputs the selected outputs, then the cotangent of each `wrt` parameter.
Program vjp(const Program& program, const Outputs& outputs, std::span<const int> wrt,
            const ExtensionRegistry* registry = nullptr);

// Brace lists of indices (`ad::grad(f, {0, 1}, &registry)`): std::span cannot bind to one in C++20.
inline Program jvp(const Program& program, std::initializer_list<int> wrt, const ExtensionRegistry* registry = nullptr) {
  return jvp(program, std::span<const int>(wrt.begin(), wrt.size()), registry);
}
inline Linearized linearize(const Program& program, std::initializer_list<int> wrt,
                            const ExtensionRegistry* registry = nullptr) {
  return linearize(program, std::span<const int>(wrt.begin(), wrt.size()), registry);
}
inline Program transpose(const Program& linear_program, std::initializer_list<int> linear_inputs,
                         const ExtensionRegistry* registry = nullptr) {
  return transpose(linear_program, std::span<const int>(linear_inputs.begin(), linear_inputs.size()), registry);
}
inline Program vjp(const Program& program, std::initializer_list<int> wrt, const ExtensionRegistry* registry = nullptr) {
  return vjp(program, std::span<const int>(wrt.begin(), wrt.size()), registry);
}
inline Program grad(const Program& program, std::initializer_list<int> wrt, const ExtensionRegistry* registry = nullptr) {
  return grad(program, std::span<const int>(wrt.begin(), wrt.size()), registry);
}
inline Program value_and_grad(const Program& program, std::initializer_list<int> wrt,
                              const ExtensionRegistry* registry = nullptr) {
  return value_and_grad(program, std::span<const int>(wrt.begin(), wrt.size()), registry);
}

inline Program grad(const Program& program, int output, std::initializer_list<int> wrt,
                    const ExtensionRegistry* registry = nullptr) {
  return grad(program, output, std::span<const int>(wrt.begin(), wrt.size()), registry);
}
inline Program value_and_grad(const Program& program, int output, std::initializer_list<int> wrt,
                              const ExtensionRegistry* registry = nullptr) {
  return value_and_grad(program, output, std::span<const int>(wrt.begin(), wrt.size()), registry);
}
inline Program vjp(const Program& program, const Outputs& outputs, std::initializer_list<int> wrt,
                   const ExtensionRegistry* registry = nullptr) {
  return vjp(program, outputs, std::span<const int>(wrt.begin(), wrt.size()), registry);
}

/// Appends `program`'s instructions to `b` with its parameters bound to `args` (values of b, one per parameter),
/// re-running the type rules (so args may be more concrete than the parameters), and copies its program-level shape
/// constraints. Returns the values of its outputs. The building block that lets transformations compose.
std::vector<Value> inline_program(Builder& b, const Program& program, std::span<const Value> args);

}  // namespace einstage::ad
