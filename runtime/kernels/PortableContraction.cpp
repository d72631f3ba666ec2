// The portable GETT: contract_portable() for every dtype, over arbitrary strides.
//
// Two paths, chosen from the problem's extents only (never from the thread count, so the bits never depend on it):
//  - direct: small or skinny problems (a matrix-vector product, an outer product, a pure batch of elementwise
//    products). Each unit of work is (batch entry, one n, a chunk of m); it accumulates a contiguous column buffer
//    over k in order 0..K-1 and stores it once.
//  - blocked: cache tiles of C (MC x NC per batch entry) are the units of work. Each tile walks k in KC blocks, packs
//    its A block into MR-row micro-panels and its B block into NR-column micro-panels straight through their
//    strides (offset tables, no index arithmetic), and runs a register-blocked micro-kernel that the compiler
//    vectorises. A tile's elements are summed within each KC block from zero and the blocks are added to C in order.
// Complex values are packed as split real / imaginary planes and multiplied with the plain formula
// (ar*br - ai*bi, ar*bi + ai*br), not std::complex's operator*, whose NaN recovery blocks vectorisation.
// i64 arithmetic is done in uint64_t, i.e. wraps modulo 2^64 like NumPy instead of being undefined.
#include "ir/Size.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Contraction.h"
#include "runtime/kernels/Strided.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace einstage {
namespace {

using kernels::offset_table;

template <typename T> struct Elem {
  using P = T;  // packed / arithmetic element
  static constexpr int planes = 1;
};
template <> struct Elem<int64_t> {
  using P = uint64_t;
  static constexpr int planes = 1;
};
template <> struct Elem<c64> {
  using P = float;
  static constexpr int planes = 2;
};
template <> struct Elem<c128> {
  using P = double;
  static constexpr int planes = 2;
};

// Register tile (MR x NR), cache blocks (MC x KC of A, KC x NC of B) and the direct path's m chunk.
template <typename T> struct Tiles;
template <> struct Tiles<float> { static constexpr int MR = 8, NR = 4, MC = 128, KC = 256, NC = 256, MD = 1024; };
template <> struct Tiles<double> { static constexpr int MR = 4, NR = 4, MC = 96, KC = 256, NC = 256, MD = 512; };
template <> struct Tiles<int64_t> { static constexpr int MR = 4, NR = 4, MC = 96, KC = 256, NC = 256, MD = 512; };
template <> struct Tiles<c64> { static constexpr int MR = 8, NR = 2, MC = 96, KC = 128, NC = 128, MD = 512; };
template <> struct Tiles<c128> { static constexpr int MR = 4, NR = 2, MC = 64, KC = 128, NC = 128, MD = 256; };

// Below this many multiply-adds per batch entry, or when m, n or k is skinny, the direct path wins.
constexpr int64_t kDirectMacs = 32 * 32 * 32;
// A parallel chunk should carry at least this many multiply-adds, so tiny problems stay on one thread.
constexpr int64_t kMinChunkMacs = 1 << 15;

struct Layout {
  int64_t M = 1, N = 1, K = 1, B = 1;
  std::vector<int64_t> am, cm, bn, cn, ak, bk;  // offset tables of the m, n, k groups
  std::vector<int64_t> bext, bsa, bsb, bsc;      // batch axes (extent > 1)
  bool swapped = false;                          // A and B roles exchanged (C^T = B^T A^T)

