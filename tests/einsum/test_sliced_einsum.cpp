// The sliced executor (SlicedEinsum.h): sliced results equal the definitional loop and the unsliced einsum (1e-12
// relative, f64), every intermediate of a slice fits the limit, bits are the same at 1, 2 and 3 threads and when the
// chunks are split over "ranks" and summed in chunk order, and the one-shot einsum() takes the limit from the plan
// spec. Seeded; every case prints its seed on failure.
#include "EinsumTestUtil.h"
#include "compiler/Trace.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "runtime/Runtime.h"
#include "extensions/einsum/exec/SlicedEinsum.h"
#include "ir/Error.h"
#include "support/ErrorOf.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

using namespace einstage;
using einstage::test::error_of;
namespace es = einstage::einsum;

namespace {

struct Net {
  std::string text;
  std::vector<std::string> terms;
  std::string output;
  std::map<char, int64_t> extent;
};

// A random closed-or-open network over letters: a ring of 6..9 tensors with bonds of extent 2..3, plus five chords
// (one a hyperedge of three tensors), a repeated label in the smallest term, and an output label on some seeds.
Net random_net(uint64_t seed) {
  kt::Rng r(seed);
  Net net;
  const int n = 6 + static_cast<int>(r.uniform(0, 3));
  net.terms.resize(static_cast<size_t>(n));
  char next = 'a';
  auto fresh = [&] {
    const char l = next++;
    net.extent[l] = 2 + static_cast<int64_t>(r.uniform(0, 1));
    return l;
  };
  for (int k = 0; k < n; ++k) {
    const char l = fresh();
    net.terms[static_cast<size_t>(k)] += l;
    net.terms[static_cast<size_t>((k + 1) % n)] += l;
  }
  for (int e = 0; e < 5; ++e) {
    const char l = fresh();
    const int carriers = e == 0 ? 3 : 2;
    for (int c = 0; c < carriers; ++c) net.terms[static_cast<size_t>(r.uniform(0, n - 0.01))] += l;
  }
  // A diagonal on the smallest term (the limit must hold every operand).
  size_t smallest = 0;
  for (size_t k = 1; k < net.terms.size(); ++k)
    if (net.terms[k].size() < net.terms[smallest].size()) smallest = k;
  net.terms[smallest] += net.terms[smallest][0];
  if (seed % 3 == 0) {
    const char l = fresh();
    net.terms[1] += l;
    net.output += l;
  }
  for (size_t k = 0; k < net.terms.size(); ++k) net.text += (k ? "," : "") + net.terms[k];
  net.text += "->" + net.output;
  return net;
}

// With `broadcast`, the first operand after operand 0 without a repeated label stores its first axis with extent 1
// (length-1 broadcasting).
std::vector<Tensor> operands_of(const Net& net, uint64_t seed, bool broadcast) {
  kt::Rng r(seed * 7919 + 1);
  std::vector<Tensor> ops;
  bool broadcast_done = false;
  for (const std::string& t : net.terms) {
    Shape s;
    for (char c : t) s.push_back(net.extent.at(c));
    const bool repeats = std::count(t.begin(), t.end(), t[0]) > 1;
    if (broadcast && !ops.empty() && !broadcast_done && !repeats) s[0] = 1, broadcast_done = true;
    ops.push_back(et::random_tensor<double>(r, s, seed % 2 == 0));
  }
  return ops;
}

// The largest operand at its labels' extents (what the limit must hold; a broadcast axis counts at full extent).
int64_t biggest_operand(const Net& net) {
  int64_t biggest = 1;
  for (const std::string& t : net.terms) {
    int64_t n = 1;
    for (char c : t) n *= net.extent.at(c);
    biggest = std::max(biggest, n);
  }
  return biggest;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

double rel_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_col_major<double>(), y = b.to_col_major<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1e-300, std::max(std::abs(x[i]), std::abs(y[i]))));
  return worst;
}

}  // namespace

TEST_CASE("sliced einsum equals the definitional loop and the unsliced result, and fits the limit") {
  ExecutionContext context(ConfigOptions{.threads = 2});
  int sliced_cases = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    const Net net = random_net(seed);
    CAPTURE(net.text);
    const bool broadcast = seed % 4 == 1;
    const std::vector<Tensor> ops = operands_of(net, seed, broadcast);
    es::EinsumOptions options;
    options.allow_broadcast = broadcast;
    std::vector<es::TensorMeta> metas;
    for (const Tensor& t : ops) metas.push_back(es::TensorMeta::of(t));
    const int64_t biggest = biggest_operand(net);
    const Tensor unsliced = es::einsum(net.text, ops, options);
    std::vector<double> scale;
    const auto want = et::definitional<double>(net.terms, net.output, ops, net.extent, &scale);
    const double unsliced_sc =
        es::SlicedEinsumPlan::prepare(net.text, metas, int64_t{1} << 40, options).slicing().unsliced_cost.sc;
    for (int cut : {0, 2, 4}) {
      const int64_t elements = std::max<int64_t>(biggest, static_cast<int64_t>(std::exp2(std::max(0.0, unsliced_sc - cut))));
      CAPTURE(elements);
      const auto plan = es::SlicedEinsumPlan::prepare(net.text, metas, elements * 8, options);
      CHECK(plan.slicing().slice_cost.max_intermediate <= static_cast<double>(elements));
      if (plan.num_slices() > 1) ++sliced_cases;
      const Tensor got = plan.execute(ops, context, &context.pool());
      CHECK(et::compare<double>(got, want, scale) == "");
      CHECK(rel_diff(got, unsliced) <= 1e-12);
      const Tensor one = plan.execute(ops, context, nullptr);
      CHECK(same_bits(got, one));
      ThreadPool three(3);
      CHECK(same_bits(got, plan.execute(ops, context, &three)));
      // Chunks split over 1, 2 and 4 "ranks", partials summed in chunk order: the same bits.
      for (int ranks : {1, 2, 4}) {
        std::vector<Tensor> all;
        for (int rank = 0; rank < ranks; ++rank) {
          auto [first, last] = es::rank_chunks(plan.num_chunks(), rank, ranks);
          for (Tensor& t : plan.execute_chunks(ops, context, nullptr, first, last)) all.push_back(std::move(t));
        }
        CHECK(same_bits(got, es::SlicedEinsumPlan::sum_in_order(all)));
      }
    }
  }
  CHECK(sliced_cases >= 5);  // the cuts do slice (6 of the 120 cases at this seed range)
}

