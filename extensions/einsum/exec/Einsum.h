// The concrete-tensor einsum API: einsum("ij,jk->ik", {a, b}, options) and the grouped variant.
//
// Stage: einsum extension, user-facing. A one-shot call looks its prepared plan up in a bounded, thread-safe cache
// of its context (EinsumOptions::context, else default_context(); two contexts share no plans) keyed by (subscripts as written, operand shapes, dtypes, plan spec, broadcast permission), so repeated calls with
// the same shapes do not parse, bind or plan again; a lookup hashes and compares the caller's string and tensors in
// place, so a hit allocates nothing; a miss prepares an EinsumPlan (Executor.h) and keeps it (least
// recently used entries are evicted beyond the capacity). Results never depend on the cache: a cached plan is the
// plan prepare() would make. For repeated calls in a loop, preparing once and calling execute() skips the lookup too.
// Depends on Executor.h.
#pragma once

#include "extensions/einsum/exec/Executor.h"

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace einstage::einsum {

/// Plain, nested (parentheses fix the order) or `...` subscripts on concrete tensors.
Tensor einsum(std::string_view subscripts, std::span<const Tensor> operands, const EinsumOptions& options = {});
Tensor einsum(std::string_view subscripts, std::initializer_list<Tensor> operands, const EinsumOptions& options = {});
/// Integer-label subscripts (make_subscripts); cached under their integer form.
Tensor einsum(const Subscripts& subscripts, std::span<const Tensor> operands, const EinsumOptions& options = {});

/// The grouped dialect ("WCa,Caib->WCb"; upper-case letters are groups of axes), with optional group lengths.
Tensor einsum_grouped(std::string_view subscripts, std::span<const Tensor> operands,
                      std::span<const GroupLength> lengths = {}, const EinsumOptions& options = {});

/// The cached plan a one-shot call with these options would use (prepared on a miss, in options.context's cache).
EinsumPlan cached_plan(std::string_view subscripts, std::span<const TensorMeta> metas, const EinsumOptions& options = {});

struct EinsumCacheStats {
  uint64_t hits = 0, misses = 0;
  size_t entries = 0, capacity = 0;
};
/// The plan cache of `context` (the one-shot calls given EinsumOptions::context = &context).
EinsumCacheStats einsum_cache_stats(ExecutionContext& context);
/// Drops every cached plan of `context` and resets its counters.
void clear_einsum_cache(ExecutionContext& context);
/// Sets the maximum number of plans `context` caches (default 256; 0 disables caching), evicting the oldest if
/// needed.
void set_einsum_cache_capacity(size_t capacity, ExecutionContext& context);
/// The same three for default_context(), the context of calls given none.
EinsumCacheStats einsum_cache_stats();
void clear_einsum_cache();
void set_einsum_cache_capacity(size_t capacity);

/// The grouped-dialect expansion cache of `context` (notation/Grouped.h), held in its einsum state beside the plan
/// cache, so two contexts share no expansions: EinsumPlan::prepare_grouped uses the options' context's (else
/// default_context()'s), tracing (op/TraceEinsum.h) default_context()'s.
std::shared_ptr<GroupedCache> grouped_cache(ExecutionContext& context);

}  // namespace einstage::einsum
