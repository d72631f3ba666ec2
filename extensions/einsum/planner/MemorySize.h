// Memory sizes as text: the byte counts of a slicing limit (`auto(max_memory=256MiB)` in a plan spec, `--max-memory`
// on the command line) parsed from and printed as a whole number with a unit, B, KiB, MiB or GiB (powers of 1024).
//
// Planning stage. The one place the units live, shared by the plan spec's text form (PlanSpec.cpp) and the sliced
// planner's messages (Slicing.cpp); Slicing.h includes it for its callers. Depends on ir/Error.h only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace einstage::einsum {

/// "256MiB" -> 268435456. A whole number followed by B, KiB, MiB or GiB (powers of 1024), at least 1 byte; anything
/// else is an Error (kind parse) naming `what` (e.g. "--max-memory") and the text.
int64_t parse_memory_size(std::string_view text, std::string_view what);
/// The canonical text: the largest of GiB, MiB, KiB that divides `bytes` exactly, else B ("256MiB", "1000B").
std::string format_memory_size(int64_t bytes);

/// The size a message suggests for `bytes`: rounded up to a whole unit of the largest unit not above it ("at least
/// 3MiB" for 2.5MiB), so that it parses and is not below `bytes`.
int64_t round_up_memory_size(int64_t bytes);

}  // namespace einstage::einsum
