// The runtime half of the test family `test.dup.v1` (tests/support/DupFamily.h): an executor whose prepared op
// returns both results from run_results, and a linked-in module descriptor for Runtime::add_module. Test-only;
// depends on runtime/Module.h and the kernels-free Tensor API.
#pragma once

#include "runtime/Module.h"
#include "support/DupFamily.h"

namespace einstage::testing {

/// a * x as a new tensor of x's dtype and shape (any floating dtype).
inline Tensor dup_scaled(const Tensor& x, double a) {
  Tensor in = x.contiguous();
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* s = in.data<T>();
    T* d = out.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = static_cast<T>(a) * s[i];
  });
  return out;
}

class DupExecutor final : public ExtensionExecutor {
 public:
  struct Prepared final : PreparedOp {
    double a, b;
    Prepared(double a_, double b_) : a(a_), b(b_) {}
    std::vector<Tensor> run_results(std::span<const Tensor> in, ExecutionContext&) const override {
      return {dup_scaled(in[0], a), dup_scaled(in[0], b)};
    }
  };
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload, std::span<const TensorType>,
                                            std::span<const TensorType> results, ExecutionContext&) const override {
    EIN_ASSERT(results.size() == 2, "test.dup.v1 prepared for {} results", results.size());
    const auto& p = static_cast<const DupPayload&>(payload);
    return std::make_shared<Prepared>(p.a, p.b);
  }
};

inline void register_dup_module_family(ModuleRegistrar& r) {
  register_dup_family(r.semantics());
  r.set_executor(kDupFamily, std::make_shared<DupExecutor>());
}

inline const EinstageModuleDescriptor* dup_module_descriptor() {
  static constexpr EinstageFamilyEntry kFamilies[] = {{"test.dup.v1", &register_dup_module_family}};
  static constexpr EinstageModuleDescriptor kDescriptor = {kModuleAbiVersion, kBuildId, "einstage.test_dup", "1.0",
                                                           kFamilies, 1};
  return &kDescriptor;
}

}  // namespace einstage::testing
