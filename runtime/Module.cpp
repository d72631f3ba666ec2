#include "runtime/Module.h"

namespace einstage {

Tensor PreparedOp::run(std::span<const Tensor>, ExecutionContext&) const {
  fail(ErrorKind::unsupported, "this prepared op overrides neither run nor run_results; a module's prepared op "
       "implements run (one result) or run_results (several)");
}

void ModuleRegistrar::set_executor(std::string_view family, std::shared_ptr<const ExtensionExecutor> executor) {
  if (!executor) fail(ErrorKind::invalid_argument, "module '{}': the executor of family \"{}\" is null", module_, family);
  if (executors_.count(family))
    fail(ErrorKind::invalid_argument, "module '{}': family \"{}\" gets a second executor; register one per family",
         module_, family);
  executors_.emplace(std::string(family), std::move(executor));
}

}  // namespace einstage
