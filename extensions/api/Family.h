// One skeleton for an extension family's compiler side: the payload class and the ExtensionSemantics that reads it,
// written once here instead of once per family. Stage: extension API (public, installed; extensions/api/Extension.h
// includes it). Depends on ir/Extension.h and ir/Program.h only, so a family's compiler side needs no runtime header.
//
// A family writes its attributes as one class, `Attrs`, and gets the payload as FamilyPayload<Attrs>:
//
//   struct GramAttrs {
//     static constexpr std::string_view kFamily = "consumer.gram.v1";   // the family name with its version
//     std::string to_text() const;              // `key = value` pairs sorted by key, no braces (ExtensionPayload)
//     std::string to_json() const;              // one JSON value
//     bool operator==(const GramAttrs&) const;  // equal attributes: the same instruction
//     static GramAttrs parse_text(std::string_view attr_text);  // readers of to_text() and to_json(); errors are
//     static GramAttrs parse_json(std::string_view json_text);  // ErrorKind::parse naming the attribute
//   };
//   using GramPayload = FamilyPayload<GramAttrs>;  // the family's accessors stay Attrs' own: payload.subscripts()
//
// FamilyPayload supplies the rest of ExtensionPayload: family() from kFamily, hash() as hash_bytes(to_text())
// computed once (the runtime's prepared-op cache asks for it on every run), equals() by Attrs' operator==, clone(),
// and parse_text / parse_json returning the payload. make_semantics<Payload>(module, type_rule) then fills an
// ExtensionSemantics with the family, the module, both readers and the type rule, each handed the typed payload;
// the family adds its optional rules (lower, linearize, transpose, ...) reading the payload with payload_of<Payload>,
// and registers it. A family without attributes uses NoAttributes<kFamily>. docs/extensions.md walks through it.
#pragma once

#include "ir/Error.h"
#include "ir/Extension.h"
#include "ir/Program.h"

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace einstage {

/// The payload of a family whose attributes are `Attrs` (see above): Attrs' accessors, plus ExtensionPayload.
template <typename Attrs>
class FamilyPayload final : public ExtensionPayload, public Attrs {
 public:
  /// Builds the attributes from `args` (Attrs' own constructors or aggregate initialisation).
  template <typename... Args>
    requires(std::is_constructible_v<Attrs, Args&&...> &&
             !(sizeof...(Args) == 1 && (std::is_same_v<std::remove_cvref_t<Args>, FamilyPayload> && ...)))
  explicit FamilyPayload(Args&&... args) : Attrs(std::forward<Args>(args)...), hash_(hash_bytes(Attrs::to_text())) {}

  const Attrs& attrs() const { return *this; }

  std::string_view family() const override { return Attrs::kFamily; }
  std::string to_text() const override { return Attrs::to_text(); }
  std::string to_json() const override { return Attrs::to_json(); }
  uint64_t hash() const override { return hash_; }
  bool equals(const ExtensionPayload& other) const override {
    const auto* o = dynamic_cast<const FamilyPayload*>(&other);
    return o && attrs() == o->attrs();
  }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<FamilyPayload>(*this); }

  /// Attrs' readers, returning the payload.
  static std::unique_ptr<FamilyPayload> parse_text(std::string_view attr_text) {
    return std::make_unique<FamilyPayload>(Attrs::parse_text(attr_text));
  }
  static std::unique_ptr<FamilyPayload> parse_json(std::string_view json_text) {
    return std::make_unique<FamilyPayload>(Attrs::parse_json(json_text));
  }

 private:
  uint64_t hash_;  // of to_text(), computed once
};

/// The attributes of a family that has none: its text is empty (the printer then omits the braces), its JSON `{}`,
/// and the readers refuse anything else.
template <const std::string_view& kName>
struct NoAttributes {
  static constexpr std::string_view kFamily = kName;
  std::string to_text() const { return ""; }
  std::string to_json() const { return "{}"; }
  bool operator==(const NoAttributes&) const = default;
  static NoAttributes parse_text(std::string_view text) {
    if (!text.empty()) fail(ErrorKind::parse, "'{}' takes no attributes, got '{}'; remove them", kFamily, text);
    return {};
  }
  static NoAttributes parse_json(std::string_view text) {
    if (text != "{}") fail(ErrorKind::parse, "'{}' takes no attributes, got {}; write {{}}", kFamily, text);
    return {};
  }
};

/// The payload of `inst`, an instruction of Payload's family (a rule of that family is only called with those).
template <typename Payload>
const Payload& payload_of(const Instruction& inst) {
  return static_cast<const Payload&>(*std::get<ExtensionOp>(inst.op).payload);
}

/// An ExtensionSemantics for Payload's family: family, module, parse_text and parse_json (Payload's readers), and
/// the type rule, called as type_rule(const Payload&, Types, TypeContext&): infer_type when it returns a TensorType,
/// infer_types when it returns a std::vector<TensorType> (several results). The caller fills the optional slots and
/// registers it (ExtensionRegistry::register_family).
template <typename Payload, typename TypeRule>
ExtensionSemantics make_semantics(std::string module, TypeRule type_rule) {
  ExtensionSemantics sem;
  sem.family = std::string(Payload::kFamily);
  sem.module = std::move(module);
  sem.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return Payload::parse_text(text);
  };
  sem.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return Payload::parse_json(text);
  };
  auto typed = [rule = std::move(type_rule)](const ExtensionPayload& payload, Types operands, TypeContext& ctx) {
    return rule(static_cast<const Payload&>(payload), operands, ctx);
  };
  using Result = std::invoke_result_t<TypeRule&, const Payload&, Types, TypeContext&>;
  if constexpr (std::is_same_v<Result, TensorType>) {
    sem.infer_type = std::move(typed);
  } else {
    static_assert(std::is_same_v<Result, std::vector<TensorType>>,
                  "make_semantics: the type rule returns a TensorType or a std::vector<TensorType>");
    sem.infer_types = std::move(typed);
  }
  return sem;
}

}  // namespace einstage
