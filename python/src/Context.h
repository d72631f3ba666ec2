// The execution context the binding's calls run on, and the Runtime that runs traced programs on it.
//
// Stage: Python binding (python/). Until einstage.set_num_threads() is called every call runs on default_context()
// (EINSTAGE_NUM_THREADS or every CPU, runtime/Context.h), whose plan cache one-shot einsum calls share with C++ code
// in the same process. set_num_threads(n) makes a new ExecutionContext of n threads and a Runtime on it; calls that
// start afterwards use them, calls already running finish on the old ones (each call holds what it uses). Old
// contexts and runtimes are kept, never destroyed: programs traced earlier point at their registry, and kernels may
// still run on their threads. Depends on runtime/Context.h, runtime/Runtime.h and the einsum and linalg modules.
#pragma once

#include "runtime/Context.h"
#include "runtime/Runtime.h"

#include <memory>

namespace einstage::python {

/// What one call runs on: a context and the Runtime on it (both live for the rest of the process).
struct CallContext {
  ExecutionContext* context = nullptr;
  Runtime* runtime = nullptr;
  uint64_t generation = 0;  // changes with every set_num_threads
};

/// The current context and runtime (the runtime has the einsum and linalg modules linked in).
CallContext current();
/// A new context of `threads` threads (0: every CPU this process may use) for the calls that start afterwards.
void set_num_threads(int threads);

}  // namespace einstage::python
