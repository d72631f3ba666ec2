// ir/ValueMap.h: ValueMap and ValueSet behave as std::map / std::set of ValueIds, whether an id lands in the dense
// vector or in the overflow map (negative ids, ids past the limit), checked against std::map on seeded random
// operation sequences (the seed is printed on failure); a hand-made program with a huge id costs no huge vector.
#include "ir/ValueMap.h"
#include "ir/Verifier.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <climits>
#include <map>

using namespace einstage;

TEST_CASE("ValueMap agrees with std::map on random operations, dense and overflow ids alike") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    test::SplitMix64 r{seed};
    ValueMap<int> map(static_cast<size_t>(1 + r.below(64)));  // a small limit: many ids overflow
    std::map<ValueId, int> oracle;
    for (int step = 0; step < 2000; ++step) {
      const auto id = static_cast<ValueId>(r.below(200) - 20);  // negative, dense and past-the-limit ids
      const int value = static_cast<int>(r.below(1000));
      switch (r.below(5)) {
        case 0: {
          auto [p, inserted] = map.try_emplace(id, value);
          auto [it, expected] = oracle.try_emplace(id, value);
          CHECK(inserted == expected);
          CHECK(*p == it->second);
          break;
        }
        case 1:
          map.insert_or_assign(id, value);
          oracle.insert_or_assign(id, value);
          break;
        case 2:
          map.erase(id);
          oracle.erase(id);
          break;
        case 3:
          map[id] += value;
          oracle[id] += value;
          break;
        default:
          break;
      }
      const int* found = map.find(id);
      auto it = oracle.find(id);
      REQUIRE((found != nullptr) == (it != oracle.end()));
      if (found) CHECK(*found == it->second);
    }
    for (const auto& [id, value] : oracle) CHECK(map.at(id) == value);
  }
}

TEST_CASE("ValueSet: insert reports novelty, erase removes") {
  ValueSet s(8);
  CHECK(s.insert(3));
  CHECK_FALSE(s.insert(3));
  CHECK(s.insert(1000));  // past the limit
  CHECK(s.insert(-5));
  CHECK(s.contains(3));
  CHECK(s.contains(1000));
  CHECK(s.contains(-5));
  CHECK_FALSE(s.contains(4));
  s.erase(1000);
  CHECK_FALSE(s.contains(1000));
}

TEST_CASE("value_count and the limit a program gives: a huge id is kept in the overflow map") {
  Builder b("f");
  Value x = b.parameter("x", TensorType{DType::f64, {3}});
  Program p = b.finish({b.neg(x)});
  CHECK(value_count(p) == 2);
  // The verifier keeps its table in a ValueMap: an id of INT32_MAX is reported, not allocated for.
  Program huge = p;
  huge.instructions[0].results[0].id = INT32_MAX;
  huge.outputs[0].id = INT32_MAX;
  verify(huge);
  huge.outputs[0].id = INT32_MAX - 1;
  CHECK(test::error_of([&] { verify(huge); }).starts_with("@f: output 0 (%?2147483646) is not a defined value\n"));
}
