#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/exec/SlicedEinsum.h"

#include "ir/Hash.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"

#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace einstage::einsum {
namespace {

// The cache key: everything a plan depends on. A lookup compares the caller's string, operands and options with the
// stored key in place (a probe), so a hit builds no string and no vector.
enum class KeyKind : uint8_t { string, labels, grouped };

struct Key {
  KeyKind kind = KeyKind::string;
  std::string text;  // the subscripts as written; the integer form serialised (labels); text + lengths (grouped)
  std::vector<TensorMeta> metas;
  PlanSpec plan;
  bool broadcast = false;
};

// What a lookup compares with a Key: the operands' metas are read from the tensors (or given), never copied.
struct Probe {
  KeyKind kind;
  std::string_view text;
  std::span<const Tensor> operands;  // either these ...
  std::span<const TensorMeta> metas;  // ... or these
  const EinsumOptions& options;

  size_t size() const { return operands.empty() ? metas.size() : operands.size(); }
  DType dtype(size_t i) const { return operands.empty() ? metas[i].dtype : operands[i].dtype(); }
  const Shape& shape(size_t i) const { return operands.empty() ? metas[i].shape : operands[i].shape(); }

  bool matches(const Key& key) const {
    if (key.kind != kind || key.text != text || key.broadcast != options.allow_broadcast ||
        key.metas.size() != size())
      return false;
    for (size_t i = 0; i < key.metas.size(); ++i)
      if (key.metas[i].dtype != dtype(i) || key.metas[i].shape != shape(i)) return false;
    return key.plan == options.plan;
  }

  uint64_t hash() const {
    Fnv1a h;
    h.byte(static_cast<uint8_t>(kind)).bytes(text).word(size());
    for (size_t i = 0; i < size(); ++i) {
      h.byte(static_cast<uint8_t>(dtype(i)));
      const Shape& shape_i = shape(i);
      h.word(shape_i.size());
      for (int64_t e : shape_i) h.word(static_cast<uint64_t>(e));
    }
    h.byte(options.allow_broadcast ? 1 : 0);
    if (options.plan != PlanSpec{}) h.word(options.plan.hash());
    return h.value();
  }

  Key key() const {
    Key k{kind, std::string(text), {}, options.plan, options.allow_broadcast};
    for (size_t i = 0; i < size(); ++i) k.metas.push_back(TensorMeta{dtype(i), shape(i)});
    return k;
  }
};

class PlanCache {
 public:
  template <typename Make>
  EinsumPlan get(const Probe& probe, Make&& make) {
    const uint64_t hash = probe.hash();
    {
      std::lock_guard lock(mutex_);
      auto [first, last] = map_.equal_range(hash);
      for (auto it = first; it != last; ++it)
        if (probe.matches(it->second->key)) {
          ++hits_;
          lru_.splice(lru_.begin(), lru_, it->second);
          return it->second->plan;
        }
      ++misses_;
    }
    EinsumPlan plan = make();  // outside the lock: planning may take a while; errors leave the cache unchanged
    std::lock_guard lock(mutex_);
    if (capacity_ == 0) return plan;
    auto [first, last] = map_.equal_range(hash);
    for (auto it = first; it != last; ++it)
      if (probe.matches(it->second->key)) return plan;  // another thread prepared it meanwhile
    lru_.push_front(Entry{probe.key(), hash, plan});
    map_.emplace(hash, lru_.begin());
    evict();
    return plan;
  }
  EinsumCacheStats stats() {
    std::lock_guard lock(mutex_);
    return EinsumCacheStats{hits_, misses_, map_.size(), capacity_};
  }
  void clear() {
    std::lock_guard lock(mutex_);
    map_.clear();
    lru_.clear();
    hits_ = misses_ = 0;
  }
  void set_capacity(size_t capacity) {
    std::lock_guard lock(mutex_);
    capacity_ = capacity;
    evict();
  }

 private:
  struct Entry {
    Key key;
    uint64_t hash;
    EinsumPlan plan;
  };
  using Iterator = std::list<Entry>::iterator;

  void evict() {
    while (map_.size() > capacity_) {
      const Iterator oldest = std::prev(lru_.end());
      auto [first, last] = map_.equal_range(oldest->hash);
      for (auto it = first; it != last; ++it)
        if (it->second == oldest) {
          map_.erase(it);
          break;
        }
      lru_.pop_back();
    }
  }
  std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_multimap<uint64_t, Iterator> map_;
  size_t capacity_ = 256;
  uint64_t hits_ = 0, misses_ = 0;
};

// The context's plan cache (ExecutionContext::extension_state), so two contexts share no plans; default_context()'s
// is never destroyed, because threads may still call einsum() while the process exits.
std::shared_ptr<PlanCache> cache(ExecutionContext& context) {
  return std::static_pointer_cast<PlanCache>(
      context.extension_state("einstage.einsum.plan_cache", [] { return std::make_shared<PlanCache>(); }));
}

}  // namespace

std::shared_ptr<GroupedCache> grouped_cache(ExecutionContext& context) {
  return std::static_pointer_cast<GroupedCache>(
      context.extension_state("einstage.einsum.grouped_cache", [] { return std::make_shared<GroupedCache>(); }));
}

