#include "runtime/Runtime.h"

#include "ir/Hash.h"
#include "ir/Quote.h"
#include "ir/Verifier.h"
#include "runtime/Context.h"
#include "runtime/Cpus.h"
#include "runtime/ModuleLoader.h"
#include "runtime/ThreadPool.h"

#include <fmt/format.h>

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace einstage {

namespace {

// ---- the prepared-op cache: (family, payload, operand types) -> PreparedOp ----
//
// A hit costs one hash of the payload's hash, dtypes and extents and one comparison per candidate, straight from the
// run's tensors: no TensorType, key or vector is built (a gradient program runs many extension ops with dozens of
// operands each, so a per-run allocation per operand was most of a small op's time). Operand types are built on a
// miss only, for the executor.

using PreparedFuture = std::shared_future<std::shared_ptr<const PreparedOp>>;

struct CacheEntry {
  std::shared_ptr<const ExtensionPayload> payload;  // equal hashes are told apart by equals()
  std::vector<std::pair<DType, Shape>> operands;
  PreparedFuture prepared;
  uint64_t last_used = 0;                           // for least-recently-used eviction
  bool matches(const ExtensionOp& op, std::span<const Tensor> tensors) const {
    if (operands.size() != tensors.size()) return false;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (operands[i].first != tensors[i].dtype() || operands[i].second != tensors[i].shape()) return false;
    return payload->family() == op.family() && payload->equals(*op.payload);
  }
};

uint64_t cache_key(const ExtensionOp& op, std::span<const Tensor> operands) {
  Fnv1a h(op.payload->hash());
  h.bytes(op.family());
  for (const Tensor& t : operands) {
    h.word(static_cast<uint64_t>(t.dtype())).word(t.shape().size());
    for (int64_t e : t.shape()) h.word(static_cast<uint64_t>(e));
  }
  return h.value();
}

}  // namespace

class PreparedCache {
 public:
  explicit PreparedCache(size_t capacity) : capacity_(capacity) {}

  /// The prepared form of `op` for these operands, preparing it on a miss (with the operands' types and the
  /// result types `results()`); concurrent misses on one key prepare once (the others wait for it). A failed prepare
  /// is not cached.
  std::shared_ptr<const PreparedOp> get(const ExtensionOp& op, const ExtensionExecutor& executor,
                                        std::span<const Tensor> operands, const std::function<std::vector<TensorType>()>& results,
                                        ExecutionContext& context, bool* hit) {
    const uint64_t key = cache_key(op, operands);
    std::promise<std::shared_ptr<const PreparedOp>> promise;
    {
      std::unique_lock lock(mutex_);
      auto& bucket = map_[key];
      for (CacheEntry& e : bucket)
        if (e.matches(op, operands)) {
          PreparedFuture f = e.prepared;
          e.last_used = ++tick_;
          ++hits_;
          lock.unlock();
          *hit = true;
          return f.get();  // waits if another thread is still preparing it
        }
      std::vector<std::pair<DType, Shape>> metas;
      for (const Tensor& t : operands) metas.emplace_back(t.dtype(), t.shape());
      bucket.push_back({op.payload, std::move(metas), promise.get_future().share(), ++tick_});
      ++misses_;
      if (++count_ > capacity_) evict_oldest(tick_);
    }
    *hit = false;
    try {
      std::vector<TensorType> types;
      for (const Tensor& t : operands) {
        TensorType type{t.dtype(), {}};
        for (int64_t e : t.shape()) type.dims.emplace_back(e);
        types.push_back(std::move(type));
      }
      std::shared_ptr<const PreparedOp> prepared = executor.prepare(*op.payload, types, results(), context);
      if (!prepared)
        fail(ErrorKind::runtime, "the executor of family \"{}\" prepared nothing (null)", op.family());
      promise.set_value(prepared);
      return prepared;
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard lock(mutex_);
      if (auto it = map_.find(key); it != map_.end()) {  // (it may have been evicted meanwhile)
        count_ -= std::erase_if(it->second, [&](const CacheEntry& e) { return e.payload == op.payload; });
        if (it->second.empty()) map_.erase(it);
      }
      throw;
    }
  }

  PreparedCacheStats stats() const {
    std::lock_guard lock(mutex_);
    return PreparedCacheStats{hits_, misses_, count_, evictions_, capacity_};
  }

  void clear() {
    std::lock_guard lock(mutex_);
    map_.clear();
    hits_ = misses_ = evictions_ = 0;
    count_ = 0;
  }

 private:
  // Drops the least recently used entry other than the one just used (`keep`). Threads waiting on it hold their own
  // copy of its future, so they still get its result. Runs on misses only; a linear scan is cheap beside a prepare.
  void evict_oldest(uint64_t keep) {
    auto oldest_bucket = map_.end();
    size_t oldest_index = 0;
    uint64_t oldest = UINT64_MAX;
    for (auto it = map_.begin(); it != map_.end(); ++it)
      for (size_t i = 0; i < it->second.size(); ++i)
        if (it->second[i].last_used != keep && it->second[i].last_used < oldest) {
          oldest = it->second[i].last_used;
          oldest_bucket = it;
          oldest_index = i;
        }
    if (oldest_bucket == map_.end()) return;
    oldest_bucket->second.erase(oldest_bucket->second.begin() + static_cast<std::ptrdiff_t>(oldest_index));
    if (oldest_bucket->second.empty()) map_.erase(oldest_bucket);
    --count_;
    ++evictions_;
  }

  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<CacheEntry>> map_;
  size_t capacity_;
  size_t count_ = 0;
  uint64_t tick_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

struct Runtime::State {
  mutable std::mutex mutex;  // guards registry, executors and modules while modules are added
  ExtensionRegistry registry;
  std::map<std::string, std::shared_ptr<const ExtensionExecutor>, std::less<>> executors;
  std::map<std::string, size_t, std::less<>> family_module;  // family -> index in modules
  std::deque<ModuleInfo> modules;                             // deque: add_module hands out stable references
  std::shared_ptr<ExecutionContext> context;  // default_context() (not owned), its own, or the one it was given
  ThreadPool* pool = nullptr;                  // the context's pool, or nullptr when it has one thread
  PreparedCache cache;

  explicit State(size_t cache_capacity) : cache(cache_capacity) {}

  const ModuleInfo& add(const EinstageModuleDescriptor* d, const std::string& origin);
};

std::string module_library_name(std::string_view module_name) {
  std::string file = "lib";
  for (char c : module_name) file += c == '.' ? '_' : c;
  return file + "_module.so";
}

const ModuleInfo& Runtime::State::add(const EinstageModuleDescriptor* d, const std::string& origin) {
  check_module_descriptor(d, origin);
  const std::string name = d->name;
  const std::string who = origin == "linked" ? fmt::format("module '{}' (linked in)", name)
                                             : fmt::format("module '{}' ('{}')", name, shown_arg(origin));
  std::lock_guard lock(mutex);
  for (size_t i = 0; i < d->family_count; ++i) {
    std::string_view family = d->families[i].family;
    auto it = family_module.find(family);
    if (it != family_module.end()) {
      const ModuleInfo& other = modules[it->second];
      fail(ErrorKind::invalid_argument, "{} provides extension family \"{}\", which module '{}' ({}) already "
           "provides; a family is registered once per Runtime", who, family, other.name,
           other.origin == "linked" ? "linked in" : "'" + shown_arg(other.origin) + "'");
    }
  }
  // Stage everything; commit only when every family registered cleanly.
  ModuleRegistrar registrar(name, HostServices{kModuleAbiVersion, origin});
  std::vector<std::string> declared;
  for (size_t i = 0; i < d->family_count; ++i) {
    const EinstageFamilyEntry& entry = d->families[i];
    declared.emplace_back(entry.family);
    try {
      entry.register_family(registrar);
    } catch (const Error& e) {
      fail(e.kind(), "{}: registering family \"{}\" failed: {}", who, entry.family, e.what());
    } catch (const std::exception& e) {
      fail(ErrorKind::runtime, "{}: registering family \"{}\" failed: {}", who, entry.family, e.what());
    } catch (...) {
      fail(ErrorKind::runtime, "{}: registering family \"{}\" failed with an unknown exception", who, entry.family);
    }
    if (!registrar.staged_semantics().find(entry.family))
      fail(ErrorKind::runtime, "{}: the registration function of family \"{}\" registered no semantics for it; call "
           "registrar.semantics().register_family(...)", who, entry.family);
    if (!registrar.staged_executors().count(entry.family))
      fail(ErrorKind::runtime, "{}: the registration function of family \"{}\" registered no executor for it; call "
           "registrar.set_executor(\"{}\", ...)", who, entry.family, entry.family);
  }
  auto is_declared = [&](std::string_view f) { return std::find(declared.begin(), declared.end(), f) != declared.end(); };
  for (const std::string& f : registrar.staged_semantics().families())
    if (!is_declared(f))
      fail(ErrorKind::runtime, "{} registered family \"{}\", which its descriptor does not list; list every family "
           "it provides", who, f);
  for (const auto& [f, e] : registrar.staged_executors())
    if (!is_declared(f))
      fail(ErrorKind::runtime, "{} registered an executor for family \"{}\", which its descriptor does not list", who,
           f);

  // Commit: nothing below can fail (names were checked against this registry under the lock, slots by staging).
  ModuleInfo info{name, d->version, origin, declared};
  for (const std::string& f : declared) {
    ExtensionSemantics s = *registrar.staged_semantics().find(f);
    if (s.module.empty()) s.module = name;
    registry.register_family(std::move(s));
    executors.emplace(f, registrar.staged_executors().find(f)->second);
    family_module.emplace(f, modules.size());
  }
  modules.push_back(std::move(info));
  return modules.back();
}

// ---- Runtime ----

Runtime::Runtime(RuntimeOptions options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    fail(ErrorKind::invalid_argument,
         "RuntimeOptions::threads is {}; expected 0 (the default: every CPU this process may use) or a count from 1 "
         "to {}",
         options.threads, kMaxThreads);
  if (options.cache_capacity < 1)
    fail(ErrorKind::invalid_argument, "RuntimeOptions::cache_capacity is 0; expected 1 or more");
  if (options.context && options.threads != 0)
    fail(ErrorKind::invalid_argument, "RuntimeOptions::threads is {} and RuntimeOptions::context is set; the context's "
         "thread count applies: leave threads at 0", options.threads);
  state_ = std::make_shared<State>(options.cache_capacity);
  if (options.context) {
    state_->context = std::move(options.context);
  } else if (options.threads == 0) {
    state_->context = default_context_handle();  // keeps an installed default alive while this Runtime lives
  } else {
    ConfigOptions config;
    config.threads = options.threads;
    state_->context = std::make_shared<ExecutionContext>(config);
  }
  ThreadPool& pool = state_->context->pool();
  state_->pool = pool.size() > 1 ? &pool : nullptr;
}
Runtime::~Runtime() = default;
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;

const ModuleInfo& Runtime::add_module(const EinstageModuleDescriptor* descriptor) {
  return state_->add(descriptor, "linked");
}

const ModuleInfo& Runtime::load_module(const std::string& path) {
  ModuleLibrary lib = open_module_library(path);
  try {
    return state_->add(lib.descriptor, path);
  } catch (...) {
    close_module_library(lib);  // refused: nothing of it was registered, so nothing refers to its code
    throw;
  }
}

std::vector<ModuleInfo> Runtime::modules() const {
  std::lock_guard lock(state_->mutex);
  return {state_->modules.begin(), state_->modules.end()};
}

const ExtensionRegistry& Runtime::registry() const { return state_->registry; }
PreparedCacheStats Runtime::cache_stats() const { return state_->cache.stats(); }
void Runtime::clear_cache() { state_->cache.clear(); }
ThreadPool* Runtime::pool() const { return state_->pool; }
ExecutionContext& Runtime::context() const { return *state_->context; }

// ---- Executable ----

struct Executable::Impl {
  std::shared_ptr<Runtime::State> state;
  Program program;
  std::unique_ptr<Interpreter> interpreter;                          // refers to `program` (Impl never moves)
  std::vector<std::shared_ptr<const ExtensionExecutor>> executors;  // by instruction index; null for standard ops
  mutable std::atomic<uint64_t> runs{0}, hits{0}, misses{0};

  std::shared_ptr<const PreparedOp> prepared(const Instruction& inst, const std::string& where,
                                             std::span<const Tensor> operands, const DimBindings& bindings) const {
    const auto& op = std::get<ExtensionOp>(inst.op);
    auto index = static_cast<size_t>(&inst - program.instructions.data());
    auto results = [&] {
      std::vector<TensorType> types;
      for (const Value& r : inst.results) {
        TensorType& result = types.emplace_back(TensorType{r.type.dtype, {}});
        for (int64_t e : evaluate_shape(r.type, bindings)) result.dims.emplace_back(e);  // bound by run()
      }
      return types;
    };
    bool hit = false;
    try {
      auto p = state->cache.get(op, *executors[index], operands, results, *state->context, &hit);
      ++(hit ? hits : misses);
      return p;
    } catch (const Error& e) {
      fail(e.kind(), "'{}' at {}: {}", op.family(), where, e.what());
    }
  }
};

Executable Runtime::prepare(const Program& program) const {
  auto impl = std::make_shared<Executable::Impl>();
  impl->state = state_;
  impl->program = program;
  {
    std::lock_guard lock(state_->mutex);
    for (const Instruction& inst : program.instructions) {
      const auto* ext = std::get_if<ExtensionOp>(&inst.op);
      if (!ext) {
        impl->executors.emplace_back();
        continue;
      }
      auto it = state_->executors.find(ext->family());
      if (it == state_->executors.end()) {
        std::string family(ext->family());
        std::string module = family.substr(0, family.rfind('.'));
        fail(ErrorKind::not_found, "@{}: missing extension family \"{}\" (used by {}): load the module that provides "
             "it (Runtime::load_module(\"path/to/{}\")) or link the module in and call Runtime::add_module with its "
             "descriptor", program.name, family, value_names(program)[inst.results[0].id],
             module_library_name(module));
      }
      impl->executors.push_back(it->second);
    }
    verify(impl->program, &state_->registry);
  }
  impl->interpreter = std::make_unique<Interpreter>(impl->program);
  return Executable(std::move(impl));
}

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs) const { return run(inputs, nullptr); }

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs, EvalStats* stats) const {
  const Impl& impl = *impl_;
  EvalOptions options;
  options.pool = impl.state->pool;
  options.extension = [&impl](const Instruction& inst, const std::string& where, std::span<const Tensor> operands,
                               const DimBindings& bindings) {
    return impl.prepared(inst, where, operands, bindings)->run_results(operands, *impl.state->context);
  };
  ++impl.runs;
  return impl.interpreter->run(inputs, options, stats);
}

std::string Executable::describe_prepared(std::span<const Tensor> inputs) const {
  const Impl& impl = *impl_;
  std::string text;
  auto names = value_names(impl.program);
  EvalOptions options;
  options.pool = impl.state->pool;
  options.extension = [&](const Instruction& inst, const std::string& where, std::span<const Tensor> operands,
                          const DimBindings& bindings) {
    auto p = impl.prepared(inst, where, operands, bindings);
    std::vector<std::string> types;
    for (const Tensor& t : operands) types.push_back(fmt::format("{}{}", name(t.dtype()), shape_to_string(t.shape())));
    std::vector<std::string> results;
    for (const Value& r : inst.results) results.push_back(names[r.id]);
    text += fmt::format("{} = {} on {}:\n", fmt::join(results, ", "), op_name(inst.op), fmt::join(types, ", "));
    std::string d = p->describe();
    if (!d.empty()) text += d + (d.back() == '\n' ? "" : "\n");
    return p->run_results(operands, *impl.state->context);
  };
  impl.interpreter->run(inputs, options);
  return text;
}

const Program& Executable::program() const { return impl_->program; }

Executable::Stats Executable::stats() const { return {impl_->runs.load(), impl_->hits.load(), impl_->misses.load()}; }

}  // namespace einstage
