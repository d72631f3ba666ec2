// The benchmark networks of docs/networks.md: the generators (SplitMix64 recipe, checked against the published
// fingerprints; a mismatch aborts with status 1) and loaders for the cotengra and einsum-benchmark JSON files.
//
// Shared by the benchmark programs (planner.cpp, slicing.cpp); header-only because every tools/bench/*.cpp is a
// program of its own. Depends on the planner's Network.h / ContractionTree.h / Random.h, fmt and nlohmann_json.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Random.h"
#include "tools/bench/BenchData.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace einstage::bench {

using einsum::Extents;
using einsum::Label;
using einsum::SplitMix64;
using einsum::Step;
using einsum::Subscripts;
namespace fs = std::filesystem;

struct Instance {
  std::string name;
  std::string source;  // "generated", "cotengra", "einsum-benchmark"
  Subscripts subscripts;
  Extents extents;
  std::optional<double> own_path_tc;  // einsum-benchmark opt_flops path, evaluated here
};

[[noreturn]] inline void die(const std::string& message) {
  fmt::print(stderr, "einstage_bench: {}\n", message);
  std::exit(1);
}

// ---- generators (docs/networks.md, Generators) ----

struct Builder {
  Instance inst;
  int next_label = 0;
  explicit Builder(std::string name, int tensors) {
    inst.name = std::move(name);
    inst.source = "generated";
    inst.subscripts.inputs.resize(tensors);
  }
  // Labels are 0x10000 + creation index (printable, never colliding with ASCII); names "i<k>".
  Label index(int64_t size) {
    const Label l = 0x10000 + next_label;
    inst.subscripts.names[l] = fmt::format("i{}", next_label);
    inst.extents[l] = size;
    ++next_label;
    return l;
  }
  void on(int tensor, Label l) { inst.subscripts.inputs[tensor].push_back(l); }
};

inline void expect(bool ok, const std::string& what) {
  if (!ok) die("fingerprint mismatch: " + what + " (the generator does not follow docs/networks.md, Generators)");
}

inline Instance chain(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("chain_n{}", n), n);
  std::vector<Label> idx;
  std::vector<int64_t> d;
  for (int k = 0; k <= n; ++k) d.push_back(2 + static_cast<int64_t>(rng.randint(63)));
  for (int k = 0; k <= n; ++k) idx.push_back(b.index(d[k]));
  for (int k = 0; k < n; ++k) b.on(k, idx[k]), b.on(k, idx[k + 1]);
  b.inst.subscripts.output = {idx[0], idx[n]};
  if (seed == 1) expect(std::vector<int64_t>(d.begin(), d.begin() + 6) == std::vector<int64_t>{25, 9, 59, 58, 14, 25},
                        "chain d_0..d_5");
  return b.inst;
}

inline Instance rtree(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("rtree_n{}", n), n);
  std::vector<std::pair<int, int64_t>> first;
  for (int k = 1; k < n; ++k) {
    const int p = static_cast<int>(rng.randint(k));
    const int64_t size = 2 + static_cast<int64_t>(rng.randint(9));
    if (first.size() < 4) first.emplace_back(p, size);
    Label l = b.index(size);
    b.on(p, l), b.on(k, l);
  }
  if (seed == 2)
    expect(first == std::vector<std::pair<int, int64_t>>{{0, 7}, {1, 5}, {1, 8}, {2, 4}}, "rtree first (parent,size)");
  return b.inst;
}

inline Instance mps_inner(int L, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("mps_inner_L{}", L), 2 * L);
  std::vector<int64_t> kd, bd;
  for (int s = 0; s + 1 < L; ++s) kd.push_back(4 + static_cast<int64_t>(rng.randint(61)));
  for (int s = 0; s + 1 < L; ++s) bd.push_back(4 + static_cast<int64_t>(rng.randint(61)));
  if (seed == 3) {
    expect(std::vector<int64_t>(kd.begin(), kd.begin() + 4) == std::vector<int64_t>{40, 17, 34, 27}, "mps k_0..k_3");
    expect(std::vector<int64_t>(bd.begin(), bd.begin() + 4) == std::vector<int64_t>{48, 56, 20, 57}, "mps b_0..b_3");
  }
  std::vector<Label> k, br, p;
  for (int64_t d : kd) k.push_back(b.index(d));
  for (int64_t d : bd) br.push_back(b.index(d));
  for (int s = 0; s < L; ++s) p.push_back(b.index(2));
  for (int s = 0; s < L; ++s) {
    const int ket = 2 * s, bra = 2 * s + 1;
    b.on(ket, p[s]);
    if (s > 0) b.on(ket, k[s - 1]);
    if (s + 1 < L) b.on(ket, k[s]);
    b.on(bra, p[s]);
    if (s > 0) b.on(bra, br[s - 1]);
    if (s + 1 < L) b.on(bra, br[s]);
  }
  return b.inst;
}

