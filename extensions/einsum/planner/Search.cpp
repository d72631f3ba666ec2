#include "extensions/einsum/planner/Search.h"

#include "extensions/einsum/planner/Exact.h"
#include "extensions/einsum/planner/Random.h"
#include "extensions/einsum/planner/SliceFinder.h"
#include "ir/Error.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

namespace einstage::einsum {

namespace {

// log2 of the product of extents over A ∪ B (sorted dense label sets).
double union_weight(const std::vector<int>& a, const std::vector<int>& b, const std::vector<double>& w) {
  double s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) s += w[a[i++]];
    else if (b[j] < a[i]) s += w[b[j++]];
    else s += w[a[i]], ++i, ++j;
  }
  while (i < a.size()) s += w[a[i++]];
  while (j < b.size()) s += w[b[j++]];
  return s;
}

// out = (A ∪ B) ∩ (P ∪ C): the labels a new node over A and B keeps when P is its ancestor's set and C the sibling
// operand (see docs/planning.md, "rotations"). Returns the log2 size of out.
double kept_after_rotation(const std::vector<int>& a, const std::vector<int>& b, const std::vector<int>& p,
                           const std::vector<int>& c, const std::vector<double>& w, std::vector<int>& out,
                           std::vector<int>& scratch) {
  scratch.clear();
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(scratch));
  out.clear();
  double s = 0;
  size_t i = 0, j = 0;
  for (int l : scratch) {
    while (i < p.size() && p[i] < l) ++i;
    while (j < c.size() && c[j] < l) ++j;
    if ((i < p.size() && p[i] == l) || (j < c.size() && c[j] == l)) out.push_back(l), s += w[l];
  }
  return s;
}

// A binary tree with per-node label sets, for local edits. Node ids: leaves 0..n-1, internal n..2n-2.
struct TreeState {
  const Network* net = nullptr;
  int n = 0;
  int root = -1;
  std::vector<int> left, right, parent;
  std::vector<std::vector<int>> labels;  // sorted dense ids; leaves: all their labels
  std::vector<double> log2_flops;        // internal nodes
  std::vector<double> log2_size;         // every node: log2 of the product of its labels' extents

  TreeState(const Network& network, const ContractionTree& tree) : net(&network), n(network.num_inputs) {
    const size_t m = std::max(0, 2 * n - 1);
    left.assign(m, -1), right.assign(m, -1), parent.assign(m, -1);
    labels.resize(m);
    log2_flops.assign(m, 0.0);
    log2_size.assign(m, 0.0);
    for (int i = 0; i < n; ++i) labels[i] = network.inputs[i], log2_size[i] = network.log2_size(labels[i]);
    std::vector<int> live(network.num_carriers);
    std::vector<uint8_t> inside(network.num_labels, 0);
    for (size_t k = 0; k < tree.steps().size(); ++k) {
      auto [a, b] = tree.steps()[k];
      const int r = n + static_cast<int>(k);
      left[r] = a, right[r] = b, parent[a] = r, parent[b] = r;
      std::vector<int> joint;
      std::set_union(labels[a].begin(), labels[a].end(), labels[b].begin(), labels[b].end(),
                     std::back_inserter(joint));
      for (int l : labels[a]) ++inside[l];
      for (int l : labels[b]) ++inside[l];
      for (int l : joint) {
        const int remaining = live[l] - inside[l];
        inside[l] = 0;
        if (network.in_output[l] || remaining > 0) labels[r].push_back(l), live[l] = remaining + 1;
        else live[l] = remaining;
      }
      log2_flops[r] = network.log2_size(joint);
      log2_size[r] = network.log2_size(labels[r]);
    }
    root = tree.root();
  }

  bool is_leaf(int id) const { return id < n; }

  double total_flops() const {
    double s = 0;
    for (int r = n; r < 2 * n - 1; ++r) s += std::exp2(log2_flops[r]);
    return s;
  }

