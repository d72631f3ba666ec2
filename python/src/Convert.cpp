// NumPy arrays <-> einstage tensors at the binding's boundary (Convert.h).
#include "python/src/Convert.h"

#include <fmt/format.h>

#include <complex>
#include <cstdint>

namespace einstage::python {

std::optional<DType> dtype_of(const py::dtype& dt) {
  // Read from the descriptor itself (no dtype objects made per call): the type number, and native byte order
  // ('=', or '<' on this little-endian target; einstage reads no swapped data).
  const auto* d = py::detail::array_descriptor_proxy(dt.ptr());
  if (d->byteorder == '>') return std::nullopt;  // structured and subarray dtypes have type number NPY_VOID
  using api = py::detail::npy_api;
  static_assert(sizeof(long) == 8, "int64 is NumPy's long on this platform");
  switch (d->type_num) {
    case api::NPY_DOUBLE_: return DType::f64;
    case api::NPY_FLOAT_: return DType::f32;
    case api::NPY_CDOUBLE_: return DType::c128;
    case api::NPY_CFLOAT_: return DType::c64;
    case api::NPY_LONG_:
    case api::NPY_LONGLONG_: return DType::i64;
    default: return std::nullopt;
  }
}

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::c64: return py::dtype::of<std::complex<float>>();
    case DType::c128: return py::dtype::of<std::complex<double>>();
    case DType::i64: return py::dtype::of<int64_t>();
  }
  return py::dtype::of<double>();
}

Shape shape_of(const py::array& a) { return Shape(a.shape(), a.shape() + a.ndim()); }

Tensor view_array(const py::array& a, std::string_view what_text, int64_t index, bool writable) {
  auto what = [&] { return index >= 0 ? fmt::format("{} {}", what_text, index) : std::string(what_text); };
  const std::optional<DType> dtype = dtype_of(a.dtype());
  if (!dtype)
    throw py::type_error(fmt::format("{} has dtype {}, which einstage does not compute in; pass float32, float64, "
                                     "complex64, complex128 or int64 (einstage.einsum converts other dtypes itself)",
                                     what(), std::string(py::str(a.dtype()))));
  // dtype.equal() above accepts only native byte order for these types, so the data need no swapping.
  const auto flags = a.flags();
  if (!(flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    throw py::type_error(
        fmt::format("{} is not aligned to its element size; pass a copy (numpy.ascontiguousarray)", what()));
  if (writable && !(flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_))
    throw py::value_error(fmt::format("{} is read-only; pass a writeable array", what()));
  const int64_t es = static_cast<int64_t>(size_of(*dtype));
  Shape shape = shape_of(a);
  Strides strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t bytes = a.strides()[i];
    if (bytes % es != 0)
      throw py::type_error(fmt::format("{} has a stride of {} bytes along axis {}, not a multiple of its element size "
                                       "{}; pass a copy (numpy.ascontiguousarray)", what(), bytes, i, es));
    strides[i] = bytes / es;
  }
  return Tensor::view_of(*dtype, std::move(shape), std::move(strides), const_cast<void*>(a.data()));
}

py::array new_array(DType dtype, const Shape& shape, char order) {
  const int64_t es = static_cast<int64_t>(size_of(dtype));
  std::vector<py::ssize_t> dims(shape.begin(), shape.end()), strides(shape.size());
  py::ssize_t s = es;
  if (order == 'C') {
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = s;
      s *= std::max<py::ssize_t>(dims[i], 1);
    }
  } else {
    for (size_t i = 0; i < shape.size(); ++i) {
      strides[i] = s;
      s *= std::max<py::ssize_t>(dims[i], 1);
    }
  }
  return py::array(numpy_dtype(dtype), std::move(dims), std::move(strides));
}

void set_python_error(const Error& e) {
  const std::string_view what = e.what();
  PyObject* type = PyExc_ValueError;
  switch (e.kind()) {
    case ErrorKind::dtype: type = PyExc_TypeError; break;
    case ErrorKind::io: type = PyExc_OSError; break;
    case ErrorKind::unsupported: type = PyExc_NotImplementedError; break;
    case ErrorKind::runtime: type = PyExc_RuntimeError; break;
    case ErrorKind::shape:
      // A size that does not fit in 64 bits of bytes (ir/Size.cpp) is a refused allocation, as NumPy's
      // MemoryError for an array too large to allocate.
      if (what.find("bytes than fit in 64 bits") != std::string_view::npos) type = PyExc_MemoryError;
      break;
    default: break;
  }
  PyErr_SetString(type, e.what());
}

void register_error_translation() {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      set_python_error(e);
    }
  });
}

}  // namespace einstage::python
