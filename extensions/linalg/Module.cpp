// The linalg module: its runtime executor (one LAPACK decomposition per instruction) and the descriptor.
#include "extensions/linalg/Module.h"

#include "extensions/api/Kernels.h"
#include "extensions/linalg/GapFactors.h"
#include "extensions/linalg/Lapack.h"
#include "extensions/linalg/LinalgOp.h"

namespace einstage::linalg {

namespace {

class PreparedDecomposition final : public PreparedOp {
 public:
  PreparedDecomposition(LinalgPayload payload, std::shared_ptr<OpenBlasThreads> blas)
      : payload_(std::move(payload)), blas_(std::move(blas)) {}
  std::vector<Tensor> run_results(std::span<const Tensor> operands, ExecutionContext& context) const override {
    if (payload_.kind() == LinalgKind::gap_factors) return gap_factors(payload_, operands[0], operands[1], context);
    return decompose(payload_, operands[0], context, *blas_);
  }
  std::string describe() const override {
    return fmt::format("LAPACK {} ({})\n", name(payload_.kind()), payload_.to_text());
  }

 private:
  LinalgPayload payload_;  // immutable; every run allocates its own results
  std::shared_ptr<OpenBlasThreads> blas_;  // a share: alive while this op may run, even after its executor is gone
};

// One per Runtime that added the module, each with a share of the process's OpenBLAS thread state (Lapack.h).
class LinalgExecutor final : public ExtensionExecutor {
 public:
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload, std::span<const TensorType>,
                                            std::span<const TensorType>, ExecutionContext&) const override {
    EIN_ASSERT(payload.family() == kLinalgFamily, "linalg executor given a '{}' payload", payload.family());
    return std::make_shared<PreparedDecomposition>(static_cast<const LinalgPayload&>(payload), blas_);
  }

 private:
  std::shared_ptr<OpenBlasThreads> blas_ = share_openblas_threads();
};

void register_linalg_family(ModuleRegistrar& registrar) {
  register_linalg_semantics(registrar.semantics());
  registrar.set_executor(kLinalgFamily, std::make_shared<LinalgExecutor>());
}

constexpr EinstageFamilyEntry kFamilies[] = {{"einstage.linalg.v1", &register_linalg_family}};

constexpr EinstageModuleDescriptor kDescriptor = {kModuleAbiVersion, kBuildId, "einstage.linalg", kLinalgModuleVersion,
                                                  kFamilies, std::size(kFamilies)};

}  // namespace

const EinstageModuleDescriptor* module_descriptor() {
  static_assert(kLinalgFamily == std::string_view("einstage.linalg.v1"), "descriptor lists the family by name");
  static_assert(kLinalgModule == std::string_view("einstage.linalg"), "descriptor names the module");
  return &kDescriptor;
}

}  // namespace einstage::linalg