  // log2 of the largest intermediate (0 without steps).
  double max_log2_size() const {
    double s = 0;
    for (int r = n; r < 2 * n - 1; ++r) s = std::max(s, log2_size[r]);
    return s;
  }

  // Post-order (children before parents, left first) of internal nodes.
  std::vector<int> post_order() const {
    std::vector<int> order;
    if (n < 2) return order;
    std::vector<std::pair<int, bool>> stack{{root, false}};
    while (!stack.empty()) {
      auto [id, expanded] = stack.back();
      stack.pop_back();
      if (is_leaf(id)) continue;
      if (expanded) {
        order.push_back(id);
      } else {
        stack.push_back({id, true});
        stack.push_back({right[id], false});
        stack.push_back({left[id], false});
      }
    }
    return order;
  }

  ContractionTree to_tree() const {
    std::vector<int> new_id(2 * std::max(n, 1), -1);
    for (int i = 0; i < n; ++i) new_id[i] = i;
    std::vector<Step> steps;
    for (int id : post_order()) {
      steps.emplace_back(new_id[left[id]], new_id[right[id]]);
      new_id[id] = n + static_cast<int>(steps.size()) - 1;
    }
    return ContractionTree(n, std::move(steps));
  }
};

// Re-solves the region below `node` with up to k frontier operands; returns true if it improved. With a finite
// `size_cap` (log2 elements) a change is kept only if its largest new intermediate stays at most
// max(size_cap, the largest intermediate of the region it replaces): the tree search's slicing objective.
bool reconfigure_at(TreeState& st, int node, int k, std::vector<int>& frontier, std::vector<int>& region,
                    double size_cap = std::numeric_limits<double>::infinity()) {
  frontier = {st.left[node], st.right[node]};
  region = {node};
  while (static_cast<int>(frontier.size()) < k) {
    // Expand the internal frontier node with the largest flops (ties: first in the list).
    int pick = -1;
    for (size_t i = 0; i < frontier.size(); ++i)
      if (!st.is_leaf(frontier[i]) && (pick < 0 || st.log2_flops[frontier[i]] > st.log2_flops[frontier[pick]]))
        pick = static_cast<int>(i);
    if (pick < 0) break;
    const int id = frontier[pick];
    region.push_back(id);
    frontier[pick] = st.left[id];
    frontier.insert(frontier.begin() + pick + 1, st.right[id]);
  }
  if (frontier.size() < 3) return false;
  double old_cost = 0;
  for (int id : region) old_cost += std::exp2(st.log2_flops[id]);
  std::vector<std::vector<int>> operands;
  for (int id : frontier) operands.push_back(st.labels[id]);
  double new_cost = 0;
  std::vector<Step> steps = solve_small(operands, st.labels[node], st.net->log2_extent, &new_cost);
  if (!(new_cost < old_cost * (1 - 1e-9))) return false;
  // The new steps' label sets (the kept rule applied inside the region, carriers counted among the frontier).
  const Network& net = *st.net;
  std::vector<int> count_in(net.num_labels, 0);
  for (auto& ls : operands)
    for (int l : ls) ++count_in[l];
  const std::vector<int>& keep = st.labels[node];
  std::vector<std::vector<int>> local(operands);
  std::vector<double> step_flops;
  double new_max = 0, old_max = 0;
  for (const Step& step : steps) {
    const int a = step.first, b = step.second;
    std::vector<int> joint, out;
    std::set_union(local[a].begin(), local[a].end(), local[b].begin(), local[b].end(), std::back_inserter(joint));
    for (int l : local[a]) --count_in[l];
    for (int l : local[b]) --count_in[l];
    for (int l : joint)
      if (count_in[l] > 0 || std::binary_search(keep.begin(), keep.end(), l)) out.push_back(l), ++count_in[l];
    step_flops.push_back(net.log2_size(joint));
    new_max = std::max(new_max, net.log2_size(out));
    local.push_back(std::move(out));
  }
  if (size_cap < std::numeric_limits<double>::infinity()) {
    for (int id : region) old_max = std::max(old_max, st.log2_size[id]);
    if (new_max > std::max(size_cap, old_max) + 1e-9) return false;
  }
  // Rebuild: step j gets region id j+1 (the region root `node` takes the last step).
  std::vector<int> ids(frontier);
  std::vector<int> free_ids(region.begin() + 1, region.end());
  const size_t first_new = operands.size();
  for (size_t j = 0; j < steps.size(); ++j) {
    const int a = steps[j].first, b = steps[j].second;
    const int id = (j + 1 == steps.size()) ? node : free_ids[j];
    st.left[id] = ids[a], st.right[id] = ids[b];
    st.parent[ids[a]] = id, st.parent[ids[b]] = id;
    st.log2_flops[id] = step_flops[j];
    if (id != node) {
      st.labels[id] = std::move(local[first_new + j]);
      st.log2_size[id] = net.log2_size(st.labels[id]);
    }
    ids.push_back(id);
  }
  return true;
}

