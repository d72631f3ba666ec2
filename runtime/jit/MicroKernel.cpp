#include "runtime/jit/MicroKernel.h"

#include "ir/Error.h"
#include "ir/Hash.h"
#include "runtime/jit/JitLlvm.h"
#include "runtime/jit/TileModel.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace einstage {

std::string MicroKernelSpec::symbol() const {
  return fmt::format("ein_{}_{}_{}x{}_v{}_u{}",
                     lane ? "lkr" : split_c ? "dkc" : split_rows ? "dks" : kmajor_a ? "dkt" : direct ? "dkr" : "ukr", name(dtype), mr, nr,
                     lanes, k_unroll);
}

MicroKernelSpec model_host_micro_kernel(DType real_dtype, bool avx512) {
  // TileModel.h's pick for this vector width on this host's caches: 3 x 8 zmm accumulators + 3 A vectors + 1
  // broadcast (28 of 32) with AVX-512, 2 x 6 ymm + 2 + 1 (15 of 16) with AVX2 on the CPUs einstage was timed on.
  // Made once per process: the GETT driver asks on every call.
  EIN_ASSERT(real_dtype == DType::f32 || real_dtype == DType::f64, "micro-kernels are real");
  static const std::array<MicroKernelSpec, 4> table = [] {
    std::array<MicroKernelSpec, 4> t;
    for (int i = 0; i < 4; ++i)
      t[i] = model_micro_kernel(i & 1 ? DType::f64 : DType::f32, vector_isa((i & 2) != 0), host_cache_info());
    return t;
  }();
  return table[(real_dtype == DType::f64 ? 1 : 0) + (avx512 ? 2 : 0)];
}

MicroKernelSpec default_micro_kernel(DType real_dtype, bool avx512) {
  return model_host_micro_kernel(real_dtype, avx512);
}

MicroKernelSpec default_lane_kernel(DType real_dtype, bool avx512) {
  MicroKernelSpec spec = model_host_micro_kernel(real_dtype, avx512);
  // 4 x 6 accumulators: per k step 4 + 6 vector loads feed 24 FMAs, within two load ports' reach.
  spec.lane = true;
  spec.mr = avx512 ? 4 : 3;
  spec.nr = avx512 ? 6 : 4;
  return spec;
}

namespace {

// The packed path's tiles around `base` (default first).
std::vector<MicroKernelChoice> candidates_around(const MicroKernelSpec& base, DType real_dtype, bool avx512) {
  std::vector<MicroKernelChoice> out = {{base, 1.0}};
  if (!avx512) return out;
  // 2 x 14 / 2 x 12 accumulator vectors reach the same rate as 3 x 8 (measured); 1 x 24 is load-port bound (one A
  // vector per 24 broadcasts), so it only wins when m is tiny.
  MicroKernelSpec wide = base;
  wide.mr = 2 * base.lanes;
  wide.nr = real_dtype == DType::f64 ? 14 : 12;
  if (!(wide == base)) out.push_back({wide, 1.0});
  MicroKernelSpec thin = base;
  thin.mr = base.lanes;
  thin.nr = 24;
  if (!(thin == base)) out.push_back({thin, 0.85});
  return out;
}

}  // namespace

std::vector<MicroKernelChoice> micro_kernel_candidates(const MicroKernelSpec& base) {
  return candidates_around(base, base.dtype, base.lanes * int(size_of(base.dtype)) == 64);
}

std::vector<MicroKernelChoice> micro_kernel_candidates(DType real_dtype, bool avx512) {
  return micro_kernel_candidates(default_micro_kernel(real_dtype, avx512));
}

int vector_registers(bool avx512) { return vector_isa(avx512).registers; }

int narrow_tile_vectors(int nr, bool avx512) {
  const int per_vector = nr + 1 + (avx512 ? 0 : 1);  // its accumulators, the A vector, its row mask without k-masks
  return std::min(4, (vector_registers(avx512) - 1) / per_vector);
}

