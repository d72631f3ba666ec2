// `einstage.einsum_ad.v1`'s rules: linearize and transpose of each mode, and the lowering to standard ops (see
// EinsumAdRules.h; the modes are described in EinsumAdOp.h).
#include "extensions/einsum/op/EinsumAdRules.h"

#include "extensions/einsum/op/EinsumAd.h"
#include "extensions/einsum/op/Lowering.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <algorithm>

namespace einstage::einsum {

namespace {

// ---- AD rules ----

// jvp: J(x, t) = sum over slots k of E(x with k := t_k). Its tangent is J(x, dt) (over the slots whose tangent has a
// tangent) plus, per slot k, the tangent of E(x with k := t_k) in the other operands' directions dx.
std::optional<Value> jvp_linearize(Builder& b, const EinsumAdPayload& p, std::span<const Value> primals,
                                   std::span<const std::optional<Value>> tangents) {
  const size_t n = p.forward().subscripts().num_inputs();
  std::span<const Value> x = primals.subspan(0, n);
  std::optional<Value> sum;
  auto add = [&](std::optional<Value> term) {
    if (term) sum = sum ? b.add(*sum, *term) : *term;
  };
  std::vector<std::optional<Value>> dt(n);
  for (size_t i = 0; i < p.slots().size(); ++i) dt[static_cast<size_t>(p.slots()[i])] = tangents[n + i];
  add(einsum_tangent(b, p.forward(), x, dt, EinsumAdPath::tree));
  for (size_t i = 0; i < p.slots().size(); ++i) {
    const size_t k = static_cast<size_t>(p.slots()[i]);
    std::vector<Value> xk(x.begin(), x.end());
    xk[k] = primals[n + i];
    std::vector<std::optional<Value>> dx(tangents.begin(), tangents.begin() + static_cast<std::ptrdiff_t>(n));
    dx[k] = std::nullopt;  // E(x with k := t_k) does not read x_k
    add(einsum_tangent(b, p.forward(), xk, dx, EinsumAdPath::tree));
  }
  return sum;
}

// jvp is linear in its tangents jointly: its transpose gives every slot's cotangent at once.
std::vector<std::optional<Value>> jvp_transpose(Builder& b, const EinsumAdPayload& p, std::span<const Value> operands,
                                                std::span<const bool> linear, const Value& ct) {
  const size_t n = p.forward().subscripts().num_inputs();
  for (size_t i = 0; i < operands.size(); ++i)
    if (linear[i] != (i >= n))
      fail(ErrorKind::invalid_argument, "'{}' mode jvp of einsum {} is linear in its tangents (operands {} to {}) "
           "together, but operand {} {} the linear inputs; transpose needs a program linear in them", kEinsumAdFamily,
           quote_for_message(p.forward().display()), n, operands.size() - 1, i,
           linear[i] ? "depends on" : "does not depend on");
  std::span<const Value> x = operands.subspan(0, n);
  std::vector<std::optional<Value>> out(operands.size());
  std::vector<Value> ops(x.begin(), x.end());
  ops.push_back(ct);
  std::vector<Value> cts = b.extension_results(std::make_shared<EinsumAdPayload>(p.forward(), EinsumAdMode::vjp,
                                                                                 p.slots()), std::move(ops));
  for (size_t i = 0; i < cts.size(); ++i) out[n + i] = cts[i];
  return out;
}

// The tangents of the cotangents of `slots` of einsum(x) with output cotangent ct, in the directions d (n + 1
// entries: the operands', then the cotangent's; nullopt: zero): one vjp_jvp instruction over the slots whose
// cotangent reads some tangent (a slot's cotangent does not read its own operand); nullopt for the others.
std::vector<std::optional<Value>> emit_vjp_jvp(Builder& b, const EinsumPayload& forward, const std::vector<int>& slots,
                                               std::span<const Value> x, const Value& ct,
                                               std::span<const std::optional<Value>> d) {
  std::vector<int> which;
  std::vector<Value> ops(x.begin(), x.end());
  ops.push_back(ct);
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i]) {
      which.push_back(static_cast<int>(i));
      ops.push_back(*d[i]);
    }
  std::vector<int> live;
  for (int k : slots)
    if (std::any_of(which.begin(), which.end(), [&](int i) { return i != k; })) live.push_back(k);
  std::vector<std::optional<Value>> out(slots.size());
  if (live.empty()) return out;
  std::vector<Value> r = b.extension_results(
      std::make_shared<EinsumAdPayload>(forward, EinsumAdMode::vjp_jvp, live, std::move(which)), std::move(ops));
  for (size_t i = 0, j = 0; i < slots.size(); ++i)
    if (j < live.size() && live[j] == slots[i]) out[i] = r[j++];
  return out;
}

