#include "extensions/linalg/TraceLinalg.h"

namespace einstage::linalg {

namespace {

std::vector<TracedTensor> append(TraceContext& ctx, LinalgPayload payload, const TracedTensor& a) {
  return ctx.extension_results(std::make_shared<LinalgPayload>(std::move(payload)), std::span(&a, 1));
}

}  // namespace

SvdFactors svd(TraceContext& ctx, const TracedTensor& a, const SvdOptions& options) {
  auto r = append(ctx, LinalgPayload(LinalgKind::svd, options.full, options.eps, options.keep), a);
  return {r[0], r[1], r[2]};
}

QrFactors qr(TraceContext& ctx, const TracedTensor& a) {
  auto r = append(ctx, LinalgPayload(LinalgKind::qr), a);
  return {r[0], r[1]};
}

EighFactors eigh(TraceContext& ctx, const TracedTensor& a, const EighOptions& options) {
  auto r = append(ctx, LinalgPayload(LinalgKind::eigh, false, options.eps, options.keep), a);
  return {r[0], r[1]};
}

EighFactors eigh(TraceContext& ctx, const TracedTensor& a, double eps) { return eigh(ctx, a, {.eps = eps}); }

TracedTensor inv_upper(TraceContext& ctx, const TracedTensor& r) {
  return append(ctx, LinalgPayload(LinalgKind::inv_upper), r)[0];
}

SvdFactors svd(const TracedTensor& a, const SvdOptions& options) { return svd(a.context(), a, options); }
QrFactors qr(const TracedTensor& a) { return qr(a.context(), a); }
EighFactors eigh(const TracedTensor& a, double eps) { return eigh(a.context(), a, eps); }
TracedTensor inv_upper(const TracedTensor& r) { return inv_upper(r.context(), r); }

}  // namespace einstage::linalg
