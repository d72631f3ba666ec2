// The registration of the einsum extension families into an ExtensionRegistry: `einstage.einsum.v1` (payload
// readers and type rule from EinsumOp.h, lowering from Lowering.h, linearize and transpose from EinsumAd.h) and its
// derivative family `einstage.einsum_ad.v1` (EinsumAdOp.h, its rules from EinsumAdRules.h). Explicit calls that a
// module entry point (Module.cpp) or a test makes, never a static initialiser. Stage: compiler side of the einsum
// extension, the top of its op layer; depends on ir and the headers named above; not on compiler/ or runtime/.
#pragma once

#include "ir/Extension.h"

namespace einstage::einsum {

/// Registers `einstage.einsum.v1` (parse_text, parse_json, infer_type, lower, and the AD rules of the tree path,
/// register_einsum_ad_rules in EinsumAd.h) and `einstage.einsum_ad.v1` in `registry`. Fails if a family is already
/// registered.
void register_einsum_semantics(ExtensionRegistry& registry);

/// Registers `einstage.einsum_ad.v1` (payload readers, type rule, linearize and transpose rules, lowering, and
/// merge_walks as its rewrite_derivative) in `registry`. register_einsum_semantics calls it after registering the
/// einsum family.
void register_einsum_ad_semantics(ExtensionRegistry& registry);

}  // namespace einstage::einsum
