// Element types of einstage tensors and programs: f32, f64, c64, c128, i64.
//
// One table (kDTypeInfo) holds each dtype's name, size and kind; promotion follows NumPy for the pairs einstage
// accepts (i64 with a float type gives that float type, real with complex gives complex of the wider precision).
// dispatch_dtype() calls a generic lambda with the C++ element type, so kernels are written once as templates.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace einstage {

enum class DType : uint8_t { f32, f64, c64, c128, i64 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::c64, DType::c128, DType::i64};

using c64 = std::complex<float>;
using c128 = std::complex<double>;

std::string_view name(DType dtype);               // "f32", "f64", "c64", "c128", "i64"
std::optional<DType> parse_dtype(std::string_view text);
size_t size_of(DType dtype);                      // bytes per element
bool is_complex(DType dtype);
bool is_floating(DType dtype);                    // f32, f64, c64, c128
DType real_part_type(DType dtype);                // c64 -> f32, c128 -> f64, others unchanged
/// The NumPy common type: f32+f64 -> f64, i64+f32 -> f64, i64+c64 -> c128, f64+c64 -> c128.
DType promote(DType a, DType b);

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<c64> { static constexpr DType value = DType::c64; };
template <> struct dtype_of<c128> { static constexpr DType value = DType::c128; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <typename T> inline constexpr DType dtype_v = dtype_of<T>::value;

/// Calls fn(T{}) with T the element type of dtype; returns what fn returns.
template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::c64: return fn(c64{});
    case DType::c128: return fn(c128{});
    case DType::i64: return fn(int64_t{});
  }
  return fn(double{});
}

}  // namespace einstage
