// Pipeline: runs named Program -> Program passes in order, verifies the program after each one and names the pass
// that broke an invariant (XLA's "Failed after", Halide's Lower.cpp logging). Stage: compiler; depends on ir only.
//
//   Pipeline p(&registry);
//   p.add("dce", eliminate_dead_code).add("cse", eliminate_common_subexpressions);
//   Program out = p.run(traced);
//
// A verifier failure after pass 'x' throws einstage::Error (kind verification, or the verifier's own kind) whose
// message starts `verification failed after pass 'x': ` followed by the verifier's message. Dumping: when
// `set_dump` has a sink, or the pipeline's Config says dump_passes (then to stderr), the program is printed before
// the first pass and after every pass, headed `// ---- after pass 'x' ----`. The Config is the one given to
// `set_config` (a Runtime's context().config(), say); a pipeline given none reads Config::process() when it runs
// (EINSTAGE_DUMP_PASSES=1), since the compiler has no context of its own.
#pragma once

#include "ir/Config.h"
#include "ir/Program.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace einstage {

using PassFn = std::function<Program(const Program&)>;

struct Pass {
  std::string name;  // kebab or snake case, as it appears in messages ("dce", "lower-to-standard-ops")
  PassFn run;
};

class Pipeline {
 public:
  /// `registry` is what the verifier uses for extension families (null when programs have none).
  explicit Pipeline(const ExtensionRegistry* registry = nullptr) : registry_(registry) {}

  Pipeline& add(std::string name, PassFn run);
  /// Receives (heading, printed program) before the first pass ("input") and after each pass.
  Pipeline& set_dump(std::function<void(std::string_view pass, std::string_view text)> sink);
  /// Takes config.dump_passes instead of the process's (a sink given to set_dump wins over both).
  Pipeline& set_config(const Config& config);

  /// Verifies the input, then runs every pass, verifying after each.
  Program run(Program program) const;
  const std::vector<Pass>& passes() const { return passes_; }

 private:
  const ExtensionRegistry* registry_;
  std::vector<Pass> passes_;
  std::function<void(std::string_view, std::string_view)> dump_;
  std::optional<bool> dump_passes_;  // set_config's; unset: Config::process()'s
};

/// The standard clean-up: dce, cse, dce.
Pipeline simplify_pipeline(const ExtensionRegistry* registry = nullptr);
/// simplify_pipeline(registry).run(program).
Program simplify(const Program& program, const ExtensionRegistry* registry = nullptr);

}  // namespace einstage
