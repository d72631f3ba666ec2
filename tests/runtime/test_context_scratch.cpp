// An ExecutionContext's ScratchAllocator (runtime/Context.h, ir/Scratch.h): einsum outputs, the executor's scratch and
// the JIT's packing buffers come from it and go back to it, reused by the next run; its limit is the context's
// Config::scratch_cache_bytes; two contexts share nothing; results are the same bits whatever the limit or thread
// count. No timing: counters and addresses only.
#include "extensions/einsum/exec/Einsum.h"
#include "ir/Scratch.h"
#include "runtime/Context.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

Tensor random_tensor(test::SplitMix64& rng, Shape shape) {
  std::vector<double> v(static_cast<size_t>(element_count(shape)));
  for (double& x : v) x = rng.symmetric();
  return Tensor::from_col_major<double>(std::move(shape), v);
}

ConfigOptions options(int threads, size_t scratch_bytes) {
  ConfigOptions o;
  o.threads = threads;
  o.scratch_cache_bytes = scratch_bytes;
  o.kernel_cache_dir = "";
  return o;
}

Tensor run_on(ExecutionContext& context, const std::string& spec, const std::vector<Tensor>& operands) {
  es::EinsumOptions o;
  o.context = &context;
  return es::einsum(spec, operands, o);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("context scratch: outputs, arenas and packing buffers return to the context's allocator and are reused") {
  test::SplitMix64 rng{31};
  const Tensor a = random_tensor(rng, {1024, 1024}), b = random_tensor(rng, {1024, 1024});  // 8 MiB each
  ExecutionContext context(options(2, 64 * kMiB));
  ScratchAllocator& scratch = context.scratch();
  CHECK(scratch.stats().limit_bytes == 64 * kMiB);
  CHECK(&scratch != &default_context().scratch());
  CHECK(&default_context().scratch() == &ScratchAllocator::process_default());

  const void* first = nullptr;
  {
    const Tensor c = run_on(context, "ij,jk->ik", {a, b});
    first = c.raw_data();
  }
  const ScratchStats after_one = scratch.stats();
  CHECK(after_one.kept_blocks == 1);                     // the freed 8 MiB output
  CHECK(after_one.retained_bytes > 8 * kMiB);            // and the packing buffers of the slot that ran the GEMM
  CHECK(after_one.retained_bytes <= after_one.limit_bytes);
  const Tensor again = run_on(context, "ij,jk->ik", {a, b});
  CHECK(again.raw_data() == first);                      // the output's block came back
  CHECK(scratch.stats().reuses >= after_one.reuses + 3);  // the block and both packing buffers
  CHECK(scratch.stats().retained_bytes <= scratch.stats().limit_bytes);

  // Another context takes nothing from this one, and this one's counters do not move while it runs.
  ExecutionContext other(options(2, 64 * kMiB));
  const ScratchStats before_other = scratch.stats();
  const Tensor elsewhere = run_on(other, "ij,jk->ik", {a, b});
  CHECK(elsewhere.raw_data() != again.raw_data());
  CHECK(other.scratch().stats().reuses == 0);
  CHECK(scratch.stats().reuses == before_other.reuses);
  CHECK(scratch.stats().fresh == before_other.fresh);
  CHECK(same_bits(elsewhere, again));
}

TEST_CASE("context scratch: the limit holds after runs of every size; a multi-step arena is reused") {
  test::SplitMix64 rng{32};
  // A chain whose intermediates live in the executor's arena (400 x 400 f64: 1.2 MiB, a large-block arena above
  // 4 MiB for the bigger chain) and a small one whose arena stays in the slot.
  const Tensor a = random_tensor(rng, {800, 60}), b = random_tensor(rng, {60, 800}), c = random_tensor(rng, {800, 9});
  const Tensor x = random_tensor(rng, {20, 30}), y = random_tensor(rng, {30, 40}), z = random_tensor(rng, {40, 5});
  for (size_t limit : {size_t(0), 1 * kMiB, 6 * kMiB, 1024 * kMiB}) {
    INFO("limit " << limit);
    ExecutionContext context(options(2, limit));
    for (int round = 0; round < 2; ++round) {
      (void)run_on(context, "ij,jk,kl->il", {a, b, c});
      (void)run_on(context, "ij,jk,kl->il", {x, y, z});
      CHECK(context.scratch().stats().retained_bytes <= limit);
    }
    if (limit >= 6 * kMiB) CHECK(context.scratch().stats().reuses > 0);
    if (limit == 0) CHECK(context.scratch().stats().retained_bytes == 0);
  }
}

TEST_CASE("context scratch: the same bits at 1 and 2 threads and with or without kept memory") {
  test::SplitMix64 rng{33};
  const Tensor a = random_tensor(rng, {300, 7, 40}), b = random_tensor(rng, {40, 7, 500}), c = random_tensor(rng, {500, 3});
  const Tensor p = random_tensor(rng, {16, 64, 64}), q = random_tensor(rng, {16, 64, 64});  // batched: a lease per chunk
  ExecutionContext one(options(1, 1024 * kMiB)), two(options(2, 1024 * kMiB)), none(options(2, 0));
  for (const auto& [spec, operands] : {std::pair<std::string, std::vector<Tensor>>{"ikb,bkj,jl->il", {a, b, c}},
                                       std::pair<std::string, std::vector<Tensor>>{"bij,bjk->bik", {p, q}}}) {
    INFO(spec);
    const Tensor r1 = run_on(one, spec, operands);
    for (int round = 0; round < 2; ++round) {  // the second round runs on reused buffers
      CHECK(same_bits(run_on(two, spec, operands), r1));
      CHECK(same_bits(run_on(none, spec, operands), r1));
      CHECK(same_bits(run_on(one, spec, operands), r1));
    }
  }
}
