#include "extensions/einsum/planner/Exact.h"

#include "ir/Error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

namespace einstage::einsum {

namespace {

constexpr int kHardMaxInputs = 22;

// Emits the steps of the subtree for subset `s` (post-order, left part first); returns its id.
int emit(uint32_t s, const std::vector<uint32_t>& split, std::vector<Step>& steps, int k) {
  if (std::has_single_bit(s)) return std::countr_zero(s);
  const uint32_t a = split[s];
  const int left = emit(a, split, steps, k);
  const int right = emit(s ^ a, split, steps, k);
  steps.emplace_back(left, right);
  return k + static_cast<int>(steps.size()) - 1;
}

}  // namespace

std::vector<Step> solve_small(const std::vector<std::vector<int>>& operands, const std::vector<int>& keep,
                              const std::vector<double>& log2_extent, double* total_flops) {
  const int k = static_cast<int>(operands.size());
  EIN_ASSERT(k <= kHardMaxInputs, "solve_small: {} operands", k);
  if (total_flops) *total_flops = 0;
  if (k <= 1) return {};
  const uint32_t full = (k == 32) ? ~0u : ((1u << k) - 1);
  // Occurrence mask per label.
  std::map<int, uint32_t> mask;
  for (int i = 0; i < k; ++i)
    for (int l : operands[i]) mask[l] |= 1u << i;
  std::vector<char> kept_label;
  const size_t n_sets = size_t{1} << k;
  std::vector<double> internal(n_sets, 0.0), all(n_sets, 0.0);
  double total = 0;
  for (auto [l, m] : mask) {
    const double w = log2_extent[l];
    total += w;
    all[m] += w;
    if (!std::binary_search(keep.begin(), keep.end(), l)) internal[m] += w;
  }
  // Subset sums (zeta transform): X[S] = sum over T ⊆ S of x[T].
  for (int b = 0; b < k; ++b)
    for (uint32_t s = 0; s <= full; ++s)
      if (s & (1u << b)) {
        internal[s] += internal[s ^ (1u << b)];
        all[s] += all[s ^ (1u << b)];
      }
  // A single operand carries all its labels into its first step, even those nobody else has.
  for (int i = 0; i < k; ++i) internal[1u << i] = 0;
  std::vector<double> best(n_sets, 0.0);
  std::vector<uint32_t> split(n_sets, 0);
  for (uint32_t s = 1; s <= full; ++s) {
    if (std::has_single_bit(s)) continue;
    const double log_union = total - all[full ^ s];
    const uint32_t low = s & (~s + 1);
    const uint32_t rest = s ^ low;
    double cur = std::numeric_limits<double>::infinity();
    uint32_t arg = 0;
    // A = low | sub for every sub ⊂ rest (sub != rest so that B is non-empty), in decreasing sub order.
    for (uint32_t sub = (rest - 1) & rest;; sub = (sub - 1) & rest) {
      const uint32_t a = low | sub, b = s ^ a;
      const double base = best[a] + best[b];
      if (base < cur) {
        const double c = base + std::exp2(log_union - internal[a] - internal[b]);
        if (c < cur) cur = c, arg = a;
      }
      if (sub == 0) break;
    }
    best[s] = cur;
    split[s] = arg;
  }
  if (total_flops) *total_flops = best[full];
  std::vector<Step> steps;
  emit(full, split, steps, k);
  return steps;
}

ContractionTree optimal(const Network& net, const ExactOptions& options) {
  const int limit = std::min(options.max_inputs, kHardMaxInputs);
  if (net.num_inputs > limit)
    fail(ErrorKind::invalid_argument,
         "exact planning of {} inputs exceeds the limit of {} (its cost grows as 3^n); use 'auto', 'greedy' or "
         "'anneal' for this many operands",
         net.num_inputs, limit);
  std::vector<int> keep = net.output;
  std::sort(keep.begin(), keep.end());
  return ContractionTree(net.num_inputs, solve_small(net.inputs, keep, net.log2_extent));
}

bool is_chain(const Network& net) {
  std::vector<int> first(net.num_labels, -1), count(net.num_labels, 0), last(net.num_labels, -1);
  for (int i = 0; i < net.num_inputs; ++i)
    for (int l : net.inputs[i]) {
      if (first[l] < 0) first[l] = i;
      last[l] = i;
      ++count[l];
    }
  for (int l = 0; l < net.num_labels; ++l)
    if (count[l] > 2 || (count[l] == 2 && last[l] != first[l] + 1)) return false;
  return true;
}

ContractionTree interval_optimal(const Network& net) {
  const int n = net.num_inputs;
  if (n <= 1) return ContractionTree(n, {});
  std::vector<int> first(net.num_labels, n), last(net.num_labels, -1);
  for (int i = 0; i < n; ++i)
    for (int l : net.inputs[i]) first[l] = std::min(first[l], i), last[l] = std::max(last[l], i);
  std::vector<std::vector<int>> by_last(n);
  for (int l = 0; l < net.num_labels; ++l)
    if (last[l] >= 0 && !net.in_output[l]) by_last[last[l]].push_back(l);
  auto at = [n](int i, int j) { return static_cast<size_t>(i) * n + j; };
  std::vector<double> log_union(static_cast<size_t>(n) * n, 0.0), internal(static_cast<size_t>(n) * n, 0.0);
  std::vector<int> stamp(net.num_labels, -1);
  for (int i = 0; i < n; ++i) {
    double u = 0, in = 0;
    for (int j = i; j < n; ++j) {
      for (int l : net.inputs[j])
        if (stamp[l] != i) stamp[l] = i, u += net.log2_extent[l];
      for (int l : by_last[j])
        if (first[l] >= i) in += net.log2_extent[l];
      log_union[at(i, j)] = u;
      internal[at(i, j)] = (i == j) ? 0.0 : in;
    }
  }
  std::vector<double> best(static_cast<size_t>(n) * n, 0.0);
  std::vector<int> split(static_cast<size_t>(n) * n, 0);
  for (int len = 2; len <= n; ++len)
    for (int i = 0; i + len - 1 < n; ++i) {
      const int j = i + len - 1;
      double cur = std::numeric_limits<double>::infinity();
      int arg = i;
      for (int m = i; m < j; ++m) {
        const double base = best[at(i, m)] + best[at(m + 1, j)];
        if (base >= cur) continue;
        const double c = base + std::exp2(log_union[at(i, j)] - internal[at(i, m)] - internal[at(m + 1, j)]);
        if (c < cur) cur = c, arg = m;
      }
      best[at(i, j)] = cur;
      split[at(i, j)] = arg;
    }
  std::vector<Step> steps;
  // Iterative post-order emission (chains can be deep).
  struct Frame { int i, j, stage, left; };
  std::vector<Frame> stack{{0, n - 1, 0, -1}};
  int last_id = -1;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.i == f.j) {
      last_id = f.i;
      stack.pop_back();
      continue;
    }
    const int m = split[at(f.i, f.j)];
    if (f.stage == 0) {
      f.stage = 1;
      stack.push_back({f.i, m, 0, -1});
    } else if (f.stage == 1) {
      f.left = last_id;
      f.stage = 2;
      stack.push_back({m + 1, f.j, 0, -1});
    } else {
      steps.emplace_back(f.left, last_id);
      last_id = n + static_cast<int>(steps.size()) - 1;
      stack.pop_back();
    }
  }
  return ContractionTree(n, std::move(steps));
}

}  // namespace einstage::einsum