std::vector<MicroKernelChoice> direct_kernel_candidates(DType real_dtype, bool avx512) {
  // Around the model's tile, never the tuned one: whether a problem runs direct (all of k in one sum) or packed (KC
  // blocks) decides its bits, so it must not depend on tuning.
  std::vector<MicroKernelChoice> out =
      candidates_around(model_host_micro_kernel(real_dtype, avx512), real_dtype, avx512);
  if (avx512) {
    // 2 x 8 accumulator vectors: small m (e.g. 16 rows) without masked-off rows; per k step 2 A loads and 8
    // broadcasts feed 16 FMAs, slightly below the larger tiles' rate.
    MicroKernelSpec mid = out.front().spec;
    mid.mr = 2 * mid.lanes;
    mid.nr = 8;
    out.push_back({mid, 0.95});
  }
  // Narrow tiles for skinny problems (n < 8: matrix-vector and matrix-times-few-vectors): a wider tile would pad the
  // columns to 8 or 14 and repeat the FMAs for nothing. Up to 4 A vectors per k step (narrow_tile_vectors: as many as
  // the register file holds) and 1, 2 or 4 broadcasts; such steps read each element of A once and are bound by
  // memory, not by the FMA rate (efficiency 0.8 keeps these tiles off problems with many columns).
  // One vector of rows (m <= 8 f64 / 16 f32, e.g. a vector times a matrix run transposed): 1 A load and 8
  // broadcasts per 8 FMAs, load-bound at about half the FMA rate, so it wins only where a taller tile is padding.
  if (avx512) {
    MicroKernelSpec one = out.front().spec;
    one.mr = one.lanes;
    one.nr = 8;
    out.push_back({one, 0.6});
  }
  for (int nr : {1, 2, 4}) {
    MicroKernelSpec narrow = out.front().spec;
    narrow.mr = narrow_tile_vectors(nr, avx512) * narrow.lanes;
    narrow.nr = nr;
    out.push_back({narrow, 0.8});
  }
  // The 8 x 24 tile keeps 24 column offsets live in the k loop: in direct form they do not fit in the general
  // registers and the loop spills (measured slower than packing), so direct kernels stop at 16 columns.
  std::erase_if(out, [](const MicroKernelChoice& choice) { return choice.spec.nr > 16; });
  // One k step per loop iteration: unrolled, the code generator strength-reduces every (column, step) B offset into
  // a register of its own, spills them and reloads one per broadcast (16 x 8 with 4 steps: 24 reloads per 64 FMAs);
  // with one step the nr column offsets stay in registers. The k-major tiles below keep the model's unroll, inside
  // their transposed groups. The order of the sum is the same either way (the bits do not change).
  for (MicroKernelChoice& choice : out) choice.spec.direct = true, choice.spec.k_unroll = 1;
  // Split-row variants of the multi-vector tiles, for rows contiguous in A only in runs of one vector (permuted
  // four-index steps such as acbd,ecfd->abef at 8^6): each A vector is one more pointer offset per k step, nearly free.
  const size_t plain = out.size();
  for (size_t i = 0; i < plain; ++i) {
    if (out[i].spec.mr == out[i].spec.lanes) continue;
    MicroKernelChoice split = out[i];
    split.spec.split_rows = true;
    split.efficiency *= 0.97;
    out.push_back(split);
    // And with C's rows in runs of one vector too (a fixed distance apart in C): without it such a step took
    // one-vector tiles, load-bound at about 0.6 of the FMA rate (the grid4x4 gradient's cotangent steps, 8^6).
    split.spec.split_c = true;
    split.efficiency *= 0.97;
    out.push_back(split);
  }
  // k-major tiles: one vector of rows, each group of `lanes` k steps transposed in registers (lanes^2 elements by
  // lanes * log2(lanes) two-source shuffles) before the FMAs. The shuffles share a port with the FMAs, so the widest
  // tile whose accumulators, transposed vectors and shuffle temporaries fit in the registers amortises them best:
  // 16 columns with AVX-512 (16 + 8 + 8 zmm), 8 with AVX2 (8 + 4 + 4 ymm). Plus a half-width tile for 8 columns.
  const int wide_nr = avx512 ? 16 : 8;
  for (int nr : {wide_nr, wide_nr / 2}) {
    MicroKernelChoice kt{out.front().spec, nr == wide_nr ? 0.85 : 0.8};
    kt.spec.mr = kt.spec.lanes;
    kt.spec.nr = nr;
    kt.spec.split_rows = false;
    kt.spec.kmajor_a = true;
    kt.spec.k_unroll = model_host_micro_kernel(real_dtype, avx512).k_unroll;
    out.push_back(kt);
  }
  return out;
}

namespace {

struct Emitter {
  const MicroKernelSpec& spec;
  llvm::LLVMContext& ctx;
  llvm::IRBuilder<> b;
  llvm::Type* elt;
  llvm::VectorType* vec;
  llvm::Type* i64;
  llvm::Function* fn = nullptr;
  int mv;  // vectors per column
  // Direct kernels: B's column offsets, the row masks and the inner k strides (set before the k loops).
  std::vector<llvm::Value*> b_cols;
  std::vector<llvm::Value*> row_masks;
  llvm::Value* a_stride = nullptr;
  llvm::Value* b_stride = nullptr;
  std::vector<llvm::Value*> a_vec_off;  // element offset of each row vector from the tile's first row
  std::vector<llvm::Value*> c_vec_off;  // the same in C (constants v * lanes but for split_c kernels)
  // k-major kernels: the stack buffer of one group's transposed vectors, and the state k_steps reads while it runs
  // the plain direct steps on that buffer (swapped in for the group: one row vector at offset 0, unmasked, stride
  // lanes).
  llvm::Value* group_buffer = nullptr;
  std::vector<llvm::Value*> group_vec_off, group_masks;
  llvm::Value* group_stride = nullptr;
  bool in_group = false;

  Emitter(const MicroKernelSpec& s, llvm::LLVMContext& c)
      : spec(s), ctx(c), b(c),
        elt(s.dtype == DType::f64 ? llvm::Type::getDoubleTy(c) : llvm::Type::getFloatTy(c)),
        vec(llvm::FixedVectorType::get(elt, s.lanes)), i64(llvm::Type::getInt64Ty(c)),
        mv(s.lane ? s.mr : s.mr / s.lanes) {}

