// `einstage.einsum_ad.v1`: payload text/JSON forms, the type rule, the AD rules and the registration (see
// EinsumAdOp.h).
#include "extensions/einsum/EinsumAdOp.h"

#include "extensions/einsum/EinsumAd.h"
#include "extensions/einsum/Lowering.h"
#include "ir/Size.h"
#include "ir/AttrText.h"
#include "ir/Quote.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace einstage::einsum {

namespace {

using json = nlohmann::json;

std::optional<EinsumAdMode> mode_from_name(std::string_view s) {
  for (EinsumAdMode m : {EinsumAdMode::jvp, EinsumAdMode::vjp})
    if (mode_name(m) == s) return m;
  return std::nullopt;
}

[[noreturn]] void fail_ad_attr(std::string_view attr, std::string_view text, std::string_view what) {
  fail(ErrorKind::parse, "'{}' attribute '{}': {} (got {})", kEinsumAdFamily, attr, what, quote_for_message(text));
}

void check_payload(const EinsumAdPayload& p) {
  const int n = static_cast<int>(p.forward().subscripts().num_inputs());
  std::string slots = fmt::format("[{}]", fmt::join(p.slots(), ", "));
  if (p.slots().empty()) fail_ad_attr("slots", slots, "expected at least one operand index");
  for (size_t i = 0; i < p.slots().size(); ++i) {
    if (p.slots()[i] < 0 || p.slots()[i] >= n)
      fail_ad_attr("slots", slots, fmt::format("operand index {} is out of range for {} operands", p.slots()[i], n));
    if (i && p.slots()[i] <= p.slots()[i - 1])
      fail_ad_attr("slots", slots, "expected distinct operand indices in ascending order");
  }
}

std::vector<int> slots_from_text(std::string_view text) {
  Axes axes;
  parse_attr(text, axes, fmt::format("attribute 'slots' of '{}'", kEinsumAdFamily));
  return std::vector<int>(axes.begin(), axes.end());
}

}  // namespace

std::string_view mode_name(EinsumAdMode mode) {
  switch (mode) {
    case EinsumAdMode::jvp: return "jvp";
    case EinsumAdMode::vjp: return "vjp";
  }
  return "?";
}

EinsumAdPayload::EinsumAdPayload(EinsumPayload forward, EinsumAdMode mode, std::vector<int> slots)
    : forward_(std::move(forward)), mode_(mode), slots_(std::move(slots)) {
  check_payload(*this);
  hash_ = hash_bytes(to_text());
}

std::string EinsumAdPayload::to_text() const {
  auto attrs = split_attribute_text(forward_.to_text());
  attrs.emplace_back("mode", std::string(mode_name(mode_)));
  attrs.emplace_back("slots", format_attr(Axes(slots_.begin(), slots_.end())));
  std::sort(attrs.begin(), attrs.end());
  std::string out;
  for (const auto& [key, value] : attrs) out += (out.empty() ? "" : ", ") + key + " = " + value;
  return out;
}

std::string EinsumAdPayload::to_json() const {
  json j = json::parse(forward_.to_json());
  j["mode"] = std::string(mode_name(mode_));
  j["slots"] = slots_;
  return j.dump();
}

uint64_t EinsumAdPayload::hash() const { return hash_; }

bool EinsumAdPayload::equals(const ExtensionPayload& other) const {
  const auto* o = dynamic_cast<const EinsumAdPayload*>(&other);
  return o && mode_ == o->mode_ && slots_ == o->slots_ && forward_.equals(o->forward_);
}

std::unique_ptr<ExtensionPayload> EinsumAdPayload::clone() const { return std::make_unique<EinsumAdPayload>(*this); }

