#include "extensions/einsum/exec/StepPlan.h"

#include "extensions/einsum/notation/Notation.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace einstage::einsum {
namespace {

bool contains(const std::vector<Label>& v, Label l) { return std::find(v.begin(), v.end(), l) != v.end(); }
int position(const std::vector<Label>& v, Label l) {
  auto it = std::find(v.begin(), v.end(), l);
  EIN_ASSERT(it != v.end(), "label {} not found", l);
  return static_cast<int>(it - v.begin());
}
int64_t extent_of(const std::map<Label, int64_t>& extents, Label l) {
  auto it = extents.find(l);
  EIN_ASSERT(it != extents.end(), "label {} has no extent", l);
  return it->second;
}

std::vector<Label> first_occurrences(const std::vector<Label>& labels) {
  std::vector<Label> out;
  for (Label l : labels)
    if (!contains(out, l)) out.push_back(l);
  return out;
}

// ExtractDiag actions that reduce `labels` to its first occurrences: repeatedly the leftmost repeat, against its
// first occurrence.
template <typename Action>
std::vector<Action> diagonal_actions(const std::vector<Label>& labels, StepSide side) {
  std::vector<Action> out;
  std::vector<Label> cur = labels;
  for (;;) {
    bool found = false;
    for (size_t p = 0; p < cur.size() && !found; ++p)
      for (size_t q = 0; q < p; ++q)
        if (cur[q] == cur[p]) {
          out.push_back(Action{side, static_cast<int>(q), static_cast<int>(p)});
          cur.erase(cur.begin() + static_cast<std::ptrdiff_t>(p));
          found = true;
          break;
        }
    if (!found) return out;
  }
}

// EmbedDiag actions that grow `distinct` (first occurrences, in output order) into `output`: each repeated position
// p, left to right, becomes a new axis p on the diagonal with the label's first position.
std::vector<EmbedDiagAction> embed_actions(const std::vector<Label>& output) {
  std::vector<EmbedDiagAction> out;
  for (size_t p = 0; p < output.size(); ++p) {
    int q = position(output, output[p]);
    if (q != static_cast<int>(p)) out.push_back(EmbedDiagAction{StepSide::result, q, static_cast<int>(p)});
  }
  return out;
}

StepOperand make_operand(const std::vector<Label>& labels, const Shape& shape, const std::vector<Label>& other,
                         const std::set<Label>& keep, const std::map<Label, int64_t>& extents, StepSide side,
                         std::vector<StepAction>& actions) {
  EIN_ASSERT(labels.size() == shape.size(), "operand has {} labels but rank {}", labels.size(), shape.size());
  StepOperand op;
  op.labels = labels;
  op.shape = shape;
  op.distinct = first_occurrences(labels);
  for (auto& d : diagonal_actions<ExtractDiagAction>(labels, side)) actions.push_back(d);
  bool any_broadcast = false;
  Shape full;
  for (Label l : op.distinct) {
    const int64_t stored = shape[static_cast<size_t>(position(labels, l))], e = extent_of(extents, l);
    EIN_ASSERT(stored == e || stored == 1, "operand axis extent {} does not fit label extent {}", stored, e);
    op.broadcast.push_back(stored != e);
    any_broadcast = any_broadcast || stored != e;
    full.push_back(e);
    if (!contains(other, l) && !keep.count(l)) op.summed.push_back(l);
    else op.reduced.push_back(l);
  }
  if (any_broadcast) {
    std::vector<int> dims(op.distinct.size());
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int>(i);
    actions.push_back(BroadcastInDimAction{side, dims, full});
  }
  if (!op.summed.empty()) {
    std::vector<int> axes;
    for (Label l : op.summed) axes.push_back(position(op.distinct, l));
    actions.push_back(ReduceSumAction{side, axes});
  }
  return op;
}

void finish_output(StepPlan& s, const std::vector<Label>& output) {
  s.final = true;
  s.output = output;
  s.output_distinct = first_occurrences(output);
  EIN_ASSERT(s.output_distinct.size() == s.result.size(), "final step result has {} labels, the output {}",
             s.result.size(), s.output_distinct.size());
  bool identity = true;
  for (size_t i = 0; i < s.output_distinct.size(); ++i) {
    s.output_perm.push_back(position(s.result, s.output_distinct[i]));
    identity = identity && s.output_perm.back() == static_cast<int>(i);
  }
  if (!identity) s.actions.push_back(TransposeAction{StepSide::result, s.output_perm});
  s.output_diagonals = embed_actions(output);
  for (const auto& e : s.output_diagonals) s.actions.push_back(e);
}

std::string labels_text(const Subscripts& names, const std::vector<Label>& labels) {
  std::string out;
  for (Label l : labels) out += label_name(names, l);
  return out;
}

std::string ints(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

}  // namespace

StepPlan make_binary_step(const std::vector<Label>& lhs, const Shape& lhs_shape, const std::vector<Label>& rhs,
                          const Shape& rhs_shape, const std::vector<Label>& keep_labels,
                          const std::map<Label, int64_t>& extents, const std::vector<Label>* output) {
  StepPlan s;
  s.binary = true;
  const std::set<Label> keep(keep_labels.begin(), keep_labels.end());
  s.lhs = make_operand(lhs, lhs_shape, rhs, keep, extents, StepSide::lhs, s.actions);
  s.rhs = make_operand(rhs, rhs_shape, lhs, keep, extents, StepSide::rhs, s.actions);
  for (Label l : s.lhs.reduced) {
    if (contains(s.rhs.reduced, l)) (keep.count(l) ? s.batch : s.contracted).push_back(l);
    else s.lhs_free.push_back(l);
  }
  for (Label l : s.rhs.reduced)
    if (!contains(s.lhs.reduced, l)) s.rhs_free.push_back(l);
  for (Label l : s.contracted) {
    s.lhs_contracting.push_back(position(s.lhs.reduced, l));
    s.rhs_contracting.push_back(position(s.rhs.reduced, l));
  }
  for (Label l : s.batch) {
    s.lhs_batch.push_back(position(s.lhs.reduced, l));
    s.rhs_batch.push_back(position(s.rhs.reduced, l));
  }
  s.result = s.lhs_free;
  s.result.insert(s.result.end(), s.rhs_free.begin(), s.rhs_free.end());
  s.result.insert(s.result.end(), s.batch.begin(), s.batch.end());
  for (Label l : s.result) s.result_shape.push_back(extent_of(extents, l));
  EIN_ASSERT(s.result.size() == keep.size(), "step keeps {} labels but its result has {}", keep.size(), s.result.size());
  s.outer_product = s.contracted.empty();
  if (s.outer_product) {
    std::vector<int> ld, rd;
    for (Label l : s.lhs.reduced) ld.push_back(position(s.result, l));
    for (Label l : s.rhs.reduced) rd.push_back(position(s.result, l));
    s.actions.push_back(BroadcastInDimAction{StepSide::lhs, ld, s.result_shape});
    s.actions.push_back(BroadcastInDimAction{StepSide::rhs, rd, s.result_shape});
    s.actions.push_back(MulAction{});
  } else {
    s.actions.push_back(DotGeneralAction{s.lhs_contracting, s.rhs_contracting, s.lhs_batch, s.rhs_batch});
  }
  if (output) finish_output(s, *output);
  return s;
}

StepPlan make_unary_step(const std::vector<Label>& operand, const Shape& shape, const std::vector<Label>& output,
                         const std::map<Label, int64_t>& extents) {
  StepPlan s;
  s.binary = false;
  const std::vector<Label> out_distinct = first_occurrences(output);
  const std::set<Label> keep(out_distinct.begin(), out_distinct.end());
  s.lhs = make_operand(operand, shape, {}, keep, extents, StepSide::lhs, s.actions);
  s.result = s.lhs.reduced;
  for (Label l : s.result) s.result_shape.push_back(extent_of(extents, l));
  finish_output(s, output);
  return s;
}

bool StepPlan::needs_transpose() const {
  for (size_t i = 0; i < output_perm.size(); ++i)
    if (output_perm[i] != static_cast<int>(i)) return true;
  return false;
}

bool is_direct_dot_general(const Subscripts& subs) {
  if (subs.inputs.size() != 2) return false;
  const auto& a = subs.inputs[0];
  const auto& b = subs.inputs[1];
  const auto& c = subs.output;
  if (first_occurrences(a).size() != a.size() || first_occurrences(b).size() != b.size() ||
      first_occurrences(c).size() != c.size())
    return false;
  std::vector<Label> want;
  for (Label l : a)
    if (!contains(b, l)) {
      if (!contains(c, l)) return false;  // a one-sided sum
      want.push_back(l);
    }
  for (Label l : b)
    if (!contains(a, l)) {
      if (!contains(c, l)) return false;
      want.push_back(l);
    }
  for (Label l : a)
    if (contains(b, l) && contains(c, l)) want.push_back(l);
  return want == c;
}

std::string StepPlan::to_string(const Subscripts& names) const {
  auto L = [&](const std::vector<Label>& v) { return labels_text(names, v); };
  std::string out;
  if (binary)
    out += fmt::format("step {},{}->{}", L(lhs.labels), L(rhs.labels), L(result));
  else
    out += fmt::format("step {}->{}", L(lhs.labels), L(result));
  if (final) out += fmt::format(" (final, output {})", L(output));
  out += "\n";
  for (const StepAction& a : actions) {
    auto side = [](StepSide s) { return s == StepSide::lhs ? "lhs" : s == StepSide::rhs ? "rhs" : "result"; };
    std::visit(
        [&](const auto& x) {
          using A = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<A, ExtractDiagAction>)
            out += fmt::format("  extract_diag {} axis_a={} axis_b={}\n", side(x.side), x.axis_a, x.axis_b);
          else if constexpr (std::is_same_v<A, BroadcastInDimAction>)
            out += fmt::format("  broadcast_in_dim {} dims={} shape={}\n", side(x.side), ints(x.dims),
                               shape_to_string(x.shape));
          else if constexpr (std::is_same_v<A, ReduceSumAction>)
            out += fmt::format("  reduce_sum {} axes={}\n", side(x.side), ints(x.axes));
          else if constexpr (std::is_same_v<A, DotGeneralAction>)
            out += fmt::format("  dot_general lhs_contracting={} rhs_contracting={} lhs_batch={} rhs_batch={}\n",
                               ints(x.lhs_contracting), ints(x.rhs_contracting), ints(x.lhs_batch), ints(x.rhs_batch));
          else if constexpr (std::is_same_v<A, MulAction>)
            out += "  mul\n";
          else if constexpr (std::is_same_v<A, TransposeAction>)
            out += fmt::format("  transpose {} perm={}\n", side(x.side), ints(x.perm));
          else
            out += fmt::format("  embed_diag {} axis_a={} axis_b={}\n", side(x.side), x.axis_a, x.axis_b);
        },
        a);
  }
  return out;
}

}  // namespace einstage::einsum