  // Elements one k step advances the packed A / B pointers by (not used by direct kernels: k_steps advances them).
  int64_t a_step() const { return spec.lane ? int64_t(spec.mr) * spec.lanes : spec.mr; }
  int64_t b_step() const { return spec.lane ? int64_t(spec.nr) * spec.lanes : spec.nr; }

  llvm::Align elt_align() const { return llvm::Align(size_of(spec.dtype)); }

  llvm::Value* gep(llvm::Value* base, llvm::Value* index) { return b.CreateInBoundsGEP(elt, base, index); }
  llvm::Value* gep(llvm::Value* base, int64_t index) { return gep(base, b.getInt64(index)); }

  // One k step for `steps` consecutive k: acc[v*nr + j] += A[k, v] * B[k, j].
  void k_steps(std::vector<llvm::Value*>& acc, llvm::Value*& pa, llvm::Value*& pb, int steps) {
    llvm::Function* fma = llvm::Intrinsic::getDeclaration(fn->getParent(), llvm::Intrinsic::fma, {vec});
    if (spec.kmajor_a && !in_group) {
      // One step is `lanes` k steps: row r's k vector at pa + a_vec_off[r] (rows >= m_rem are not read), transposed
      // in registers so that t[q] holds the tile's rows at k step q and stored to a stack buffer; then an inner loop
      // runs the plain direct kernel's k steps on that buffer (one vector of rows per k step, B broadcast through
      // its run-time column offsets and stride, like every direct kernel: the same order, the same bits). A loop,
      // not straight-line code: unrolled, the code generator would keep lanes x nr B offsets live and spill them.
      const int L = spec.lanes;
      for (int u = 0; u < steps; ++u) {
        std::vector<llvm::Value*> t(L);
        for (int r = 0; r < L; ++r)
          t[r] = b.CreateMaskedLoad(vec, gep(pa, a_vec_off[r]), elt_align(), row_masks[r],
                                    llvm::Constant::getNullValue(vec));
        // Swap bit `bit` of the row index with bit `bit` of the lane index, for every bit: t[q][r] = A[row r, k q].
        for (int bit = 1; bit < L; bit <<= 1) {
          std::vector<int> lo(L), hi(L);
          for (int e = 0; e < L; ++e) {
            lo[e] = (e & bit) ? L + (e ^ bit) : e;
            hi[e] = (e & bit) ? L + e : (e | bit);
          }
          for (int r = 0; r < L; ++r) {
            if (r & bit) continue;
            llvm::Value* x = t[r];
            llvm::Value* y = t[r | bit];
            t[r] = b.CreateShuffleVector(x, y, lo);
            t[r | bit] = b.CreateShuffleVector(x, y, hi);
          }
        }
        const llvm::Align vec_align(int64_t(L) * int64_t(size_of(spec.dtype)));
        for (int q = 0; q < L; ++q) b.CreateAlignedStore(t[q], gep(group_buffer, int64_t(q) * L), vec_align);
        in_group = true;
        std::swap(a_vec_off, group_vec_off);
        std::swap(row_masks, group_masks);
        std::swap(a_stride, group_stride);
        llvm::Value* pt = group_buffer;
        const int unroll = L % spec.k_unroll == 0 ? spec.k_unroll : 1;
        acc = loop("k.group", b.getInt64(L / unroll), acc, pt, pb, unroll);
        std::swap(a_vec_off, group_vec_off);
        std::swap(row_masks, group_masks);
        std::swap(a_stride, group_stride);
        in_group = false;
        pa = gep(pa, b.CreateMul(a_stride, b.getInt64(L)));
      }
      return;
    }
    if (spec.direct) {
      // pa is A's row pointer for this k, pb B's k pointer (column j at pb + b_cols[j]); both advance by a run-time
      // stride per k step (the inner k level). Pointer increments, not table loads: a loaded offset would make the
      // scheduler hoist every broadcast of a step ahead of its FMAs and spill.
      for (int u = 0; u < steps; ++u) {
        std::vector<llvm::Value*> av(mv);
        for (int v = 0; v < mv; ++v)
          av[v] = b.CreateMaskedLoad(vec, gep(pa, a_vec_off[v]), elt_align(), row_masks[v],
                                     llvm::Constant::getNullValue(vec));
        for (int j = 0; j < spec.nr; ++j) {
          llvm::Value* splat = b.CreateVectorSplat(spec.lanes, b.CreateAlignedLoad(elt, gep(pb, b_cols[j]), elt_align()));
          for (int v = 0; v < mv; ++v) acc[v * spec.nr + j] = b.CreateCall(fma, {av[v], splat, acc[v * spec.nr + j]});
        }
        pa = gep(pa, a_stride);
        pb = gep(pb, b_stride);
      }
      return;
    }
    for (int u = 0; u < steps; ++u) {
      std::vector<llvm::Value*> av(mv);
      for (int v = 0; v < mv; ++v)
        av[v] = b.CreateAlignedLoad(vec, gep(pa, int64_t(u) * a_step() + int64_t(v) * spec.lanes), elt_align());
      for (int j = 0; j < spec.nr; ++j) {
        llvm::Value* splat;
        if (spec.lane) {
          splat = b.CreateAlignedLoad(vec, gep(pb, int64_t(u) * b_step() + int64_t(j) * spec.lanes), elt_align());
        } else {
          llvm::Value* bj = b.CreateAlignedLoad(elt, gep(pb, int64_t(u) * spec.nr + j), elt_align());
          splat = b.CreateVectorSplat(spec.lanes, bj);
        }
        for (int v = 0; v < mv; ++v) acc[v * spec.nr + j] = b.CreateCall(fma, {av[v], splat, acc[v * spec.nr + j]});
      }
    }
  }

