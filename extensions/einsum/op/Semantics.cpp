// The registration of the einsum families: which function of EinsumOp.h, Lowering.h, EinsumAd.h, EinsumAdOp.h and
// EinsumAdRules.h fills which slot of their ExtensionSemantics (see Semantics.h).
#include "extensions/einsum/op/Semantics.h"

#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/EinsumAdRules.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/op/Lowering.h"

namespace einstage::einsum {

namespace {

const EinsumAdPayload& ad_payload_of(const Instruction& inst) {
  return static_cast<const EinsumAdPayload&>(*std::get<ExtensionOp>(inst.op).payload);
}

}  // namespace

void register_einsum_ad_semantics(ExtensionRegistry& registry) {
  ExtensionSemantics sem;
  sem.family = std::string(kEinsumAdFamily);
  sem.module = std::string(kEinsumModule);
  sem.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return EinsumAdPayload::parse_text(text);
  };
  sem.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return EinsumAdPayload::parse_json(text);
  };
  sem.infer_types = [](const ExtensionPayload& payload, Types operands, TypeContext& ctx) {
    return infer_einsum_ad_types(static_cast<const EinsumAdPayload&>(payload), operands, ctx);
  };
  sem.lower_results = [](Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings&) {
    return lower_einsum_ad(b, ad_payload_of(inst), operands);
  };
  sem.linearize_results = [](Builder& b, const Instruction& inst, std::span<const Value> primals,
                             std::span<const std::optional<Value>> tangents) {
    return linearize_einsum_ad(b, ad_payload_of(inst), primals, tangents);
  };
  sem.rewrite_derivative = merge_walks;  // the walks of one tree merged in every program AD hands to users
  sem.transpose_results = [](Builder& b, const Instruction& inst, std::span<const Value> operands,
                             std::span<const bool> linear, std::span<const std::optional<Value>> cts) {
    return transpose_einsum_ad(b, ad_payload_of(inst), operands, linear, cts);
  };
  registry.register_family(std::move(sem));
}

void register_einsum_semantics(ExtensionRegistry& registry) {
  ExtensionSemantics sem;
  sem.family = std::string(kEinsumFamily);
  sem.module = std::string(kEinsumModule);
  sem.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return EinsumPayload::parse_text(text);
  };
  sem.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return EinsumPayload::parse_json(text);
  };
  sem.infer_type = [](const ExtensionPayload& payload, Types operands, TypeContext& ctx) {
    return infer_einsum_type(static_cast<const EinsumPayload&>(payload), operands, ctx);
  };
  sem.lower = [](Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings&) {
    const auto& ext = std::get<ExtensionOp>(inst.op);
    return lower_einsum(b, static_cast<const EinsumPayload&>(*ext.payload), operands);
  };
  registry.register_family(std::move(sem));
  register_einsum_ad_semantics(registry);  // the derivative forms einsum's AD rules emit (EinsumAdOp.h)
  register_einsum_ad_rules(registry);  // through find_mutable, as a third-party module would (EinsumAd.h)
}

}  // namespace einstage::einsum