namespace {

ExecutionContext& context_of(const EinsumOptions& options) {
  return options.context ? *options.context : default_context();
}

// What every one-shot call checks before planning.
void check_call(std::span<const Tensor> operands, const EinsumOptions& options) {
  if (options.threads < 0 || options.threads > Config::kMaxThreads)
    fail(ErrorKind::invalid_argument,
         "einsum: EinsumOptions::threads is {}; expected 0 (the default: every CPU this process may use) or a count "
         "from 1 to {}",
         options.threads, Config::kMaxThreads);
  for (size_t i = 0; i < operands.size(); ++i)
    if (!operands[i].defined()) fail(ErrorKind::invalid_argument, "einsum: operand {} is undefined", i);
}

std::vector<TensorMeta> metas_of(std::span<const Tensor> operands) {
  std::vector<TensorMeta> metas;
  metas.reserve(operands.size());
  for (const Tensor& t : operands) metas.push_back(TensorMeta::of(t));
  return metas;
}

// Calls fn(context, pool) with the options' context (default_context() unless given) and threads: the given pool,
// the context's pool, inline (nullptr), or a pool for this call.
template <typename Fn>
Tensor on_threads(const EinsumOptions& options, Fn&& fn) {
  ExecutionContext& context = context_of(options);
  if (options.pool) return fn(context, options.pool);
  if (options.threads == 0) return fn(context, &context.pool());
  if (options.threads == 1) return fn(context, nullptr);
  ThreadPool pool(options.threads);
  return fn(context, &pool);
}

Tensor run(const EinsumPlan& plan, std::span<const Tensor> operands, const EinsumOptions& options) {
  return on_threads(options, [&](ExecutionContext& context, ThreadPool* pool) {
    Tensor out = Tensor::empty(plan.dtype(), plan.output_shape(), context.scratch());
    plan.execute_into(operands, out, context, pool);
    return out;
  });
}

// plan.max_memory set: the sliced executor (not cached; planning the slices is small next to running them).
Tensor run_sliced(std::string_view subscripts, std::span<const Tensor> operands, const EinsumOptions& options) {
  const SlicedEinsumPlan plan =
      SlicedEinsumPlan::prepare(subscripts, metas_of(operands), options.plan.max_memory, options);
  return on_threads(options, [&](ExecutionContext& context, ThreadPool* pool) {
    return plan.execute(operands, context, pool);
  });
}

}  // namespace

EinsumPlan cached_plan(std::string_view subscripts, std::span<const TensorMeta> metas, const EinsumOptions& options) {
  const Probe probe{KeyKind::string, subscripts, {}, metas, options};
  return cache(context_of(options))->get(probe, [&] { return EinsumPlan::prepare(subscripts, metas, options); });
}

Tensor einsum(std::string_view subscripts, std::span<const Tensor> operands, const EinsumOptions& options) {
  check_call(operands, options);
  if (options.plan.max_memory > 0) return run_sliced(subscripts, operands, options);
  const Probe probe{KeyKind::string, subscripts, operands, {}, options};
  const EinsumPlan plan =
      cache(context_of(options))->get(probe, [&] { return EinsumPlan::prepare(subscripts, metas_of(operands), options); });
  return run(plan, operands, options);
}

Tensor einsum(std::string_view subscripts, std::initializer_list<Tensor> operands, const EinsumOptions& options) {
  return einsum(subscripts, std::span<const Tensor>(operands.begin(), operands.size()), options);
}

Tensor einsum(const Subscripts& subscripts, std::span<const Tensor> operands, const EinsumOptions& options) {
  check_call(operands, options);
  std::string text;
  for (const auto& term : subscripts.inputs) {
    for (Label l : term) text += std::to_string(l) + ' ';
    text += ',';
  }
  text += '>';
  for (Label l : subscripts.output) text += std::to_string(l) + ' ';
  text += '#';
  for (Label l : subscripts.ellipsis) text += std::to_string(l) + ' ';
  const Probe probe{KeyKind::labels, text, operands, {}, options};
  const EinsumPlan plan =
      cache(context_of(options))->get(probe, [&] { return EinsumPlan::prepare(subscripts, metas_of(operands), options); });
  return run(plan, operands, options);
}

Tensor einsum_grouped(std::string_view subscripts, std::span<const Tensor> operands,
                      std::span<const GroupLength> lengths, const EinsumOptions& options) {
  check_call(operands, options);
  std::string text(subscripts);
  for (const GroupLength& g : lengths) text += fmt::format("|len_{}={}", g.group, g.length);
  const Probe probe{KeyKind::grouped, text, operands, {}, options};
  const EinsumPlan plan = cache(context_of(options))->get(
      probe, [&] { return EinsumPlan::prepare_grouped(subscripts, metas_of(operands), lengths, options); });
  return run(plan, operands, options);
}

EinsumCacheStats einsum_cache_stats(ExecutionContext& context) { return cache(context)->stats(); }
void clear_einsum_cache(ExecutionContext& context) { cache(context)->clear(); }
void set_einsum_cache_capacity(size_t capacity, ExecutionContext& context) { cache(context)->set_capacity(capacity); }
EinsumCacheStats einsum_cache_stats() { return einsum_cache_stats(default_context()); }
void clear_einsum_cache() { clear_einsum_cache(default_context()); }
void set_einsum_cache_capacity(size_t capacity) { set_einsum_cache_capacity(capacity, default_context()); }

}  // namespace einstage::einsum
