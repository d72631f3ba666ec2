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
  for (EinsumAdMode m : {EinsumAdMode::jvp, EinsumAdMode::vjp, EinsumAdMode::vjp_part})
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
  const bool is_part = p.mode() == EinsumAdMode::vjp_part;
  if (is_part && std::find(p.slots().begin(), p.slots().end(), p.part()) == p.slots().end())
    fail_ad_attr("part", std::to_string(p.part()), fmt::format("expected one of the slots {}", slots));
  if (!is_part && p.part() != -1)
    fail_ad_attr("part", std::to_string(p.part()), fmt::format("only mode vjp_part takes a part, this is mode {}",
                                                                 mode_name(p.mode())));
}

std::vector<int> slots_from_text(std::string_view text) {
  Axes axes;
  parse_attr(text, axes, fmt::format("attribute 'slots' of '{}'", kEinsumAdFamily));
  return std::vector<int>(axes.begin(), axes.end());
}

}  // namespace

int64_t packed_vjp_elements(const std::vector<int>& slots, Types operands) {
  int64_t total = 0;
  for (int k : slots)
    total = checked_add(total, element_count(*operands[static_cast<size_t>(k)].constant_shape()),
                        "the packed cotangents of an einsum vjp");
  return total;
}

std::string_view mode_name(EinsumAdMode mode) {
  switch (mode) {
    case EinsumAdMode::jvp: return "jvp";
    case EinsumAdMode::vjp: return "vjp";
    case EinsumAdMode::vjp_part: return "vjp_part";
  }
  return "?";
}

EinsumAdPayload::EinsumAdPayload(EinsumPayload forward, EinsumAdMode mode, std::vector<int> slots, int part)
    : forward_(std::move(forward)), mode_(mode), slots_(std::move(slots)), part_(part) {
  check_payload(*this);
  hash_ = hash_bytes(to_text());
}

std::string EinsumAdPayload::to_text() const {
  auto attrs = split_attribute_text(forward_.to_text());
  attrs.emplace_back("mode", std::string(mode_name(mode_)));
  if (mode_ == EinsumAdMode::vjp_part) attrs.emplace_back("part", std::to_string(part_));
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
  if (mode_ == EinsumAdMode::vjp_part) j["part"] = part_;
  return j.dump();
}

uint64_t EinsumAdPayload::hash() const { return hash_; }

bool EinsumAdPayload::equals(const ExtensionPayload& other) const {
  const auto* o = dynamic_cast<const EinsumAdPayload*>(&other);
  return o && mode_ == o->mode_ && slots_ == o->slots_ && part_ == o->part_ && forward_.equals(o->forward_);
}

std::unique_ptr<ExtensionPayload> EinsumAdPayload::clone() const { return std::make_unique<EinsumAdPayload>(*this); }

std::unique_ptr<EinsumAdPayload> EinsumAdPayload::parse_text(std::string_view attr_text) {
  std::optional<EinsumAdMode> mode;
  std::optional<std::vector<int>> slots;
  int part = -1;
  std::string rest;
  for (auto& [key, value] : split_attribute_text(attr_text)) {
    if (key == "mode") {
      mode = mode_from_name(value);
      if (!mode) fail_ad_attr("mode", value, "expected jvp, vjp or vjp_part");
    } else if (key == "slots") {
      slots = slots_from_text(value);
    } else if (key == "part") {
      int64_t v = 0;
      parse_attr(value, v, fmt::format("attribute 'part' of '{}'", kEinsumAdFamily));
      part = static_cast<int>(v);
    } else {
      rest += (rest.empty() ? "" : ", ") + key + " = " + value;
    }
  }
  if (!mode || !slots)
    fail(ErrorKind::parse, "'{}' needs the attributes mode and slots besides einsum's broadcast, plan and "
         "subscripts (got: {})", kEinsumAdFamily, quote_for_message(attr_text));
  return std::make_unique<EinsumAdPayload>(*EinsumPayload::parse_text(rest), *mode, std::move(*slots), part);
}

