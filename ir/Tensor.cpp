#include "ir/Tensor.h"

#include "ir/Scratch.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>


namespace einstage {

Strides col_major_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    s[i] = acc;
    if (i + 1 < shape.size()) acc = checked_mul(acc, std::max<int64_t>(shape[i], 1), "column-major strides");
  }
  return s;
}

int64_t element_count(const Shape& shape) { return checked_product(shape, "shape"); }

std::string shape_to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

int64_t slice_extent(int axis, int64_t extent, int64_t begin, int64_t end, int64_t step) {
  if (step <= 0) fail(ErrorKind::invalid_argument, "slice: step must be positive, got {}", step);
  if (begin < 0 || begin > end)
    fail(ErrorKind::invalid_argument, "slice [{}, {}) is out of range for axis {}; need 0 <= begin <= end", begin, end,
         axis);
  if (extent >= 0 && end > extent)
    fail(ErrorKind::invalid_argument, "slice [{}, {}) is out of range for axis {} of extent {}; need end <= {}", begin,
         end, axis, extent, extent);
  return (end - begin + step - 1) / step;
}

namespace {

// Calls fn(offset_a, offset_b) for every multi-index in column-major order, with offsets in elements.
template <typename Fn>
void for_each_index2(const Shape& shape, const Strides& sa, const Strides& sb, Fn&& fn) {
  int r = static_cast<int>(shape.size());
  for (int64_t e : shape)
    if (e == 0) return;
  if (r == 0) {
    fn(int64_t{0}, int64_t{0});
    return;
  }
  std::vector<int64_t> idx(r, 0);
  int64_t oa = 0, ob = 0;
  const int64_t n0 = shape[0], a0 = sa[0], b0 = sb[0];
  while (true) {
    for (int64_t i = 0; i < n0; ++i) fn(oa + i * a0, ob + i * b0);
    int ax = 1;
    for (; ax < r; ++ax) {
      oa += sa[ax];
      ob += sb[ax];
      if (++idx[ax] < shape[ax]) break;
      oa -= sa[ax] * shape[ax];
      ob -= sb[ax] * shape[ax];
      idx[ax] = 0;
    }
    if (ax == r) return;
  }
}

bool overlaps(const Tensor& a, const Tensor& b) {
  auto [a0, a1] = a.byte_range();
  auto [b0, b1] = b.byte_range();
  return a0 < b1 && b0 < a1;
}

template <typename T>
std::string format_element(T v) {
  if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) {
    return fmt::format("{}{}{}j", v.real(), v.imag() < 0 || std::signbit(v.imag()) ? "-" : "+", std::abs(v.imag()));
  } else {
    return fmt::format("{}", v);
  }
}

}  // namespace

std::pair<uintptr_t, uintptr_t> Tensor::byte_range() const {
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < rank(); ++i) {
    int64_t reach = (shape_[i] - 1) * strides_[i];
    (reach < 0 ? lo : hi) += reach;
  }
  auto base = reinterpret_cast<uintptr_t>(raw_data());
  int64_t es = static_cast<int64_t>(size_of(dtype_));
  return {base + lo * es, base + (hi + 1) * es};
}

bool Tensor::overlaps(const Tensor& other) const {
  return shares_storage_with(other) && numel() > 0 && other.numel() > 0 && einstage::overlaps(*this, other);
}

Tensor Tensor::empty(DType dtype, Shape shape) { return empty(dtype, std::move(shape), ScratchAllocator::process_default()); }

Tensor Tensor::empty(DType dtype, Shape shape, ScratchAllocator& allocator) {
  const int64_t bytes = checked_bytes(shape, size_of(dtype), "shape");
  Tensor t;
  t.storage_ = allocator.allocate(static_cast<size_t>(bytes));
  t.dtype_ = dtype;
  t.strides_ = col_major_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.storage_.get(), 0, t.nbytes());
  return t;
}