std::unique_ptr<EinsumAdPayload> EinsumAdPayload::parse_text(std::string_view attr_text) {
  std::optional<EinsumAdMode> mode;
  std::optional<std::vector<int>> slots;
  std::string rest;
  for (auto& [key, value] : split_attribute_text(attr_text)) {
    if (key == "mode") {
      mode = mode_from_name(value);
      if (!mode) fail_ad_attr("mode", value, "expected jvp or vjp");
    } else if (key == "slots") {
      slots = slots_from_text(value);
    } else {
      rest += (rest.empty() ? "" : ", ") + key + " = " + value;
    }
  }
  if (!mode || !slots)
    fail(ErrorKind::parse, "'{}' needs the attributes mode and slots besides einsum's broadcast, plan and "
         "subscripts (got: {})", kEinsumAdFamily, quote_for_message(attr_text));
  return std::make_unique<EinsumAdPayload>(*EinsumPayload::parse_text(rest), *mode, std::move(*slots));
}

std::unique_ptr<EinsumAdPayload> EinsumAdPayload::parse_json(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("mode") || !j["mode"].is_string() || !j.contains("slots") ||
      !j["slots"].is_array())
    fail(ErrorKind::parse, "'{}' payload: expected a JSON object with \"mode\" and \"slots\" besides einsum's "
         "fields (got {})", kEinsumAdFamily, quote_for_message(json_text));
  std::optional<EinsumAdMode> mode = mode_from_name(j["mode"].get<std::string>());
  if (!mode) fail_ad_attr("mode", j["mode"].dump(), "expected jvp or vjp");
  std::vector<int> slots;
  for (const json& v : j["slots"]) {
    if (!v.is_number_integer()) fail_ad_attr("slots", j["slots"].dump(), "expected operand indices");
    slots.push_back(v.get<int>());
  }
  for (const char* key : {"mode", "slots"}) j.erase(key);
  return std::make_unique<EinsumAdPayload>(*EinsumPayload::parse_json(j.dump()), *mode, std::move(slots));
}

namespace {

// ---- the type rule ----

std::vector<TensorType> infer_einsum_ad_types(const EinsumAdPayload& p, Types operands, TypeContext& ctx) {
  const size_t n = p.forward().subscripts().num_inputs();
  const std::string shown = quote_for_message(p.forward().display());
  const size_t extra = p.mode() == EinsumAdMode::jvp ? p.slots().size() : 1;
  if (operands.size() != n + extra)
    ctx.error(ErrorKind::invalid_argument, "mode {} of einsum {} over slots [{}] takes {} operands but was given {}",
              mode_name(p.mode()), shown, fmt::join(p.slots(), ", "), n + extra, operands.size());
  Types primals = operands.subspan(0, n);
  const TensorType forward = infer_einsum_type(p.forward(), primals, ctx);
  if (p.mode() == EinsumAdMode::jvp) {
    for (size_t i = 0; i < p.slots().size(); ++i) {
      const TensorType& x = primals[static_cast<size_t>(p.slots()[i])];
      const TensorType& t = operands[n + i];
      if (t.dtype != x.dtype || t.rank() != x.rank())
        ctx.error(ErrorKind::shape, "einsum {}: the tangent of operand {} is {} but the operand is {}; a tangent has "
                  "its operand's type", shown, p.slots()[i], t.to_string(), x.to_string());
      for (int a = 0; a < x.rank(); ++a)
        ctx.unify(t.dims[a], x.dims[a], fmt::format("tangent of operand {} axis {}", p.slots()[i], a));
    }
    return {forward};
  }
  const TensorType& ct = operands[n];
  if (ct.rank() != forward.rank())
    ctx.error(ErrorKind::shape, "einsum {}: the output cotangent is {} but the output is {}; pass a cotangent of the "
              "output's shape", shown, ct.to_string(), forward.to_string());
  for (int a = 0; a < ct.rank(); ++a) ctx.unify(ct.dims[a], forward.dims[a], fmt::format("cotangent axis {}", a));
  std::vector<TensorType> out;  // each slot's cotangent has its operand's type
  for (int k : p.slots()) out.push_back(primals[static_cast<size_t>(k)]);
  return out;
}

// ---- AD rules ----

const EinsumAdPayload& ad_payload_of(const Instruction& inst) {
  return static_cast<const EinsumAdPayload&>(*std::get<ExtensionOp>(inst.op).payload);
}

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

// vjp: the cotangent of slot k = einsum_cotangent(x, ct), the (linear) fix-ups of one reverse einsum R_k of
// (ct, conj x_j for j != k); it does not read x_k. Its tangent is the fix-ups of R_k's tangent in the directions
// (dct, conj dx_j), emitted by einsum_tangent: one mode jvp instruction over R_k when two or more of them have
// tangents, so a Hessian-vector product propagates them along R_k's planned tree in one pass instead of running R_k
// once per tangent.
std::vector<std::optional<Value>> vjp_linearize(Builder& b, const EinsumAdPayload& p, std::span<const Value> primals,
                                                std::span<const std::optional<Value>> tangents) {
  const size_t n = p.forward().subscripts().num_inputs();
  std::span<const Value> x = primals.subspan(0, n);
  std::vector<std::optional<Value>> out;
  for (int slot : p.slots()) {
    const size_t k = static_cast<size_t>(slot);
    std::vector<std::optional<Value>> reverse_tangents{tangents[n]};  // in R_k's operand order
    bool any = tangents[n].has_value();
    for (size_t j = 0; j < n; ++j) {
      if (j == k) continue;
      std::optional<Value> t = tangents[j];
      if (t && is_complex(x[j].type.dtype)) t = b.conj(*t);
      any = any || t.has_value();
      reverse_tangents.push_back(t);
    }
    if (!any) {
      out.emplace_back();
      continue;
    }
    out.push_back(einsum_cotangent(b, p.forward(), x, k, primals[n],
                                   [&](Builder& bb, const EinsumPayload& reverse, std::vector<Value> ops) {
                                     return *einsum_tangent(bb, reverse, ops, reverse_tangents, EinsumAdPath::tree);
                                   }));
  }
  return out;
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
  for (int k : p.slots())
    out.push_back(einsum_cotangent(b, p.forward(), operands.subspan(0, n), static_cast<size_t>(k), operands[n], lower));
  return out;
}

}  // namespace

