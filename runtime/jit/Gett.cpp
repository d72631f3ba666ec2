// contract_jit and GettPlan (runtime/jit/Gett.h): a problem's set-up (GettSetup.cpp) and run (GettRun.cpp) per call
// or kept by a plan, the block split of products whose zeros split them, and the packed GEMM's row split. Which mode
// a problem runs in is GettModes.cpp's.
#include "runtime/jit/Gett.h"

#include "runtime/jit/GettSetup.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/Tuning.h"
#include "runtime/kernels/BlockProduct.h"

#include <algorithm>
#include <complex>
#include <memory>
#include <type_traits>
#include <vector>

namespace einstage {

namespace {

using namespace gett_detail;

// Whether ws, kept from an earlier call in its slot, is p's set-up on `cache` with `direct` (no explicit blocking).
template <typename T>
bool kept_for(const GettSetup<T>& ws, const ContractionProblem& p, const KernelCache& cache, bool direct) {
  return ws.kept.valid && ws.kept.cache == cache.serial() && ws.kept.direct == direct &&
         same_geometry(p, ws.kept.problem);
}

// Records ws as p's set-up when it depends on nothing else (GettSetup::Kept): no packed GEMM, whose tile and blocks
// are the tuning's.
template <typename T>
void keep(GettSetup<T>& ws, const ContractionProblem& p, const KernelCache& cache, bool direct) {
  const bool packed = (ws.mode == GettMode::gett && ws.g.kernel) || (ws.mode == GettMode::transposed && ws.t.kernel);
  if (packed) return;
  ws.kept.problem = p;
  ws.kept.problem.a = ws.kept.problem.b = nullptr;
  ws.kept.problem.c = nullptr;
  ws.kept.cache = cache.serial();
  ws.kept.direct = direct;
  ws.kept.valid = true;
}

template <typename T>
void run_gett(const ContractionProblem& p, ThreadPool* pool, KernelCache& cache, const GettBlocking* blocking,
              ScratchAllocator& scratch, bool direct, const GemmTuning& tuning) {
  ScratchAllocator::Lease lease = scratch.lease();
  GettSetup<T>& ws = lease.object<GettSetup<T>>();
  struct Trim {
    GettSetup<T>& ws;
    ~Trim() { ws.trim(); }
  } trim{ws};
  if (blocking || !kept_for(ws, p, cache, direct)) {
    ws.kept.valid = false;  // until this set-up is complete (set_up may throw half-way)
    set_up(ws, p, cache, blocking, scratch, direct, tuning);
    if (!blocking) keep(ws, p, cache, direct);
  }
  ws.run(p.a, p.b, p.c, pool, p.stream_c);
}

}  // namespace

int gemm_row_chunks(int64_t M, int64_t tile_rows, int threads) {
  const int64_t tiles = (M + std::max<int64_t>(tile_rows, 1) - 1) / std::max<int64_t>(tile_rows, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, tiles / kMinRowTilesPerThread)));
}

namespace {

bool same_axes(const std::vector<Axis>& x, const std::vector<Axis>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].extent != y[i].extent || x[i].stride_a != y[i].stride_a || x[i].stride_b != y[i].stride_b ||
        x[i].stride_c != y[i].stride_c)
      return false;
  return true;
}

// contract_jit without the block split: the set-up and run of p itself.
void run_unsplit(const ContractionProblem& p, ThreadPool* pool, KernelCache& kernels, const GettBlocking* blocking,
                 ScratchAllocator& buffers, bool direct, const GemmTuning& tuning);

// Whether kernels::block_product_in_place may split p (it decides per call, on the operands' zeros): a product of
// at least kMinBlockProductMacs multiply-adds that overwrites C, without a batch axis. Blocks run as packed GEMMs
// through their offset tables (run_blocks_in_place), one after the other on the caller's pool.
bool may_split_blocks(const ContractionProblem& p) {
  if (p.accumulate || p.dtype == DType::i64) return false;
  double macs = 1;
  for (const auto* group : {&p.m, &p.n, &p.k})
    for (const Axis& ax : *group) macs *= double(ax.extent);
  for (const Axis& ax : p.batch)
    if (ax.extent != 1) return false;
  return macs >= kernels::kMinBlockProductMacs;
}

}  // namespace

bool same_geometry(const ContractionProblem& x, const ContractionProblem& y) {
  return x.dtype == y.dtype && x.accumulate == y.accumulate && same_axes(x.m, y.m) && same_axes(x.n, y.n) &&
         same_axes(x.k, y.k) && same_axes(x.batch, y.batch);
}

