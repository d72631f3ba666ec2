// Benchmark of the einsum notation front end: parsing "ij,jk->ik" (goal <= 100 ns), parse + bind, the nested and
// ellipsis forms, and the grouped dialect warm (cache hit) and cold (parse + solve + expand). Prints a table and one
// JSON line. Method: a warm-up, then `repeats` batches of `iterations` calls each; the median batch gives ns/call.
#include "tools/bench/Machine.h"
#include "extensions/einsum/notation/Grouped.h"
#include "extensions/einsum/notation/Notation.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace einstage;
using namespace einstage::einsum;

namespace {

volatile size_t g_sink = 0;  // results feed this so the calls cannot be optimised away

template <typename F>
double median_ns(F&& f, int iterations, int repeats) {
  for (int i = 0; i < iterations / 4 + 1; ++i) f();  // warm-up
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iterations);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 200000, repeats = 15;
  if (argc > 1) iterations = std::max(1, std::atoi(argv[1]));
  if (argc > 2) repeats = std::max(1, std::atoi(argv[2]));

  const bench::Machine machine = bench::detect_machine();
  std::printf("%s\n", machine.summary().c_str());
  struct Row {
    std::string name;
    double ns;
  };
  std::vector<Row> rows;
  rows.push_back({"parse_subscripts(\"ij,jk->ik\")", median_ns([] {
                    Subscripts s = parse_subscripts("ij,jk->ik");
                    g_sink = g_sink + s.output.size();
                  }, iterations, repeats)});
  // The floor: building the same Subscripts by copying one (the 4 allocations every parse must make), for reading
  // the numbers on a loaded machine.
  const Subscripts parsed = parse_subscripts("ij,jk->ik");
  rows.push_back({"copy of a Subscripts (allocation floor)", median_ns([&] {
                    Subscripts s = parsed;
                    g_sink = g_sink + s.output.size();
                  }, iterations, repeats)});
  rows.push_back({"parse_notation(\"ij,jk->ik\")", median_ns([] {
                    Notation n = parse_notation("ij,jk->ik");
                    g_sink = g_sink + n.output.size();
                  }, iterations, repeats)});
  const std::vector<Shape> shapes{{16, 16}, {16, 16}};
  rows.push_back({"parse + bind_einsum ij,jk->ik", median_ns([&] {
                    BoundEinsum b = bind_einsum(parse_subscripts("ij,jk->ik"), shapes, false);
                    g_sink = g_sink + b.output_shape.size();
                  }, iterations, repeats)});
  rows.push_back({"parse_notation(\"((ab,bc),(cd,de)),ef->af\")", median_ns([] {
                    Notation n = parse_notation("((ab,bc),(cd,de)),ef->af");
                    g_sink = g_sink + n.order.size();
                  }, iterations, repeats)});
  const std::vector<Shape> eshapes{{4, 2, 3}, {3, 5}};
  rows.push_back({"parse + bind ...ij,jk->...ik", median_ns([&] {
                    BoundEinsum b = bind_einsum(parse_notation("...ij,jk->...ik"), eshapes, false);
                    g_sink = g_sink + b.output_shape.size();
                  }, iterations, repeats)});
  GroupedCache grouped;  // what an ExecutionContext holds (exec/Einsum.h grouped_cache())
  const int64_t granks[] = {4, 4, 3};
  rows.push_back({"expand_grouped warm WKCa,Caib,WCi->WKCb", median_ns([&] {
                    auto e = grouped.expand("WKCa,Caib,WCi->WKCb", granks);
                    g_sink = g_sink + e->expanded.output.size();
                  }, iterations, repeats)});
  const int64_t uranks[] = {3, 3};
  const GroupLength lens[] = {{'W', 1}};
  rows.push_back({"expand_grouped warm WCo,WCa->Cao len_W", median_ns([&] {
                    auto e = grouped.expand("WCo,WCa->Cao", uranks, lens);
                    g_sink = g_sink + e->expanded.output.size();
                  }, iterations, repeats)});
  rows.push_back({"expand_grouped cold (cache cleared)", median_ns([&] {
                    grouped.clear();
                    auto e = grouped.expand("WKCa,Caib,WCi->WKCb", granks);
                    g_sink = g_sink + e->expanded.output.size();
                  }, std::max(1, iterations / 20), repeats)});

  std::printf("%-48s %12s\n", "case", "ns/call");
  for (const Row& r : rows) std::printf("%-48s %12.1f\n", r.name.c_str(), r.ns);
  std::printf("goal: parse_subscripts(\"ij,jk->ik\") <= 100 ns -> %s\n", rows[0].ns <= 100.0 ? "met" : "not met");
  nlohmann::json j;
  j["bench"] = "notation";
  j["machine"] = machine.to_json();
  j["iterations"] = iterations;
  j["repeats"] = repeats;
  for (const Row& r : rows) j["ns"][r.name] = r.ns;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
