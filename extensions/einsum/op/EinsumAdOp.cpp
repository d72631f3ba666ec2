// `einstage.einsum_ad.v1`: payload text/JSON forms and the type rule (see EinsumAdOp.h).
#include "extensions/einsum/op/EinsumAdOp.h"

#include "ir/Size.h"
#include "ir/AttrText.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace einstage::einsum {

namespace {

using json = nlohmann::json;

std::optional<EinsumAdMode> mode_from_name(std::string_view s) {
  for (EinsumAdMode m : {EinsumAdMode::jvp, EinsumAdMode::vjp, EinsumAdMode::vjp_jvp, EinsumAdMode::value_vjp,
                         EinsumAdMode::vjp_with_jvp})
    if (mode_name(m) == s) return m;
  return std::nullopt;
}

bool takes_tangents(EinsumAdMode mode) { return mode == EinsumAdMode::vjp_jvp || mode == EinsumAdMode::vjp_with_jvp; }

[[noreturn]] void fail_ad_attr(std::string_view attr, std::string_view text, std::string_view what) {
  fail(ErrorKind::parse, "'{}' attribute '{}': {} (got {})", kEinsumAdFamily, attr, what, quote_for_message(text));
}

void check_payload(const EinsumAdAttrs& p) {
  const int n = static_cast<int>(p.forward().subscripts().num_inputs());
  std::string slots = fmt::format("[{}]", fmt::join(p.slots(), ", "));
  if (p.slots().empty()) fail_ad_attr("slots", slots, "expected at least one operand index");
  for (size_t i = 0; i < p.slots().size(); ++i) {
    if (p.slots()[i] < 0 || p.slots()[i] >= n)
      fail_ad_attr("slots", slots, fmt::format("operand index {} is out of range for {} operands", p.slots()[i], n));
    if (i && p.slots()[i] <= p.slots()[i - 1])
      fail_ad_attr("slots", slots, "expected distinct operand indices in ascending order");
  }
  std::string tangents = fmt::format("[{}]", fmt::join(p.tangents(), ", "));
  if (!takes_tangents(p.mode())) {
    if (!p.tangents().empty())
      fail_ad_attr("tangents", tangents, fmt::format("only modes vjp_jvp and vjp_with_jvp take tangents, this is "
                                                     "mode {}", mode_name(p.mode())));
    return;
  }
  if (p.tangents().empty()) fail_ad_attr("tangents", tangents, "expected at least one index");
  for (size_t i = 0; i < p.tangents().size(); ++i) {
    if (p.tangents()[i] < 0 || p.tangents()[i] > n)
      fail_ad_attr("tangents", tangents, fmt::format("index {} is out of range: operands 0 to {}, {} for the "
                                                     "cotangent", p.tangents()[i], n - 1, n));
    if (i && p.tangents()[i] <= p.tangents()[i - 1])
      fail_ad_attr("tangents", tangents, "expected distinct indices in ascending order");
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
    case EinsumAdMode::vjp_jvp: return "vjp_jvp";
    case EinsumAdMode::value_vjp: return "value_vjp";
    case EinsumAdMode::vjp_with_jvp: return "vjp_with_jvp";
  }
  return "?";
}

EinsumAdAttrs::EinsumAdAttrs(EinsumPayload forward, EinsumAdMode mode, std::vector<int> slots,
                             std::vector<int> tangents)
    : forward_(std::move(forward)), mode_(mode), slots_(std::move(slots)), tangents_(std::move(tangents)) {
  check_payload(*this);
}

std::string EinsumAdAttrs::to_text() const {
  auto attrs = split_attribute_text(forward_.to_text());
  attrs.emplace_back("mode", std::string(mode_name(mode_)));
  attrs.emplace_back("slots", format_attr(Axes(slots_.begin(), slots_.end())));
  if (takes_tangents(mode_)) attrs.emplace_back("tangents", format_attr(Axes(tangents_.begin(), tangents_.end())));
  std::sort(attrs.begin(), attrs.end());
  std::string out;
  for (const auto& [key, value] : attrs) out += (out.empty() ? "" : ", ") + key + " = " + value;
  return out;
}

std::string EinsumAdAttrs::to_json() const {
  json j = json::parse(forward_.to_json());
  j["mode"] = std::string(mode_name(mode_));
  j["slots"] = slots_;
  if (takes_tangents(mode_)) j["tangents"] = tangents_;
  return j.dump();
}

bool EinsumAdAttrs::operator==(const EinsumAdAttrs& o) const {
  return mode_ == o.mode_ && slots_ == o.slots_ && tangents_ == o.tangents_ && forward_.attrs() == o.forward_.attrs();
}

EinsumAdAttrs EinsumAdAttrs::parse_text(std::string_view attr_text) {
  std::optional<EinsumAdMode> mode;
  std::optional<std::vector<int>> slots;
  std::vector<int> tangents;
  std::string rest;
  for (auto& [key, value] : split_attribute_text(attr_text)) {
    if (key == "mode") {
      mode = mode_from_name(value);
      if (!mode) fail_ad_attr("mode", value, "expected jvp, vjp, vjp_jvp, value_vjp or vjp_with_jvp");
    } else if (key == "slots") {
      slots = slots_from_text(value);
    } else if (key == "tangents") {
      tangents = slots_from_text(value);
    } else {
      rest += (rest.empty() ? "" : ", ") + key + " = " + value;
    }
  }
  if (!mode || !slots)
    fail(ErrorKind::parse, "'{}' needs the attributes mode and slots besides einsum's broadcast, plan and "
         "subscripts (got: {})", kEinsumAdFamily, quote_for_message(attr_text));
  return EinsumAdAttrs(*EinsumPayload::parse_text(rest), *mode, std::move(*slots), std::move(tangents));
}

EinsumAdAttrs EinsumAdAttrs::parse_json(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("mode") || !j["mode"].is_string() || !j.contains("slots") ||
      !j["slots"].is_array())
    fail(ErrorKind::parse, "'{}' payload: expected a JSON object with \"mode\" and \"slots\" besides einsum's "
         "fields (got {})", kEinsumAdFamily, quote_for_message(json_text));
  std::optional<EinsumAdMode> mode = mode_from_name(j["mode"].get<std::string>());
  if (!mode) fail_ad_attr("mode", j["mode"].dump(), "expected jvp, vjp, vjp_jvp, value_vjp or vjp_with_jvp");
  std::vector<int> slots;
  for (const json& v : j["slots"]) {
    if (!v.is_number_integer()) fail_ad_attr("slots", j["slots"].dump(), "expected operand indices");
    slots.push_back(v.get<int>());
  }
  std::vector<int> tangents;
  if (j.contains("tangents")) {
    if (!j["tangents"].is_array()) fail_ad_attr("tangents", j["tangents"].dump(), "expected indices");
    for (const json& v : j["tangents"]) {
      if (!v.is_number_integer()) fail_ad_attr("tangents", j["tangents"].dump(), "expected indices");
      tangents.push_back(v.get<int>());
    }
  }
  for (const char* key : {"mode", "slots", "tangents"}) j.erase(key);
  return EinsumAdAttrs(*EinsumPayload::parse_json(j.dump()), *mode, std::move(slots), std::move(tangents));
}