inline Instance grid(std::vector<int> dims, int64_t d) {
  int sites = 1;
  for (int x : dims) sites *= x;
  std::string name = dims.size() == 2 ? fmt::format("grid2d_{}x{}_d{}", dims[0], dims[1], d)
                                      : fmt::format("grid3d_{}x{}x{}_d{}", dims[0], dims[1], dims[2], d);
  Builder b(name, sites);
  std::vector<int> stride(dims.size(), 1);
  for (int a = static_cast<int>(dims.size()) - 2; a >= 0; --a) stride[a] = stride[a + 1] * dims[a + 1];
  for (int s = 0; s < sites; ++s)
    for (size_t a = 0; a < dims.size(); ++a) {
      const int coord = (s / stride[a]) % dims[a];
      if (coord + 1 < dims[a]) {
        Label l = b.index(d);
        b.on(s, l), b.on(s + stride[a], l);
      }
    }
  return b.inst;
}

inline std::vector<std::pair<int, int>> rrg3_edges(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  for (;;) {
    std::vector<int> pts;
    for (int v = 0; v < n; ++v) pts.insert(pts.end(), {v, v, v});
    for (int i = static_cast<int>(pts.size()) - 1; i >= 1; --i) std::swap(pts[i], pts[rng.randint(i + 1)]);
    std::vector<std::pair<int, int>> edges;
    std::set<std::pair<int, int>> seen;
    bool ok = true;
    for (size_t i = 0; i + 1 < pts.size(); i += 2) {
      const int u = std::min(pts[i], pts[i + 1]), v = std::max(pts[i], pts[i + 1]);
      if (u == v || !seen.insert({u, v}).second) {
        ok = false;
        break;
      }
      edges.emplace_back(u, v);
    }
    if (ok) return edges;
  }
}

inline Instance rrg3(int n, uint64_t seed) {
  auto edges = rrg3_edges(n, seed);
  using E = std::vector<std::pair<int, int>>;
  if (n == 100 && seed == 4) expect(E(edges.begin(), edges.begin() + 3) == E{{83, 97}, {3, 61}, {22, 92}}, "rrg3 n100");
  if (n == 200 && seed == 5) expect(E(edges.begin(), edges.begin() + 2) == E{{52, 137}, {53, 142}}, "rrg3 n200");
  if (n == 500 && seed == 6) expect(E(edges.begin(), edges.begin() + 2) == E{{34, 44}, {273, 493}}, "rrg3 n500");
  Builder b(fmt::format("rrg3_n{}", n), n);
  for (auto [u, v] : edges) {
    Label l = b.index(2);
    b.on(u, l), b.on(v, l);
  }
  return b.inst;
}

inline Instance rrg3mis(int n, uint64_t seed) {
  auto edges = rrg3_edges(n, seed);
  Builder b(fmt::format("rrg3mis_n{}", n), n + static_cast<int>(edges.size()));
  std::vector<Label> vl;
  for (int v = 0; v < n; ++v) vl.push_back(b.index(2));
  for (int v = 0; v < n; ++v) b.on(v, vl[v]);
  for (size_t e = 0; e < edges.size(); ++e) b.on(n + static_cast<int>(e), vl[edges[e].first]), b.on(n + e, vl[edges[e].second]);
  return b.inst;
}

inline Instance rand_net(int n, int reg, int out, uint64_t seed) {
  SplitMix64 rng(seed);
  Builder b(fmt::format("rand_n{}", n), n);
  for (int k = 0; k < n * reg / 2; ++k) {
    const int a = static_cast<int>(rng.randint(n));
    int c = static_cast<int>(rng.randint(n - 1));
    c += (c >= a);
    Label l = b.index(2 + static_cast<int64_t>(rng.randint(4)));
    b.on(a, l), b.on(c, l);
  }
  std::vector<int64_t> out_sizes;
  for (int k = 0; k < out; ++k) {
    const int64_t size = 2 + static_cast<int64_t>(rng.randint(4));
    out_sizes.push_back(size);
    Label l = b.index(size);
    b.on(static_cast<int>(rng.randint(n)), l);
    b.inst.subscripts.output.push_back(l);
  }
  if (seed == 8) {
    std::vector<int> t0;
    for (Label l : b.inst.subscripts.inputs[0]) t0.push_back(l - 0x10000);
    expect(t0 == std::vector<int>{5, 17, 29, 31, 44, 49, 55, 66, 72, 112}, "rand T_0");
    expect(out_sizes == std::vector<int64_t>{3, 2, 3, 4}, "rand output sizes");
    expect(b.inst.subscripts.output.front() - 0x10000 == 125, "rand first output index");
  }
  return b.inst;
}

