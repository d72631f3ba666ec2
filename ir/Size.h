// Checked size arithmetic: the one place where element counts, strides and byte sizes are multiplied and added.
//
// Every product of extents (Tensor sizes, column-major strides, .npy header shapes, lowering shapes, the einsum
// executor's arena and workspace) goes through these functions, so a shape whose size does not fit in 64 bits is an
// einstage::Error (kind shape) naming what was being sized instead of signed overflow. Extents follow NumPy's rule:
// a zero extent makes the element count 0, but the product of the other extents must still fit (NumPy refuses
// np.empty((0, 2**62, 2**62)) as "array is too big"), so the strides of every accepted shape fit too. The memory
// check compares a planned allocation with the machine's memory before anything is allocated. Depends on
// ir/Error.h only.
#pragma once

#include "ir/Error.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace einstage {

/// a * b for non-negative sizes; fails naming `what` when the product does not fit in int64.
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
/// a + b for non-negative sizes; fails naming `what` when the sum does not fit in int64.
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
/// The element count of `extents` (1 for none). Fails naming `what` when an extent is negative or the product of
/// the non-zero extents does not fit in int64 (then 0 is returned only when an extent is 0 and the rest fit).
int64_t checked_product(std::span<const int64_t> extents, std::string_view what);
/// checked_product times the element size: the bytes of a dense tensor; fails when they do not fit in int64, even
/// for a zero-size tensor (the bytes its non-zero extents would need are checked, as NumPy does).
int64_t checked_bytes(std::span<const int64_t> extents, size_t element_size, std::string_view what);

/// Bytes of memory the machine has (RAM plus swap on Linux; the largest int64 where unknown).
int64_t machine_memory_bytes();
/// False when an allocation of `bytes` cannot succeed because the machine does not have that much memory: checked
/// before allocating, so a huge request fails cleanly instead of being killed later (Linux may overcommit).
bool fits_in_memory(int64_t bytes);
/// The one out-of-memory error (kind runtime): "out of memory allocating N bytes (64.8 GB) for <what>", plus the
/// machine's memory when `bytes` exceeds it.
[[noreturn]] void fail_out_of_memory(int64_t bytes, std::string_view what);
/// "64.8 GB" for messages (decimal units, as `df -H` prints them).
std::string human_bytes(int64_t bytes);

}  // namespace einstage