  void batch_offsets(int64_t b, int64_t& oa, int64_t& ob, int64_t& oc) const {
    oa = ob = oc = 0;
    for (size_t i = 0; i < bext.size(); ++i) {
      int64_t x = b % bext[i];
      b /= bext[i];
      oa += x * bsa[i];
      ob += x * bsb[i];
      oc += x * bsc[i];
    }
  }
};

void group(const std::vector<ContractionProblem::Axis>& axes, int64_t ContractionProblem::Axis::*s1,
           int64_t ContractionProblem::Axis::*s2, int64_t& total, std::vector<int64_t>& t1, std::vector<int64_t>& t2) {
  std::vector<int64_t> ext, st1, st2;
  total = ContractionProblem::group_size(axes, "contract_portable: axis group");
  for (const auto& ax : axes) {
    if (ax.extent == 1) continue;
    ext.push_back(ax.extent);
    st1.push_back(ax.*s1);
    st2.push_back(ax.*s2);
  }
  if (total == 0) return;
  t1 = offset_table(ext, st1);
  t2 = offset_table(ext, st2);
}

// ---- element arithmetic shared by both paths ----

template <typename T> inline typename Elem<T>::P load_re(const T* p, int64_t off) {
  if constexpr (Elem<T>::planes == 2) return reinterpret_cast<const typename Elem<T>::P*>(p)[2 * off];
  else return static_cast<typename Elem<T>::P>(p[off]);
}
template <typename T> inline typename Elem<T>::P load_im(const T* p, int64_t off) {
  return reinterpret_cast<const typename Elem<T>::P*>(p)[2 * off + 1];
}
template <typename T> inline void store(T* c, int64_t off, typename Elem<T>::P re, typename Elem<T>::P im, bool add) {
  if constexpr (Elem<T>::planes == 2) {
    auto* q = reinterpret_cast<typename Elem<T>::P*>(c) + 2 * off;
    if (add) {
      q[0] += re;
      q[1] += im;
    } else {
      q[0] = re;
      q[1] = im;
    }
  } else if constexpr (std::is_same_v<T, int64_t>) {
    (void)im;
    uint64_t v = add ? static_cast<uint64_t>(c[off]) + re : re;
    c[off] = static_cast<int64_t>(v);
  } else {
    (void)im;
    c[off] = add ? c[off] + re : re;
  }
}

// ---- direct path ----

template <typename T>
void run_direct(const Layout& L, const T* A, const T* Bm, T* C, bool accumulate, ThreadPool* pool) {
  using P = typename Elem<T>::P;
  constexpr int MD = Tiles<T>::MD;
  const int64_t mchunks = (L.M + MD - 1) / MD;
  const int64_t units = L.B * L.N * mchunks;
  bool a_contig = true;  // A's m offsets are 0, 1, 2, ...: the inner loop is a plain vector loop
  for (int64_t i = 0; i < L.M && a_contig; ++i) a_contig = L.am[i] == i;
  const int64_t work = std::max<int64_t>(1, L.K * std::min<int64_t>(L.M, MD));
  parallel_for(pool, units, [&](int64_t u0, int64_t u1) {
    alignas(64) P tr[MD];
    alignas(64) P ti[Elem<T>::planes == 2 ? MD : 1];
    int64_t mc = u0 % mchunks, n = (u0 / mchunks) % L.N, b = u0 / (mchunks * L.N);
    int64_t oa, ob, oc;
    L.batch_offsets(b, oa, ob, oc);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t m0 = mc * MD, len = std::min<int64_t>(MD, L.M - m0);
      std::fill(tr, tr + len, P(0));
      if constexpr (Elem<T>::planes == 2) std::fill(ti, ti + len, P(0));
      const int64_t* am = L.am.data() + m0;
      for (int64_t k = 0; k < L.K; ++k) {
        const int64_t boff = ob + L.bk[k] + L.bn[n];
        const T* ap = A + oa + L.ak[k];
        if constexpr (Elem<T>::planes == 2) {
          const P br = load_re(Bm, boff), bi = load_im(Bm, boff);
          const P* a2 = reinterpret_cast<const P*>(ap);
          if (a_contig) {
            a2 += 2 * m0;
            for (int64_t i = 0; i < len; ++i) {
              const P ar = a2[2 * i], ai = a2[2 * i + 1];
              tr[i] += ar * br - ai * bi;
              ti[i] += ar * bi + ai * br;
            }
          } else {
            for (int64_t i = 0; i < len; ++i) {
              const P ar = a2[2 * am[i]], ai = a2[2 * am[i] + 1];
              tr[i] += ar * br - ai * bi;
              ti[i] += ar * bi + ai * br;
            }
          }
        } else {
          const P bv = load_re(Bm, boff);
          if (a_contig) {
            ap += m0;
            for (int64_t i = 0; i < len; ++i) tr[i] += static_cast<P>(ap[i]) * bv;
          } else {
            for (int64_t i = 0; i < len; ++i) tr[i] += static_cast<P>(ap[am[i]]) * bv;
          }
        }
      }
      const int64_t cbase = oc + L.cn[n];
      const int64_t* cm = L.cm.data() + m0;
      if constexpr (Elem<T>::planes == 2) {
        for (int64_t i = 0; i < len; ++i) store(C, cbase + cm[i], tr[i], ti[i], accumulate);
      } else {
        for (int64_t i = 0; i < len; ++i) store(C, cbase + cm[i], tr[i], P(0), accumulate);
      }
      // next unit
      if (++mc == mchunks) {
        mc = 0;
        if (++n == L.N) {
          n = 0;
          ++b;
          if (u + 1 < u1) L.batch_offsets(b, oa, ob, oc);
        }
      }
    }
  }, (kMinChunkMacs + work - 1) / work);
}

// ---- blocked path ----