inline std::vector<Instance> generated(bool with_scale) {
  {
    SplitMix64 rng(1);
    expect(rng.next() == 0x910a2dec89025cc1ULL && rng.next() == 0xbeeb8da1658eec67ULL, "SplitMix64(seed 1)");
  }
  std::vector<Instance> v = {chain(100, 1),       rtree(100, 2),      mps_inner(200, 3),  grid({16, 16}, 2),
                             grid({8, 8}, 16),     grid({24, 30}, 2),  grid({6, 6, 10}, 2), rrg3(100, 4),
                             rrg3(200, 5),         rrg3(500, 6),       rrg3mis(200, 7),    rand_net(50, 5, 4, 8)};
  if (with_scale) v.push_back(grid({100, 100}, 2));
  return v;
}

// ---- data files ----

inline std::vector<Label> utf8_labels(std::string_view s) {
  std::vector<Label> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    Label cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

inline nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) die("cannot read " + p.string());
  return nlohmann::json::parse(in);
}

// The .json files of a folder, sorted by name (so instances load in the same order everywhere).
inline std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

inline std::vector<Instance> load_cotengra(const fs::path& dir) {
  std::vector<Instance> v;
  for (auto& f : json_files(dir)) {
    nlohmann::json j = read_json(f);
    Instance inst;
    inst.name = f.stem().string();
    if (inst.name.rfind("sycamore_n53_m20", 0) == 0) inst.name = "sycamore_m20";
    inst.source = "cotengra";
    std::map<std::string, Label> intern;
    auto label = [&](const std::string& s) {
      auto [it, fresh] = intern.emplace(s, 0x10000 + static_cast<Label>(intern.size()));
      if (fresh) inst.subscripts.names[it->second] = s;
      return it->second;
    };
    for (auto& term : j["inputs"]) {
      std::vector<Label> t;
      for (auto& s : term) t.push_back(label(s.get<std::string>()));
      inst.subscripts.inputs.push_back(t);
    }
    for (auto& s : j["output"]) inst.subscripts.output.push_back(label(s.get<std::string>()));
    for (auto& [k, size] : j["size_dict"].items())
      if (intern.count(k)) inst.extents[intern[k]] = size.get<int64_t>();
    v.push_back(std::move(inst));
  }
  return v;
}

inline std::vector<Instance> load_einsum_benchmark(const fs::path& dir) {
  std::vector<Instance> v;
  for (auto& f : json_files(dir)) {
    nlohmann::json j = read_json(f);
    Instance inst;
    inst.name = j["name"].get<std::string>();
    inst.source = "einsum-benchmark";
    const std::string fmt_string = j["format_string"].get<std::string>();
    const size_t arrow = fmt_string.find("->");
    std::string lhs = fmt_string.substr(0, arrow), rhs = fmt_string.substr(arrow + 2);
    std::stringstream ss(lhs);
    for (std::string term; std::getline(ss, term, ',');) inst.subscripts.inputs.push_back(utf8_labels(term));
    inst.subscripts.output = utf8_labels(rhs);
    std::vector<std::vector<int64_t>> shapes = j["shapes"].get<std::vector<std::vector<int64_t>>>();
    inst.extents = einsum::extents_from_shapes(inst.subscripts, shapes);
    std::vector<Step> path;
    for (auto& p : j["paths"]["opt_flops"]["path"]) path.emplace_back(p[0].get<int>(), p[1].get<int>());
    const int n = static_cast<int>(inst.subscripts.inputs.size());
    inst.own_path_tc =
        einsum::evaluate(inst.subscripts, inst.extents, einsum::ContractionTree::from_positional_path(n, path)).tc;
    v.push_back(std::move(inst));
  }
  return v;
}

/// "a,b,,c" -> {"a", "b", "c"} (the benchmarks' --only lists).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

}  // namespace einstage::bench
