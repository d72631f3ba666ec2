#include "compiler/Pipeline.h"

#include "compiler/Cse.h"
#include "compiler/Dce.h"
#include "ir/Config.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <fmt/format.h>

#include <cstdio>

namespace einstage {

Pipeline& Pipeline::add(std::string name, PassFn run) {
  EIN_ASSERT(run != nullptr, "pass '{}' has no function", name);
  passes_.push_back({std::move(name), std::move(run)});
  return *this;
}

Pipeline& Pipeline::set_dump(std::function<void(std::string_view, std::string_view)> sink) {
  dump_ = std::move(sink);
  return *this;
}

Pipeline& Pipeline::set_config(const Config& config) {
  dump_passes_ = config.dump_passes;
  return *this;
}

Program Pipeline::run(Program program) const {
  std::function<void(std::string_view, std::string_view)> dump = dump_;
  if (!dump) {
    if (dump_passes_ ? *dump_passes_ : Config::process().dump_passes)  // no Config given: EINSTAGE_DUMP_PASSES=1
      dump = [](std::string_view pass, std::string_view text) {
        std::fputs(fmt::format("// ---- after pass '{}' ----\n{}", pass, text).c_str(), stderr);
      };
  }
  auto check = [&](const Program& p, std::string_view stage) {
    try {
      verify(p, registry_);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("verification failed {}: {}", stage, e.what()));
    }
  };
  check(program, "on the pipeline's input");
  if (dump) dump("input", print_program(program));
  for (const Pass& pass : passes_) {
    try {
      program = pass.run(program);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("pass '{}' failed: {}", pass.name, e.what()));
    }
    check(program, fmt::format("after pass '{}'", pass.name));
    if (dump) dump(pass.name, print_program(program));
  }
  return program;
}

Pipeline simplify_pipeline(const ExtensionRegistry* registry) {
  Pipeline p(registry);
  p.add("dce", eliminate_dead_code).add("cse", eliminate_common_subexpressions).add("dce", eliminate_dead_code);
  return p;
}

Program simplify(const Program& program, const ExtensionRegistry* registry) {
  return simplify_pipeline(registry).run(program);
}

}  // namespace einstage