// vjp: the cotangent of slot k is vjp_k(x, ct) = R_k(ct, conj x_j for j != k) (R_k the reverse einsum, with fix-ups;
// EinsumAd.h, einsum_cotangent). Its tangent R_k(dct, ...) + sum over j of R_k(..., conj dx_j in place of x_j, ...)
// for every slot at once is one vjp_jvp instruction, walked along the forward's tree.
std::vector<std::optional<Value>> vjp_linearize(Builder& b, const EinsumAdPayload& p, std::span<const Value> primals,
                                                std::span<const std::optional<Value>> tangents) {
  const size_t n = p.forward().subscripts().num_inputs();
  return emit_vjp_jvp(b, p.forward(), p.slots(), primals.subspan(0, n), primals[n], tangents.subspan(0, n + 1));
}

// vjp_jvp H(x, c; d) over tangents T. Its tangent in the directions (dx, dc, dd) is
//   H(x, c; dd) + H(x, dc; d restricted to operands) + H(x, d_n; dx) + sum over j in T, j < n, of
//   H(x with x_j := d_j, c; dx without j) over the slots other than j
// (H is linear in (c, d) jointly and multilinear in the operands; the last sum is the mixed second derivative).
std::vector<std::optional<Value>> vjp_jvp_linearize(Builder& b, const EinsumAdPayload& p,
                                                    std::span<const Value> primals,
                                                    std::span<const std::optional<Value>> tangents) {
  const size_t n = p.forward().subscripts().num_inputs();
  const std::vector<int>& slots = p.slots();
  std::span<const Value> x = primals.subspan(0, n);
  const Value& c = primals[n];
  std::vector<std::optional<Value>> d(n + 1), dd(n + 1);  // the tangents H reads, and their tangents
  for (size_t i = 0; i < p.tangents().size(); ++i) {
    d[static_cast<size_t>(p.tangents()[i])] = primals[n + 1 + i];
    dd[static_cast<size_t>(p.tangents()[i])] = tangents[n + 1 + i];
  }
  std::vector<std::optional<Value>> sum(slots.size());
  auto add = [&](const std::vector<int>& which, const std::vector<std::optional<Value>>& terms) {
    for (size_t i = 0, j = 0; i < slots.size() && j < which.size(); ++i)
      if (which[j] == slots[i]) {
        if (terms[j]) sum[i] = sum[i] ? b.add(*sum[i], *terms[j]) : *terms[j];
        ++j;
      }
  };
  add(slots, emit_vjp_jvp(b, p.forward(), slots, x, c, dd));
  std::vector<std::optional<Value>> dx(tangents.begin(), tangents.begin() + static_cast<std::ptrdiff_t>(n));
  dx.emplace_back();
  if (tangents[n]) {
    std::vector<std::optional<Value>> d_operands = d;
    d_operands[n] = std::nullopt;
    add(slots, emit_vjp_jvp(b, p.forward(), slots, x, *tangents[n], d_operands));
  }
  if (d[n]) add(slots, emit_vjp_jvp(b, p.forward(), slots, x, *d[n], dx));
  for (int j : p.tangents()) {
    if (j == static_cast<int>(n)) continue;
    std::vector<Value> xj(x.begin(), x.end());
    xj[static_cast<size_t>(j)] = *d[static_cast<size_t>(j)];
    std::vector<std::optional<Value>> dxj = dx;
    dxj[static_cast<size_t>(j)] = std::nullopt;
    std::vector<int> others;
    for (int k : slots)
      if (k != j) others.push_back(k);
    add(others, emit_vjp_jvp(b, p.forward(), others, xj, c, dxj));
  }
  return sum;
}