// Work units of re-solving one subtree with `k` frontier operands: the pairs of solve_small's subset DP (each subset
// S of >= 2 operands tries 2^(|S|-1) - 1 splits: (3^k + 1)/2 - 2^k in all) and its k 2^k subset sums.
int64_t reconfigure_units(int k) {
  int64_t pow3 = 1;
  for (int i = 0; i < k; ++i) pow3 *= 3;
  const int64_t pairs = k >= 2 ? (pow3 + 1) / 2 - (int64_t{1} << k) : 0;
  return kReconfigureUnitsPerCall + kDpUnitsPerPair * (pairs + k * (int64_t{1} << k));
}

void reconfigure_state(TreeState& st, int k, int max_passes, const Deadline& deadline,
                       double size_cap = std::numeric_limits<double>::infinity()) {
  std::vector<int> frontier, region;
  for (int pass = 0; pass < max_passes; ++pass) {
    bool improved = false;
    for (int node : st.post_order()) {
      if (deadline.expired()) return;
      improved |= reconfigure_at(st, node, k, frontier, region, size_cap);
      deadline.charge(reconfigure_units(static_cast<int>(frontier.size())));
    }
    if (!improved) return;
  }
}

void anneal_state(TreeState& st, const AnnealOptions& opt, const Deadline& deadline) {
  const int n = st.n;
  if (n < 3 || opt.moves <= 0) return;
  const std::vector<double>& w = st.net->log2_extent;
  SplitMix64 rng(opt.seed);
  const int internal = n - 1;
  const int64_t sweeps = std::max<int64_t>(1, opt.moves / internal);
  std::vector<int> cand_new, scratch;
  // The energy: log2 of the total flops, plus, with a size target, size_weight bits per bit by which the largest
  // intermediate exceeds it (TreeSA's objective). A move is priced locally: the change of log2 of its two nodes'
  // flops plus size_weight times the change of the moved node's own excess over the target.
  const bool sized = opt.size_target < std::numeric_limits<double>::infinity();
  auto excess = [&](double log2_size) { return std::max(0.0, log2_size - opt.size_target); };
  auto energy = [&]() {
    return std::log2(std::max(st.total_flops(), 1e-300)) + (sized ? opt.size_weight * excess(st.max_log2_size()) : 0.0);
  };
  double best = energy();
  std::vector<int> best_structure_left = st.left, best_structure_right = st.right;
  int64_t checked = 0;
  int64_t work = 0;  // units not yet charged
  for (int64_t sweep = 0; sweep < sweeps; ++sweep) {
    const double beta = sweeps == 1 ? opt.beta_end
                                    : opt.beta_start + (opt.beta_end - opt.beta_start) * sweep / (sweeps - 1);
    for (int p = n; p < 2 * n - 1; ++p) {
      if ((++checked & 255) == 0) {
        deadline.charge(work);
        work = 0;
        if (deadline.expired()) goto done;
      }
      work += kAnnealUnitsPerMove;
      // Rotations at p: a deep child Y=(B,C) and the other child X; new child N=(X,B) or (X,C).
      int options[4][3];  // (deep child, grandchild joining X, grandchild staying)
      int count = 0;
      for (int side = 0; side < 2; ++side) {
        const int y = side == 0 ? st.right[p] : st.left[p];
        if (st.is_leaf(y)) continue;
        options[count][0] = y, options[count][1] = st.left[y], options[count][2] = st.right[y], ++count;
        options[count][0] = y, options[count][1] = st.right[y], options[count][2] = st.left[y], ++count;
      }
      if (count == 0) continue;
      const int pick = static_cast<int>(rng.randint(count));
      const int y = options[pick][0], b = options[pick][1], c = options[pick][2];
      const int x = st.left[p] == y ? st.right[p] : st.left[p];
      work += kAnnealUnitsPerLabel * static_cast<int64_t>(st.labels[x].size() + st.labels[b].size() +
                                                         st.labels[p].size() + st.labels[c].size());
      const double s_n = kept_after_rotation(st.labels[x], st.labels[b], st.labels[p], st.labels[c], w, cand_new, scratch);
      const double f_n = union_weight(st.labels[x], st.labels[b], w);
      const double f_p = union_weight(cand_new, st.labels[c], w);
      const double old_y = st.log2_flops[y], old_p = st.log2_flops[p];
      // dE = log2(2^f_n + 2^f_p) - log2(2^old_y + 2^old_p), computed stably.
      auto lse = [](double u, double v) { const double m = std::max(u, v); return m + std::log2(std::exp2(u - m) + std::exp2(v - m)); };
      double de = lse(f_n, f_p) - lse(old_y, old_p);
      if (sized) de += opt.size_weight * (excess(s_n) - excess(st.log2_size[y]));
      if (de > 0 && rng.uniform() >= std::exp2(-beta * de)) continue;
      // Apply: y becomes N = (x, b); p becomes (y, c).
      st.left[y] = x, st.right[y] = b, st.parent[x] = y, st.parent[b] = y;
      st.left[p] = y, st.right[p] = c, st.parent[c] = p;
      st.labels[y].swap(cand_new);
      st.log2_flops[y] = f_n, st.log2_flops[p] = f_p;
      st.log2_size[y] = s_n;
    }
    {
      work += kAnnealUnitsPerSweepNode * internal;  // the sweep's total
      const double total = energy();
      if (total < best) {
        best = total, best_structure_left = st.left, best_structure_right = st.right;
      }
    }
  }
done:
  deadline.charge(work + evaluate_units(*st.net));  // and the rebuild below
  {
    // Restore the best structure seen (the start tree if nothing beat it) and recompute labels.
    std::vector<Step> steps;
    std::vector<int> new_id(2 * n - 1, -1);
    for (int i = 0; i < n; ++i) new_id[i] = i;
    // Post-order over the saved structure; find its root (the node without a parent).
    std::vector<int> par(2 * n - 1, -1);
    for (int id = n; id < 2 * n - 1; ++id) par[best_structure_left[id]] = id, par[best_structure_right[id]] = id;
    int r = n;
    for (int id = n; id < 2 * n - 1; ++id)
      if (par[id] < 0) r = id;
    std::vector<std::pair<int, bool>> stack{{r, false}};
    while (!stack.empty()) {
      auto [id, expanded] = stack.back();
      stack.pop_back();
      if (id < n) continue;
      if (expanded) {
        steps.emplace_back(new_id[best_structure_left[id]], new_id[best_structure_right[id]]);
        new_id[id] = n + static_cast<int>(steps.size()) - 1;
      } else {
        stack.push_back({id, true});
        stack.push_back({best_structure_right[id], false});
        stack.push_back({best_structure_left[id], false});
      }
    }
    st = TreeState(*st.net, ContractionTree(n, std::move(steps)));
  }
}

}  // namespace