  // A counted loop running `count` iterations of `steps` k steps; returns the accumulators after it.
  std::vector<llvm::Value*> loop(const std::string& name, llvm::Value* count, std::vector<llvm::Value*> acc,
                                 llvm::Value*& pa, llvm::Value*& pb, int steps) {
    llvm::BasicBlock* pre = b.GetInsertBlock();
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, name, fn);
    llvm::BasicBlock* after = llvm::BasicBlock::Create(ctx, name + ".end", fn);
    b.CreateCondBr(b.CreateICmpSGT(count, b.getInt64(0)), body, after);
    b.SetInsertPoint(body);
    llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
    llvm::PHINode* pa_phi = b.CreatePHI(pa->getType(), 2, "pa");
    llvm::PHINode* pb_phi = b.CreatePHI(pb->getType(), 2, "pb");
    std::vector<llvm::PHINode*> acc_phi(acc.size());
    for (size_t t = 0; t < acc.size(); ++t) acc_phi[t] = b.CreatePHI(vec, 2);
    i->addIncoming(b.getInt64(0), pre);
    pa_phi->addIncoming(pa, pre);
    pb_phi->addIncoming(pb, pre);
    for (size_t t = 0; t < acc.size(); ++t) acc_phi[t]->addIncoming(acc[t], pre);
    std::vector<llvm::Value*> next(acc_phi.begin(), acc_phi.end());
    llvm::Value* pa_next = pa_phi;
    llvm::Value* pb_next = pb_phi;
    k_steps(next, pa_next, pb_next, steps);  // direct kernels advance the pointers themselves
    if (!spec.direct) {
      pa_next = gep(pa_phi, int64_t(steps) * a_step());
      pb_next = gep(pb_phi, int64_t(steps) * b_step());
    }
    llvm::Value* i_next = b.CreateAdd(i, b.getInt64(1));
    llvm::BasicBlock* latch = b.GetInsertBlock();
    i->addIncoming(i_next, latch);
    pa_phi->addIncoming(pa_next, latch);
    pb_phi->addIncoming(pb_next, latch);
    for (size_t t = 0; t < acc.size(); ++t) acc_phi[t]->addIncoming(next[t], latch);
    b.CreateCondBr(b.CreateICmpSLT(i_next, count), body, after);
    b.SetInsertPoint(after);
    llvm::PHINode* pa_out = b.CreatePHI(pa->getType(), 2);
    pa_out->addIncoming(pa, pre);
    pa_out->addIncoming(pa_next, latch);
    llvm::PHINode* pb_out = b.CreatePHI(pb->getType(), 2);
    pb_out->addIncoming(pb, pre);
    pb_out->addIncoming(pb_next, latch);
    pa = pa_out;
    pb = pb_out;
    std::vector<llvm::Value*> out(acc.size());
    for (size_t t = 0; t < acc.size(); ++t) {
      llvm::PHINode* phi = b.CreatePHI(vec, 2);
      phi->addIncoming(acc[t], pre);
      phi->addIncoming(next[t], latch);
      out[t] = phi;
    }
    return out;
  }

