// Helpers shared by the AD transformations (Jvp.cpp, Transpose.cpp, Vjp.cpp): index validation, fresh parameter
// names, the clean-up every transformation ends with. Stage: compiler (AD), internal to compiler/ad; depends on ir
// and the compiler's DCE/CSE passes.
#pragma once

#include "ir/Extension.h"
#include "ir/Program.h"

#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::ad::detail {

/// Checks that `indices` are distinct parameter indices of floating dtype; `what` names the argument ("wrt").
void check_parameter_indices(const Program& program, std::span<const int> indices, std::string_view transform,
                             std::string_view what);

/// `base`, or `base` followed by as many '_' as needed to be unused; the result is added to `used`.
std::string fresh_name(std::set<std::string>& used, const std::string& base);

/// "%k in @name" for an instruction of `program` (by its first result's printed name in `names`, value_names of
/// the program), as messages name it.
std::string instruction_where(const Program& program, const std::map<ValueId, std::string>& names,
                              const Instruction& inst);

/// DCE, CSE, DCE: what every transformation returns.
Program clean_up(const Program& program);

/// What a public transformation (jvp, vjp, grad, value_and_grad) hands to the user: `program` after every family's
/// rewrite_derivative in `registry`, in the order of the family names (ir/Extension.h). The one place those rewrites
/// run; never inside linearize or transpose, whose results are transformed further.
Program finish_public(const Program& program, const ExtensionRegistry* registry);

}  // namespace einstage::ad::detail
