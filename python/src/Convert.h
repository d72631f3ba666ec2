// The boundary between NumPy arrays and einstage tensors: dtype mapping, zero-copy views of arrays, output arrays
// allocated by NumPy for einstage to write, and einstage::Error translated to Python exceptions.
//
// Stage: Python binding (python/), conversion only; no contraction rule lives here. An operand array becomes a
// Tensor::view_of its buffer with its strides converted from bytes to elements (C order, Fortran order, slices and
// negative strides are all just strides, so nothing is copied). The view does not own the buffer: the caller keeps
// the py::array (and so the buffer) alive for as long as the Tensor is used, which for every entry point is the call
// itself. Arrays einstage cannot view in place (a dtype outside f32/f64/c64/c128/i64, unaligned data, byte-swapped
// data, strides that are not a multiple of the element size) are refused with a TypeError; the Python package
// converts those before it calls in (einstage/_einsum.py). Depends on pybind11, numpy's headers through pybind11 and
// ir/Tensor.h.
#pragma once

#include "ir/Error.h"
#include "ir/Tensor.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace einstage::python {

namespace py = pybind11;

/// The einstage dtype of a NumPy dtype, or nullopt for any other (float16, int32, bool, object, ...).
std::optional<DType> dtype_of(const py::dtype& dt);
/// The NumPy dtype of an einstage dtype.
py::dtype numpy_dtype(DType dtype);

/// A non-owning Tensor over `a`'s buffer with `a`'s strides (in elements). `what` and, when >= 0, `index` name the
/// argument in errors ("operand 1", "out"; formatted only when one is raised, since this runs on every call).
/// `writable` asks for a writeable array (out=).
Tensor view_array(const py::array& a, std::string_view what, int64_t index = -1, bool writable = false);

/// A fresh NumPy array of `shape` and `dtype` in C order ('C') or Fortran order ('F'), for einstage to write.
py::array new_array(DType dtype, const Shape& shape, char order);

/// Shapes of arrays as einstage shapes.
Shape shape_of(const py::array& a);

/// Sets the Python exception for `e` (the one mapping of ErrorKind to exception types; the message unchanged).
void set_python_error(const Error& e);
/// Installs the translation of einstage::Error into Python exceptions (ValueError, TypeError, MemoryError, OSError,
/// NotImplementedError, RuntimeError, by ErrorKind) with the message text unchanged.
void register_error_translation();

}  // namespace einstage::python