  // Direct kernels: k runs as k_geometry[0] (>= 1) outer steps of kc inner steps; outer step i starts at
  // a + i * k_geometry[3] and b + i * k_geometry[4]. The accumulators stay in registers across both levels, so every
  // element is summed over k in the fused order p = inner + kc * outer.
  std::vector<llvm::Value*> outer_k(llvm::Value* k_geometry, llvm::Value* kc, std::vector<llvm::Value*> acc,
                                    llvm::Value* a, llvm::Value* bb) {
    auto load_i64 = [&](int index) {
      return b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, k_geometry, b.getInt64(index)), llvm::Align(8));
    };
    llvm::Value* outer = load_i64(0);
    llvm::Value* a_outer = load_i64(3);
    llvm::Value* b_outer = load_i64(4);
    llvm::BasicBlock* pre = b.GetInsertBlock();
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "k.outer", fn);
    b.CreateBr(body);
    b.SetInsertPoint(body);
    llvm::PHINode* i = b.CreatePHI(i64, 2, "outer");
    i->addIncoming(b.getInt64(0), pre);
    std::vector<llvm::PHINode*> acc_phi(acc.size());
    for (size_t t = 0; t < acc.size(); ++t) {
      acc_phi[t] = b.CreatePHI(vec, 2);
      acc_phi[t]->addIncoming(acc[t], pre);
    }
    llvm::Value* pa = gep(a, b.CreateMul(i, a_outer));
    llvm::Value* pb = gep(bb, b.CreateMul(i, b_outer));
    std::vector<llvm::Value*> cur(acc_phi.begin(), acc_phi.end());
    if (spec.kmajor_a) {
      cur = loop("k.main", b.CreateSDiv(kc, b.getInt64(spec.lanes)), cur, pa, pb, 1);  // kc is a multiple of lanes
    } else {
      const int u = spec.k_unroll;
      cur = loop("k.main", b.CreateSDiv(kc, b.getInt64(u)), cur, pa, pb, u);
      cur = loop("k.rem", b.CreateSRem(kc, b.getInt64(u)), cur, pa, pb, 1);
    }
    llvm::Value* i_next = b.CreateAdd(i, b.getInt64(1));
    llvm::BasicBlock* latch = b.GetInsertBlock();
    i->addIncoming(i_next, latch);
    for (size_t t = 0; t < acc.size(); ++t) acc_phi[t]->addIncoming(cur[t], latch);
    llvm::BasicBlock* after = llvm::BasicBlock::Create(ctx, "k.outer.end", fn);
    b.CreateCondBr(b.CreateICmpSLT(i_next, outer), body, after);
    b.SetInsertPoint(after);
    return cur;
  }

  // Stores the tile: full (unmasked, all columns) or edge (masked rows, columns < n_rem); beta 0 or 1.
  void store(const std::vector<llvm::Value*>& acc, llvm::Value* c, llvm::Value* col_off, llvm::Value* m_rem,
             llvm::Value* n_rem, bool edge, bool beta, llvm::BasicBlock* exit) {
    std::vector<llvm::Value*> masks(mv, nullptr);
    if (edge) {
      std::vector<llvm::Constant*> iota;
      for (int l = 0; l < spec.lanes; ++l) iota.push_back(b.getInt64(l));
      llvm::Value* lane = llvm::ConstantVector::get(iota);
      for (int v = 0; v < mv; ++v) {
        llvm::Value* limit = b.CreateVectorSplat(spec.lanes, b.CreateSub(m_rem, b.getInt64(int64_t(v) * spec.lanes)));
        masks[v] = b.CreateICmpSLT(lane, limit);
      }
    }
    for (int j = 0; j < spec.nr; ++j) {
      llvm::BasicBlock* next = nullptr;
      if (edge) {
        llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "col", fn);
        next = llvm::BasicBlock::Create(ctx, "col.next", fn);
        b.CreateCondBr(b.CreateICmpSLT(b.getInt64(j), n_rem), body, exit);
        b.SetInsertPoint(body);
      }
      llvm::Value* off = b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, col_off, b.getInt64(j)), llvm::Align(8));
      llvm::Value* column = gep(c, off);
      for (int v = 0; v < mv; ++v) {
        llvm::Value* p = gep(column, c_vec_off[v]);
        llvm::Value* value = acc[v * spec.nr + j];
        if (edge) {
          if (beta) value = b.CreateFAdd(b.CreateMaskedLoad(vec, p, elt_align(), masks[v], nullptr), value);
          b.CreateMaskedStore(value, p, elt_align(), masks[v]);
        } else {
          if (beta) value = b.CreateFAdd(b.CreateAlignedLoad(vec, p, elt_align()), value);
          b.CreateAlignedStore(value, p, elt_align());
        }
      }
      if (edge) {
        b.CreateBr(next);
        b.SetInsertPoint(next);
      }
    }
    b.CreateBr(exit);
  }

  // Lane-kernel epilogue: vector (row i, column j) goes to c + row_off[i] + col_off[j]; the edge variant masks
  // lanes >= lane_rem and skips rows >= m_rem and columns >= n_rem.
  void store_lane(const std::vector<llvm::Value*>& acc, llvm::Value* c, llvm::Value* row_off, llvm::Value* col_off,
                  llvm::Value* lane_rem, llvm::Value* m_rem, llvm::Value* n_rem, bool edge, bool beta,
                  llvm::BasicBlock* exit) {
    llvm::Value* mask = nullptr;
    if (edge) {
      std::vector<llvm::Constant*> iota;
      for (int l = 0; l < spec.lanes; ++l) iota.push_back(b.getInt64(l));
      mask = b.CreateICmpSLT(llvm::ConstantVector::get(iota), b.CreateVectorSplat(spec.lanes, lane_rem));
    }
    auto load_offset = [&](llvm::Value* table, int index) {
      return b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, table, b.getInt64(index)), llvm::Align(8));
    };
    for (int i = 0; i < spec.mr; ++i) {
      llvm::BasicBlock* row_next = nullptr;
      if (edge) {
        llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "row", fn);
        row_next = llvm::BasicBlock::Create(ctx, "row.next", fn);
        b.CreateCondBr(b.CreateICmpSLT(b.getInt64(i), m_rem), body, exit);
        b.SetInsertPoint(body);
      }
      llvm::Value* row = gep(c, load_offset(row_off, i));
      for (int j = 0; j < spec.nr; ++j) {
        llvm::BasicBlock* col_next = nullptr;
        if (edge) {
          llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "col", fn);
          col_next = llvm::BasicBlock::Create(ctx, "col.next", fn);
          b.CreateCondBr(b.CreateICmpSLT(b.getInt64(j), n_rem), body, row_next);
          b.SetInsertPoint(body);
        }
        llvm::Value* p = gep(row, load_offset(col_off, j));
        llvm::Value* value = acc[i * spec.nr + j];
        if (edge) {
          if (beta) value = b.CreateFAdd(b.CreateMaskedLoad(vec, p, elt_align(), mask, nullptr), value);
          b.CreateMaskedStore(value, p, elt_align(), mask);
          b.CreateBr(col_next);
          b.SetInsertPoint(col_next);
        } else {
          if (beta) value = b.CreateFAdd(b.CreateAlignedLoad(vec, p, elt_align()), value);
          b.CreateAlignedStore(value, p, elt_align());
        }
      }
      if (edge) {
        b.CreateBr(row_next);
        b.SetInsertPoint(row_next);
      }
    }
    b.CreateBr(exit);
  }

  void emit_lane(llvm::Module& module) {
    llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
    auto* type = llvm::FunctionType::get(b.getVoidTy(), {i64, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64}, false);
    fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, spec.symbol(), module);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned a : {1u, 2u, 3u}) fn->addParamAttr(a, llvm::Attribute::NoAlias);
    auto args = fn->arg_begin();
    llvm::Value* kc = &*args++;
    llvm::Value* pa = &*args++;
    llvm::Value* pb = &*args++;
    llvm::Value* c = &*args++;
    llvm::Value* row_off = &*args++;
    llvm::Value* col_off = &*args++;
    llvm::Value* lane_rem = &*args++;
    llvm::Value* m_rem = &*args++;
    llvm::Value* n_rem = &*args++;
    llvm::Value* beta = &*args++;
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    std::vector<llvm::Value*> acc(size_t(mv) * spec.nr, llvm::Constant::getNullValue(vec));
    int u = spec.k_unroll;
    acc = loop("k.main", b.CreateSDiv(kc, b.getInt64(u)), acc, pa, pb, u);
    acc = loop("k.rem", b.CreateSRem(kc, b.getInt64(u)), acc, pa, pb, 1);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
    llvm::BasicBlock* full = llvm::BasicBlock::Create(ctx, "full", fn);
    llvm::BasicBlock* edge = llvm::BasicBlock::Create(ctx, "edge", fn);
    llvm::Value* is_full = b.CreateAnd(b.CreateAnd(b.CreateICmpEQ(m_rem, b.getInt64(spec.mr)),
                                                   b.CreateICmpEQ(n_rem, b.getInt64(spec.nr))),
                                       b.CreateICmpEQ(lane_rem, b.getInt64(spec.lanes)));
    llvm::Value* accumulate = b.CreateICmpNE(beta, b.getInt64(0));
    b.CreateCondBr(is_full, full, edge);
    for (auto [block, is_edge] : {std::pair{full, false}, std::pair{edge, true}}) {
      b.SetInsertPoint(block);
      llvm::BasicBlock* beta0 = llvm::BasicBlock::Create(ctx, "beta0", fn);
      llvm::BasicBlock* beta1 = llvm::BasicBlock::Create(ctx, "beta1", fn);
      b.CreateCondBr(accumulate, beta1, beta0);
      b.SetInsertPoint(beta0);
      store_lane(acc, c, row_off, col_off, lane_rem, m_rem, n_rem, is_edge, false, exit);
      b.SetInsertPoint(beta1);
      store_lane(acc, c, row_off, col_off, lane_rem, m_rem, n_rem, is_edge, true, exit);
    }
    b.SetInsertPoint(exit);
    b.CreateRetVoid();
  }

  void emit(llvm::Module& module) {
    if (spec.lane) return emit_lane(module);
    llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
    std::vector<llvm::Type*> params = {i64, ptr, ptr, ptr, ptr, i64, i64, i64};
    if (spec.direct) params.insert(params.end(), {ptr, ptr});  // k_geometry, b_coff (MicroKernel.h: DirectKernelFn)
    auto* type = llvm::FunctionType::get(b.getVoidTy(), params, false);
    fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, spec.symbol(), module);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned a : {1u, 2u, 3u, 4u}) fn->addParamAttr(a, llvm::Attribute::NoAlias);
    auto args = fn->arg_begin();
    llvm::Value* kc = &*args++;
    llvm::Value* pa = &*args++;
    llvm::Value* pb = &*args++;
    llvm::Value* c = &*args++;
    llvm::Value* col_off = &*args++;
    llvm::Value* m_rem = &*args++;
    llvm::Value* n_rem = &*args++;
    llvm::Value* beta = &*args++;

    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    llvm::Value* k_geometry = nullptr;
    if (spec.direct) {
      k_geometry = &*args++;
      llvm::Value* b_coff = &*args++;
      auto load_i64 = [&](llvm::Value* table, int index) {
        return b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, table, b.getInt64(index)), llvm::Align(8));
      };
      for (int j = 0; j < spec.nr; ++j) b_cols.push_back(load_i64(b_coff, j));
      std::vector<llvm::Constant*> iota;
      for (int l = 0; l < spec.lanes; ++l) iota.push_back(b.getInt64(l));
      llvm::Value* lane = llvm::ConstantVector::get(iota);
      a_stride = load_i64(k_geometry, 1);
      b_stride = load_i64(k_geometry, 2);
      if (spec.kmajor_a) {
        // Per row of the tile: its A offset and an all-or-nothing load mask (rows >= m_rem are not read).
        llvm::Value* row_stride = load_i64(k_geometry, 5);
        for (int r = 0; r < spec.lanes; ++r) {
          row_masks.push_back(b.CreateVectorSplat(spec.lanes, b.CreateICmpSLT(b.getInt64(r), m_rem)));
          a_vec_off.push_back(b.CreateMul(row_stride, b.getInt64(r)));
        }
        llvm::AllocaInst* buffer = b.CreateAlloca(llvm::ArrayType::get(vec, spec.lanes));
        buffer->setAlignment(llvm::Align(int64_t(spec.lanes) * int64_t(size_of(spec.dtype))));
        group_buffer = buffer;
        group_vec_off = {b.getInt64(0)};
        group_masks = {llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b.getInt1Ty(), spec.lanes))};
        group_stride = b.getInt64(spec.lanes);
      } else {
        for (int v = 0; v < mv; ++v)
          row_masks.push_back(b.CreateICmpSLT(
              lane, b.CreateVectorSplat(spec.lanes, b.CreateSub(m_rem, b.getInt64(int64_t(v) * spec.lanes)))));
        llvm::Value* vec_stride =
            spec.split_rows ? static_cast<llvm::Value*>(load_i64(k_geometry, 5)) : b.getInt64(spec.lanes);
        for (int v = 0; v < mv; ++v) a_vec_off.push_back(b.CreateMul(vec_stride, b.getInt64(v)));
      }
    }
    llvm::Value* c_stride = spec.split_c ? static_cast<llvm::Value*>(b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, k_geometry, b.getInt64(6)),
                                                                llvm::Align(8)))
                                         : b.getInt64(spec.lanes);
    for (int v = 0; v < mv; ++v) c_vec_off.push_back(b.CreateMul(c_stride, b.getInt64(v)));
    // Touch the C tile early so its lines arrive while the k loop runs (write intent: the epilogue stores there).
    llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::prefetch, {ptr});
    for (int j = 0; j < spec.nr; ++j) {
      llvm::Value* off = b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, col_off, b.getInt64(j)), llvm::Align(8));
      llvm::Value* column = gep(c, off);
      for (int v = 0; v < mv; ++v) {
        llvm::Value* row_vector = gep(column, c_vec_off[v]);
        for (int64_t byte = 0; byte < int64_t(spec.lanes) * int64_t(size_of(spec.dtype)); byte += 64)
          b.CreateCall(prefetch, {b.CreateInBoundsGEP(b.getInt8Ty(), row_vector, b.getInt64(byte)), b.getInt32(1),
                                  b.getInt32(3), b.getInt32(1)});
      }
    }
    std::vector<llvm::Value*> acc(size_t(mv) * spec.nr, llvm::Constant::getNullValue(vec));
    int u = spec.k_unroll;
    if (spec.direct) {
      acc = outer_k(k_geometry, kc, acc, pa, pb);
    } else {
      acc = loop("k.main", b.CreateSDiv(kc, b.getInt64(u)), acc, pa, pb, u);
      acc = loop("k.rem", b.CreateSRem(kc, b.getInt64(u)), acc, pa, pb, 1);
    }

    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
    llvm::BasicBlock* full = llvm::BasicBlock::Create(ctx, "full", fn);
    llvm::BasicBlock* edge = llvm::BasicBlock::Create(ctx, "edge", fn);
    llvm::Value* is_full = b.CreateAnd(b.CreateICmpEQ(m_rem, b.getInt64(spec.mr)),
                                       b.CreateICmpEQ(n_rem, b.getInt64(spec.nr)));
    llvm::Value* accumulate = b.CreateICmpNE(beta, b.getInt64(0));
    b.CreateCondBr(is_full, full, edge);
    for (auto [block, is_edge] : {std::pair{full, false}, std::pair{edge, true}}) {
      b.SetInsertPoint(block);
      llvm::BasicBlock* beta0 = llvm::BasicBlock::Create(ctx, "beta0", fn);
      llvm::BasicBlock* beta1 = llvm::BasicBlock::Create(ctx, "beta1", fn);
      b.CreateCondBr(accumulate, beta1, beta0);
      b.SetInsertPoint(beta0);
      store(acc, c, col_off, m_rem, n_rem, is_edge, false, exit);
      b.SetInsertPoint(beta1);
      store(acc, c, col_off, m_rem, n_rem, is_edge, true, exit);
    }
    b.SetInsertPoint(exit);
    b.CreateRetVoid();
  }
};

