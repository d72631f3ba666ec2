// gap_factors' kernel (see GapFactors.h).
#include "extensions/linalg/GapFactors.h"

#include <cstdint>

namespace einstage::linalg {

namespace {

// One batch: columns j of the [ni, nj] grids, F and G exactly as the standard ops computed them (one rounding per
// op), then the halves.
template <typename T>
void fill(const T* si, const T* sj, int64_t ni, int64_t nj, T eps, bool diagonal, T* hp, T* hm) {
  for (int64_t j = 0; j < nj; ++j) {
    const T s = sj[j];
    T* p_col = hp + j * ni;
    T* m_col = hm + j * ni;
    for (int64_t i = 0; i < ni; ++i) {
      const T d = s - si[i], p = s + si[i];
      const T f = d / (d * d + eps), g = p / (p * p + eps);
      p_col[i] = (f + g) * T(0.5);
      m_col[i] = (f - g) * T(0.5);
    }
    if (diagonal && j < ni) {  // F's diagonal is zero by the mask, not by 0 / eps (LinalgAd.h)
      const T p = s + si[j], g = p / (p * p + eps);
      p_col[j] = g * T(0.5);
      m_col[j] = -g * T(0.5);
    }
  }
}

}  // namespace

std::vector<Tensor> gap_factors(const LinalgPayload& payload, const Tensor& si_in, const Tensor& sj_in,
                                ExecutionContext& context) {
  const Tensor si = si_in.contiguous(), sj = sj_in.contiguous();
  const int64_t ni = si.extent(0), nj = sj.extent(0);
  Shape shape{ni, nj};
  shape.insert(shape.end(), si.shape().begin() + 1, si.shape().end());
  const int64_t batches = ni == 0 ? 0 : si.numel() / ni;
  std::vector<Tensor> out{Tensor::empty(si.dtype(), shape, context.scratch()),
                          Tensor::empty(si.dtype(), shape, context.scratch())};
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* a = si.data<T>();
    const T* b = sj.data<T>();
    T* hp = out[0].data<T>();
    T* hm = out[1].data<T>();
    for (int64_t k = 0; k < batches; ++k)
      fill<T>(a + k * ni, b + k * nj, ni, nj, static_cast<T>(payload.eps()), payload.diagonal(), hp + k * ni * nj,
              hm + k * ni * nj);
  };
  if (si.dtype() == DType::f32) run(float{});
  else run(double{});
  return out;
}

}  // namespace einstage::linalg
