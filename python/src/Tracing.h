// Registers the traced-program part of the `_einstage` module (Tracing.cpp): Tracer, Traced, Program and the traced
// ops. Stage: Python binding (python/). Depends on pybind11.
#pragma once

#include <pybind11/pybind11.h>

namespace einstage::python {

void register_tracing(pybind11::module_& m);

}  // namespace einstage::python