// The micro-kernel's module, generated for the JIT's target.
std::unique_ptr<llvm::Module> micro_kernel_module(Jit& jit, const MicroKernelSpec& spec, llvm::LLVMContext& context) {
  EIN_ASSERT(spec.dtype == DType::f32 || spec.dtype == DType::f64, "micro-kernels are real");
  EIN_ASSERT(spec.mr > 0 && (spec.lane || spec.mr % spec.lanes == 0) && spec.nr > 0 && spec.k_unroll > 0 &&
                 !(spec.lane && spec.direct) && (spec.direct || !spec.split_rows) && (spec.split_rows || !spec.split_c) &&
                 (!spec.kmajor_a || (spec.direct && !spec.split_rows && spec.mr == spec.lanes)),
             "bad micro-kernel tile");
  auto module = jit.impl().new_module(context, spec.symbol());
  Emitter(spec, context).emit(*module);
  return module;
}

}  // namespace

std::vector<char> compile_micro_kernel(Jit& jit, const MicroKernelSpec& spec) {
  llvm::LLVMContext context;
  return jit.impl().emit_object(*micro_kernel_module(jit, spec, context));
}

std::string micro_kernel_assembly(Jit& jit, const MicroKernelSpec& spec) {
  llvm::LLVMContext context;
  return jit.impl().emit_assembly(*micro_kernel_module(jit, spec, context));
}