std::vector<TensorType> infer_einsum_ad_types(const EinsumAdPayload& p, Types operands, TypeContext& ctx) {
  const size_t n = p.forward().subscripts().num_inputs();
  const std::string shown = quote_for_message(p.forward().display());
  const size_t extra = p.mode() == EinsumAdMode::jvp ? p.slots().size() : 1 + p.tangents().size();
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
        ctx.unify(t.dims[a], x.dims[a], [&] { return fmt::format("tangent of operand {} axis {}", p.slots()[i], a); });
    }
    return {forward};
  }
  const TensorType& ct = operands[n];
  if (ct.rank() != forward.rank())
    ctx.error(ErrorKind::shape, "einsum {}: the output cotangent is {} but the output is {}; pass a cotangent of the "
              "output's shape", shown, ct.to_string(), forward.to_string());
  for (int a = 0; a < ct.rank(); ++a)
    ctx.unify(ct.dims[a], forward.dims[a], [&] { return fmt::format("cotangent axis {}", a); });
  for (size_t i = 0; i < p.tangents().size(); ++i) {  // vjp_jvp: each tangent has its operand's (or ct's) type
    const size_t of = static_cast<size_t>(p.tangents()[i]);
    const TensorType& x = of == n ? ct : primals[of];
    const TensorType& t = operands[n + 1 + i];
    const std::string what = of == n ? std::string("the cotangent") : fmt::format("operand {}", of);
    if (t.dtype != x.dtype || t.rank() != x.rank())
      ctx.error(ErrorKind::shape, "einsum {}: the tangent of {} is {} but {} is {}; a tangent has its value's type",
                shown, what, t.to_string(), what, x.to_string());
    for (int a = 0; a < x.rank(); ++a)
      ctx.unify(t.dims[a], x.dims[a], [&] { return fmt::format("tangent of {} axis {}", what, a); });
  }
  std::vector<TensorType> out;  // (value_vjp: the value first) each slot's cotangent has its operand's type
  if (p.mode() == EinsumAdMode::value_vjp) out.push_back(forward);
  for (int k : p.slots()) out.push_back(primals[static_cast<size_t>(k)]);
  if (p.mode() == EinsumAdMode::vjp_with_jvp)  // then the tangent of each
    for (int k : p.slots()) out.push_back(primals[static_cast<size_t>(k)]);
  return out;
}

}  // namespace einstage::einsum
