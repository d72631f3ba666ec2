// Tracing the decompositions: the calls that append one `einstage.linalg.v1` instruction to a TraceContext and hand
// back its factors. Stage: compiler front end, provided by the linalg extension (compiler/ knows no family).
//
//   auto [u, s, vh] = linalg::svd(ctx, a);            // thin; {.full = true} for the full factors
//   auto [uk, sk, vhk] = linalg::svd(ctx, a, {.keep = 16});  // the 16 leading triplets (truncated; cheap AD)
//   auto [q, r] = linalg::qr(ctx, a);
//   auto [w, v] = linalg::eigh(ctx, h);                // ascending eigenvalues
//   auto [wa, vk] = linalg::eigh(ctx, h, {.keep = 16}); // all eigenvalues, the 16 of largest modulus' vectors
//   TracedTensor rinv = linalg::inv_upper(ctx, r);
//
// The context's registry must have the family registered (register_linalg_semantics, or the module). The type rule
// (LinalgOp.h) checks the operand right away, so a wrong rank or dtype fails here, naming the op. Depends on
// compiler/Trace.h and LinalgOp.h.
#pragma once

#include "compiler/Trace.h"
#include "extensions/linalg/LinalgOp.h"

namespace einstage::linalg {

struct SvdOptions {
  bool full = false;         // U [M, M], Vh [N, N] instead of the thin [M, K], [K, N]
  double eps = kDefaultEps;  // the AD rule's broadening (LinalgAd.h)
  /// 1 <= keep < K: only the `keep` leading triplets, U [M, keep], S [keep], Vh [keep, N] (the split form of
  /// LinalgOp.h; its other results, the discarded triplets, are in the program for the AD rule). Their derivatives
  /// are those of the thin svd followed by a slice, computed without K x K temporaries. 0: the thin svd.
  int64_t keep = 0;
};

struct EighOptions {
  double eps = kDefaultEps;  // the AD rule's broadening (LinalgAd.h)
  /// 1 <= keep <= N: V [N, keep], the eigenvectors of the `keep` eigenvalues of largest modulus in W's (ascending)
  /// order, W still all N eigenvalues (LinalgOp.h); not differentiable. 0: all eigenvectors.
  int64_t keep = 0;
};

struct SvdFactors {
  TracedTensor u, s, vh;
};
struct QrFactors {
  TracedTensor q, r;
};
struct EighFactors {
  TracedTensor w, v;
};

SvdFactors svd(TraceContext& ctx, const TracedTensor& a, const SvdOptions& options = {});
QrFactors qr(TraceContext& ctx, const TracedTensor& a);
EighFactors eigh(TraceContext& ctx, const TracedTensor& a, const EighOptions& options);
EighFactors eigh(TraceContext& ctx, const TracedTensor& a, double eps = kDefaultEps);
/// The inverse of the upper triangle of a square (batch of) matrix, e.g. qr's R.
TracedTensor inv_upper(TraceContext& ctx, const TracedTensor& r);

// The same without the context argument: the operand's own TraceContext (for callables traced by einstage::trace).
SvdFactors svd(const TracedTensor& a, const SvdOptions& options = {});
QrFactors qr(const TracedTensor& a);
EighFactors eigh(const TracedTensor& a, double eps = kDefaultEps);
TracedTensor inv_upper(const TracedTensor& r);

}  // namespace einstage::linalg
