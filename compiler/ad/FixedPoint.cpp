// The fixed-point adjoint (FixedPoint.h): the step's programs are made by linearize + transpose once; the adjoint
// system (I − ∂f/∂x)ᵀ w = x̄ is solved matrix-free by Eigen's GMRES with the truncated Neumann series as fallback,
// over the state tensors flattened to one real vector (complex entries as two reals: vjp's adjoint is for the real
// inner product, so the operator is R-linear).
#include "compiler/ad/FixedPoint.h"

#include "compiler/ad/Ad.h"
#include "compiler/ad/Util.h"
#include "ir/Error.h"
#include "ir/Quote.h"

#include <Eigen/Core>
#include <unsupported/Eigen/IterativeSolvers>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>

namespace einstage::ad {
namespace {
using Vec = Eigen::VectorXd;
using Apply = std::function<Vec(const Vec&)>;
class AdjointOperator;
}  // namespace
}  // namespace einstage::ad

// Eigen's matrix-free pattern (its "Matrix-free solvers" page): an operator type GMRES multiplies vectors with.
namespace Eigen::internal {
template <>
struct traits<einstage::ad::AdjointOperator> : public traits<Eigen::SparseMatrix<double>> {};
}  // namespace Eigen::internal

namespace einstage::ad {
namespace {

class AdjointOperator : public Eigen::EigenBase<AdjointOperator> {
 public:
  using Scalar = double;
  using RealScalar = double;
  using StorageIndex = int;
  enum { ColsAtCompileTime = Eigen::Dynamic, MaxColsAtCompileTime = Eigen::Dynamic, IsRowMajor = false };

  AdjointOperator(Eigen::Index size, const Apply* apply) : size_(size), apply_(apply) {}
  Eigen::Index rows() const { return size_; }
  Eigen::Index cols() const { return size_; }
  template <typename Rhs>
  Eigen::Product<AdjointOperator, Rhs, Eigen::AliasFreeProduct> operator*(const Eigen::MatrixBase<Rhs>& x) const {
    return Eigen::Product<AdjointOperator, Rhs, Eigen::AliasFreeProduct>(*this, x.derived());
  }
  Vec apply(const Vec& v) const { return (*apply_)(v); }

 private:
  Eigen::Index size_;
  const Apply* apply_;
};

}  // namespace
}  // namespace einstage::ad

namespace Eigen::internal {
template <typename Rhs>
struct generic_product_impl<einstage::ad::AdjointOperator, Rhs, SparseShape, DenseShape, GemvProduct>
    : generic_product_impl_base<einstage::ad::AdjointOperator, Rhs,
                                generic_product_impl<einstage::ad::AdjointOperator, Rhs>> {
  using Scalar = typename Product<einstage::ad::AdjointOperator, Rhs>::Scalar;
  template <typename Dest>
  static void scaleAndAddTo(Dest& dst, const einstage::ad::AdjointOperator& lhs, const Rhs& rhs,
                            const Scalar& alpha) {
    einstage::ad::Vec x = rhs;
    dst.noalias() += alpha * lhs.apply(x);
  }
};
}  // namespace Eigen::internal

