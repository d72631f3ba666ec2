#include "examples/ising/Trg.h"

#include "compiler/Reassociate.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/linalg/TraceLinalg.h"
#include "ir/Error.h"
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace einstage::ising {
namespace {

void check_sizes(int chi, int steps) {
  if (chi < 1) fail(ErrorKind::invalid_argument, "ising-trg: chi = {} must be at least 1", chi);
  if (steps < 1 || steps > 60)
    fail(ErrorKind::invalid_argument, "ising-trg: steps = {} must be in 1..60 (the lattice has 2^steps sites)", steps);
}

// T[i,j,k,l] = √(λ_i λ_j λ_k λ_l)/2 for even i+j+k+l: the outer product of v = (√(2 cosh β), √(2 sinh β)) with
// itself four times, times the parity mask / 2.
TracedTensor initial_tensor(TraceContext& ctx, const TracedTensor& beta) {
  TracedTensor e0 = ctx.constant(Tensor::from_col_major<double>({2}, {1, 0}));
  TracedTensor e1 = ctx.constant(Tensor::from_col_major<double>({2}, {0, 1}));
  // One statement per traced term: the operands of + are evaluated in an unspecified order (gcc right to left, clang
  // left to right), and the order of evaluation is the order of the program's instructions.
  const TracedTensor odd = sqrt(2.0 * sinh(beta)) * e1;
  const TracedTensor even = sqrt(2.0 * cosh(beta)) * e0;
  TracedTensor v = even + odd;
  std::vector<double> parity(16);
  for (size_t k = 0; k < parity.size(); ++k) parity[k] = std::popcount(k) % 2 == 0 ? 0.5 : 0.0;
  TracedTensor half_even = ctx.constant(Tensor::from_col_major<double>({2, 2, 2, 2}, parity));
  return einsum::einsum(ctx, "i,j,k,l->ijkl", {v, v, v, v}) * half_even;
}

void check_beta(double beta) {
  if (!(beta > 0) || !std::isfinite(beta))
    fail(ErrorKind::invalid_argument, "ising-trg: beta = {} must be positive and finite", beta);
}

// 1 where s > threshold, 0 where s < threshold (sign's 0 gives ½ at exact equality), with a zero derivative.
TracedTensor above_threshold(const TracedTensor& s) {
  return stop_gradient((sign(s - kSingularThreshold) + 1.0) * 0.5);
}

// u [D², D'] times root [D'] along its columns, split to (D, D, D').
TracedTensor split_scaled(const TracedTensor& u, const TracedTensor& root, int64_t d, int64_t dn) {
  return reshape(u * broadcast_in_dim(root, {1}, u.dims()), {Dim(d), Dim(d), Dim(dn)});
}

}  // namespace

std::vector<int64_t> bond_schedule(int chi, int steps) {
  check_sizes(chi, steps);
  std::vector<int64_t> d{2};
  for (int n = 0; n < steps; ++n) d.push_back(std::min<int64_t>(d.back() * d.back(), chi));
  return d;
}

Program trace_ising_trg(const ExtensionRegistry* registry, int chi, int steps) {
  const std::vector<int64_t> dims = bond_schedule(chi, steps);
  TraceContext ctx("ising_trg", registry);
  TracedTensor beta = ctx.parameter("beta", DType::f64, {});
  TracedTensor t = initial_tensor(ctx, beta);
  TracedTensor lnz = ctx.full(TensorType{DType::f64, {}}, 0.0);
  for (int n = 0; n < steps; ++n) {
    const int64_t d = dims[static_cast<size_t>(n)], dn = dims[static_cast<size_t>(n) + 1];
    TracedTensor m = stop_gradient(max(abs(t)));
    t = t / m;
    lnz = lnz + std::ldexp(1.0, -n) * log(m);
    TracedTensor ma = reshape(t, {Dim(d * d), Dim(d * d)});
    TracedTensor mb = reshape(transpose(t, {1, 2, 0, 3}), {Dim(d * d), Dim(d * d)});
    // The dn leading triplets: the thin svd split (keep = dn) when it truncates, so the derivative rules work on
    // [D², dn] blocks instead of [D², D²] matrices (the values and derivatives are those of full svd, then slice).
    const linalg::SvdOptions leading{.keep = dn < d * d ? dn : 0};
    linalg::SvdFactors a = linalg::svd(ctx, ma, leading), b = linalg::svd(ctx, mb, leading);
    const TracedTensor &sa = a.s, &sb = b.s;
    // D' = min(D², χ) statically; modes at or below the threshold in either spectrum become exact zeros.
    // One traced operand per statement where two would be made in one expression (see initial_tensor).
    const TracedTensor keep_b = above_threshold(sb);
    const TracedTensor keep_a = above_threshold(sa);
    TracedTensor keep = keep_a * keep_b;
    const TracedTensor dropped = 1.0 - keep;
    TracedTensor ra = sqrt(sa * keep + dropped) * keep, rb = sqrt(sb * keep + dropped) * keep;
    TracedTensor s1 = split_scaled(a.u, ra, d, dn), s3 = split_scaled(transpose(a.vh, {1, 0}), ra, d, dn);
    TracedTensor s2 = split_scaled(b.u, rb, d, dn), s4 = split_scaled(transpose(b.vh, {1, 0}), rb, d, dn);
    t = einsum::einsum(ctx, "xwu,yxl,yzd,wzr->uldr", {s2, s3, s4, s1});
  }
  lnz = lnz + std::ldexp(1.0, -steps) * log(einsum::einsum(ctx, "xyxy->", {t}));
  return ctx.finish({lnz});
}

IsingTrg::IsingTrg(const Runtime& runtime, int chi, int steps)
    : program_(trace_ising_trg(&runtime.registry(), chi, steps)),
      // Reassociated: the tangents of the svds' discarded blocks ([D², D² − D'] singular vectors) are read only by
      // thin products, so they are never formed (compiler/Reassociate.h).
      derivatives_(runtime.prepare(reassociate_products(
          ad::jvp(ad::value_and_grad(program_, {0}, &runtime.registry()), {0}, &runtime.registry())))),
      pool_(runtime.pool()) {}

TrgValues IsingTrg::evaluate(double beta) const {
  check_beta(beta);
  // Outputs (f, f', then their tangents along dβ = 1: f', f'').
  std::vector<Tensor> out = derivatives_.run({Tensor::scalar<double>(beta), Tensor::scalar<double>(1.0)});
  const double lnz = out.at(0).at<double>({}), d1 = out.at(1).at<double>({}), d2 = out.at(3).at<double>({});
  return {lnz, -d1, beta * beta * d2};
}

std::vector<TrgValues> IsingTrg::evaluate_all(std::span<const double> betas) const {
  for (double beta : betas) check_beta(beta);
  std::vector<TrgValues> values(betas.size());
  // A nested parallel_for runs inline, so the kernels inside each evaluation stay on the thread running it.
  parallel_for(pool_, static_cast<int64_t>(betas.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) values[static_cast<size_t>(i)] = evaluate(betas[static_cast<size_t>(i)]);
  });
  return values;
}

}  // namespace einstage::ising