template <typename T, int MR, int NR>
inline void micro_real(int64_t kc, const typename Elem<T>::P* __restrict a, const typename Elem<T>::P* __restrict b,
                       typename Elem<T>::P (&acc)[NR][MR]) {
  using P = typename Elem<T>::P;
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = P(0);
  for (int64_t p = 0; p < kc; ++p) {
    const P* ap = a + p * MR;
    const P* bp = b + p * NR;
    for (int j = 0; j < NR; ++j) {
      const P bj = bp[j];
      for (int i = 0; i < MR; ++i) acc[j][i] += ap[i] * bj;
    }
  }
}

template <typename T, int MR, int NR>
inline void micro_complex(int64_t kc, const typename Elem<T>::P* __restrict a, const typename Elem<T>::P* __restrict b,
                          typename Elem<T>::P (&re)[NR][MR], typename Elem<T>::P (&im)[NR][MR]) {
  using P = typename Elem<T>::P;
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < MR; ++i) re[j][i] = im[j][i] = P(0);
  for (int64_t p = 0; p < kc; ++p) {
    const P* ar = a + p * 2 * MR;
    const P* ai = ar + MR;
    const P* br = b + p * 2 * NR;
    const P* bi = br + NR;
    for (int j = 0; j < NR; ++j) {
      const P x = br[j], y = bi[j];
      for (int i = 0; i < MR; ++i) {
        re[j][i] += ar[i] * x - ai[i] * y;
        im[j][i] += ar[i] * y + ai[i] * x;
      }
    }
  }
}

template <typename T>
void run_blocked(const Layout& L, const T* A, const T* Bm, T* C, bool accumulate, ThreadPool* pool) {
  using P = typename Elem<T>::P;
  using Ti = Tiles<T>;
  constexpr int MR = Ti::MR, NR = Ti::NR, MC = Ti::MC, NC = Ti::NC, KC = Ti::KC, PL = Elem<T>::planes;
  const int64_t mt = (L.M + MC - 1) / MC, nt = (L.N + NC - 1) / NC;
  const int64_t units = L.B * mt * nt;
  const int64_t work = int64_t(MC) * NC * L.K;
  parallel_for(pool, units, [&](int64_t u0, int64_t u1) {
    std::vector<P> apack(static_cast<size_t>(MC) * KC * PL), bpack(static_cast<size_t>(NC) * KC * PL);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t ic = u % mt, jc = (u / mt) % nt, b = u / (mt * nt);
      int64_t oa, ob, oc;
      L.batch_offsets(b, oa, ob, oc);
      const int64_t m0 = ic * MC, mlen = std::min<int64_t>(MC, L.M - m0);
      const int64_t n0 = jc * NC, nlen = std::min<int64_t>(NC, L.N - n0);
      for (int64_t p0 = 0; p0 < L.K; p0 += KC) {
        const int64_t kc = std::min<int64_t>(KC, L.K - p0);
        // Pack A: micro-panel r holds rows m0 + r*MR .. +MR, as kc groups of MR (per plane), zero-padded.
        for (int64_t r = 0; r * MR < mlen; ++r) {
          P* dst = apack.data() + r * MR * kc * PL;
          const int64_t rows = std::min<int64_t>(MR, mlen - r * MR);
          const int64_t* am = L.am.data() + m0 + r * MR;
          for (int64_t p = 0; p < kc; ++p) {
            const T* src = A + oa + L.ak[p0 + p];
            P* d = dst + p * MR * PL;
            int64_t i = 0;
            for (; i < rows; ++i) {
              d[i] = load_re(src, am[i]);
              if constexpr (PL == 2) d[MR + i] = load_im(src, am[i]);
            }
            for (; i < MR; ++i) {
              d[i] = P(0);
              if constexpr (PL == 2) d[MR + i] = P(0);
            }
          }
        }
        // Pack B: micro-panel s holds columns n0 + s*NR .. +NR, as kc groups of NR (per plane), zero-padded.
        for (int64_t s = 0; s * NR < nlen; ++s) {
          P* dst = bpack.data() + s * NR * kc * PL;
          const int64_t cols = std::min<int64_t>(NR, nlen - s * NR);
          const int64_t* bn = L.bn.data() + n0 + s * NR;
          for (int64_t p = 0; p < kc; ++p) {
            const T* src = Bm + ob + L.bk[p0 + p];
            P* d = dst + p * NR * PL;
            int64_t j = 0;
            for (; j < cols; ++j) {
              d[j] = load_re(src, bn[j]);
              if constexpr (PL == 2) d[NR + j] = load_im(src, bn[j]);
            }
            for (; j < NR; ++j) {
              d[j] = P(0);
              if constexpr (PL == 2) d[NR + j] = P(0);
            }
          }
        }
        const bool add = accumulate || p0 > 0;
        for (int64_t s = 0; s * NR < nlen; ++s) {
          const int64_t cols = std::min<int64_t>(NR, nlen - s * NR);
          const P* bpanel = bpack.data() + s * NR * kc * PL;
          for (int64_t r = 0; r * MR < mlen; ++r) {
            const int64_t rows = std::min<int64_t>(MR, mlen - r * MR);
            const P* apanel = apack.data() + r * MR * kc * PL;
            const int64_t* cm = L.cm.data() + m0 + r * MR;
            const int64_t* cn = L.cn.data() + n0 + s * NR;
            if constexpr (PL == 2) {
              P re[NR][MR], im[NR][MR];
              micro_complex<T, MR, NR>(kc, apanel, bpanel, re, im);
              for (int64_t j = 0; j < cols; ++j)
                for (int64_t i = 0; i < rows; ++i) store(C, oc + cm[i] + cn[j], re[j][i], im[j][i], add);
            } else {
              P acc[NR][MR];
              micro_real<T, MR, NR>(kc, apanel, bpanel, acc);
              for (int64_t j = 0; j < cols; ++j)
                for (int64_t i = 0; i < rows; ++i) store(C, oc + cm[i] + cn[j], acc[j][i], P(0), add);
            }
          }
        }
      }
    }
  }, (kMinChunkMacs + work - 1) / work);
}