Tensor Tensor::from_bytes(DType dtype, Shape shape, const void* data, size_t bytes, bool col_major) {
  const int64_t n = element_count(shape);
  const size_t expected = static_cast<size_t>(checked_bytes(shape, size_of(dtype), "shape"));
  if (bytes != expected)
    fail(ErrorKind::shape, "tensor data has {} elements but shape {} needs {}; pass exactly one value per element",
         bytes / size_of(dtype), shape_to_string(shape), n);
  Tensor t = empty(dtype, shape);
  if (col_major || t.rank() <= 1) {
    if (bytes) std::memcpy(t.storage_.get(), data, bytes);
    return t;
  }
  Strides rm(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    rm[i] = s;
    s *= shape[i];
  }
  t.copy_from(view_of(dtype, shape, rm, const_cast<void*>(data)));
  return t;
}

Tensor Tensor::view_of(DType dtype, Shape shape, Strides strides, void* data) {
  if (strides.size() != shape.size())
    fail(ErrorKind::shape, "view_of: {} strides given for shape {} of rank {}", strides.size(), shape_to_string(shape),
         shape.size());
  const int64_t n = element_count(shape);
  (void)checked_bytes(shape, size_of(dtype), "shape");  // so nbytes() of every tensor fits
  if (!data && n > 0)
    fail(ErrorKind::invalid_argument, "view_of: data is null for a view of shape {}", shape_to_string(shape));
  // A view with no elements may come from an empty vector's null data(); it still is a defined tensor.
  static std::byte no_elements;
  if (!data) data = &no_elements;
  Tensor t;
  t.storage_ = std::shared_ptr<std::byte>(static_cast<std::byte*>(data), [](std::byte*) {});
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  return t;
}

Tensor Tensor::in_block(DType dtype, Shape shape, std::shared_ptr<std::byte> block, int64_t offset) {
  const int64_t es = static_cast<int64_t>(size_of(dtype));
  EIN_ASSERT(block && offset >= 0 && offset % es == 0, "in_block: byte offset {} is not a multiple of {}", offset, es);
  Tensor t;
  t.storage_ = std::move(block);
  t.dtype_ = dtype;
  t.strides_ = col_major_strides(shape);
  t.shape_ = std::move(shape);
  t.offset_ = offset / es;
  return t;
}

void Tensor::check_one_element(const char* what) const {
  if (numel() != 1)
    fail(ErrorKind::shape,
         "{}: the tensor has shape {} ({} elements) but {}() reads a tensor of one element; index it with "
         "at<T>({{...}}) or reduce it first",
         what, shape_to_string(shape_), numel(), what);
}

int64_t Tensor::extent(int axis) const {
  if (axis < 0 || axis >= rank())
    fail(ErrorKind::invalid_argument, "axis {} is out of range for a tensor of rank {}", axis, rank());
  return shape_[axis];
}

int64_t Tensor::numel() const { return element_count(shape_); }

