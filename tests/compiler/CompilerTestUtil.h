// Shared helpers of the compiler suite: the einsum registry, golden files (one per case under
// tests/compiler/golden/, EINSTAGE_UPDATE_GOLDEN=1 rewrites them; review the diff), round trips, error capture.
#pragma once

#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/op/Semantics.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "support/ErrorOf.h"
#include "support/Golden.h"
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace compiler_test {

inline const einstage::ExtensionRegistry& registry() {
  static const einstage::ExtensionRegistry reg = [] {
    einstage::ExtensionRegistry r;
    einstage::einsum::register_einsum_semantics(r);
    return r;
  }();
  return reg;
}

using einstage::test::error_of;

inline std::string golden_path(const std::string& name) {
  return std::string(EINSTAGE_SOURCE_DIR) + "/tests/compiler/golden/" + name + ".ir";
}

/// The golden's text must equal print_program(p); then parse(text) and JSON(p) must both print the same text.
inline void check_golden(const std::string& name, const einstage::Program& p) {
  using namespace einstage;
  const std::string text = print_program(p);
  einstage::test::check_golden_file(golden_path(name), text);
  INFO("golden " << name);
  Program parsed = parse_program(text, &registry());
  CHECK(print_program(parsed) == text);
  const std::string json = program_to_json(p);
  Program from_json = program_from_json(json, &registry());
  CHECK(print_program(from_json) == text);
  CHECK(program_to_json(from_json) == json);
  CHECK(program_to_json(parsed) == json);
}

}  // namespace compiler_test
