// ExtensionOp: an instruction whose meaning comes from an extension family (`einstage.einsum.v1`), not from the
// standard op table. Semantic IR (compiler stage).
//
// The op itself is only a typed payload; the family name, with its version, is part of the payload. The IR core
// prints, parses, serialises, hashes and compares payloads through this virtual interface and never looks inside.
// What the family *means* (type rule, lowering, AD rules) is registered separately as ExtensionSemantics in an
// ExtensionRegistry (ir/Extension.h). Depends on fmt only; no JSON library in this header (payloads exchange JSON as
// text, so a module may use any JSON library it likes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace einstage {

class ExtensionPayload {
 public:
  virtual ~ExtensionPayload() = default;
  /// Family name with version, e.g. "einstage.einsum.v1": [a-z0-9_]+ segments joined by '.', ending in `.v<N>`.
  virtual std::string_view family() const = 0;
  /// The attribute text printed between `{` and `}`: `key = value` pairs joined by ", ", sorted by key, no braces.
  /// Empty when the payload has no attributes (the printer then omits the braces). The family's parse_text reads
  /// exactly this back. String values use format_string_literal (ir/Extension.h) so they parse unambiguously.
  virtual std::string to_text() const = 0;
  /// The payload as the text of one JSON value (normally an object); the family's parse_json reads it back.
  virtual std::string to_json() const = 0;
  /// Equal payloads must hash equally; the same payload must hash the same in every process (no pointers, no
  /// std::hash of strings, which is not guaranteed stable; see hash_bytes in ir/Extension.h).
  virtual uint64_t hash() const = 0;
  /// Called only with a payload of the same family.
  virtual bool equals(const ExtensionPayload& other) const = 0;
  virtual std::unique_ptr<ExtensionPayload> clone() const = 0;
};

struct ExtensionOp {
  /// Never null. Shared because payloads are immutable once built.
  std::shared_ptr<const ExtensionPayload> payload;

  std::string_view family() const { return payload->family(); }
  friend bool operator==(const ExtensionOp& a, const ExtensionOp& b) {
    return a.payload->family() == b.payload->family() && a.payload->equals(*b.payload);
  }
};

}  // namespace einstage