std::unique_ptr<EinsumAdPayload> EinsumAdPayload::parse_json(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("mode") || !j["mode"].is_string() || !j.contains("slots") ||
      !j["slots"].is_array())
    fail(ErrorKind::parse, "'{}' payload: expected a JSON object with \"mode\" and \"slots\" besides einsum's "
         "fields (got {})", kEinsumAdFamily, quote_for_message(json_text));
  std::optional<EinsumAdMode> mode = mode_from_name(j["mode"].get<std::string>());
  if (!mode) fail_ad_attr("mode", j["mode"].dump(), "expected jvp, vjp or vjp_part");
  std::vector<int> slots;
  for (const json& v : j["slots"]) {
    if (!v.is_number_integer()) fail_ad_attr("slots", j["slots"].dump(), "expected operand indices");
    slots.push_back(v.get<int>());
  }
  int part = -1;
  if (j.contains("part")) {
    if (!j["part"].is_number_integer()) fail_ad_attr("part", j["part"].dump(), "expected an operand index");
    part = j["part"].get<int>();
  }
  for (const char* key : {"mode", "slots", "part"}) j.erase(key);
  return std::make_unique<EinsumAdPayload>(*EinsumPayload::parse_json(j.dump()), *mode, std::move(slots), part);
}

namespace {

// ---- the type rule ----

TensorType infer_einsum_ad_type(const EinsumAdPayload& p, Types operands, TypeContext& ctx) {
  const size_t n = p.forward().subscripts().num_inputs();
  const std::string shown = quote_for_message(p.forward().display());
  const size_t first = p.mode() == EinsumAdMode::vjp_part ? 1 : 0;  // where the forward operands start
  const size_t extra = p.mode() == EinsumAdMode::jvp ? p.slots().size() : 1;
  if (operands.size() != first + n + extra)
    ctx.error(ErrorKind::invalid_argument, "mode {} of einsum {} over slots [{}] takes {} operands but was given {}",
              mode_name(p.mode()), shown, fmt::join(p.slots(), ", "), first + n + extra, operands.size());
  Types primals = operands.subspan(first, n);
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
    return forward;
  }
  const TensorType& ct = operands[first + n];
  if (ct.rank() != forward.rank())
    ctx.error(ErrorKind::shape, "einsum {}: the output cotangent is {} but the output is {}; pass a cotangent of the "
              "output's shape", shown, ct.to_string(), forward.to_string());
  for (int a = 0; a < ct.rank(); ++a) ctx.unify(ct.dims[a], forward.dims[a], fmt::format("cotangent axis {}", a));
  DType dtype = ct.dtype;
  for (const TensorType& t : primals) dtype = promote(dtype, t.dtype);
  for (int k : p.slots())
    if (!primals[static_cast<size_t>(k)].constant_shape())
      ctx.error(ErrorKind::shape, "einsum {}: mode {} packs the cotangents into one vector, so the slots' operands "
                "need constant dims, but operand {} is {}; bind the symbols first (or differentiate per operand)",
                shown, mode_name(p.mode()), k, primals[static_cast<size_t>(k)].to_string());
  if (p.mode() == EinsumAdMode::vjp_part) {
    const TensorType& packed = operands[0];
    const TensorType expected{dtype, {Dim(packed_vjp_elements(p.slots(), primals))}};
    if (packed != expected)
      ctx.error(ErrorKind::shape, "einsum {}: the packed cotangents (operand 0) are {} but the vjp of these operands "
                "gives {}; pass the result of the mode vjp instruction over the same operands", shown,
                packed.to_string(), expected.to_string());
    return primals[static_cast<size_t>(p.part())];
  }
  return TensorType{dtype, {Dim(packed_vjp_elements(p.slots(), primals))}};
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
  bool constant = true;
  for (int k : p.slots()) constant = constant && x[static_cast<size_t>(k)].type.constant_shape().has_value();
  if (!constant) {  // the packed form needs constant dims: one reverse einsum per slot
    for (size_t i = 0; i < p.slots().size(); ++i)
      out[n + i] = einsum_cotangent(b, p.forward(), x, static_cast<size_t>(p.slots()[i]), ct);
    return out;
  }
  std::vector<Value> ops(x.begin(), x.end());
  ops.push_back(ct);
  Value packed = b.extension(std::make_shared<EinsumAdPayload>(p.forward(), EinsumAdMode::vjp, p.slots()), ops);
  ops.insert(ops.begin(), packed);
  for (size_t i = 0; i < p.slots().size(); ++i)
    out[n + i] = b.extension(std::make_shared<EinsumAdPayload>(p.forward(), EinsumAdMode::vjp_part, p.slots(),
                                                               p.slots()[i]), ops);
  return out;
}

