// The einsum module: its runtime executor (EinsumPlan per concrete shapes) and the descriptor.
#include "extensions/einsum/Module.h"

#include "extensions/api/Kernels.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/exec/Executor.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/exec/SlicedEinsum.h"
#include "extensions/einsum/exec/TreeAd.h"
#include "ir/Config.h"
#include "runtime/Context.h"

#include <fmt/format.h>

namespace einstage::einsum {

namespace {

std::vector<TensorMeta> metas_of(std::span<const TensorType> types) {
  std::vector<TensorMeta> metas;
  for (const TensorType& t : types) metas.push_back(TensorMeta{t.dtype, *t.constant_shape()});
  return metas;
}

EinsumOptions options_of(const EinsumPayload& p) {
  EinsumOptions options;
  options.plan = p.plan();
  options.allow_broadcast = p.broadcast();
  return options;
}

class PreparedEinsum final : public PreparedOp {
 public:
  explicit PreparedEinsum(EinsumPlan plan) : plan_(std::move(plan)) {}
  Tensor run(std::span<const Tensor> operands, ExecutionContext& context) const override {
    return plan_.execute(operands, context);
  }
  std::string describe() const override { return plan_.to_string(); }

 private:
  EinsumPlan plan_;  // immutable; execute() allocates its own arena, so concurrent runs are safe
};

// A plan spec with max_memory: the slices, summed in a fixed order on the context's threads (SlicedEinsum.h).
class PreparedSlicedEinsum final : public PreparedOp {
 public:
  explicit PreparedSlicedEinsum(SlicedEinsumPlan plan) : plan_(std::move(plan)) {}
  Tensor run(std::span<const Tensor> operands, ExecutionContext& context) const override {
    return plan_.execute(operands, context, &context.pool());
  }
  std::string describe() const override { return plan_.to_string(); }

 private:
  SlicedEinsumPlan plan_;
};

class EinsumExecutor final : public ExtensionExecutor {
 public:
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload, std::span<const TensorType> operands,
                                            std::span<const TensorType>, ExecutionContext&) const override {
    EIN_ASSERT(payload.family() == kEinsumFamily, "einsum executor given a '{}' payload", payload.family());
    // Same class on both sides of a module boundary (same headers, checked by the ABI version), so a static_cast
    // is right even when the payload was made by the host's copy of this code.
    const auto& p = static_cast<const EinsumPayload&>(payload);
    if (p.plan().max_memory > 0)
      return std::make_shared<PreparedSlicedEinsum>(
          SlicedEinsumPlan::prepare(p.subscripts(), metas_of(operands), p.plan().max_memory, options_of(p)));
    return std::make_shared<PreparedEinsum>(EinsumPlan::prepare(p.subscripts(), metas_of(operands), options_of(p)));
  }
};

class PreparedJvp final : public PreparedOp {
 public:
  PreparedJvp(EinsumJvpPlan plan, size_t n) : plan_(std::move(plan)), n_(n) {}
  Tensor run(std::span<const Tensor> operands, ExecutionContext& context) const override {
    return plan_.execute(operands.subspan(0, n_), operands.subspan(n_), context);
  }
  std::string describe() const override { return plan_.to_string(); }

 private:
  EinsumJvpPlan plan_;
  size_t n_;
};

class PreparedVjp final : public PreparedOp {
 public:
  PreparedVjp(EinsumVjpPlan plan, size_t n) : plan_(std::move(plan)), n_(n) {}
  std::vector<Tensor> run_results(std::span<const Tensor> operands, ExecutionContext& context) const override {
    return plan_.execute(operands.subspan(0, n_), operands[n_], context);
  }
  std::string describe() const override { return plan_.to_string(); }

