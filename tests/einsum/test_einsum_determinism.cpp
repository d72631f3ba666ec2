// Determinism: the same bits at 1, 2 and 3 threads on problems large enough to be split, and the same bits in
// another process (this binary runs its own probe twice as child processes and compares output hashes).
#include "EinsumTestUtil.h"
#include "extensions/einsum/exec/Einsum.h"
#include "ir/Hash.h"
#include "runtime/Cpus.h"
#include "runtime/ThreadPool.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unistd.h>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

struct Problem {
  const char* text;
  std::vector<Shape> shapes;
};

const std::vector<Problem>& problems() {
  static const std::vector<Problem> p{
      {"ij,jk->ik", {{150, 170}, {170, 130}}},
      {"ij,jk,kl->li", {{90, 300}, {300, 80}, {80, 70}}},
      {"bij,bjk->bik", {{6, 40, 50}, {6, 50, 30}}},
      {"ijk,kj->i", {{300, 20, 30}, {30, 20}}},
      {"ab,bc,cd,da->", {{40, 50}, {50, 60}, {60, 30}, {30, 40}}},
      {"i,i,i->ii", {{64}, {64}, {64}}},
  };
  return p;
}

// Runs every problem in every dtype (seeded data) on `threads` threads (0: the default, on default_pool());
// returns the outputs.
std::vector<Tensor> run_all(int threads) {
  std::optional<ThreadPool> pool;
  if (threads > 0) pool.emplace(threads);
  std::vector<Tensor> outs;
  uint64_t seed = 1;
  for (const Problem& pr : problems())
    for (DType dt : kAllDTypes) {
      kt::Rng r(seed++);
      std::vector<Tensor> ops;
      for (const Shape& s : pr.shapes)
        dispatch_dtype(dt, [&](auto tag) { ops.push_back(et::random_tensor<decltype(tag)>(r, s, seed % 2 == 0)); });
      es::EinsumOptions o;
      o.pool = pool ? &*pool : nullptr;
      outs.push_back(es::einsum(pr.text, ops, o));
    }
  return outs;
}

uint64_t hash_all(const std::vector<Tensor>& outs) {
  Fnv1a h;
  for (const Tensor& t : outs) {
    Tensor c = t.contiguous();
    h.bytes(c.raw_data(), c.nbytes());
  }
  return h.value();
}

}  // namespace

TEST_CASE("einsum gives the same bits at 1, 2 and 3 threads") {
  std::vector<Tensor> one = run_all(1), two = run_all(2), three = run_all(3);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(bitwise_equal(one[i], two[i]));
    CHECK(bitwise_equal(one[i], three[i]));
  }
}

TEST_CASE("einsum at the default thread count gives the same bits as on 1 thread") {
  // The default is every CPU here, and 3 in the einsum_default_threads_3 ctest process (EINSTAGE_NUM_THREADS=3).
  INFO("default_threads() = " << default_threads());
  CHECK(es::EinsumOptions{}.threads == 0);
  std::vector<Tensor> one = run_all(1), at_default = run_all(0);
  REQUIRE(one.size() == at_default.size());
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(bitwise_equal(one[i], at_default[i]));
  }
}

TEST_CASE("determinism probe") {
  // Run as a child by the next test: prints the hash of all outputs on 2 threads.
  const uint64_t h = hash_all(run_all(2));
  if (std::getenv("EINSTAGE_DETERMINISM_CHILD")) std::printf("probe-hash=%016llx\n", static_cast<unsigned long long>(h));
  CHECK(h != 0);
}

TEST_CASE("einsum gives the same bits in two other processes") {
  char exe[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  REQUIRE(len > 0);
  char own[32];
  std::snprintf(own, sizeof(own), "%016llx", static_cast<unsigned long long>(hash_all(run_all(2))));
  for (int run = 0; run < 2; ++run) {
    const std::string cmd = std::string("EINSTAGE_DETERMINISM_CHILD=1 '") + exe +
                            "' --no-version=true --test-case='determinism probe' 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    REQUIRE(f != nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), f)) out += buf;
    const int status = pclose(f);
    CAPTURE(out);
    CHECK(status == 0);
    const size_t pos = out.find("probe-hash=");
    REQUIRE(pos != std::string::npos);
    CHECK(out.substr(pos + 11, 16) == std::string(own));
  }
}