// C = 0 over every (m, n, batch) point: the k extent is 0.
template <typename T>
void zero_output(const ContractionProblem& p, T* C) {
  std::vector<int64_t> shape, stride;
  for (const auto* g : {&p.m, &p.n, &p.batch})
    for (const auto& ax : *g) {
      shape.push_back(ax.extent);
      stride.push_back(ax.stride_c);
    }
  auto nest = kernels::make_loop_nest<1>(shape, {&stride});
  kernels::for_each_run(nest, 0, nest.outer_count(), [&](const std::array<int64_t, 1>& off, int64_t n,
                                                         const std::array<int64_t, 1>& st) {
    for (int64_t i = 0; i < n; ++i) C[off[0] + i * st[0]] = T(0);
  });
}

template <typename T>
void run(const ContractionProblem& p, ThreadPool* pool) {
  using CA = ContractionProblem::Axis;
  Layout L;
  group(p.m, &CA::stride_a, &CA::stride_c, L.M, L.am, L.cm);
  group(p.n, &CA::stride_b, &CA::stride_c, L.N, L.bn, L.cn);
  group(p.k, &CA::stride_a, &CA::stride_b, L.K, L.ak, L.bk);
  L.B = ContractionProblem::group_size(p.batch, "contract_portable: batch axes");
  for (const auto& ax : p.batch) {
    if (ax.extent == 1) continue;
    L.bext.push_back(ax.extent);
    L.bsa.push_back(ax.stride_a);
    L.bsb.push_back(ax.stride_b);
    L.bsc.push_back(ax.stride_c);
  }
  if (L.M == 0 || L.N == 0 || L.B == 0) return;  // C has no elements
  T* C = static_cast<T*>(p.c);
  if (L.K == 0) {  // empty sums
    if (!p.accumulate) zero_output(p, C);
    return;
  }
  const T* A = static_cast<const T*>(p.a);
  const T* Bm = static_cast<const T*>(p.b);
  const bool skinny = std::min(L.M, L.N) < 8 || L.K < 4;
  // m*n*k may exceed 64 bits where operands broadcast (stride 0) while A, B and C fit: such a step would not finish.
  const int64_t macs = checked_mul(checked_mul(L.M, L.N, "contract_portable: m*n"), L.K,
                                   "contract_portable: multiply-adds per batch entry (m*n*k)");
  if (skinny || macs <= kDirectMacs) {
    // The direct path runs its inner loop over m: make m the longer of the two free groups. Multiplication and
    // addition are commutative in IEEE arithmetic, so exchanging the roles of A and B does not change any bit.
    if (L.N > L.M) {
      std::swap(L.M, L.N);
      std::swap(L.am, L.bn);
      std::swap(L.cm, L.cn);
      std::swap(L.ak, L.bk);
      std::swap(L.bsa, L.bsb);
      std::swap(A, Bm);
      L.swapped = true;
    }
    run_direct<T>(L, A, Bm, C, p.accumulate, pool);
  } else {
    run_blocked<T>(L, A, Bm, C, p.accumulate, pool);
  }
}

}  // namespace

void contract_portable(const ContractionProblem& p, ThreadPool* pool) {
  p.check("contract_portable");
  dispatch_dtype(p.dtype, [&](auto tag) { run<decltype(tag)>(p, pool); });
}

}  // namespace einstage