TEST_CASE("sliced einsum: mixed dtypes and the limit from the plan spec through einsum()") {
  int checked = 0;
  for (uint64_t seed = 2; seed <= 60 && checked < 3; ++seed) {
    CAPTURE(seed);
    const Net net = random_net(seed);
    std::vector<Tensor> ops = operands_of(net, seed, false);
    ops[2] = ops[2].astype(DType::f32);
    std::vector<es::TensorMeta> metas;
    for (const Tensor& t : ops) metas.push_back(es::TensorMeta::of(t));
    const es::SlicedPlan big = es::SlicedEinsumPlan::prepare(net.text, metas, int64_t{1} << 40).slicing();
    es::EinsumOptions limited;
    limited.plan.max_memory =
        std::max(biggest_operand(net), static_cast<int64_t>(big.unsliced_cost.max_intermediate) / 4) * 8;
    if (es::SlicedEinsumPlan::prepare(net.text, metas, limited.plan.max_memory).num_slices() == 1) continue;
    ++checked;
    const Tensor got = es::einsum(net.text, ops, limited);
    CHECK(got.dtype() == DType::f64);
    CHECK(rel_diff(got, es::einsum(net.text, ops)) <= 1e-12);
  }
  CHECK(checked == 3);
}

TEST_CASE("sliced einsum: a traced einsum whose plan spec has max_memory runs sliced, with the direct API's bits") {
  // The first seeded network that a quarter of its largest intermediate slices.
  Net net;
  std::vector<Tensor> ops;
  std::vector<es::TensorMeta> metas;
  int64_t limit = 0;
  for (uint64_t seed = 2; seed <= 60 && limit == 0; ++seed) {
    net = random_net(seed);
    ops = operands_of(net, seed, false);
    metas.clear();
    for (const Tensor& t : ops) metas.push_back(es::TensorMeta::of(t));
    const es::SlicedPlan big = es::SlicedEinsumPlan::prepare(net.text, metas, int64_t{1} << 40).slicing();
    const int64_t bytes =
        std::max(biggest_operand(net), static_cast<int64_t>(big.unsliced_cost.max_intermediate) / 4) * 8;
    if (es::SlicedEinsumPlan::prepare(net.text, metas, bytes).num_slices() > 1) limit = bytes;
  }
  REQUIRE(limit > 0);
  CAPTURE(net.text);
  const auto direct = es::SlicedEinsumPlan::prepare(net.text, metas, limit);
  ExtensionRegistry registry;
  es::register_einsum_semantics(registry);
  TraceContext ctx("sliced", &registry);
  std::vector<TracedTensor> params;
  for (size_t k = 0; k < ops.size(); ++k)
    params.push_back(ctx.parameter(fmt::format("t{}", k), DType::f64,
                                   std::vector<Dim>(ops[k].shape().begin(), ops[k].shape().end())));
  es::TraceEinsumOptions options;
  options.plan.max_memory = limit;
  Program p = ctx.finish({es::einsum(ctx, net.text, params, options)});
  Runtime rt(RuntimeOptions{2});
  rt.add_module(es::module_descriptor());
  Executable exe = rt.prepare(p);
  const auto out = exe.run(ops);
  ExecutionContext context(ConfigOptions{.threads = 1});
  CHECK(same_bits(out[0], direct.execute(ops, context, nullptr)));
  CHECK(exe.describe_prepared(ops).find("sliced: ") != std::string::npos);
}

TEST_CASE("sliced einsum: a limit below an operand or one element is an error naming it") {
  std::vector<es::TensorMeta> metas{{DType::f64, {10, 20}}, {DType::f64, {20, 3}}};
  CHECK(error_of([&] { es::SlicedEinsumPlan::prepare("ij,jk->ik", metas, 1024); }) ==
        "operand 0 ('ij') has 200 elements (1600B) but the memory limit is 128 elements (1KiB); every operand is read "
        "whole, so raise the limit to at least 2KiB");
  CHECK(error_of([&] { es::SlicedEinsumPlan::prepare("ij,jk->ik", metas, 7); }) ==
        "einsum: a memory limit of 7B is smaller than one f64 element (8 bytes); give at least 8B");
}