void register_einsum_ad_semantics(ExtensionRegistry& registry) {
  ExtensionSemantics sem;
  sem.family = std::string(kEinsumAdFamily);
  sem.module = std::string(kEinsumModule);
  sem.parse_text = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return EinsumAdPayload::parse_text(text);
  };
  sem.parse_json = [](std::string_view text) -> std::unique_ptr<ExtensionPayload> {
    return EinsumAdPayload::parse_json(text);
  };
  sem.infer_types = [](const ExtensionPayload& payload, Types operands, TypeContext& ctx) {
    return infer_einsum_ad_types(static_cast<const EinsumAdPayload&>(payload), operands, ctx);
  };
  sem.lower_results = [](Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings&) {
    return lower_einsum_ad(b, ad_payload_of(inst), operands);
  };
  sem.linearize_results = [](Builder& b, const Instruction& inst, std::span<const Value> primals,
                             std::span<const std::optional<Value>> tangents) -> std::vector<std::optional<Value>> {
    const EinsumAdPayload& p = ad_payload_of(inst);
    if (p.mode() == EinsumAdMode::vjp) return vjp_linearize(b, p, primals, tangents);
    return {jvp_linearize(b, p, primals, tangents)};
  };
  sem.transpose_results = [](Builder& b, const Instruction& inst, std::span<const Value> operands,
                             std::span<const bool> linear,
                             std::span<const std::optional<Value>> cts) -> std::vector<std::optional<Value>> {
    const EinsumAdPayload& p = ad_payload_of(inst);
    if (p.mode() != EinsumAdMode::jvp)
      fail(ErrorKind::unsupported, "transpose rule for '{}' mode {} not implemented: it is the reverse pass itself "
           "and never occurs in a linearized program; differentiate the program that produced it instead",
           kEinsumAdFamily, mode_name(p.mode()));
    return jvp_transpose(b, p, operands, linear, *cts[0]);
  };
  registry.register_family(std::move(sem));
}

}  // namespace einstage::einsum
