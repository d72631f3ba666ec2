// Checked size arithmetic (ir/Size.h): overflowing products and sums are errors naming what was sized, zero-size
// shapes with huge extents follow NumPy's rule, and the out-of-memory error says what the bytes were for.
#include "support/ErrorOf.h"

#include "ir/Size.h"
#include "ir/Tensor.h"
#include "ir/Type.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

using namespace einstage;
using test::error_of;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t p(int bits) { return int64_t{1} << bits; }
}  // namespace

TEST_CASE("size: checked_mul and checked_add name what overflows") {
  CHECK(checked_mul(p(31), p(31), "x") == p(62));
  CHECK(checked_add(kMax - 1, 1, "x") == kMax);
  CHECK(error_of([] { checked_mul(p(32), p(31), "the arena"); }) ==
        "the arena: 4294967296 * 2147483648 does not fit in 64 bits");
  CHECK(error_of([] { checked_add(kMax, 1, "the workspace"); }) ==
        "the workspace: 9223372036854775807 + 1 does not fit in 64 bits");
}

TEST_CASE("size: a zero extent makes the count 0, but the other extents must still fit (NumPy's rule)") {
  const Shape zero_huge{0, p(59)};
  CHECK(checked_product(zero_huge, "shape") == 0);
  CHECK(checked_bytes(zero_huge, 8, "shape") == 0);
  CHECK(checked_product(Shape{}, "shape") == 1);
  CHECK(checked_bytes(Shape{3, 5}, 16, "shape") == 240);
  CHECK(error_of([] { checked_product(Shape{0, p(62), p(62)}, "shape"); }) ==
        "shape [0,4611686018427387904,4611686018427387904] has more elements than fit in 64 bits (counting its "
        "non-zero extents only, as NumPy does)");
  CHECK(error_of([] { checked_bytes(Shape{0, p(60)}, 8, "shape"); }) ==
        "shape [0,1152921504606846976] needs more bytes than fit in 64 bits (1152921504606846976 elements of 8 "
        "bytes, counting its non-zero extents only)");
  CHECK(error_of([] { checked_product(Shape{kMax, kMax}, "shape"); }) ==
        "shape [9223372036854775807,9223372036854775807] has more elements than fit in 64 bits");
}

TEST_CASE("size: tensors and strides of zero-size shapes with huge extents") {
  Tensor t = Tensor::empty(DType::f64, {0, p(59)});
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.strides() == Strides{1, 1});
  CHECK(col_major_strides({p(59), 0, 3}) == Strides{1, p(59), p(59)});
  CHECK(error_of([] { Tensor::empty(DType::f64, {0, p(62), p(62)}); }) ==
        "shape [0,4611686018427387904,4611686018427387904] has more elements than fit in 64 bits (counting its "
        "non-zero extents only, as NumPy does)");
  CHECK(error_of([] { col_major_strides({kMax, kMax, kMax}); }) ==
        "column-major strides: 9223372036854775807 * 9223372036854775807 does not fit in 64 bits");
  CHECK(error_of([] { (void)(Dim(p(40)) * Dim(p(30))); }) ==
        "extent product: 1099511627776 * 1073741824 does not fit in 64 bits");
}

TEST_CASE("size: an allocation larger than the machine's memory fails before allocating, saying what it was for") {
  CHECK(fits_in_memory(1 << 20));
  CHECK_FALSE(fits_in_memory(kMax));
  const std::string message = error_of([] { fail_out_of_memory(kMax, "the scratch of step 3"); });
  CHECK(message.starts_with("out of memory allocating 9223372036854775807 bytes (9.2 EB) for the scratch of step 3: "
                            "this machine has "));
  CHECK(message.ends_with(" of memory (RAM and swap)"));
  CHECK(error_of([] { Tensor::empty(DType::f64, {p(60) - 1}); }).starts_with(
      "out of memory allocating 9223372036854775800 bytes (9.2 EB) for a tensor: this machine has "));
  CHECK(human_bytes(999) == "999 bytes");
  CHECK(human_bytes(64'800'000'000) == "64.8 GB");
}
