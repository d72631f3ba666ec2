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

/// "%k in @name" for an instruction of `program` (`inst` is one of program.instructions; %k is its first result's
/// printed name), as messages name it. Made only for a message: it counts the results before the instruction.
std::string instruction_where(const Program& program, const Instruction& inst);

/// Refuses `program` when it has an extension op and `registry` is null: differentiating it needs the rules its
/// module registered (the error names the first such instruction and says how to pass the registry).
void check_registry(const Program& program, const ExtensionRegistry* registry);

/// The rules of extension family `family` for an AD pass, from `registry`. Without a registry the error says that
/// one is needed and how to pass it (the unknown-family message would send the user to register a module that is
/// registered); with one that lacks the family, the unknown-family message. `where` names the instruction.
const ExtensionSemantics& ad_semantics(const ExtensionRegistry* registry, std::string_view family,
                                       const std::string& where);

/// DCE, CSE, DCE: what every transformation returns (by value: callers move the program they built in).
Program clean_up(Program program);

/// What a public transformation (jvp, vjp, grad, value_and_grad) hands to the user: `program` after every family's
/// rewrite_derivative in `registry`, in the order of the family names (ir/Extension.h). The one place those rewrites
/// run; never inside linearize or transpose, whose results are transformed further.
Program finish_public(Program program, const ExtensionRegistry* registry);

}  // namespace einstage::ad::detail
