#include "ir/DType.h"

#include <algorithm>

namespace einstage {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
  bool complex;
  bool floating;
};
constexpr DTypeInfo kDTypeInfo[] = {
    {DType::f32, "f32", 4, false, true},  {DType::f64, "f64", 8, false, true},
    {DType::c64, "c64", 8, true, true},   {DType::c128, "c128", 16, true, true},
    {DType::i64, "i64", 8, false, false},
};
const DTypeInfo& info(DType d) { return kDTypeInfo[static_cast<int>(d)]; }
}  // namespace

std::string_view name(DType dtype) { return info(dtype).name; }
size_t size_of(DType dtype) { return info(dtype).size; }
bool is_complex(DType dtype) { return info(dtype).complex; }
bool is_floating(DType dtype) { return info(dtype).floating; }

std::optional<DType> parse_dtype(std::string_view text) {
  for (const auto& i : kDTypeInfo)
    if (i.name == text) return i.dtype;
  return std::nullopt;
}

DType real_part_type(DType dtype) {
  if (dtype == DType::c64) return DType::f32;
  if (dtype == DType::c128) return DType::f64;
  return dtype;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  // NumPy: int64 with float32 gives float64; with complex64 gives complex128.
  if (a == DType::i64 || b == DType::i64) {
    DType other = a == DType::i64 ? b : a;
    return is_complex(other) ? DType::c128 : DType::f64;
  }
  bool complex = is_complex(a) || is_complex(b);
  bool wide = real_part_type(a) == DType::f64 || real_part_type(b) == DType::f64;
  if (complex) return wide ? DType::c128 : DType::c64;
  return wide ? DType::f64 : DType::f32;
}

}  // namespace einstage