// vjp_part: the cotangent of operand k = einsum_cotangent(x, ct), the (linear) fix-ups of one reverse einsum R_k of
// (ct, conj x_j for j != k); it does not read x_k. Its tangent is the fix-ups of R_k's tangent in the directions
// (dct, conj dx_j), emitted by einsum_tangent: one mode jvp instruction over R_k when two or more of them have
// tangents, so a Hessian-vector product propagates them along R_k's planned tree in one pass instead of running R_k
// once per tangent. The packed operand carries no tangent (see the header).
std::optional<Value> part_linearize(Builder& b, const EinsumAdPayload& p, std::span<const Value> primals,
                                    std::span<const std::optional<Value>> tangents) {
  const size_t n = p.forward().subscripts().num_inputs();
  const size_t k = static_cast<size_t>(p.part());
  std::span<const Value> x = primals.subspan(1, n);
  std::vector<std::optional<Value>> reverse_tangents{tangents[1 + n]};  // in R_k's operand order
  bool any = tangents[1 + n].has_value();
  for (size_t j = 0; j < n; ++j) {
    if (j == k) continue;
    std::optional<Value> t = tangents[1 + j];
    if (t && is_complex(x[j].type.dtype)) t = b.conj(*t);
    any = any || t.has_value();
    reverse_tangents.push_back(t);
  }
  if (!any) return std::nullopt;
  return einsum_cotangent(b, p.forward(), x, k, primals[1 + n],
                          [&](Builder& bb, const EinsumPayload& reverse, std::vector<Value> ops) {
                            return *einsum_tangent(bb, reverse, ops, reverse_tangents, EinsumAdPath::tree);
                          });
}

// ---- lowering: mode jvp is the sum of the lowered einsums with each tangent in place; vjp_part is the lowered reverse
// einsum of its slot; the packed vector of mode vjp has no standard-op form (a placeholder only vjp_part receives) ----
Value lower_einsum_ad(Builder& b, const EinsumAdPayload& p, const Instruction& inst, std::span<const Value> operands) {
  const size_t n = p.forward().subscripts().num_inputs();
  auto lower = [](Builder& bb, const EinsumPayload& payload, std::vector<Value> ops) {
    return lower_einsum(bb, payload, ops);
  };
  switch (p.mode()) {
    case EinsumAdMode::jvp: {
      std::optional<Value> sum;
      for (size_t i = 0; i < p.slots().size(); ++i) {
        std::vector<Value> ops(operands.begin(), operands.begin() + static_cast<std::ptrdiff_t>(n));
        ops[static_cast<size_t>(p.slots()[i])] = operands[n + i];
        Value term = lower_einsum(b, p.forward(), ops);
        sum = sum ? b.add(*sum, term) : term;
      }
      return *sum;
    }
    case EinsumAdMode::vjp: return Value{-1, inst.result().type};
    case EinsumAdMode::vjp_part:
      return einsum_cotangent(b, p.forward(), operands.subspan(1, n), static_cast<size_t>(p.part()), operands[1 + n],
                              lower);
  }
  EIN_ASSERT(false, "einsum_ad: unknown mode");
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
  sem.infer_type = [](const ExtensionPayload& payload, Types operands, TypeContext& ctx) {
    return infer_einsum_ad_type(static_cast<const EinsumAdPayload&>(payload), operands, ctx);
  };
  sem.lower = [](Builder& b, const Instruction& inst, std::span<const Value> operands, const DimBindings&) {
    return lower_einsum_ad(b, ad_payload_of(inst), inst, operands);
  };
  sem.linearize = [](Builder& b, const Instruction& inst, std::span<const Value> primals,
                     std::span<const std::optional<Value>> tangents) -> std::optional<Value> {
    const EinsumAdPayload& p = ad_payload_of(inst);
    switch (p.mode()) {
      case EinsumAdMode::jvp: return jvp_linearize(b, p, primals, tangents);
      case EinsumAdMode::vjp: return std::nullopt;  // the pair's tangent is vjp_part's (see the header)
      case EinsumAdMode::vjp_part: return part_linearize(b, p, primals, tangents);
    }
    return std::nullopt;
  };
  sem.transpose = [](Builder& b, const Instruction& inst, std::span<const Value> operands, std::span<const bool> linear,
                     const Value& ct) -> std::vector<std::optional<Value>> {
    const EinsumAdPayload& p = ad_payload_of(inst);
    if (p.mode() != EinsumAdMode::jvp)
      fail(ErrorKind::unsupported, "transpose rule for '{}' mode {} not implemented: it is the reverse pass itself "
           "and never occurs in a linearized program; differentiate the program that produced it instead",
           kEinsumAdFamily, mode_name(p.mode()));
    return jvp_transpose(b, p, operands, linear, ct);
  };
  registry.register_family(std::move(sem));
}

}  // namespace einstage::einsum
