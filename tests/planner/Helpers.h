// Test helpers for the planner suite: seeded random networks and an independent brute-force oracle.
//
// The oracle is written here on std::set, separately from the planner's evaluator, so that tests compare two
// implementations of the cost model (ContractionTree.h): flops = product of extents of left ∪ right, a result keeps a
// label iff the output or another live operand carries it.
#pragma once

#include "extensions/einsum/planner/ContractionTree.h"
#include "extensions/einsum/planner/Random.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <vector>

namespace einstage::einsum::testing {

struct Case {
  Subscripts subscripts;
  Extents extents;
};

/// A random network of n inputs: a spanning tree of shared labels, extra labels (some hyperedges with 3 carriers),
/// some labels private to one input, some repeated inside a term, some kept in the output. Extents 1..max_extent.
inline Case random_case(uint64_t seed, int n, int max_extent = 6) {
  SplitMix64 rng(seed);
  Case c;
  c.subscripts.inputs.resize(n);
  Label next = 'a';
  auto fresh = [&]() {
    Label l = next++;
    if (next == 'z' + 1) next = 'A';
    if (next == 'Z' + 1) next = 0x3b1;  // continue with Greek letters
    c.extents[l] = 1 + static_cast<int64_t>(rng.randint(max_extent));
    return l;
  };
  for (int i = 1; i < n; ++i) {
    Label l = fresh();
    c.subscripts.inputs[rng.randint(i)].push_back(l);
    c.subscripts.inputs[i].push_back(l);
  }
  const int extra = n / 2 + 1;
  for (int e = 0; e < extra; ++e) {
    Label l = fresh();
    const int carriers = rng.randint(4) == 0 ? 3 : (rng.randint(3) == 0 ? 1 : 2);
    for (int k = 0; k < carriers; ++k) {
      auto& term = c.subscripts.inputs[rng.randint(n)];
      if (std::find(term.begin(), term.end(), l) == term.end() || rng.randint(5) == 0) term.push_back(l);
    }
    if (rng.randint(4) == 0) c.subscripts.output.push_back(l);
  }
  return c;
}

struct OracleStep {
  double flops = 0;        // product of extents of left ∪ right
  double result_size = 0;  // product of extents of the labels the result keeps
};

/// Per-step flops and result sizes of a sequence of steps, computed on std::set (independent of evaluate()).
inline std::vector<OracleStep> oracle_steps(const Case& c, const std::vector<Step>& steps) {
  std::vector<std::set<Label>> ops;
  for (const auto& t : c.subscripts.inputs) ops.emplace_back(t.begin(), t.end());
  std::vector<char> live(ops.size(), 1);
  const std::set<Label> out(c.subscripts.output.begin(), c.subscripts.output.end());
  std::vector<OracleStep> result;
  for (auto [a, b] : steps) {
    std::set<Label> joint = ops[a];
    joint.insert(ops[b].begin(), ops[b].end());
    OracleStep step{1, 1};
    for (Label l : joint) step.flops *= static_cast<double>(c.extents.at(l));
    live[a] = live[b] = 0;
    std::set<Label> kept;
    for (Label l : joint) {
      bool needed = out.count(l) > 0;
      for (size_t o = 0; o < ops.size() && !needed; ++o) needed = live[o] && ops[o].count(l);
      if (needed) kept.insert(l);
    }
    for (Label l : kept) step.result_size *= static_cast<double>(c.extents.at(l));
    result.push_back(step);
    ops.push_back(kept);
    live.push_back(1);
  }
  return result;
}

/// Sum of step flops of a sequence of steps (oracle_steps).
inline double oracle_flops(const Case& c, const std::vector<Step>& steps) {
  double total = 0;
  for (const OracleStep& s : oracle_steps(c, steps)) total += s.flops;
  return total;
}

/// Minimal total flops over every sequence of pairwise steps (branch and bound over all orders). With
/// `outer_products` false, only pairs whose operands share a label are tried (the trees of the connected-subset DP).
inline double brute_force_min_flops(const Case& c, bool outer_products = true) {
  const int n = static_cast<int>(c.subscripts.inputs.size());
  if (n < 2) return 0;
  const std::set<Label> out(c.subscripts.output.begin(), c.subscripts.output.end());
  std::vector<std::set<Label>> ops;
  for (const auto& t : c.subscripts.inputs) ops.emplace_back(t.begin(), t.end());
  std::vector<int> live_ids(n);
  for (int i = 0; i < n; ++i) live_ids[i] = i;
  double best = std::numeric_limits<double>::infinity();
  std::function<void(double)> dfs = [&](double cost) {
    if (cost >= best) return;
    if (live_ids.size() == 1) {
      best = cost;
      return;
    }
    const std::vector<int> current = live_ids;
    for (size_t i = 0; i < current.size(); ++i)
      for (size_t j = i + 1; j < current.size(); ++j) {
        const int a = current[i], b = current[j];
        if (!outer_products &&
            std::none_of(ops[a].begin(), ops[a].end(), [&](Label l) { return ops[b].count(l) > 0; }))
          continue;
        std::set<Label> joint = ops[a];
        joint.insert(ops[b].begin(), ops[b].end());
        double f = 1;
        for (Label l : joint) f *= static_cast<double>(c.extents.at(l));
        std::set<Label> kept;
        for (Label l : joint) {
          bool needed = out.count(l) > 0;
          for (int o : current)
            if (o != a && o != b && ops[o].count(l)) needed = true;
          if (needed) kept.insert(l);
        }
        ops.push_back(kept);
        live_ids.clear();
        for (int o : current)
          if (o != a && o != b) live_ids.push_back(o);
        live_ids.push_back(static_cast<int>(ops.size()) - 1);
        dfs(cost + f);
        ops.pop_back();
        live_ids = current;
      }
  };
  dfs(0);
  return best;
}

/// A chain T_k = (i_k, i_{k+1}), k = 0..n-1, extents from the seed; output (i_0, i_n) if `open`.
inline Case random_chain(uint64_t seed, int n, bool open, int max_extent = 64) {
  SplitMix64 rng(seed);
  Case c;
  for (int k = 0; k <= n; ++k) c.extents[0x100 + k] = 1 + static_cast<int64_t>(rng.randint(max_extent));
  for (int k = 0; k < n; ++k) c.subscripts.inputs.push_back({0x100 + k, 0x100 + k + 1});
  if (open) c.subscripts.output = {0x100, 0x100 + n};
  return c;
}

/// The benchmark networks' grid2d(R x C, d) (docs/networks.md): sites row-major; per site, per axis, a new label
/// shared with the +1 neighbour.
inline Case grid_case(int rows, int cols, int64_t d) {
  Case c;
  c.subscripts.inputs.resize(static_cast<size_t>(rows) * cols);
  Label next = 0x10000;
  for (int s = 0; s < rows * cols; ++s) {
    const int r = s / cols, q = s % cols;
    if (r + 1 < rows) c.extents[next] = d, c.subscripts.inputs[s].push_back(next), c.subscripts.inputs[s + cols].push_back(next), ++next;
    if (q + 1 < cols) c.extents[next] = d, c.subscripts.inputs[s].push_back(next), c.subscripts.inputs[s + 1].push_back(next), ++next;
  }
  return c;
}

inline bool close_rel(double a, double b, double tol = 1e-9) {
  return std::abs(a - b) <= tol * std::max({1.0, std::abs(a), std::abs(b)});
}

}  // namespace einstage::einsum::testing
