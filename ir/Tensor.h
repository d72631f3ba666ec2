// Tensor: the value type that constants, inputs and outputs carry (as XLA keeps its Literal at the base).
//
// A Tensor is a dtype, a shape, element strides and an offset into shared storage. Owned storage is column-major
// (first index fastest) and 64-byte aligned, from a ScratchAllocator (ir/Scratch.h, which keeps freed large blocks
// for reuse). Views (permute, slice, reshape when possible) share storage without copying; contiguous() gives a
// column-major copy when the layout is anything else. Construction always says which order the caller's data is in
// (from_col_major / from_row_major); nothing guesses. Extents may be 0 and the rank may be 0 (a scalar holding one
// element). Depends on ir/DType.h, ir/Error.h and ir/Scratch.h.
#pragma once

#include "ir/DType.h"
#include "ir/Error.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace einstage {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements, not bytes

/// Column-major strides of a dense tensor of this shape: 1, e0, e0*e1, ...
Strides col_major_strides(const Shape& shape);
/// Product of the extents (1 for a scalar); fails on a negative extent or overflow.
int64_t element_count(const Shape& shape);
/// "[2,3]" — the shape as einstage prints it everywhere.
std::string shape_to_string(const Shape& shape);
/// The rule of a one-axis slice x[begin:end:step], NumPy's basic slicing without negative indices or clamping, shared
/// by Tensor::slice and the traced slice (compiler/Trace.h): 0 <= begin <= end <= extent and step >= 1, else an
/// Error naming `axis`. Returns the slice's extent, ceil((end - begin) / step). A negative `extent` stands for one not
/// known yet (a symbolic dim while tracing): end is then not bounded.
int64_t slice_extent(int axis, int64_t extent, int64_t begin, int64_t end, int64_t step);

class ScratchAllocator;

class Tensor {
 public:
  /// An undefined tensor (defined() is false); most operations on it fail.
  Tensor() = default;

  /// Uninitialised column-major storage from ScratchAllocator::process_default() (ir/Scratch.h).
  static Tensor empty(DType dtype, Shape shape);
  /// The same from `allocator` (an ExecutionContext's scratch()), to which the storage returns when freed.
  static Tensor empty(DType dtype, Shape shape, ScratchAllocator& allocator);
  static Tensor zeros(DType dtype, Shape shape);
  /// A rank-0 tensor holding one value.
  template <typename T> static Tensor scalar(T value);
  /// Copies data given in column-major order (NumPy order="F" reading); data.size() must equal the element count.
  template <typename T> static Tensor from_col_major(Shape shape, std::span<const T> data);
  template <typename T> static Tensor from_col_major(Shape shape, std::initializer_list<T> data) {
    return from_col_major<T>(std::move(shape), std::span<const T>(data.begin(), data.size()));
  }
  /// Copies data given in row-major order (NumPy's default C order), reordering it once into column-major storage.
  template <typename T> static Tensor from_row_major(Shape shape, std::span<const T> data);
  template <typename T> static Tensor from_row_major(Shape shape, std::initializer_list<T> data) {
    return from_row_major<T>(std::move(shape), std::span<const T>(data.begin(), data.size()));
  }
  /// Same as the typed versions, for bytes of the given dtype.
  static Tensor from_bytes(DType dtype, Shape shape, const void* data, size_t bytes, bool col_major);
  /// A non-owning view of caller memory (which must outlive every use of the view).
  static Tensor view_of(DType dtype, Shape shape, Strides strides, void* data);
  /// A column-major tensor of `shape` at byte `offset` of `block`, sharing the block's ownership (it lives while any
  /// tensor in it does): several results carved from one allocation. `offset` is a multiple of the element size; the
  /// caller keeps the tensors inside the block (and disjoint where they are written).
  static Tensor in_block(DType dtype, Shape shape, std::shared_ptr<std::byte> block, int64_t offset);

