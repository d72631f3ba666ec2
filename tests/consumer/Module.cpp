// A small out-of-tree extension module, built by tests/consumer/ with einstage_add_module against an installed
// einstage, that includes only the public headers (extensions/api/), like a third-party module would. Two families,
// neither with attributes (payload and semantics from extensions/api/Family.h):
// - consumer.twice.v1 doubles an f64 tensor with a loop of its own, split over the context's pool;
// - consumer.gram.v1 maps an f64 matrix X (m x k) to X·Xᵀ (m x m): one ContractionProblem run by contract() from the
//   public kernel API, on the context the Runtime passes (the JIT of the installed libeinstage_runtime.so).
#include "extensions/api/Extension.h"
#include "extensions/api/Kernels.h"

namespace {

using einstage::Tensor;

using RunFn = Tensor (*)(const Tensor& x, einstage::ExecutionContext& context);

struct Prepared final : einstage::PreparedOp {
  explicit Prepared(RunFn fn) : fn(fn) {}
  Tensor run(std::span<const Tensor> in, einstage::ExecutionContext& context) const override {
    return fn(in[0], context);
  }
  RunFn fn;
};

struct Executor final : einstage::ExtensionExecutor {
  explicit Executor(RunFn fn) : fn(fn) {}
  std::shared_ptr<const einstage::PreparedOp> prepare(const einstage::ExtensionPayload&,
                                                      std::span<const einstage::TensorType>,
                                                      std::span<const einstage::TensorType>,
                                                      einstage::ExecutionContext&) const override {
    return std::make_shared<Prepared>(fn);
  }
  RunFn fn;
};

// Registers a family without attributes whose one operand must be f64 of the given rank (0: any) and whose result
// type is `result`.
template <const std::string_view& kFamily>
void register_family(einstage::ModuleRegistrar& registrar, int rank,
                     einstage::TensorType (*result)(const einstage::TensorType&), RunFn run) {
  using Payload = einstage::FamilyPayload<einstage::NoAttributes<kFamily>>;
  auto type_rule = [rank, result](const Payload&, einstage::Types in, einstage::TypeContext& ctx) {
    if (in.size() != 1 || in[0].dtype != einstage::DType::f64 || (rank > 0 && in[0].rank() != rank))
      ctx.error(einstage::ErrorKind::invalid_argument, "'{}' takes one f64 operand{}", kFamily,
                rank > 0 ? fmt::format(" of rank {}", rank) : "");
    return result(in[0]);
  };
  registrar.semantics().register_family(einstage::make_semantics<Payload>(registrar.module_name(), type_rule));
  registrar.set_executor(kFamily, std::make_shared<Executor>(run));
}

constexpr std::string_view kTwice = "consumer.twice.v1";
constexpr std::string_view kGram = "consumer.gram.v1";

Tensor twice(const Tensor& in, einstage::ExecutionContext& context) {
  Tensor x = in.contiguous(), out = Tensor::empty(x.dtype(), x.shape());
  const double* src = x.data<double>();
  double* dst = out.data<double>();
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = 2 * src[i];
  };
  context.pool().parallel_for(x.numel(), body);
  return out;
}

// C[i, j] = sum_l X[i, l] * X[j, l]: X is both A (axes m, k) and B (axes n, k), read through its own strides.
Tensor gram(const Tensor& x, einstage::ExecutionContext& context) {
  using Axis = einstage::ContractionProblem::Axis;
  const int64_t m = x.shape()[0], k = x.shape()[1];
  Tensor c = Tensor::empty(einstage::DType::f64, {m, m});
  einstage::ContractionProblem p;
  p.dtype = einstage::DType::f64;
  p.m = {Axis{.extent = m, .stride_a = x.strides()[0], .stride_c = c.strides()[0]}};
  p.n = {Axis{.extent = m, .stride_b = x.strides()[0], .stride_c = c.strides()[1]}};
  p.k = {Axis{.extent = k, .stride_a = x.strides()[1], .stride_b = x.strides()[1]}};
  p.a = x.data<double>();
  p.b = x.data<double>();
  p.c = c.data<double>();
  einstage::contract(p, context, &context.pool());
  return c;
}

void register_twice(einstage::ModuleRegistrar& registrar) {
  register_family<kTwice>(registrar, 0, [](const einstage::TensorType& x) { return x; }, twice);
}

void register_gram(einstage::ModuleRegistrar& registrar) {
  auto result = [](const einstage::TensorType& x) {
    return einstage::TensorType{einstage::DType::f64, {x.dims[0], x.dims[0]}};
  };
  register_family<kGram>(registrar, 2, result, gram);
}

constexpr EinstageFamilyEntry kFamilies[] = {{"consumer.twice.v1", &register_twice},
                                             {"consumer.gram.v1", &register_gram}};
constexpr EinstageModuleDescriptor kDescriptor = {einstage::kModuleAbiVersion, einstage::kBuildId, "consumer.demo",
                                                  "0.1.0", kFamilies, 2};
const EinstageModuleDescriptor* descriptor() { return &kDescriptor; }

}  // namespace

EINSTAGE_DEFINE_MODULE_ENTRY(descriptor)