bool Tensor::is_col_major() const {
  int64_t expect = 1;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] == 0) return true;
    if (shape_[i] != 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() {
  if (!defined()) fail(ErrorKind::invalid_argument, "raw_data: the tensor is undefined");
  // Most tensors start at their block (the executor asks three per contraction step): no element size needed.
  return offset_ == 0 ? storage_.get() : storage_.get() + offset_ * static_cast<int64_t>(size_of(dtype_));
}
const void* Tensor::raw_data() const { return const_cast<Tensor*>(this)->raw_data(); }

int64_t Tensor::linear_offset(std::span<const int64_t> index) const {
  if (static_cast<int>(index.size()) != rank())
    fail(ErrorKind::invalid_argument, "index has {} entries but the tensor {} has rank {}", index.size(),
         shape_to_string(shape_), rank());
  int64_t off = offset_;
  for (int i = 0; i < rank(); ++i) {
    if (index[i] < 0 || index[i] >= shape_[i])
      fail(ErrorKind::invalid_argument, "index {} is out of range for axis {} of extent {} (shape {})", index[i], i,
           shape_[i], shape_to_string(shape_));
    off += index[i] * strides_[i];
  }
  return off;
}

Tensor Tensor::permute(std::span<const int> perm) const {
  if (static_cast<int>(perm.size()) != rank())
    fail(ErrorKind::invalid_argument, "permute: permutation has {} entries but the tensor has rank {}", perm.size(),
         rank());
  std::vector<bool> seen(rank(), false);
  Tensor t = *this;
  for (int i = 0; i < rank(); ++i) {
    int p = perm[i];
    if (p < 0 || p >= rank() || seen[p])
      fail(ErrorKind::invalid_argument, "permute: [{}] is not a permutation of 0..{}", fmt::join(perm, ","), rank() - 1);
    seen[p] = true;
    t.shape_[i] = shape_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

Tensor Tensor::transpose() const {
  std::vector<int> perm(rank());
  for (int i = 0; i < rank(); ++i) perm[i] = rank() - 1 - i;
  return permute(perm);
}

Tensor Tensor::slice(int axis, int64_t begin, int64_t end, int64_t step) const {
  const int64_t n = slice_extent(axis, extent(axis), begin, end, step);
  Tensor t = *this;
  t.shape_[axis] = n;
  // An empty slice keeps the offset, so raw_data() never points past the storage.
  if (t.shape_[axis] > 0) t.offset_ += begin * strides_[axis];
  t.strides_[axis] = strides_[axis] * step;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t n = element_count(shape);
  if (n != numel())
    fail(ErrorKind::shape, "cannot reshape {} ({} elements) to {} ({} elements); the element counts must match",
         shape_to_string(shape_), numel(), shape_to_string(shape), n);
  // Try a view: walk old and new axes from the fastest, matching groups with equal products; within a group the
  // old axes must be mutually contiguous (column-major), then the new strides follow from the group's first stride.
  Shape os;
  Strides ost;
  for (int i = 0; i < rank(); ++i)
    if (shape_[i] != 1) {
      os.push_back(shape_[i]);
      ost.push_back(strides_[i]);
    }
  Strides ns(shape.size(), 0);
  bool ok = n != 0;
  size_t oi = 0, ni = 0;
  while (ok && ni < shape.size()) {
    if (shape[ni] == 1) {
      ns[ni] = 1;
      ++ni;
      continue;
    }
    if (oi >= os.size()) {
      ok = false;
      break;
    }
    int64_t po = os[oi], pn = shape[ni];
    size_t oj = oi + 1, nj = ni + 1;
    while (po != pn) {
      if (po < pn) {
        if (oj >= os.size()) { ok = false; break; }
        po *= os[oj++];
      } else {
        while (nj < shape.size() && shape[nj] == 1) ++nj;
        if (nj >= shape.size()) { ok = false; break; }
        pn *= shape[nj++];
      }
    }
    if (!ok) break;
    for (size_t k = oi; k + 1 < oj; ++k)
      if (ost[k + 1] != ost[k] * os[k]) ok = false;
    if (!ok) break;
    int64_t s = ost[oi];
    for (size_t k = ni; k < nj; ++k) {
      ns[k] = s;
      s *= shape[k];
    }
    oi = oj;
    ni = nj;
  }
  if (ok && oi == os.size()) {
    Tensor t = *this;
    t.shape_ = std::move(shape);
    t.strides_ = std::move(ns);
    return t;
  }
  Tensor t = contiguous();
  if (t.shares_storage_with(*this)) t = clone();
  t.strides_ = col_major_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::contiguous() const {
  if (!defined()) fail(ErrorKind::invalid_argument, "contiguous: the tensor is undefined");
  if (is_col_major()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (!defined()) fail(ErrorKind::invalid_argument, "clone: the tensor is undefined");
  Tensor t = empty(dtype_, shape_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::astype(DType to) const {
  if (!defined()) fail(ErrorKind::invalid_argument, "astype: the tensor is undefined");
  if (to == dtype_) return clone();
  if (is_complex(dtype_) && !is_complex(to))
    fail(ErrorKind::dtype, "astype: converting {} to {} would drop the imaginary part; take the real part explicitly",
         name(dtype_), name(to));
  Tensor out = empty(to, shape_);
  dispatch_dtype(dtype_, [&](auto s) {
    using S = decltype(s);
    dispatch_dtype(to, [&](auto d) {
      using D = decltype(d);
      const S* src = static_cast<const S*>(raw_data());
      D* dst = static_cast<D*>(out.raw_data());
      int64_t k = 0;
      for_each_index2(shape_, strides_, strides_, [&](int64_t oa, int64_t) {
        if constexpr (std::is_same_v<D, c64> || std::is_same_v<D, c128>) {
          using R = typename D::value_type;
          if constexpr (std::is_same_v<S, c64> || std::is_same_v<S, c128>)
            dst[k++] = D(static_cast<R>(src[oa].real()), static_cast<R>(src[oa].imag()));
          else
            dst[k++] = D(static_cast<R>(src[oa]), R(0));
        } else if constexpr (!(std::is_same_v<S, c64> || std::is_same_v<S, c128>)) {
          dst[k++] = static_cast<D>(src[oa]);
        }
      });
    });
  });
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  if (!defined() || !src.defined()) fail(ErrorKind::invalid_argument, "copy_from: a tensor is undefined");
  if (src.dtype_ != dtype_)
    fail(ErrorKind::dtype, "copy_from: source has dtype {} but destination has {}", name(src.dtype_), name(dtype_));
  if (src.shape_ != shape_)
    fail(ErrorKind::shape, "copy_from: source has shape {} but destination has {}", shape_to_string(src.shape_),
         shape_to_string(shape_));
  if (numel() == 0) return;
  if (is_col_major() && src.is_col_major()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());  // memmove: the two may overlap
    return;
  }
  // Element by element, a destination that overlaps the source (say t.copy_from(t.transpose())) would read values
  // it has already overwritten; copy the source out first.
  if (einstage::overlaps(*this, src)) {
    copy_from(src.clone());
    return;
  }
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T* dt = static_cast<T*>(raw_data());
    const T* st = static_cast<const T*>(src.raw_data());
    for_each_index2(shape_, strides_, src.strides_, [&](int64_t od, int64_t os) { dt[od] = st[os]; });
  });
}

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  std::string out = fmt::format("{}{}\n", name(dtype_), shape_to_string(shape_));
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* base = static_cast<const T*>(raw_data());
    // NumPy's rules: more than 1000 elements are summarised to the first and last 3 entries of every axis longer
    // than 6; elements are right-aligned to the widest one shown.
    const bool summarize = numel() > 1000;
    const int r = rank();
    size_t width = 0;
    bool measuring = true;
    // Nested rows in NumPy's reading: axis 0 outermost, last axis along a line; between blocks of axis a there are
    // rank - a - 1 line breaks (a blank line between the matrices of a rank-3 tensor).
    auto rec = [&](auto&& self, int axis, int64_t off, int indent) -> void {
      if (axis == r) {
        std::string e = format_element(base[off]);
        if (measuring) width = std::max(width, e.size());
        else out += fmt::format("{:>{}}", e, width);
        return;
      }
      if (!measuring) out += '[';
      std::string sep = ",";
      if (axis + 1 == r) sep += ' ';
      else sep.append(static_cast<size_t>(r - axis - 1), '\n').append(static_cast<size_t>(indent + 1), ' ');
      int64_t e = shape_[axis];
      for (int64_t i = 0; i < e; ++i) {
        if (summarize && e > 6 && i == 3) {
          if (!measuring) out.append("...").append(sep);
          i = e - 3;
        }
        self(self, axis + 1, off + i * strides_[axis], indent + 1);
        if (!measuring && i + 1 < e) out += sep;
      }
      if (!measuring) out += ']';
    };
    if (numel() == 0) {  // NumPy prints every empty array as [] (the header has the shape)
      out += "[]";
      return;
    }
    rec(rec, 0, 0, 0);
    measuring = false;
    rec(rec, 0, 0, 0);
  });
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return !a.defined() && !b.defined();
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return a.nbytes() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), a.nbytes()) == 0;
}

}  // namespace einstage
