// A test-only extension family with two results, registered through the public ExtensionRegistry exactly as a
// third-party module would: `test.dup.v1` with payload {a, b} (real numbers) maps one floating operand x to the
// pair (a * x, b * x). It is linear, so it exercises every several-results slot at once: infer_types, lower_results
// (two muls by broadcast constants), linearize_results (the same op on the tangent) and transpose_results
// (a * ct0 + b * ct1, either may be a symbolic zero). tests/support/DupModule.h adds its executor. Depends on ir only.
#pragma once

#include "ir/Extension.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace einstage::testing {

inline constexpr std::string_view kDupFamily = "test.dup.v1";

struct DupPayload final : ExtensionPayload {
  double a = 1, b = 1;
  DupPayload(double a_, double b_) : a(a_), b(b_) {}
  std::string_view family() const override { return kDupFamily; }
  std::string to_text() const override { return fmt::format("a = {}, b = {}", format_float(a), format_float(b)); }
  std::string to_json() const override { return nlohmann::json{{"a", a}, {"b", b}}.dump(); }
  uint64_t hash() const override { return hash_bytes(to_text()); }
  bool equals(const ExtensionPayload& o) const override {
    const auto& d = static_cast<const DupPayload&>(o);
    return d.a == a && d.b == b;
  }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<DupPayload>(a, b); }
};

inline const DupPayload& dup_payload(const Instruction& inst) {
  return static_cast<const DupPayload&>(*std::get<ExtensionOp>(inst.op).payload);
}

inline void register_dup_family(ExtensionRegistry& registry) {
  ExtensionSemantics s;
  s.family = std::string(kDupFamily);
  s.module = "einstage.test";
  s.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    auto attrs = split_attribute_text(text);
    std::optional<double> a, b;
    if (attrs.size() == 2 && attrs[0].first == "a" && attrs[1].first == "b") {
      a = parse_double(attrs[0].second);
      b = parse_double(attrs[1].second);
    }
    if (!a || !b) fail(ErrorKind::parse, "'test.dup.v1' takes the attributes 'a = <number>, b = <number>'");
    return std::make_unique<DupPayload>(*a, *b);
  };
  s.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("a") || !j.contains("b") || !j["a"].is_number() || !j["b"].is_number())
      fail(ErrorKind::parse, "'test.dup.v1' payload must be {{\"a\": number, \"b\": number}}");
    return std::make_unique<DupPayload>(j["a"].get<double>(), j["b"].get<double>());
  };
  s.infer_types = [](const ExtensionPayload&, Types in, TypeContext& ctx) {
    if (in.size() != 1) ctx.error(ErrorKind::invalid_argument, "takes 1 operand but {} were given", in.size());
    if (!is_floating(in[0].dtype))
      ctx.error(ErrorKind::dtype, "operand 0 has type {}; expected a floating dtype", in[0].to_string());
    return std::vector<TensorType>{in[0], in[0]};
  };
  s.lower_results = [](Builder& b, const Instruction& inst, std::span<const Value> ops, const DimBindings&) {
    const DupPayload& p = dup_payload(inst);
    return std::vector<Value>{b.mul(b.full(ops[0].type, p.a), ops[0]), b.mul(b.full(ops[0].type, p.b), ops[0])};
  };
  s.linearize_results = [](Builder& b, const Instruction& inst, std::span<const Value>,
                           std::span<const std::optional<Value>> tangents) {
    std::vector<Value> t = b.extension_results(std::get<ExtensionOp>(inst.op).payload, {*tangents[0]});
    return std::vector<std::optional<Value>>{t[0], t[1]};
  };
  s.transpose_results = [](Builder& b, const Instruction& inst, std::span<const Value> ops, std::span<const bool>,
                           std::span<const std::optional<Value>> cts) {
    const DupPayload& p = dup_payload(inst);
    std::optional<Value> sum;
    for (size_t r = 0; r < 2; ++r) {
      if (!cts[r]) continue;
      Value term = b.mul(b.full(ops[0].type, r == 0 ? p.a : p.b), *cts[r]);
      sum = sum ? b.add(*sum, term) : term;
    }
    return std::vector<std::optional<Value>>{sum};
  };
  registry.register_family(std::move(s));
}

/// The program of the ir suite's multi_result golden: two dup instructions, results read once, twice and as outputs.
inline Program dup_pairs_program(const ExtensionRegistry& registry) {
  Builder b("pairs", &registry);
  Value x = b.parameter("x", {DType::f64, {Dim::symbol("n"), 3}});
  std::vector<Value> d = b.extension_results(std::make_shared<DupPayload>(2, -0.5), {x});
  Value m = b.mul(d[0], d[1]);
  std::vector<Value> e = b.extension_results(std::make_shared<DupPayload>(1, 3), {d[1]});
  return b.finish({m, b.add(e[0], e[1]), e[1]});
}

}  // namespace einstage::testing