namespace einstage::ad {

std::string_view to_string(FixedPointMethod method) {
  switch (method) {
    case FixedPointMethod::none: return "none";
    case FixedPointMethod::gmres: return "gmres";
    case FixedPointMethod::neumann: return "neumann";
  }
  return "?";
}

namespace {

constexpr std::string_view kWhat = "fixed_point_adjoint";

int64_t real_size(const Tensor& t) { return t.numel() * (is_complex(t.dtype()) ? 2 : 1); }

// Appends t's entries (column-major; complex as re, im) to v from position `at`.
void flatten_into(const Tensor& t, Vec& v, Eigen::Index at) {
  auto put = [&](const auto& values) {
    for (const auto& x : values) {
      if constexpr (std::is_floating_point_v<std::decay_t<decltype(x)>>) {
        v[at++] = double(x);
      } else {
        v[at++] = double(x.real());
        v[at++] = double(x.imag());
      }
    }
  };
  switch (t.dtype()) {
    case DType::f32: put(t.to_col_major<float>()); break;
    case DType::f64: put(t.to_col_major<double>()); break;
    case DType::c64: put(t.to_col_major<std::complex<float>>()); break;
    case DType::c128: put(t.to_col_major<std::complex<double>>()); break;
    default: fail(ErrorKind::dtype, "{}: a state tensor has dtype {}; only f32, f64, c64 and c128 have cotangents",
                  kWhat, name(t.dtype()));
  }
}

Vec flatten(std::span<const Tensor> ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += real_size(t);
  Vec v(n);
  Eigen::Index at = 0;
  for (const Tensor& t : ts) {
    flatten_into(t, v, at);
    at += real_size(t);
  }
  return v;
}

template <typename T>
Tensor real_tensor(const Shape& shape, const double* p, int64_t n) {
  std::vector<T> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[i] = T(p[i]);
  return Tensor::from_col_major<T>(shape, data);
}
template <typename R>
Tensor complex_tensor(const Shape& shape, const double* p, int64_t n) {
  std::vector<std::complex<R>> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[i] = {R(p[2 * i]), R(p[2 * i + 1])};
  return Tensor::from_col_major<std::complex<R>>(shape, data);
}

// The inverse of flatten: tensors shaped and typed like `like`.
std::vector<Tensor> unflatten(const Vec& v, std::span<const Tensor> like) {
  std::vector<Tensor> out;
  const double* p = v.data();
  for (const Tensor& t : like) {
    int64_t n = t.numel();
    switch (t.dtype()) {
      case DType::f32: out.push_back(real_tensor<float>(t.shape(), p, n)); break;
      case DType::f64: out.push_back(real_tensor<double>(t.shape(), p, n)); break;
      case DType::c64: out.push_back(complex_tensor<float>(t.shape(), p, n)); break;
      default: out.push_back(complex_tensor<double>(t.shape(), p, n)); break;
    }
    p += real_size(t);
  }
  return out;
}

// `program` returning only its outputs [begin, end), simplified (what the other outputs alone needed goes).
Program select_outputs(const Program& program, size_t begin, size_t end, const std::string& name,
                       const ExtensionRegistry* registry) {
  Builder b(name, registry);
  std::vector<Value> args;
  for (const Parameter& p : program.params) args.push_back(b.parameter(p.name, p.value.type));
  std::vector<Value> outs = inline_program(b, program, args);
  return detail::clean_up(b.finish(std::vector<Value>(outs.begin() + long(begin), outs.begin() + long(end))));
}

double relative(double num, double den) { return den > 0 ? num / den : num; }

}  // namespace

FixedPointAdjoint::FixedPointAdjoint(const Program& step, std::span<const int> state, std::span<const int> wrt,
                                     const ExtensionRegistry* registry, ProgramPreparer prepare,
                                     FixedPointOptions options)
    : name_(step.name), state_(state.begin(), state.end()), wrt_(wrt.begin(), wrt.end()) {
  detail::check_parameter_indices(step, state, kWhat, "state");
  detail::check_parameter_indices(step, wrt, kWhat, "wrt");
  if (state.empty())
    fail(ErrorKind::invalid_argument, "{}: no state parameter given for @{}; pass the indices of the parameters the "
         "step maps to its first outputs", kWhat, shown_arg(step.name));
  for (int s : state)
    for (int w : wrt)
      if (s == w)
        fail(ErrorKind::invalid_argument, "{}: parameter {} ('{}') of @{} is both a state parameter and in wrt; list "
             "it in one of them (the state is what the step iterates, wrt what the fixed point depends on)", kWhat, s,
             shown_arg(step.params[s].name), shown_arg(step.name));
  if (step.outputs.size() < state.size())
    fail(ErrorKind::invalid_argument, "{}: @{} has {} outputs but {} state parameters; its first outputs must be the "
         "new values of the state parameters, in the order of `state`", kWhat, shown_arg(step.name),
         step.outputs.size(), state.size());
  for (size_t k = 0; k < state.size(); ++k) {
    const Parameter& p = step.params[state[k]];
    if (!(step.outputs[k].type == p.value.type))
      fail(ErrorKind::shape, "{}: output {} of @{} has type {} but state parameter '{}' (index {}) has {}; the "
           "step's first outputs must be the new values of the state parameters, in the order of `state`", kWhat, k,
           shown_arg(step.name), step.outputs[k].type, shown_arg(p.name), state[k], p.value.type.to_string());
  }
  if (!prepare)
    fail(ErrorKind::invalid_argument, "{}: no ProgramPreparer given for @{}; pass ad::preparer_of(runtime)", kWhat,
         shown_arg(step.name));
  for (const Parameter& p : step.params) {
    param_types_.push_back(p.value.type);
    param_names_.push_back(p.name);
  }
  set_options(options);

  const size_t n = state.size(), m = wrt.size();
  Program states_only = step.outputs.size() == n ? step : select_outputs(step, 0, n, step.name, registry);
  std::vector<int> all(state_);
  all.insert(all.end(), wrt_.begin(), wrt_.end());
  Linearized lin = linearize(states_only, all, registry);
  num_residuals_ = lin.num_residuals;
  std::vector<int> tangents(all.size());
  std::iota(tangents.begin(), tangents.end(), lin.num_residuals);
  Program back = transpose(lin.linear, tangents, registry);  // (residuals, ct per state) -> (x̄..., θ̄...)
  primal_ = std::move(lin.primal);
  state_adjoint_ = detail::finish_public(select_outputs(back, 0, n, step.name + "_state_adjoint", registry), registry);
  wrt_adjoint_ = detail::finish_public(select_outputs(back, n, n + m, step.name + "_wrt_adjoint", registry), registry);
  run_primal_ = prepare(primal_);
  run_state_adjoint_ = prepare(state_adjoint_);
  run_wrt_adjoint_ = prepare(wrt_adjoint_);
}

void FixedPointAdjoint::set_options(const FixedPointOptions& o) {
  if (!(o.tolerance > 0) || o.gmres_max_iterations < 0 || o.gmres_restart < 1 || o.neumann_max_iterations < 0 ||
      !(o.fixed_point_tolerance > 0))
    fail(ErrorKind::invalid_argument, "{}: options for @{} out of range (tolerance {}, gmres_max_iterations {}, "
         "gmres_restart {}, neumann_max_iterations {}, fixed_point_tolerance {}); tolerances must be positive, "
         "iteration counts at least 0 and the restart at least 1", kWhat, shown_arg(name_), o.tolerance,
         o.gmres_max_iterations, o.gmres_restart, o.neumann_max_iterations, o.fixed_point_tolerance);
  options_ = o;
}

FixedPointVjp FixedPointAdjoint::vjp(std::span<const Tensor> inputs, std::span<const Tensor> x_bar) const {
  if (inputs.size() != param_types_.size())
    fail(ErrorKind::invalid_argument, "{}: {} inputs for @{} with {} parameters; pass one per parameter, the state "
         "ones at the fixed point", kWhat, inputs.size(), shown_arg(name_), param_types_.size());
  if (x_bar.size() != state_.size())
    fail(ErrorKind::invalid_argument, "{}: {} state cotangents for @{} with {} state parameters; pass one per state "
         "parameter, in the order of `state`", kWhat, x_bar.size(), shown_arg(name_), state_.size());
  std::vector<Tensor> x;
  for (size_t k = 0; k < state_.size(); ++k) {
    const Tensor& in = inputs[state_[k]];
    x.push_back(in);
    if (x_bar[k].dtype() != in.dtype() || x_bar[k].shape() != in.shape())
      fail(ErrorKind::shape, "{}: the cotangent of state parameter '{}' of @{} is {}{} but its input is {}{}; a "
           "cotangent has its state's dtype and shape", kWhat, shown_arg(param_names_[state_[k]]), shown_arg(name_),
           name(x_bar[k].dtype()), shape_to_string(x_bar[k].shape()), name(in.dtype()), shape_to_string(in.shape()));
  }
  const FixedPointOptions& o = options_;
  FixedPointVjp result;
  FixedPointReport& rep = result.report;

  // The step at x*: the new states (for the fixed-point check) and the residuals of its linearisation.
  std::vector<Tensor> primal = run_primal_(inputs);
  const size_t n = state_.size();
  std::vector<Tensor> residuals(primal.begin() + long(n), primal.end());
  Vec xv = flatten(x);
  Vec fx = flatten(std::span<const Tensor>(primal.data(), n));
  rep.fixed_point_residual = relative((fx - xv).norm(), xv.norm());
  if (!(rep.fixed_point_residual <= o.fixed_point_tolerance))
    fail(ErrorKind::invalid_argument, "{}: the inputs of @{} are not at a fixed point: |f(x) - x| / |x| = {:.3g} over "
         "the state parameters, above fixed_point_tolerance {:.3g}; iterate the step until it converges (with the "
         "gauge fixed, so that x converges element-wise) before differentiating, or raise fixed_point_tolerance",
         kWhat, shown_arg(name_), rep.fixed_point_residual, o.fixed_point_tolerance);

  const Vec b = flatten(x_bar);
  const double bnorm = b.norm();
  // w -> (∂f/∂x)ᵀ w, one run of the transposed step; the operator of the adjoint system is w -> w − (∂f/∂x)ᵀ w.
  std::vector<Tensor> args(residuals);
  auto transposed = [&](const Vec& w) {
    std::vector<Tensor> ws = unflatten(w, x);
    args.resize(residuals.size());
    args.insert(args.end(), ws.begin(), ws.end());
    ++rep.step_runs;
    return flatten(run_state_adjoint_(args));
  };
  Apply apply = [&](const Vec& w) { return Vec(w - transposed(w)); };
  auto true_residual = [&](const Vec& w) { return relative((b - apply(w)).norm(), bnorm); };

  Vec w = Vec::Zero(b.size());
  if (bnorm == 0) {
    rep.converged = true;
  } else {
    Vec best = b;
    double best_residual = std::numeric_limits<double>::infinity();
    FixedPointMethod best_method = FixedPointMethod::none;
    if (o.gmres_max_iterations > 0) {
      AdjointOperator op(b.size(), &apply);
      Eigen::GMRES<AdjointOperator, Eigen::IdentityPreconditioner> gmres;
      gmres.setTolerance(o.tolerance);
      gmres.setMaxIterations(o.gmres_max_iterations);
      gmres.set_restart(o.gmres_restart);
      gmres.compute(op);
      // Eigen's GMRES stops on its own residual estimate, which drifts from the true residual over long runs in
      // rounding; while the true residual is above tolerance and iterations remain, GMRES restarts from its last
      // iterate (iterative refinement: the estimate is reset to the true residual).
      Vec g = b;  // the Neumann series' first term as the first guess
      rep.gmres_residual = std::numeric_limits<double>::infinity();
      while (rep.gmres_iterations < o.gmres_max_iterations) {
        gmres.setMaxIterations(o.gmres_max_iterations - rep.gmres_iterations);
        Vec next = gmres.solveWithGuess(b, g);
        rep.gmres_iterations += std::max(1, int(gmres.iterations()));
        const double r = next.allFinite() ? true_residual(next) : std::numeric_limits<double>::infinity();
        if (!(r < rep.gmres_residual)) break;  // no progress (or not finite): keep the better iterate
        g = std::move(next);
        rep.gmres_residual = r;
        if (r <= o.tolerance) break;
      }
      if (!std::isfinite(rep.gmres_residual)) g = b;
      best = g;
      best_residual = rep.gmres_residual;
      best_method = FixedPointMethod::gmres;
    }
    if (!(best_residual <= o.tolerance) && o.neumann_max_iterations > 0) {
      // w_{k+1} = x̄ + (∂f/∂x)ᵀ w_k; the residual of w_k is |w_{k+1} − w_k|, so w_k is returned with a known residual.
      Vec wk = b;
      double r = std::numeric_limits<double>::infinity();
      int runs = 0;
      while (runs < o.neumann_max_iterations) {
        Vec next = b + transposed(wk);
        ++runs;
        r = relative((next - wk).norm(), bnorm);
        if (!std::isfinite(r) || r <= o.tolerance || runs == o.neumann_max_iterations) break;
        wk = std::move(next);
      }
      rep.neumann_iterations = runs;
      rep.neumann_residual = r;
      if (r < best_residual || best_method == FixedPointMethod::none) {
        best = wk;
        best_residual = r;
        best_method = FixedPointMethod::neumann;
      }
    }
    w = best;
    rep.method = best_method;
    rep.residual = best_residual;
    rep.converged = best_residual <= o.tolerance;
    if (!rep.converged) {
      std::string gm = o.gmres_max_iterations > 0
                           ? fmt::format("GMRES reached {:.3g} after {} iterations (restart {})", rep.gmres_residual,
                                         rep.gmres_iterations, o.gmres_restart)
                           : std::string("GMRES was off (gmres_max_iterations 0)");
      std::string nm = o.neumann_max_iterations > 0
                           ? fmt::format("the Neumann series {:.3g} after {} terms", rep.neumann_residual,
                                         rep.neumann_iterations)
                           : std::string("the Neumann series was off (neumann_max_iterations 0)");
      rep.message = fmt::format(
          "{}: the adjoint system (I - df/dx)^T w = x_bar of @{} did not converge: {} and {}, relative residuals "
          "above tolerance {:.3g}; raise gmres_max_iterations or gmres_restart (the series converges only when every "
          "eigenvalue of df/dx has modulus below 1), or check that the step contracts near its fixed point",
          kWhat, shown_arg(name_), gm, nm, o.tolerance);
      if (o.on_failure == FixedPointFailure::throw_error) fail(ErrorKind::runtime, "{}", rep.message);
    }
  }
  result.adjoint = unflatten(w, x);
  args.resize(residuals.size());
  args.insert(args.end(), result.adjoint.begin(), result.adjoint.end());
  result.cotangents = run_wrt_adjoint_(args);
  return result;
}

}  // namespace einstage::ad
