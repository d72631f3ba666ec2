// Hash: FNV-1a 64, the one hash einstage computes itself. Stage: ir (used by every stage). Depends on the standard
// library only.
//
// Everything that needs a hash stable across processes and platforms uses it: payload hashes (hash_bytes, the helper
// offered to extension authors in ir/Extension.h), the einsum plan cache key, plan-spec hashes, the JIT's kernel
// symbols and the kernel cache's file names and checksums. std::hash is not guaranteed stable, so it is never used
// for anything that is printed, stored or compared between processes.
//
//   uint64_t h = hash_bytes("ij,jk->ik");                        // plain FNV-1a of the bytes
//   uint64_t k = Fnv1a().byte(kind).bytes(text).word(n).value();  // a key built from parts
//
// byte() and bytes() are textbook FNV-1a (hash_bytes("a") == 0xaf63dc4c8601ec8c). word() mixes a whole 64-bit
// value in one xor-multiply and then folds the high bits down (h ^= h >> 29), because one multiply carries a word's
// low bits only upwards: without the fold, keys that differ only in a word's high bits would differ only in the
// hash's high bits, which a bucket index (the low bits) never sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace einstage {

class Fnv1a {
 public:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;

  constexpr Fnv1a() = default;
  /// Continues from an earlier value (a seed), e.g. hash_bytes(b, hash_bytes(a)) hashes a then b.
  constexpr explicit Fnv1a(uint64_t state) : h_(state) {}

  constexpr Fnv1a& byte(uint8_t v) {
    h_ = (h_ ^ v) * kPrime;
    return *this;
  }
  constexpr Fnv1a& bytes(std::string_view s) {
    for (char c : s) byte(static_cast<uint8_t>(c));
    return *this;
  }
  Fnv1a& bytes(const void* data, size_t size) {
    return bytes(std::string_view(static_cast<const char*>(data), size));
  }
  /// A whole 64-bit value in one step, then the fold described above.
  constexpr Fnv1a& word(uint64_t v) {
    h_ = (h_ ^ v) * kPrime;
    h_ ^= h_ >> 29;
    return *this;
  }

  constexpr uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kOffsetBasis;
};

/// FNV-1a 64 of `bytes`, continuing from `seed`; stable across processes and platforms.
constexpr uint64_t hash_bytes(std::string_view bytes, uint64_t seed = Fnv1a::kOffsetBasis) {
  return Fnv1a(seed).bytes(bytes).value();
}

}  // namespace einstage
