// The einsum module: its runtime executor (EinsumPlan per concrete shapes) and the descriptor.
#include "extensions/einsum/Module.h"

#include "extensions/einsum/EinsumOp.h"
#include "extensions/einsum/Executor.h"

namespace einstage::einsum {

namespace {

class PreparedEinsum final : public PreparedOp {
 public:
  explicit PreparedEinsum(EinsumPlan plan) : plan_(std::move(plan)) {}
  Tensor run(std::span<const Tensor> operands, ThreadPool* pool) const override { return plan_.execute(operands, pool); }
  std::string describe() const override { return plan_.to_string(); }

 private:
  EinsumPlan plan_;  // immutable; execute() allocates its own arena, so concurrent runs are safe
};

class EinsumExecutor final : public ExtensionExecutor {
 public:
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload, std::span<const TensorType> operands,
                                            const TensorType&) const override {
    EIN_ASSERT(payload.family() == kEinsumFamily, "einsum executor given a '{}' payload", payload.family());
    // Same class on both sides of a module boundary (same headers, checked by the ABI version), so a static_cast
    // is right even when the payload was made by the host's copy of this code.
    const auto& p = static_cast<const EinsumPayload&>(payload);
    std::vector<TensorMeta> metas;
    for (const TensorType& t : operands) metas.push_back(TensorMeta{t.dtype, *t.constant_shape()});
    EinsumOptions options;
    options.plan = p.plan();
    options.allow_broadcast = p.broadcast();
    return std::make_shared<PreparedEinsum>(EinsumPlan::prepare(p.subscripts(), metas, options));
  }
};

void register_einsum_family(ModuleRegistrar& registrar) {
  register_einsum_semantics(registrar.semantics());
  registrar.set_executor(kEinsumFamily, std::make_shared<EinsumExecutor>());
}

constexpr EinstageFamilyEntry kFamilies[] = {{"einstage.einsum.v1", &register_einsum_family}};

constexpr EinstageModuleDescriptor kDescriptor = {kModuleAbiVersion, "einstage.einsum", kEinsumModuleVersion,
                                                  kFamilies, std::size(kFamilies)};

}  // namespace

const EinstageModuleDescriptor* module_descriptor() {
  static_assert(kEinsumFamily == std::string_view("einstage.einsum.v1"), "descriptor lists the family by name");
  static_assert(kEinsumModule == std::string_view("einstage.einsum"), "descriptor names the module");
  return &kDescriptor;
}

}  // namespace einstage::einsum
