// The extension registry the program-reader fuzz targets parse with: the einsum family's semantics, so programs
// holding einsum ops (and their payloads: subscripts, plan specs) are read, not refused as an unknown family.
#pragma once

#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/op/Semantics.h"
#include "ir/Extension.h"

namespace einstage::fuzz {

inline const ExtensionRegistry& fuzz_registry() {
  static const ExtensionRegistry registry = [] {
    ExtensionRegistry r;
    einsum::register_einsum_semantics(r);
    return r;
  }();
  return registry;
}

}  // namespace einstage::fuzz
