// Runtime and Executable: the loaded extension modules, the cache of prepared extension ops, and programs prepared
// to run on concrete inputs. Stage: runtime (the last two stages of docs/architecture.md: prepare, run). Depends on
// ir/, runtime/Interpreter.h and runtime/Module.h; never on compiler/ or extensions/ (modules arrive through
// add_module / load_module).
//
//   Runtime rt;
//   rt.add_module(einstage::einsum::module_descriptor());        // linked in, or:
//   rt.load_module("lib/libeinstage_einsum_module.so");          // a shared library, by path
//   Executable exe = rt.prepare(program);                         // every extension family must be provided
//   std::vector<Tensor> out = exe.run({x, w});                    // binds n from x, checks constraints, runs
//
// prepare() checks that a loaded module provides every extension family the program uses (the error names the
// family and how to load it), re-verifies the program against the runtime's registry and resolves each extension
// instruction to its family's executor. run() binds the symbolic dims from the inputs (errors name the parameter),
// checks the recorded shape constraints (errors name the instruction, the symbol and both values) and evaluates:
// standard ops on the interpreter's kernels, extension ops through their module's executor. The first time an
// extension op meets a set of concrete operand types it is prepared (einsum: the tree is planned) and cached in the
// Runtime under (payload, operand types); later runs with the same shapes only execute. The cache is shared by
// every Executable of the Runtime, is thread-safe (concurrent misses on one key prepare once; the others wait), is
// bounded (least recently used entries are dropped beyond RuntimeOptions::cache_capacity), and its hits, misses and
// evictions are observable. An Executable keeps the Runtime's state alive, so it may outlive the Runtime
// object, and it may run from several threads at once with identical results.
#pragma once

#include "ir/Program.h"
#include "runtime/Interpreter.h"
#include "runtime/Module.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace einstage {

class ExecutionContext;
class ThreadPool;

struct RuntimeOptions {
  /// Threads for the kernels. 0 (the default): default_threads() (runtime/Cpus.h: every CPU this process may use, or
  /// EINSTAGE_NUM_THREADS), on default_context() that one-shot einsum calls share; 1: run on the calling thread;
  /// n > 1: the Runtime owns an ExecutionContext of n threads (with its own JIT). Results are bitwise the same at
  /// every count.
  int threads = 0;
  /// Prepared extension ops kept at most (least recently used ones are dropped beyond it; >= 1).
  size_t cache_capacity = 1024;
  /// A context to share (runtime/Context.h); threads must then be 0. The Runtime and its Executables keep it alive.
  std::shared_ptr<ExecutionContext> context = nullptr;
};

/// A module the Runtime has registered.
struct ModuleInfo {
  std::string name;     // "einstage.einsum"
  std::string version;  // the module's own version
  std::string origin;   // the library path, or "linked"
  std::vector<std::string> families;
};

struct PreparedCacheStats {
  uint64_t hits = 0;       // runs of an extension op that found it prepared
  uint64_t misses = 0;     // runs that prepared it (einsum: planned a tree)
  size_t entries = 0;      // distinct (payload, operand types) held now
  uint64_t evictions = 0;  // entries dropped to stay within the capacity
  size_t capacity = 0;
};

class Executable;

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(Runtime&&) noexcept;
  Runtime& operator=(Runtime&&) noexcept;

  /// Registers a module linked into this program (its descriptor function called directly). Transactional: on any
  /// error (bad descriptor, a family already provided, a registration function that throws or registers the wrong
  /// thing) nothing of the module is registered.
  const ModuleInfo& add_module(const EinstageModuleDescriptor* descriptor);
  /// Loads a module from a shared library by path (dlopen) and registers it like add_module. Errors name the file:
  /// missing or unreadable file, not a library, no entry symbol, wrong ABI version, a family already provided.
  const ModuleInfo& load_module(const std::string& path);
  /// Registered modules in the order they were added.
  std::vector<ModuleInfo> modules() const;

  /// The compiler-side semantics of every family of every registered module: give it to the parser, the JSON
  /// reader, a Builder or a TraceContext. Register modules before sharing the Runtime between threads.
  const ExtensionRegistry& registry() const;

  /// Checks and prepares a program (copied into the Executable). Fails (not_found) naming the first extension
  /// family no registered module provides, and how to load it.
  Executable prepare(const Program& program) const;

  PreparedCacheStats cache_stats() const;
  /// Drops every prepared op (the next run of each prepares again) and resets the counters.
  void clear_cache();
  /// The pool the kernels run on: its context's, or nullptr when that has one thread.
  ThreadPool* pool() const;
  /// The context its kernels and extension ops run on (default_context(), its own, or the one it was given).
  ExecutionContext& context() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// A program ready to run; cheap to copy (shared, immutable).
class Executable {
 public:
  /// Runs the program; see the header comment. Thread-safe.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
  std::vector<Tensor> run(std::initializer_list<Tensor> inputs) const {
    return run(std::span<const Tensor>(inputs.begin(), inputs.size()));
  }
  /// The same, also reporting what the interpreter did.
  std::vector<Tensor> run(std::span<const Tensor> inputs, EvalStats* stats) const;

  /// For each extension instruction, the prepared form for these inputs (preparing it through the cache if needed):
  /// "%3 = einstage.einsum.v1 on f64[6,2,3], f64[6,3,4]:" followed by the module's describe() lines.
  std::string describe_prepared(std::span<const Tensor> inputs) const;

  const Program& program() const;
  /// This Executable's runs and how its extension ops fared in the Runtime's cache.
  struct Stats {
    uint64_t runs = 0;
    uint64_t hits = 0;    // extension op runs that found their prepared form
    uint64_t misses = 0;  // extension op runs that prepared it
  };
  Stats stats() const;

  struct Impl;

 private:
  friend class Runtime;
  explicit Executable(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// The library file name a module named `name` ships as by einstage's convention: "einstage.einsum" ->
/// "libeinstage_einsum_module.so". Used in messages that say how to load a family's module.
std::string module_library_name(std::string_view module_name);

}  // namespace einstage