ContractionTree reconfigure(const Network& network, const ContractionTree& tree, int subtree_size, int max_passes,
                            const Deadline& deadline) {
  if (network.num_inputs < 3 || subtree_size < 3) return tree;
  TreeState st(network, tree);
  deadline.charge(evaluate_units(network));
  reconfigure_state(st, std::min(subtree_size, 16), max_passes, deadline);
  ContractionTree out = st.to_tree();
  deadline.charge(2 * evaluate_units(network));
  return evaluate(network, out, false).flops <= evaluate(network, tree, false).flops ? out : tree;
}

ContractionTree anneal(const Network& network, const ContractionTree& start, const AnnealOptions& options,
                       const Deadline& deadline) {
  if (network.num_inputs < 3) return start;
  TreeState st(network, start);
  deadline.charge(evaluate_units(network));
  anneal_state(st, options, deadline);
  ContractionTree out = st.to_tree();
  deadline.charge(2 * evaluate_units(network));
  return evaluate(network, out, false).flops <= evaluate(network, start, false).flops ? out : start;
}

namespace {

struct TrialOutcome {
  bool done = false;
  ContractionTree tree;
  double flops = std::numeric_limits<double>::infinity();
  std::vector<int> sliced;  // sliced trials: the labels the tree's score slices
};

// One trial starts from the best of kGreediesPerTrial randomised greedy runs (and, for trial 0 only, `first`)
// (alpha log-uniform in [0.01, 16], i.e. cotengra's costmod range (0.1, 4) squared: a large alpha favours joining the
// largest operands, which finds slab sweeps on lattices; temperature log-uniform in [0.001, 1]). The start is
// reconfigured, annealed with the trial's own seed and reconfigured again. A trial cut by the deadline returns the
// best tree it has (done = false): only budget-bound searches ever use such a tree.
constexpr int kGreediesPerTrial = 16;

// The slicing-aware part of a trial (SearchOptions::slice_limit): kSlicedRounds rounds of "slice, then anneal the
// tree on the sliced network": the tree is sliced to fit (SliceFinder.h, from the labels already sliced), then
// reconfigured and annealed with those labels at extent 1, every intermediate held to the limit by the size penalty
// and the reconfiguration cap, and sliced again from there (adding labels it still needs, dropping those it no
// longer needs). The trial's score is the best total sliced flops seen; the anneal moves are split over the rounds.
constexpr int kSlicedRounds = 4;

TrialOutcome run_sliced_rounds(const Network& net, TrialOutcome start, const SearchOptions& opt, int64_t moves,
                               SplitMix64& rng, const Deadline& deadline) {
  const double limit = opt.slice_limit;
  const double target = std::log2(limit);
  TrialOutcome out = std::move(start);
  ContractionTree tree = out.tree;
  SliceChoice choice = slice_tree(net, tree, limit, deadline);
  out.flops = choice.total_flops;
  out.sliced = choice.labels;
  for (int round = 0; round < kSlicedRounds; ++round) {
    if (deadline.expired()) return out;
    SlicedNetwork sn(net);
    for (int l : choice.labels) sn.set(l, true);
    TreeState st(sn.net, tree);
    deadline.charge(evaluate_units(net));
    if (opt.subtree_size >= 3) reconfigure_state(st, opt.subtree_size, 4, deadline, target);
    if (moves > 0 && !deadline.expired()) {
      AnnealOptions a;
      a.moves = std::max<int64_t>(1, moves / kSlicedRounds);
      a.seed = rng.next();
      a.size_target = target;
      a.size_weight = 2.0;
      anneal_state(st, a, deadline);
      if (opt.subtree_size >= 3 && !deadline.expired()) reconfigure_state(st, opt.subtree_size, 4, deadline, target);
    }
    tree = st.to_tree();
    deadline.charge(evaluate_units(net));
    choice = slice_tree(net, tree, limit, deadline, choice.labels);
    if (choice.fits && choice.total_flops < out.flops) out.flops = choice.total_flops, out.tree = tree, out.sliced = choice.labels;
  }
  out.done = !deadline.expired();
  return out;
}

TrialOutcome run_trial(const Network& net, const ContractionTree& first, int index, const SearchOptions& opt,
                       int64_t moves, const Deadline& deadline) {
  SplitMix64 rng(trial_seed(opt.seed, static_cast<uint64_t>(index)));
  TrialOutcome out;
  out.tree = first;
  out.flops = index == 0 ? evaluate(net, first, false).flops : std::numeric_limits<double>::infinity();
  if (index == 0) deadline.charge(evaluate_units(net));
  bool cut = false;  // the deadline passed during the greedy starts
  {
    for (int r = 0; r < kGreediesPerTrial && !cut; ++r) {
      GreedyOptions g;
      g.cost = GreedyCost::memory_removed;
      g.alpha = std::exp2(std::log2(0.01) + rng.uniform() * (std::log2(16.0) - std::log2(0.01)));
      g.temperature = std::exp2(std::log2(0.001) * (1.0 - rng.uniform()));
      g.seed = rng.next();
      g.deadline = &deadline;
      std::optional<ContractionTree> t = greedy_until(net, g);  // abandoned when the deadline passes mid-run
      if (!t) {
        cut = true;
        break;
      }
      const double f = evaluate(net, *t, false).flops;
      deadline.charge(evaluate_units(net));
      if (f < out.flops) out.flops = f, out.tree = std::move(*t);
      cut = deadline.expired();
    }
  }
  // A sliced trial always scores its tree by the sliced total (its rounds stop at once when the deadline passed).
  if (opt.slice_limit > 0 && out.tree.num_inputs() == net.num_inputs)
    return run_sliced_rounds(net, std::move(out), opt, moves, rng, deadline);
  if (cut) return out;
  TreeState st(net, out.tree);
  deadline.charge(evaluate_units(net));
  auto finish = [&](bool done) {
    ContractionTree t = st.to_tree();
    const double f = evaluate(net, t, false).flops;
    deadline.charge(2 * evaluate_units(net));
    if (f < out.flops) out.flops = f, out.tree = std::move(t);
    out.done = done;
    return out;
  };
  if (opt.subtree_size >= 3) reconfigure_state(st, opt.subtree_size, 4, deadline);
  if (deadline.expired()) return finish(false);
  if (moves > 0) {
    AnnealOptions a;
    a.moves = moves;
    a.seed = rng.next();
    anneal_state(st, a, deadline);
    if (deadline.expired()) return finish(false);
    if (opt.subtree_size >= 3) reconfigure_state(st, opt.subtree_size, 4, deadline);
    if (deadline.expired()) return finish(false);
  }
  return finish(true);
}

}  // namespace

