#include "extensions/einsum/Einsum.h"

#include "runtime/ThreadPool.h"

#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace einstage::einsum {
namespace {

// The cache key: everything a plan depends on, serialised into one string (kind tag, subscripts, shapes, dtypes,
// plan spec, broadcast bit, group lengths).
void append_metas(std::string& key, std::span<const TensorMeta> metas) {
  for (const TensorMeta& m : metas) {
    key += '|';
    key += name(m.dtype);
    for (int64_t e : m.shape) {
      key += ':';
      key += std::to_string(e);
    }
  }
}

void append_options(std::string& key, const EinsumOptions& options) {
  key += options.allow_broadcast ? "|b1|" : "|b0|";
  if (options.plan != PlanSpec{}) key += options.plan.to_string();
}

class PlanCache {
 public:
  template <typename Make>
  EinsumPlan get(const std::string& key, Make&& make) {
    {
      std::lock_guard lock(mutex_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        ++hits_;
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
      ++misses_;
    }
    EinsumPlan plan = make();  // outside the lock: planning may take a while; errors leave the cache unchanged
    std::lock_guard lock(mutex_);
    if (capacity_ == 0 || map_.count(key)) return plan;
    lru_.emplace_front(key, plan);
    map_[key] = lru_.begin();
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
  void evict() {
    while (map_.size() > capacity_) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  std::mutex mutex_;
  std::list<std::pair<std::string, EinsumPlan>> lru_;  // most recent first
  std::unordered_map<std::string, std::list<std::pair<std::string, EinsumPlan>>::iterator> map_;
  size_t capacity_ = 256;
  uint64_t hits_ = 0, misses_ = 0;
};

PlanCache& cache() {
  static PlanCache instance;
  return instance;
}

std::vector<TensorMeta> metas_of(std::span<const Tensor> operands) {
  std::vector<TensorMeta> metas;
  metas.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].defined()) fail(ErrorKind::invalid_argument, "einsum: operand {} is undefined", i);
    metas.push_back(TensorMeta::of(operands[i]));
  }
  return metas;
}

// Runs a plan with the options' threads: the given pool, or one made for this call.
Tensor run(const EinsumPlan& plan, std::span<const Tensor> operands, const EinsumOptions& options) {
  if (options.pool || options.threads <= 1) return plan.execute(operands, options.pool);
  ThreadPool pool(options.threads);
  return plan.execute(operands, &pool);
}

}  // namespace

EinsumPlan cached_plan(std::string_view subscripts, std::span<const TensorMeta> metas, const EinsumOptions& options) {
  std::string key = "s|";
  key += subscripts;
  append_metas(key, metas);
  append_options(key, options);
  return cache().get(key, [&] { return EinsumPlan::prepare(subscripts, metas, options); });
}

Tensor einsum(std::string_view subscripts, std::span<const Tensor> operands, const EinsumOptions& options) {
  const std::vector<TensorMeta> metas = metas_of(operands);
  return run(cached_plan(subscripts, metas, options), operands, options);
}

Tensor einsum(std::string_view subscripts, std::initializer_list<Tensor> operands, const EinsumOptions& options) {
  return einsum(subscripts, std::span<const Tensor>(operands.begin(), operands.size()), options);
}

Tensor einsum(const Subscripts& subscripts, std::span<const Tensor> operands, const EinsumOptions& options) {
  const std::vector<TensorMeta> metas = metas_of(operands);
  std::string key = "i|";
  for (const auto& term : subscripts.inputs) {
    for (Label l : term) key += std::to_string(l) + ' ';
    key += ',';
  }
  key += '>';
  for (Label l : subscripts.output) key += std::to_string(l) + ' ';
  key += '#';
  for (Label l : subscripts.ellipsis) key += std::to_string(l) + ' ';
  append_metas(key, metas);
  append_options(key, options);
  EinsumPlan plan = cache().get(key, [&] { return EinsumPlan::prepare(subscripts, metas, options); });
  return run(plan, operands, options);
}

Tensor einsum_grouped(std::string_view subscripts, std::span<const Tensor> operands,
                      std::span<const GroupLength> lengths, const EinsumOptions& options) {
  const std::vector<TensorMeta> metas = metas_of(operands);
  std::string key = "g|";
  key += subscripts;
  for (const GroupLength& g : lengths) key += fmt::format("|len_{}={}", g.group, g.length);
  append_metas(key, metas);
  append_options(key, options);
  EinsumPlan plan = cache().get(key, [&] { return EinsumPlan::prepare_grouped(subscripts, metas, lengths, options); });
  return run(plan, operands, options);
}

EinsumCacheStats einsum_cache_stats() { return cache().stats(); }
void clear_einsum_cache() { cache().clear(); }
void set_einsum_cache_capacity(size_t capacity) { cache().set_capacity(capacity); }

}  // namespace einstage::einsum