  bool defined() const { return static_cast<bool>(storage_); }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t extent(int axis) const;
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * size_of(dtype_); }
  /// True when the elements are dense in column-major order starting at data().
  bool is_col_major() const;

  /// Pointer to element (0, ..., 0). The typed form checks the dtype.
  void* raw_data();
  const void* raw_data() const;
  template <typename T> T* data();
  template <typename T> const T* data() const;

  /// Element access by a full multi-index; checks dtype and bounds.
  template <typename T> T& at(std::span<const int64_t> index);
  template <typename T> const T& at(std::span<const int64_t> index) const;
  template <typename T> T& at(std::initializer_list<int64_t> index) { return at<T>(std::span(index.begin(), index.size())); }
  template <typename T> const T& at(std::initializer_list<int64_t> index) const {
    return at<T>(std::span(index.begin(), index.size()));
  }

  /// The one element of a tensor of one element (a scalar, or any shape whose extents are all 1: NumPy's item()),
  /// e.g. `double trace = out.at(0).item<double>();`. Checks the dtype as at() does; another size fails naming the
  /// shape.
  template <typename T> T item() const;

  /// View with axes reordered: result axis i is this tensor's axis perm[i].
  Tensor permute(std::span<const int> perm) const;
  Tensor permute(std::initializer_list<int> perm) const { return permute(std::span(perm.begin(), perm.size())); }
  /// View with all axes reversed (NumPy .T).
  Tensor transpose() const;
  /// View of x[begin:end:step] along one axis, the others whole (slice_extent above is the rule); the traced
  /// slice(x, axis, begin, end, step) of compiler/Trace.h takes the same arguments.
  Tensor slice(int axis, int64_t begin, int64_t end, int64_t step = 1) const;
  /// Same elements in column-major order with a new shape (NumPy reshape(order="F")); a view when the layout
  /// allows it, otherwise a copy.
  Tensor reshape(Shape shape) const;
  /// This tensor if already column-major dense, otherwise a column-major copy.
  Tensor contiguous() const;
  /// Always a fresh column-major copy.
  Tensor clone() const;
  /// A column-major copy converted to another dtype (complex to real is refused: take the real part explicitly).
  Tensor astype(DType dtype) const;

  /// The elements in column-major / row-major order.
  template <typename T> std::vector<T> to_col_major() const;
  template <typename T> std::vector<T> to_row_major() const;

  /// Copies src's elements into this tensor (same shape and dtype; any strides on both sides).
  void copy_from(const Tensor& src);
  /// True if both views reference the same storage block.
  bool shares_storage_with(const Tensor& other) const { return storage_ && storage_ == other.storage_; }
  /// The storage block's address (null when undefined): two defined tensors share storage exactly when theirs are
  /// equal, so a set of tensors can be sorted by it instead of compared pair by pair.
  const std::byte* storage_block() const { return storage_.get(); }
  /// The addresses [first, last) of the bytes a non-empty view may touch (from its offset and strides): overlaps()
  /// compares these.
  std::pair<uintptr_t, uintptr_t> byte_range() const;
  /// True if both views share storage and may touch a common byte (the bounding byte ranges of their elements meet;
  /// an empty view touches nothing). Disjoint slices of one block do not overlap.
  bool overlaps(const Tensor& other) const;

  /// Multi-line text like NumPy's repr, with a header "f64[2,3]".
  std::string to_string() const;

 private:
  template <typename T> void check_dtype(const char* what) const;
  void check_one_element(const char* what) const;
  int64_t linear_offset(std::span<const int64_t> index) const;

  std::shared_ptr<std::byte> storage_;
  DType dtype_ = DType::f64;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;  // in elements
};

/// Bitwise equality of dtype, shape and element values (layouts may differ).
bool bitwise_equal(const Tensor& a, const Tensor& b);

// ---- template definitions ----

template <typename T> void Tensor::check_dtype(const char* what) const {
  if (!defined()) fail(ErrorKind::invalid_argument, "{}: the tensor is undefined", what);
  if (dtype_ != dtype_v<T>)
    fail(ErrorKind::dtype, "{}: tensor has dtype {} but {} was requested", what, name(dtype_), name(dtype_v<T>));
}

template <typename T> Tensor Tensor::scalar(T value) { return from_col_major<T>({}, std::span<const T>(&value, 1)); }

template <typename T> Tensor Tensor::from_col_major(Shape shape, std::span<const T> data) {
  return from_bytes(dtype_v<T>, std::move(shape), data.data(), data.size_bytes(), true);
}
template <typename T> Tensor Tensor::from_row_major(Shape shape, std::span<const T> data) {
  return from_bytes(dtype_v<T>, std::move(shape), data.data(), data.size_bytes(), false);
}

template <typename T> T* Tensor::data() {
  check_dtype<T>("data");
  return static_cast<T*>(raw_data());
}
template <typename T> const T* Tensor::data() const {
  check_dtype<T>("data");
  return static_cast<const T*>(raw_data());
}
template <typename T> T& Tensor::at(std::span<const int64_t> index) {
  check_dtype<T>("at");
  return reinterpret_cast<T*>(storage_.get())[linear_offset(index)];
}
template <typename T> const T& Tensor::at(std::span<const int64_t> index) const {
  check_dtype<T>("at");
  return reinterpret_cast<const T*>(storage_.get())[linear_offset(index)];
}

template <typename T> T Tensor::item() const {
  check_dtype<T>("item");
  check_one_element("item");
  return reinterpret_cast<const T*>(storage_.get())[offset_];  // every index is 0
}

template <typename T> std::vector<T> Tensor::to_col_major() const {
  check_dtype<T>("to_col_major");
  std::vector<T> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;  // an empty vector's data() may be null, which view_of would take as undefined
  Tensor::view_of(dtype_, shape_, col_major_strides(shape_), out.data()).copy_from(*this);
  return out;
}
template <typename T> std::vector<T> Tensor::to_row_major() const {
  check_dtype<T>("to_row_major");
  std::vector<T> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  // Row-major memory of shape s is column-major memory of the reversed shape; view it that way.
  Strides st(shape_.size());
  int64_t s = 1;
  for (int i = rank() - 1; i >= 0; --i) { st[i] = s; s *= shape_[i]; }
  Tensor::view_of(dtype_, shape_, st, out.data()).copy_from(*this);
  return out;
}

}  // namespace einstage

template <> struct fmt::formatter<einstage::Tensor> : einstage::detail::ToStringFormatter<einstage::Tensor> {};
