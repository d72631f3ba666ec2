// The registration of the einsum families: which function of EinsumOp.h, Lowering.h, EinsumAd.h, EinsumAdOp.h and
// EinsumAdRules.h fills which slot of their ExtensionSemantics (see Semantics.h).
#include "extensions/einsum/op/Semantics.h"

#include "extensions/api/Family.h"
#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/EinsumAdRules.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/op/Lowering.h"

namespace einstage::einsum {

void register_einsum_ad_semantics(ExtensionRegistry& registry) {
  ExtensionSemantics sem = make_semantics<EinsumAdPayload>(std::string(kEinsumModule), infer_einsum_ad_types);
  sem.lower_results = [](Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings&) {
    return lower_einsum_ad(b, payload_of<EinsumAdPayload>(inst), operands);
  };
  sem.linearize_results = [](Builder& b, const Instruction& inst, std::span<const Value> primals,
                             std::span<const std::optional<Value>> tangents) {
    return linearize_einsum_ad(b, payload_of<EinsumAdPayload>(inst), primals, tangents);
  };
  sem.transpose_results = [](Builder& b, const Instruction& inst, std::span<const Value> operands,
                             std::span<const bool> linear, std::span<const std::optional<Value>> cts) {
    return transpose_einsum_ad(b, payload_of<EinsumAdPayload>(inst), operands, linear, cts);
  };
  sem.rewrite_derivative = merge_walks;  // the walks of one tree merged in every program AD hands to users
  registry.register_family(std::move(sem));
}

void register_einsum_semantics(ExtensionRegistry& registry) {
  ExtensionSemantics sem = make_semantics<EinsumPayload>(std::string(kEinsumModule), infer_einsum_type);
  sem.lower = [](Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings&) {
    return lower_einsum(b, payload_of<EinsumPayload>(inst), operands);
  };
  registry.register_family(std::move(sem));
  register_einsum_ad_semantics(registry);  // the derivative forms einsum's AD rules emit (EinsumAdOp.h)
  register_einsum_ad_rules(registry);  // through find_mutable, as a third-party module would (EinsumAd.h)
}

}  // namespace einstage::einsum