std::string SpecialisedKernelSpec::describe() const {
  std::string text = fmt::format("specialised generator {} tile {} k {} [{},{},{},{},{},{},{}] beta {}\ncols", 3,
                                 tile.symbol(), k_inner, k_geometry[0], k_geometry[1], k_geometry[2], k_geometry[3],
                                 k_geometry[4], k_geometry[5], k_geometry[6], accumulate ? 1 : 0);
  for (int64_t off : col_off) text += fmt::format(" {}", off);
  for (const SpecialisedTile& t : tiles) {
    text += fmt::format("\ntile {} {} {} {} {} b", t.a_off, t.c_off, t.j0, t.m_rem, t.n_rem);
    for (int64_t off : t.b_coff) text += fmt::format(" {}", off);
  }
  return text + "\n";
}

std::string SpecialisedKernelSpec::symbol() const {
  return fmt::format("ein_spec_{:016x}", hash_bytes(describe()));
}

std::vector<char> compile_specialised_kernel(Jit& jit, const SpecialisedKernelSpec& spec) {
  EIN_ASSERT(spec.tile.direct, "a specialised kernel is built from a direct tile");
  llvm::LLVMContext context;
  auto module = jit.impl().new_module(context, spec.symbol());
  Emitter(spec.tile, context).emit(*module);
  llvm::Function* kernel = module->getFunction(spec.tile.symbol());
  kernel->setLinkage(llvm::GlobalValue::InternalLinkage);
  kernel->addFnAttr(llvm::Attribute::AlwaysInline);

  llvm::IRBuilder<> b(context);
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* ptr = llvm::PointerType::get(context, 0);
  llvm::Type* elt = spec.tile.dtype == DType::f64 ? b.getDoubleTy() : b.getFloatTy();
  auto table = [&](const std::vector<int64_t>& values, const std::string& name) {
    auto* type = llvm::ArrayType::get(i64, values.size());
    std::vector<llvm::Constant*> items;
    for (int64_t v : values) items.push_back(b.getInt64(v));
    return new llvm::GlobalVariable(*module, type, true, llvm::GlobalValue::PrivateLinkage,
                                    llvm::ConstantArray::get(type, items), name);
  };
  llvm::GlobalVariable* cols = table(spec.col_off, "cols");
  llvm::GlobalVariable* geometry =
      table(std::vector<int64_t>(std::begin(spec.k_geometry), std::end(spec.k_geometry)), "k_geometry");
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr}, false);
  llvm::Function* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, spec.symbol(), *module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned a : {0u, 1u, 2u}) fn->addParamAttr(a, llvm::Attribute::NoAlias);
  auto args = fn->arg_begin();
  llvm::Value* a = &*args++;
  llvm::Value* bb = &*args++;
  llvm::Value* c = &*args++;
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
  for (size_t t = 0; t < spec.tiles.size(); ++t) {
    const SpecialisedTile& tile = spec.tiles[t];
    llvm::GlobalVariable* b_coff = table(tile.b_coff, "b_coff");
    b.CreateCall(kernel, {b.getInt64(spec.k_inner), b.CreateInBoundsGEP(elt, a, b.getInt64(tile.a_off)), bb,
                          b.CreateInBoundsGEP(elt, c, b.getInt64(tile.c_off)),
                          b.CreateInBoundsGEP(i64, cols, b.getInt64(tile.j0)), b.getInt64(tile.m_rem),
                          b.getInt64(tile.n_rem), b.getInt64(spec.accumulate ? 1 : 0), geometry, b_coff});
  }
  b.CreateRetVoid();
  jit.impl().optimise(*module);
  return jit.impl().emit_object(*module);
}

}  // namespace einstage