// vjp_jvp H(x, c; dx, dc) = vjp(x, dc) + sum over j of d/dx_j vjp(x, c)[dx_j] is linear in (dx, dc) jointly for fixed
// c, and in (c, dc) jointly for fixed dx (its linearize rule emits both kinds). With u_k the cotangent of slot k's
// result, U the slots with one and J(x; u) = sum over k in U of E(x with x_k := u_k) (mode jvp):
//   the cotangent of dc is J(x; u);
//   of dx_j (j < n), sum over k != j of vjp_j(x with x_k := u_k, c): vjp_jvp with the directions u over the slots
//   T (the mixed second derivative of Re<c, E(x)> is symmetric);
//   of c, sum over k and j != k of E(x with x_k := u_k, x_j := dx_j): the tangent of J(x; u) in the directions dx.
std::vector<std::optional<Value>> vjp_jvp_transpose(Builder& b, const EinsumAdPayload& p,
                                                    std::span<const Value> operands, std::span<const bool> linear,
                                                    std::span<const std::optional<Value>> cts) {
  const size_t n = p.forward().subscripts().num_inputs();
  // Which of the two linear structures this is: the tangents (c fixed) or the cotangent (the operands' tangents fixed).
  const bool in_c = linear[n];
  for (size_t i = 0; i < operands.size(); ++i) {
    const bool is_dc = i > n && p.tangents()[i - n - 1] == static_cast<int>(n);
    const bool expected = i < n ? false : i == n ? in_c : (is_dc || !in_c);
    if (linear[i] != expected)
      fail(ErrorKind::invalid_argument, "'{}' mode vjp_jvp of einsum {} is linear in its tangents (operands {} to {}) "
           "together, or in the cotangent (operand {}) and its tangent, but operand {} {} the linear inputs; "
           "transpose needs a program linear in one of those", kEinsumAdFamily,
           quote_for_message(p.forward().display()), n + 1, operands.size() - 1, n, i,
           linear[i] ? "depends on" : "does not depend on");
  }
  std::span<const Value> x = operands.subspan(0, n);
  std::vector<std::optional<Value>> u(n + 1), d(n + 1);
  for (size_t i = 0; i < p.slots().size(); ++i) u[static_cast<size_t>(p.slots()[i])] = cts[i];
  for (size_t i = 0; i < p.tangents().size(); ++i) d[static_cast<size_t>(p.tangents()[i])] = operands[n + 1 + i];
  std::vector<std::optional<Value>> out(operands.size());
  for (size_t i = 0; i < p.tangents().size(); ++i)
    if (p.tangents()[i] == static_cast<int>(n))
      out[n + 1 + i] = einsum_tangent(b, p.forward(), x, std::span(u).subspan(0, n), EinsumAdPath::tree);
  if (in_c) {
    std::vector<int> us;
    std::vector<Value> primals(x.begin(), x.end());
    for (int k : p.slots())
      if (u[static_cast<size_t>(k)]) {
        us.push_back(k);
        primals.push_back(*u[static_cast<size_t>(k)]);
      }
    if (us.empty()) return out;
    std::vector<std::optional<Value>> tangents(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(n));
    tangents.resize(primals.size());
    out[n] = jvp_linearize(b, EinsumAdPayload(p.forward(), EinsumAdMode::jvp, us), primals, tangents);
    return out;
  }
  std::vector<int> operand_tangents;
  for (int j : p.tangents())
    if (j < static_cast<int>(n)) operand_tangents.push_back(j);
  if (operand_tangents.empty()) return out;
  std::vector<std::optional<Value>> g = emit_vjp_jvp(b, p.forward(), operand_tangents, x, operands[n], u);
  for (size_t i = 0; i < operand_tangents.size(); ++i) out[n + 1 + i] = g[i];
  return out;
}

}  // namespace

std::vector<std::optional<Value>> linearize_einsum_ad(Builder& b, const EinsumAdPayload& p,
                                                      std::span<const Value> primals,
                                                      std::span<const std::optional<Value>> tangents) {
  if (p.mode() == EinsumAdMode::vjp) return vjp_linearize(b, p, primals, tangents);
  if (p.mode() == EinsumAdMode::value_vjp) {  // einsum's rule for the value, vjp's for the cotangents
    const size_t n = p.forward().subscripts().num_inputs();
    std::vector<std::optional<Value>> out = {
        einsum_tangent(b, p.forward(), primals.subspan(0, n), tangents.subspan(0, n), EinsumAdPath::tree)};
    for (std::optional<Value>& d : vjp_linearize(b, p, primals, tangents)) out.push_back(std::move(d));
    return out;
  }
  if (p.mode() == EinsumAdMode::vjp_jvp) return vjp_jvp_linearize(b, p, primals, tangents);
  if (p.mode() == EinsumAdMode::vjp_with_jvp) {  // vjp's rule for the cotangents, vjp_jvp's for their tangents
    std::vector<std::optional<Value>> out = vjp_linearize(b, p, primals, tangents);
    for (std::optional<Value>& d : vjp_jvp_linearize(b, p, primals, tangents)) out.push_back(std::move(d));
    return out;
  }
  return {jvp_linearize(b, p, primals, tangents)};
}

