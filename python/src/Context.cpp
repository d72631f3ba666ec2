// The binding's current execution context and runtime (Context.h).
#include "python/src/Context.h"

#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"

#include <mutex>
#include <vector>

namespace einstage::python {
namespace {

struct State {
  std::mutex mutex;
  CallContext now;
  std::vector<std::shared_ptr<ExecutionContext>> contexts;  // kept for the life of the process
  std::vector<std::unique_ptr<Runtime>> runtimes;
};

// Never destroyed: kernels may still run on the contexts' threads when the interpreter exits.
State& state() {
  static State* s = new State();
  return *s;
}

Runtime* new_runtime(RuntimeOptions options) {
  auto rt = std::make_unique<Runtime>(std::move(options));
  rt->add_module(einsum::module_descriptor());
  rt->add_module(linalg::module_descriptor());
  Runtime* raw = rt.get();
  state().runtimes.push_back(std::move(rt));
  return raw;
}

}  // namespace

CallContext current() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.now.runtime) {
    s.now.context = &default_context();
    s.now.runtime = new_runtime(RuntimeOptions{});  // threads 0: default_context()
  }
  return s.now;
}

void set_num_threads(int threads) {
  if (threads < 0) fail(ErrorKind::invalid_argument, "set_num_threads: {} threads; pass 1 or more (0: every CPU)", threads);
  ConfigOptions config;
  config.threads = threads;
  auto context = std::make_shared<ExecutionContext>(config);
  State& s = state();
  std::lock_guard lock(s.mutex);
  RuntimeOptions options;
  options.context = context;
  Runtime* rt = new_runtime(std::move(options));
  s.contexts.push_back(context);
  s.now = CallContext{context.get(), rt, s.now.generation + 1};
}

}  // namespace einstage::python
