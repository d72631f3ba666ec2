// Test-only extension families registered through the public ExtensionRegistry exactly as a third-party module
// would: `test.scale.v1` (one operand, a float payload, result = factor * operand) and `test.matmul.v1` (two
// operands, a label payload; its type rule unifies the inner extents, so symbolic ones become shape constraints).
#pragma once

#include "ir/Extension.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace einstage::testing {

struct ScalePayload final : ExtensionPayload {
  double factor = 1;
  explicit ScalePayload(double f) : factor(f) {}
  std::string_view family() const override { return "test.scale.v1"; }
  std::string to_text() const override { return "factor = " + format_float(factor); }
  std::string to_json() const override { return nlohmann::json{{"factor", factor}}.dump(); }
  uint64_t hash() const override { return hash_bytes(format_float(factor)); }
  bool equals(const ExtensionPayload& o) const override {
    return static_cast<const ScalePayload&>(o).factor == factor;
  }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<ScalePayload>(factor); }
};

struct MatmulPayload final : ExtensionPayload {
  std::string inner_label;  // the label the error messages and constraints use, as a user wrote it
  explicit MatmulPayload(std::string l) : inner_label(std::move(l)) {}
  std::string_view family() const override { return "test.matmul.v1"; }
  std::string to_text() const override { return "label = " + format_string_literal(inner_label); }
  std::string to_json() const override { return nlohmann::json{{"label", inner_label}}.dump(); }
  uint64_t hash() const override { return hash_bytes(inner_label); }
  bool equals(const ExtensionPayload& o) const override {
    return static_cast<const MatmulPayload&>(o).inner_label == inner_label;
  }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<MatmulPayload>(inner_label); }
};

inline void register_test_families(ExtensionRegistry& registry) {
  ExtensionSemantics scale;
  scale.family = "test.scale.v1";
  scale.module = "einstage.test";
  scale.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    auto attrs = split_attribute_text(text);
    if (attrs.size() != 1 || attrs[0].first != "factor")
      fail(ErrorKind::parse, "'test.scale.v1' takes exactly one attribute 'factor', got '{}'", text);
    auto f = parse_double(attrs[0].second);
    if (!f) fail(ErrorKind::parse, "'test.scale.v1' attribute 'factor': '{}' is not a number", attrs[0].second);
    return std::make_unique<ScalePayload>(*f);
  };
  scale.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("factor") || !j["factor"].is_number())
      fail(ErrorKind::parse, "'test.scale.v1' payload must be {{\"factor\": number}}, got {}", text);
    return std::make_unique<ScalePayload>(j["factor"].get<double>());
  };
  scale.infer_type = [](const ExtensionPayload&, Types in, TypeContext& ctx) {
    if (in.size() != 1) ctx.error(ErrorKind::invalid_argument, "takes 1 operand but {} were given", in.size());
    if (!is_floating(in[0].dtype))
      ctx.error(ErrorKind::dtype, "operand 0 has type {}; expected a floating dtype", in[0].to_string());
    return in[0];
  };
  registry.register_family(std::move(scale));

  ExtensionSemantics matmul;
  matmul.family = "test.matmul.v1";
  matmul.module = "einstage.test";
  matmul.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    auto attrs = split_attribute_text(text);
    auto label = attrs.size() == 1 && attrs[0].first == "label" ? parse_string_literal(attrs[0].second) : std::nullopt;
    if (!label) fail(ErrorKind::parse, "'test.matmul.v1' takes one string attribute 'label', got '{}'", text);
    return std::make_unique<MatmulPayload>(*label);
  };
  matmul.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("label") || !j["label"].is_string())
      fail(ErrorKind::parse, "'test.matmul.v1' payload must be {{\"label\": string}}, got {}", text);
    return std::make_unique<MatmulPayload>(j["label"].get<std::string>());
  };
  matmul.infer_type = [](const ExtensionPayload& p, Types in, TypeContext& ctx) {
    const auto& payload = static_cast<const MatmulPayload&>(p);
    if (in.size() != 2 || in[0].rank() != 2 || in[1].rank() != 2)
      ctx.error(ErrorKind::shape, "expects two matrices");
    ctx.unify(in[0].dims[1], in[1].dims[0], fmt::format("operand 1 axis 0 (label {})", payload.inner_label));
    return TensorType{in[0].dtype, {in[0].dims[0], in[1].dims[1]}};
  };
  registry.register_family(std::move(matmul));
}

}  // namespace einstage::testing
