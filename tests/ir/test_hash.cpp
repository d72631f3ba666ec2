// ir/Hash.h: hash_bytes is textbook FNV-1a 64 (published test vectors), seeds chain, and Fnv1a::word() spreads a
// word's high bits into the low bits a hash table's bucket index uses.
#include "ir/Hash.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>

using namespace einstage;

TEST_CASE("hash_bytes is FNV-1a 64") {
  static_assert(hash_bytes("") == 0xcbf29ce484222325ull);  // usable at compile time
  CHECK(hash_bytes("a") == 0xaf63dc4c8601ec8cull);
  CHECK(hash_bytes("foobar") == 0x85944171f73967e8ull);
  CHECK(hash_bytes(std::string("a\0b", 3)) != hash_bytes("ab"));  // every byte counts, NUL included
}

TEST_CASE("hash_bytes: a seed continues the hash") {
  CHECK(hash_bytes("bar", hash_bytes("foo")) == hash_bytes("foobar"));
  const std::string bytes = "foobar";
  CHECK(Fnv1a().bytes(bytes.data(), 3).bytes(bytes.data() + 3, 3).value() == hash_bytes("foobar"));
  CHECK(Fnv1a().byte('f').bytes("oobar").value() == hash_bytes("foobar"));
}

TEST_CASE("Fnv1a::word: words that differ only in high bits land in different low bits") {
  // Without the fold, (h ^ v) * prime leaves the low 32 bits independent of v's high 32 bits.
  std::set<uint64_t> low_bits;
  for (uint64_t high = 1; high <= 64; ++high) low_bits.insert(Fnv1a().word(high << 32).value() & 0xffff);
  CHECK(low_bits.size() > 56);  // 64 values into 65536 buckets: a handful of collisions at most
  CHECK(Fnv1a().word(1).value() != Fnv1a().byte(1).value());
}
