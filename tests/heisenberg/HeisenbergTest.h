// The heisenberg suite's shared set-up: one Runtime with the einsum and linalg modules, made on first use and kept
// for the process (test_ipeps.cpp and test_optimize.cpp run their programs on it).
#pragma once

#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "runtime/Runtime.h"

namespace einstage::heisenberg_test {

inline const Runtime& runtime() {
  static const Runtime rt = [] {
    Runtime r;
    r.add_module(einsum::module_descriptor());
    r.add_module(linalg::module_descriptor());
    return r;
  }();
  return rt;
}

}  // namespace einstage::heisenberg_test