std::vector<std::optional<Value>> transpose_einsum_ad(Builder& b, const EinsumAdPayload& p,
                                                      std::span<const Value> operands, std::span<const bool> linear,
                                                      std::span<const std::optional<Value>> cts) {
  if (p.mode() == EinsumAdMode::vjp_jvp) return vjp_jvp_transpose(b, p, operands, linear, cts);
  if (p.mode() != EinsumAdMode::jvp)
    fail(ErrorKind::unsupported, "transpose rule for '{}' mode {} not implemented: it is the reverse pass itself "
         "and never occurs in a linearized program; differentiate the program that produced it instead",
         kEinsumAdFamily, mode_name(p.mode()));
  return jvp_transpose(b, p, operands, linear, *cts[0]);
}

// ---- lowering: mode jvp is the sum of the lowered einsums with each tangent in place; mode vjp is each slot's lowered
// reverse einsum ----
std::vector<Value> lower_einsum_ad(Builder& b, const EinsumAdPayload& p, std::span<const Value> operands) {
  const size_t n = p.forward().subscripts().num_inputs();
  if (p.mode() == EinsumAdMode::jvp) {
    std::optional<Value> sum;
    for (size_t i = 0; i < p.slots().size(); ++i) {
      std::vector<Value> ops(operands.begin(), operands.begin() + static_cast<std::ptrdiff_t>(n));
      ops[static_cast<size_t>(p.slots()[i])] = operands[n + i];
      Value term = lower_einsum(b, p.forward(), ops);
      sum = sum ? b.add(*sum, term) : term;
    }
    return {*sum};
  }
  auto lower = [](Builder& bb, const EinsumPayload& payload, std::vector<Value> ops) {
    return lower_einsum(bb, payload, ops);
  };
  std::vector<Value> out;
  std::span<const Value> x = operands.subspan(0, n);
  if (p.mode() == EinsumAdMode::value_vjp) out.push_back(lower_einsum(b, p.forward(), x));
  if (p.mode() != EinsumAdMode::vjp_jvp) {
    for (int k : p.slots()) out.push_back(einsum_cotangent(b, p.forward(), x, static_cast<size_t>(k), operands[n], lower));
    if (p.mode() != EinsumAdMode::vjp_with_jvp) return out;
  }
  std::vector<std::optional<Value>> d(n + 1);
  for (size_t i = 0; i < p.tangents().size(); ++i) d[static_cast<size_t>(p.tangents()[i])] = operands[n + 1 + i];
  for (int slot : p.slots()) {  // R_k's operands are (ct, conj x_j for j != k): sum R_k with each tangent in place
    const size_t k = static_cast<size_t>(slot);
    std::vector<std::optional<Value>> rt{d[n]};
    bool any = d[n].has_value();
    for (size_t j = 0; j < n; ++j) {
      if (j == k) continue;
      std::optional<Value> t = d[j];
      if (t && is_complex(x[j].type.dtype)) t = b.conj(*t);
      any = any || t.has_value();
      rt.push_back(t);
    }
    if (!any) {
      out.push_back(b.full(x[k].type, 0.0));
      continue;
    }
    out.push_back(einsum_cotangent(b, p.forward(), x, k, operands[n],
                                   [&](Builder& bb, const EinsumPayload& reverse, std::vector<Value> ops) {
                                     std::optional<Value> total;
                                     for (size_t i = 0; i < rt.size(); ++i) {
                                       if (!rt[i]) continue;
                                       std::vector<Value> with = ops;
                                       with[i] = *rt[i];
                                       Value term = lower_einsum(bb, reverse, with);
                                       total = total ? bb.add(*total, term) : term;
                                     }
                                     return *total;
                                   }));
  }
  return out;
}

}  // namespace einstage::einsum