 private:
  EinsumVjpPlan plan_;
  size_t n_;
};

// Modes vjp_jvp and vjp_with_jvp (`with_cotangents`): operands (x, ct, the tangents listed in `tangents`, n standing
// for ct's).
class PreparedVjpJvp final : public PreparedOp {
 public:
  PreparedVjpJvp(EinsumVjpPlan plan, size_t n, std::vector<int> tangents, bool with_cotangents)
      : plan_(std::move(plan)), n_(n), tangents_(std::move(tangents)), with_cotangents_(with_cotangents) {}
  std::vector<Tensor> run_results(std::span<const Tensor> operands, ExecutionContext& context) const override {
    std::vector<Tensor> d(n_ + 1);
    for (size_t i = 0; i < tangents_.size(); ++i) d[static_cast<size_t>(tangents_[i])] = operands[n_ + 1 + i];
    return plan_.execute_tangent(operands.subspan(0, n_), operands[n_], std::span(d).subspan(0, n_), d[n_], context,
                                 with_cotangents_);
  }
  std::string describe() const override {
    return fmt::format("{}tangent of the walk in the directions [{}] ({} for the cotangent):\n{}",
                       with_cotangents_ ? "the cotangents and the " : "", fmt::join(tangents_, ", "), n_,
                       plan_.to_string());
  }

 private:
  EinsumVjpPlan plan_;
  size_t n_;
  std::vector<int> tangents_;
  bool with_cotangents_;
};

class EinsumAdExecutor final : public ExtensionExecutor {
 public:
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload, std::span<const TensorType> operands,
                                            std::span<const TensorType>, ExecutionContext& context) const override {
    EIN_ASSERT(payload.family() == kEinsumAdFamily, "einsum_ad executor given a '{}' payload", payload.family());
    const auto& p = static_cast<const EinsumAdPayload&>(payload);
    const size_t n = p.forward().subscripts().num_inputs();
    const std::vector<TensorMeta> metas = metas_of(operands);
    const EinsumOptions options = options_of(p.forward());
    switch (p.mode()) {
      case EinsumAdMode::jvp:
        return std::make_shared<PreparedJvp>(
            EinsumJvpPlan::prepare(p.forward().subscripts(), std::span(metas).subspan(0, n), p.slots(), options), n);
      case EinsumAdMode::vjp:
      case EinsumAdMode::value_vjp:
        return std::make_shared<PreparedVjp>(
            EinsumVjpPlan::prepare(p.forward().subscripts(), std::span(metas).subspan(0, n), metas[n], p.slots(),
                                   options, context.config().ad_keep_bytes, p.mode() == EinsumAdMode::value_vjp),
            n);
      case EinsumAdMode::vjp_jvp:
      case EinsumAdMode::vjp_with_jvp:
        return std::make_shared<PreparedVjpJvp>(
            EinsumVjpPlan::prepare(p.forward().subscripts(), std::span(metas).subspan(0, n), metas[n], p.slots(),
                                   options),
            n, p.tangents(), p.mode() == EinsumAdMode::vjp_with_jvp);
    }
    EIN_ASSERT(false, "einsum_ad: unknown mode");
  }
};

// The einsum family's entry registers the semantics of both families (register_einsum_semantics: einsum's AD rules
// emit einsum_ad instructions); each entry sets its family's executor.
void register_einsum_family(ModuleRegistrar& registrar) {
  register_einsum_semantics(registrar.semantics());
  registrar.set_executor(kEinsumFamily, std::make_shared<EinsumExecutor>());
}

void register_einsum_ad_family(ModuleRegistrar& registrar) {
  registrar.set_executor(kEinsumAdFamily, std::make_shared<EinsumAdExecutor>());
}

constexpr EinstageFamilyEntry kFamilies[] = {{"einstage.einsum.v1", &register_einsum_family},
                                             {"einstage.einsum_ad.v1", &register_einsum_ad_family}};

constexpr EinstageModuleDescriptor kDescriptor = {kModuleAbiVersion, kBuildId, "einstage.einsum", kEinsumModuleVersion,
                                                  kFamilies, std::size(kFamilies)};

}  // namespace

const EinstageModuleDescriptor* module_descriptor() {
  static_assert(kEinsumFamily == std::string_view("einstage.einsum.v1"), "descriptor lists the family by name");
  static_assert(kEinsumAdFamily == std::string_view("einstage.einsum_ad.v1"), "descriptor lists the family by name");
  static_assert(kEinsumModule == std::string_view("einstage.einsum"), "descriptor names the module");
  return &kDescriptor;
}

}  // namespace einstage::einsum