SearchResult search(const Network& net, const ContractionTree& baseline, const SearchOptions& opt) {
  if (opt.budget_s <= 0 && opt.trials <= 0 && opt.deadline.unlimited())
    fail(ErrorKind::invalid_argument, "search needs a time budget or a trial count; set budget > 0 or trials > 0");
  const auto t0 = std::chrono::steady_clock::now();
  // The caller's deadline (plan() passes its own, whose meter holds the work done before the search), or the budget's.
  const Deadline deadline =
      opt.deadline.unlimited() ? Deadline(opt.budget_s, work_for_budget(opt.budget_s, net.num_inputs)) : opt.deadline;
  SearchResult result;
  result.tree = baseline;
  if (opt.slice_limit > 0) {
    SliceChoice c = slice_tree(net, baseline, opt.slice_limit, deadline);
    result.flops = c.total_flops;
    result.sliced = std::move(c.labels);
  } else {
    result.flops = evaluate(net, baseline, false).flops;
    deadline.charge(evaluate_units(net));
  }
  if (net.num_inputs < 3) return result;
  // Moves per anneal trial from the budget (an assumed rate, never a measured one, so the work stays deterministic).
  int64_t moves = opt.anneal_moves;
  if (moves < 0) {
    const double budget = opt.budget_s > 0 ? opt.budget_s : 1.0;
    moves = static_cast<int64_t>(std::clamp(budget * 2.0e6 / 16.0, 0.0, 5.0e7));
    if (moves < 20 * net.num_inputs) moves = budget >= 0.05 ? 20 * net.num_inputs : 0;
  }
  // Which trials count is decided by work units, never by the clock or the thread that ran them: trial t counts when
  // the work of trials 0..t (S_t) stays below the allowance A (trial 0 always counts; its own meter stops it at A).
  // Trial t runs with a meter of A - S_{t-1} when trials 0..t-1 have finished, else of A: either way a trial cut by
  // its meter has S_t >= A and does not count, and one that finishes did the same work as on one thread.
  const int64_t kNoLimit = std::numeric_limits<int64_t>::max();
  const int64_t allowance = deadline.allowance_left();
  auto add = [&](int64_t a, int64_t b) { return a > kNoLimit - b ? kNoLimit : a + b; };
  const int total = opt.trials > 0 ? opt.trials : std::numeric_limits<int>::max();
  struct Slot {
    TrialOutcome outcome;
    int64_t work = -1;       // -1: not finished
    bool clock_cut = false;  // the clock guard stopped it: its tree depends on timing
  };
  std::vector<Slot> slots;
  std::mutex mutex;
  std::condition_variable cv;
  int next = 0, finished = 0, reported = 0;
  int64_t finished_work = 0;  // over finished trials of any index
  auto report = [&]() {  // with `mutex` held (or single-threaded)
    if (!opt.progress || reported == finished) return;
    reported = finished;
    PlanProgress p;
    p.trials_done = finished;
    p.trials_total = opt.trials;
    p.best_flops = result.flops;
    for (const Slot& s : slots)
      if (s.work >= 0) p.best_flops = std::min(p.best_flops, s.outcome.flops);
    p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    opt.progress(p);
  };
  auto worker = [&](bool single) {
    for (;;) {
      int index;
      int64_t limit = allowance;
      {
        std::lock_guard lock(mutex);
        if (next >= total || finished_work >= allowance || deadline.clock_expired()) break;
        index = next++;
        slots.resize(next);
        int64_t prefix = 0;
        for (int i = 0; i < index && limit != kNoLimit; ++i) {
          if (slots[i].work < 0) {
            prefix = 0;
            break;
          }
          prefix = add(prefix, slots[i].work);
        }
        if (limit != kNoLimit) limit -= std::min(prefix, limit);
      }
      const Deadline meter = deadline.with_allowance(limit);
      TrialOutcome o = run_trial(net, baseline, index, opt, moves, meter);
      std::lock_guard lock(mutex);
      slots[index].clock_cut = !o.done && meter.clock_expired() && !meter.work_spent();
      slots[index].outcome = std::move(o);
      slots[index].work = meter.used();
      finished_work = add(finished_work, meter.used());
      ++finished;
      if (single) report();
      else cv.notify_all();
    }
  };
  const int threads = std::max(1, opt.threads);
  if (threads == 1) {
    worker(true);
  } else {
    int running = threads;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        worker(false);
        std::lock_guard lock(mutex);
        --running;
        cv.notify_all();
      });
    {
      std::unique_lock lock(mutex);
      while (running > 0) {
        cv.wait(lock);
        report();
      }
    }
    for (auto& t : pool) t.join();
  }
  // The counted prefix; `complete` when it ended by the work or the trial count, not by the clock.
  bool complete = false;
  int64_t spent = 0;
  for (size_t t = 0; t < slots.size() && slots[t].work >= 0; ++t) {
    const int64_t s = add(spent, slots[t].work);
    if (t > 0 && s >= allowance) {
      complete = true;
      break;
    }
    spent = s;
    const TrialOutcome& o = slots[t].outcome;
    if (o.tree.num_inputs() == net.num_inputs && o.flops < result.flops)
      result.flops = o.flops, result.tree = o.tree, result.sliced = o.sliced;
    ++result.trials_done;
    if (slots[t].clock_cut) break;
    if (spent >= allowance || static_cast<int>(t) + 1 == total) {
      complete = true;
      break;
    }
  }
  deadline.charge(spent);
  result.work_units = spent;
  result.stopped_by_budget = !complete;
  return result;
}

}  // namespace einstage::einsum
