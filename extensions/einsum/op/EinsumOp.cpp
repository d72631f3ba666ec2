// `einstage.einsum.v1`: payload text/JSON forms, equality and hash, the type rule, and the registration call.
#include "extensions/einsum/op/EinsumOp.h"

#include "extensions/einsum/notation/BindRule.h"
#include "extensions/einsum/notation/Notation.h"
#include "ir/AttrText.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace einstage::einsum {

namespace {

using json = nlohmann::json;

// The plain string when it reads back to exactly these labels and names, else nullopt (then the JSON form is used).
std::optional<std::string> plain_string(const Subscripts& s) {
  if (!s.ellipsis.empty()) return std::nullopt;
  std::string text = to_string(s);
  try {
    Subscripts back = parse_subscripts(text);
    if (back.inputs != s.inputs || back.output != s.output) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  // A name that differs from the label's own character would be lost.
  for (const auto& [label, name] : s.names) {
    Subscripts bare;
    if (label_name(bare, label) != name) return std::nullopt;
  }
  return text;
}

json subscripts_json(const Subscripts& s) {
  json j = json::object();
  j["inputs"] = s.inputs;
  j["output"] = s.output;
  j["ellipsis"] = s.ellipsis;
  json names = json::object();
  for (const auto& [label, name] : s.names) names[std::to_string(label)] = name;
  j["names"] = names;
  return j;
}

// The value of the `subscripts` attribute / JSON field: a string, or the exact integer form.
json subscripts_value(const Subscripts& s) {
  if (auto plain = plain_string(s)) return *plain;
  return subscripts_json(s);
}

[[noreturn]] void fail_attr(std::string_view attr, std::string_view text, std::string_view what) {
  fail(ErrorKind::parse, "'{}' attribute '{}': {} (got {})", kEinsumFamily, attr, what, text);
}

Label json_label(const json& v, std::string_view text) {
  if (!v.is_number_integer()) fail_attr("subscripts", text, "labels must be integers");
  int64_t l = v.get<int64_t>();
  if (l < 0 || l > kFreshLabelTop) fail_attr("subscripts", text, "labels must be in 0..2147483647");
  return static_cast<Label>(l);
}

Subscripts subscripts_from_value(const json& v, std::string_view text) {
  if (v.is_string()) {
    try {
      return parse_subscripts(v.get<std::string>());
    } catch (const Error& e) {
      fail_attr("subscripts", text, e.what());
    }
  }
  if (!v.is_object() || !v.contains("inputs") || !v.contains("output") || !v["inputs"].is_array() ||
      !v["output"].is_array())
    fail_attr("subscripts", text, "expected a string \"ij,jk->ik\" or an object with \"inputs\" and \"output\"");
  std::vector<std::vector<Label>> inputs;
  for (const json& term : v["inputs"]) {
    if (!term.is_array()) fail_attr("subscripts", text, "every input term must be an array of labels");
    std::vector<Label> t;
    for (const json& l : term) t.push_back(json_label(l, text));
    inputs.push_back(std::move(t));
  }
  std::vector<Label> output;
  for (const json& l : v["output"]) output.push_back(json_label(l, text));
  Subscripts s;
  try {
    s = make_subscripts(std::move(inputs), std::move(output));
  } catch (const Error& e) {
    fail_attr("subscripts", text, e.what());
  }
  if (v.contains("ellipsis")) {
    if (!v["ellipsis"].is_array()) fail_attr("subscripts", text, "\"ellipsis\" must be an array of labels");
    for (const json& l : v["ellipsis"]) s.ellipsis.push_back(json_label(l, text));
  }
  if (v.contains("names")) {
    if (!v["names"].is_object()) fail_attr("subscripts", text, "\"names\" must map labels to strings");
    for (const auto& [key, name] : v["names"].items()) {
      if (!name.is_string()) fail_attr("subscripts", text, "\"names\" must map labels to strings");
      Label l = 0;
      try {
        size_t used = 0;
        long long parsed = std::stoll(key, &used);
        if (used != key.size() || parsed < 0 || parsed > kFreshLabelTop) throw std::out_of_range(key);
        l = static_cast<Label>(parsed);
      } catch (const std::exception&) {
        fail_attr("subscripts", text, fmt::format("\"names\" key '{}' is not a label", key));
      }
      s.names[l] = name.get<std::string>();
    }
  }
  return s;
}

PlanSpec plan_from_text(std::string_view text) {
  try {
    return PlanSpec::parse(text);
  } catch (const Error& e) {
    fail_attr("plan", text, e.what());
  }
}

bool bool_from_text(std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  fail_attr("broadcast", text, "expected true or false");
}

// The shape rule's policy over ir Dims: constants are decided, anything symbolic becomes a recorded equality.
struct DimRules {
  TypeContext& ctx;
  detail::ExtentCmp compare(const Dim& a, const Dim& b) const {
    if (a == b) return detail::ExtentCmp::equal;
    if (a.is_constant() && b.is_constant()) return detail::ExtentCmp::differ;
    return detail::ExtentCmp::undecided;
  }
  bool is_one(const Dim& d) const { return d.is_constant() && d.constant() == 1; }
  bool negative(const Dim& d) const { return d.is_constant() && d.constant() < 0; }
  std::string text(const Dim& d) const { return d.to_string(); }
  Dim assume_equal(const Dim& a, const Dim& b, const std::string& what) const { return ctx.unify(a, b, what); }
};

}  // namespace

EinsumAttrs::EinsumAttrs(Subscripts subscripts, PlanSpec plan, bool broadcast,
                         std::optional<std::vector<Dim>> output_shape)
    : subscripts_(std::move(subscripts)), plan_(std::move(plan)), broadcast_(broadcast),
      output_shape_(std::move(output_shape)) {}

std::string EinsumAttrs::display() const { return to_string(subscripts_); }

std::string EinsumAttrs::to_text() const {
  json sub = subscripts_value(subscripts_);
  std::string out = fmt::format("broadcast = {}", broadcast_ ? "true" : "false");
  if (output_shape_) out += ", output_shape = " + format_attr(*output_shape_);
  out += ", plan = " + plan_.to_string();
  out += ", subscripts = " + (sub.is_string() ? format_string_literal(sub.get<std::string>()) : sub.dump());
  return out;
}

std::string EinsumAttrs::to_json() const {
  json j = json::object();
  j["broadcast"] = broadcast_;
  j["plan"] = plan_.to_string();
  j["subscripts"] = subscripts_value(subscripts_);
  if (output_shape_) {
    json dims = json::array();
    for (const Dim& d : *output_shape_) {
      if (d.is_constant())
        dims.push_back(d.constant());
      else
        dims.push_back(d.to_string());
    }
    j["output_shape"] = dims;
  }
  return j.dump();
}

bool EinsumAttrs::operator==(const EinsumAttrs& o) const {
  return subscripts_ == o.subscripts_ && subscripts_.names == o.subscripts_.names && plan_ == o.plan_ &&
         broadcast_ == o.broadcast_ && output_shape_ == o.output_shape_;
}

EinsumAttrs EinsumAttrs::parse_text(std::string_view attr_text) {
  std::optional<Subscripts> subs;
  std::optional<PlanSpec> plan;
  std::optional<bool> broadcast;
  std::optional<std::vector<Dim>> output_shape;
  for (auto& [key, value] : split_attribute_text(attr_text)) {
    if (key == "subscripts") {
      json v;
      if (auto lit = parse_string_literal(value)) {
        v = *lit;
      } else {
        v = json::parse(value, nullptr, false);
        if (v.is_discarded()) fail_attr("subscripts", value, "expected a string literal or a JSON object");
      }
      subs = subscripts_from_value(v, value);
    } else if (key == "plan") {
      plan = plan_from_text(value);
    } else if (key == "broadcast") {
      broadcast = bool_from_text(value);
    } else if (key == "output_shape") {
      std::vector<Dim> dims;
      parse_attr(value, dims, fmt::format("attribute 'output_shape' of '{}'", kEinsumFamily));
      output_shape = std::move(dims);
    } else {
      fail(ErrorKind::parse, "'{}' has no attribute '{}'; it takes broadcast, output_shape (optional), plan, "
           "subscripts", kEinsumFamily, key);
    }
  }
  if (!subs || !plan || !broadcast)
    fail(ErrorKind::parse, "'{}' needs the attributes broadcast, plan and subscripts (got: {})", kEinsumFamily,
         attr_text);
  return EinsumAttrs(std::move(*subs), std::move(*plan), *broadcast, std::move(output_shape));
}

EinsumAttrs EinsumAttrs::parse_json(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(ErrorKind::parse, "'{}' payload: expected a JSON object (got {})", kEinsumFamily, json_text);
  for (const char* key : {"subscripts", "plan", "broadcast"})
    if (!j.contains(key)) fail(ErrorKind::parse, "'{}' payload: missing \"{}\" (got {})", kEinsumFamily, key, json_text);
  if (!j["plan"].is_string()) fail_attr("plan", j["plan"].dump(), "expected a string such as \"auto\"");
  if (!j["broadcast"].is_boolean()) fail_attr("broadcast", j["broadcast"].dump(), "expected true or false");
  for (const auto& [key, v] : j.items())
    if (key != "subscripts" && key != "plan" && key != "broadcast" && key != "output_shape")
      fail(ErrorKind::parse, "'{}' payload: unknown key \"{}\"", kEinsumFamily, key);
  std::optional<std::vector<Dim>> output_shape;
  if (j.contains("output_shape")) {
    if (!j["output_shape"].is_array()) fail_attr("output_shape", j["output_shape"].dump(), "expected an array");
    std::vector<Dim> dims;
    for (const json& d : j["output_shape"]) {
      std::optional<Dim> dim;
      if (d.is_number_integer() && d.get<int64_t>() >= 0) dim = Dim(d.get<int64_t>());
      if (d.is_string()) dim = Dim::parse(d.get<std::string>());
      if (!dim) fail_attr("output_shape", d.dump(), "expected an extent (integer >= 0) or a dim such as \"n\"");
      dims.push_back(*dim);
    }
    output_shape = std::move(dims);
  }
  return EinsumAttrs(subscripts_from_value(j["subscripts"], j["subscripts"].dump()),
                     plan_from_text(j["plan"].get<std::string>()), j["broadcast"].get<bool>(), std::move(output_shape));
}

TensorType infer_einsum_type(const EinsumPayload& payload, Types operands, TypeContext& ctx) {
  const Subscripts& s = payload.subscripts();
  if (operands.empty()) ctx.error(ErrorKind::invalid_argument, "einsum needs at least one operand");
  DType dtype = operands[0].dtype;
  for (const TensorType& t : operands) dtype = promote(dtype, t.dtype);
  std::vector<std::vector<Dim>> shapes;
  for (const TensorType& t : operands) shapes.push_back(t.dims);
  DimRules rules{ctx};
  const std::string shown = payload.display();
  auto fail_shape = [&](const std::vector<std::pair<size_t, size_t>>&, const std::string& message) {
    ctx.error(ErrorKind::shape, "einsum {}: {}", quote_for_message(shown), message);
  };
  auto bound = detail::bind_label_extents<Dim>(s, std::span<const std::vector<Dim>>(shapes), payload.broadcast(),
                                               rules, fail_shape);
  TensorType result{dtype, std::move(bound.output)};
  if (const auto& hint = payload.output_shape()) {
    if (hint->size() != result.dims.size())
      ctx.error(ErrorKind::shape, "einsum {}: the output-shape hint [{}] has {} dims but the output has {} labels",
                quote_for_message(shown), fmt::join(*hint, ", "), hint->size(), result.dims.size());
    for (size_t a = 0; a < hint->size(); ++a)
      result.dims[a] = ctx.unify((*hint)[a], result.dims[a],
                                 fmt::format("output axis {} (label '{}'): hint vs operands", a,
                                             label_name(s, s.output[a])));
  }
  return result;
}

}  // namespace einstage::einsum
