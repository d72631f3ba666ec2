// A tiny out-of-tree extension module, built by tests/consumer/ with einstage_add_module against an installed
// einstage: the family consumer.twice.v1 doubles an f64 tensor, the work split over the pool the Runtime passes.
// It uses only extensions/api/Extension.h, like a third-party module would.
#include "extensions/api/Extension.h"

namespace {

constexpr std::string_view kFamily = "consumer.twice.v1";

struct TwicePayload final : einstage::ExtensionPayload {
  std::string_view family() const override { return kFamily; }
  std::string to_text() const override { return ""; }
  std::string to_json() const override { return "{}"; }
  uint64_t hash() const override { return einstage::hash_bytes(kFamily); }
  bool equals(const einstage::ExtensionPayload&) const override { return true; }
  std::unique_ptr<einstage::ExtensionPayload> clone() const override { return std::make_unique<TwicePayload>(); }
};

struct Twice final : einstage::PreparedOp {
  einstage::Tensor run(std::span<const einstage::Tensor> in, einstage::ExecutionContext& context) const override {
    einstage::Tensor x = in[0].contiguous(), out = einstage::Tensor::empty(x.dtype(), x.shape());
    const double* src = x.data<double>();
    double* dst = out.data<double>();
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = 2 * src[i];
    };
    context.pool().parallel_for(x.numel(), body);
    return out;
  }
};

struct TwiceExecutor final : einstage::ExtensionExecutor {
  std::shared_ptr<const einstage::PreparedOp> prepare(const einstage::ExtensionPayload&,
                                                      std::span<const einstage::TensorType>,
                                                      const einstage::TensorType&) const override {
    return std::make_shared<Twice>();
  }
};

std::unique_ptr<einstage::ExtensionPayload> parse(std::string_view text) {
  if (!text.empty() && text != "{}")
    einstage::fail(einstage::ErrorKind::parse, "'{}' takes no attributes, got '{}'", kFamily, text);
  return std::make_unique<TwicePayload>();
}

void register_twice(einstage::ModuleRegistrar& registrar) {
  einstage::ExtensionSemantics sem;
  sem.family = std::string(kFamily);
  sem.module = registrar.module_name();
  sem.parse_text = parse;
  sem.parse_json = parse;
  sem.infer_type = [](const einstage::ExtensionPayload&, einstage::Types in, einstage::TypeContext& ctx) {
    if (in.size() != 1 || in[0].dtype != einstage::DType::f64)
      ctx.error(einstage::ErrorKind::invalid_argument, "'{}' takes one f64 operand", kFamily);
    return in[0];
  };
  registrar.semantics().register_family(std::move(sem));
  registrar.set_executor(kFamily, std::make_shared<TwiceExecutor>());
}

constexpr EinstageFamilyEntry kFamilies[] = {{"consumer.twice.v1", &register_twice}};
constexpr EinstageModuleDescriptor kDescriptor = {einstage::kModuleAbiVersion, einstage::kBuildId, "consumer.twice",
                                                  "0.1.0", kFamilies, 1};
const EinstageModuleDescriptor* descriptor() { return &kDescriptor; }

}  // namespace

EINSTAGE_DEFINE_MODULE_ENTRY(descriptor)