struct GettPlan::Impl {
  ContractionProblem signature;  // the problem without its pointers
  bool direct = true;
  bool may_split = false;  // kernels::block_product may split it: test each call's operands for blocks
  KernelCache* cache = nullptr;
  ScratchAllocator* scratch = nullptr;
  const GemmTuning* tuning = nullptr;
  virtual ~Impl() = default;
  virtual void run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const = 0;
  virtual size_t table_bytes() const = 0;
};

namespace {

template <typename T>
struct TypedGettPlan final : GettPlan::Impl {
  GettSetup<T> setup;
  void run(const void* a, const void* b, void* c, ThreadPool* pool, bool stream_c) const override {
    setup.run(a, b, c, pool, stream_c);
  }
  size_t table_bytes() const override { return setup.table_bytes(); }
};

template <typename T>
std::unique_ptr<GettPlan::Impl> make_plan(const ContractionProblem& p, KernelCache& cache, ScratchAllocator& scratch,
                                          bool direct, const GemmTuning& tuning) {
  auto plan = std::make_unique<TypedGettPlan<T>>();
  set_up(plan->setup, p, cache, nullptr, scratch, direct, tuning);
  plan->setup.fuse = FuseScratch();  // temporaries of the set-up only
  plan->setup.q = ContractionProblem();
  return plan;
}

}  // namespace

GettPlan::GettPlan(const ContractionProblem& p, KernelCache& cache, ScratchAllocator& scratch, bool direct,
                   const GemmTuning* tuning) {
  p.check("contract");
  const GemmTuning& in_force = tuning ? *tuning : GemmTuning::model();
  switch (p.dtype) {
    case DType::f32: impl_ = make_plan<float>(p, cache, scratch, direct, in_force); break;
    case DType::f64: impl_ = make_plan<double>(p, cache, scratch, direct, in_force); break;
    case DType::c64: impl_ = make_plan<c64>(p, cache, scratch, direct, in_force); break;
    case DType::c128: impl_ = make_plan<c128>(p, cache, scratch, direct, in_force); break;
    case DType::i64:
      fail(ErrorKind::unsupported, "contract: the JIT has no i64 kernel; use contract() or contract_portable()");
  }
  impl_->signature = p;
  impl_->signature.a = impl_->signature.b = nullptr;
  impl_->signature.c = nullptr;
  impl_->direct = direct;
  impl_->may_split = may_split_blocks(p);
  impl_->cache = &cache;
  impl_->scratch = &scratch;
  impl_->tuning = &in_force;
}

GettPlan::~GettPlan() = default;

bool GettPlan::matches(const ContractionProblem& p, bool direct) const {
  return direct == impl_->direct && same_geometry(p, impl_->signature);
}

void GettPlan::run(const ContractionProblem& p, ThreadPool* pool) const {
  if (p.a == nullptr || p.b == nullptr || p.c == nullptr) p.check("contract");  // as contract_jit would refuse it
  if (impl_->may_split && split_in_place(p, pool, *impl_->cache, *impl_->scratch, *impl_->tuning)) return;
  impl_->run(p.a, p.b, p.c, pool, p.stream_c);
}

size_t GettPlan::table_bytes() const { return impl_->table_bytes(); }

void contract_jit(const ContractionProblem& p, ThreadPool* pool, KernelCache* cache, const GettBlocking* blocking,
                  ScratchAllocator* scratch, bool direct, const GemmTuning* tuning) {
  p.check("contract");
  const GemmTuning& in_force = tuning ? *tuning : GemmTuning::model();
  EIN_ASSERT(cache != nullptr, "contract_jit needs a kernel cache (a context's: JitState::kernels())");
  KernelCache& kernels = *cache;
  ScratchAllocator& buffers = scratch ? *scratch : ScratchAllocator::process_default();
  // Explicit blocking asks for the GETT itself (tests, tuning): it is never split.
  if (!blocking && may_split_blocks(p) && split_in_place(p, pool, kernels, buffers, in_force)) return;
  run_unsplit(p, pool, kernels, blocking, buffers, direct, in_force);
}

namespace {

void run_unsplit(const ContractionProblem& p, ThreadPool* pool, KernelCache& kernels, const GettBlocking* blocking,
                 ScratchAllocator& buffers, bool direct, const GemmTuning& tuning) {
  dispatch_dtype(p.dtype, [&]<typename T>(T) {
    if constexpr (std::is_same_v<T, int64_t>)
      fail(ErrorKind::unsupported, "contract: the JIT has no i64 kernel; use contract() or contract_portable()");
    else
      run_gett<T>(p, pool, kernels, blocking, buffers, direct, tuning);
  });
}

}  // namespace

}  // namespace einstage
