#include "ir/Json.h"

#include "ir/AttrText.h"
#include "ir/Extension.h"
#include "ir/Quote.h"
#include "ir/Verifier.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace einstage {

using nlohmann::json;

namespace {

constexpr std::string_view kFormat = "einstage.ir";
constexpr int kVersion = 1;

[[noreturn]] void malformed(std::string_view where, std::string_view what) {
  fail(ErrorKind::parse, "malformed JSON program: {}: {}", where, what);
}

// ---- attribute values ----

json to_json_attr(int64_t v) { return v; }
json to_json_attr(const Axes& v) { return v; }
json to_json_attr(DType v) { return std::string(name(v)); }
json to_json_attr(Comparison v) { return std::string(name(v)); }
json to_json_attr(const std::vector<Dim>& v) {
  json a = json::array();
  for (const Dim& d : v) a.push_back(d.is_constant() ? json(d.constant()) : json(d.to_string()));
  return a;
}
template <typename R> json real_to_json(R v) {
  if (std::isfinite(v)) return static_cast<double>(v);
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}
json to_json_attr(double v) { return real_to_json(v); }
json to_json_attr(const Tensor& t) {
  json data = json::array();
  dispatch_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (t.numel() == 0) return;
    for (const T& x : t.to_col_major<T>()) {
      if constexpr (std::is_same_v<T, int64_t>) data.push_back(x);
      else if constexpr (std::is_floating_point_v<T>) data.push_back(real_to_json(x));
      else data.push_back(json::array({real_to_json(x.real()), real_to_json(x.imag())}));
    }
  });
  std::string type = format_attr(t);
  return {{"type", type.substr(0, type.find('<'))}, {"data", std::move(data)}};
}

void from_json_attr(const json& j, int64_t& out, const std::string& where) {
  if (!j.is_number_integer()) malformed(where, "expected an integer");
  out = j.get<int64_t>();
}
void from_json_attr(const json& j, Axes& out, const std::string& where) {
  if (!j.is_array()) malformed(where, "expected an array of integers");
  Axes r;
  for (const json& e : j) {
    if (!e.is_number_integer()) malformed(where, fmt::format("{} is not an integer", e.dump()));
    r.push_back(e.get<int64_t>());
  }
  out = std::move(r);
}
void from_json_attr(const json& j, DType& out, const std::string& where) {
  auto d = j.is_string() ? parse_dtype(j.get<std::string>()) : std::nullopt;
  if (!d) malformed(where, fmt::format("{} is not a dtype (f32, f64, c64, c128, i64)", j.dump()));
  out = *d;
}
void from_json_attr(const json& j, Comparison& out, const std::string& where) {
  auto c = j.is_string() ? parse_comparison(j.get<std::string>()) : std::nullopt;
  if (!c) malformed(where, fmt::format("{} is not a comparison (lt, le, gt, ge, eq, ne)", j.dump()));
  out = *c;
}
void from_json_attr(const json& j, std::vector<Dim>& out, const std::string& where) {
  if (!j.is_array()) malformed(where, "expected an array of extents");
  std::vector<Dim> r;
  for (const json& e : j) {
    std::optional<Dim> d;
    if (e.is_number_integer() && e.get<int64_t>() >= 0) d = Dim(e.get<int64_t>());
    else if (e.is_string()) d = Dim::parse(e.get<std::string>());
    if (!d) malformed(where, fmt::format("{} is not an extent (a non-negative integer or a symbol)", e.dump()));
    r.push_back(*d);
  }
  out = std::move(r);
}
template <typename R> R real_from_json(const json& e, const std::string& where) {
  if (e.is_number()) return static_cast<R>(e.get<double>());
  if (e.is_string()) {
    std::string s = e.get<std::string>();
    if (s == "nan") return std::numeric_limits<R>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<R>::infinity();
    if (s == "-inf") return -std::numeric_limits<R>::infinity();
  }
  malformed(where, fmt::format("{} is not a number", e.dump()));
}
void from_json_attr(const json& j, double& out, const std::string& where) { out = real_from_json<double>(j, where); }
void from_json_attr(const json& j, Tensor& out, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j.contains("data") || !j["type"].is_string() || !j["data"].is_array())
    malformed(where, "expected a tensor {\"type\": \"f64[2]\", \"data\": [...]}");
  auto type = TensorType::parse(j["type"].get<std::string>());
  auto shape = type ? type->constant_shape() : std::nullopt;
  if (!shape) malformed(where, fmt::format("{} is not a constant tensor type", j["type"].dump()));
  const json& data = j["data"];
  if (static_cast<int64_t>(data.size()) != element_count(*shape))
    malformed(where, fmt::format("a {} tensor needs {} elements but {} are given", type->to_string(),
                                 element_count(*shape), data.size()));
  out = dispatch_dtype(type->dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v;
    for (const json& e : data) {
      if constexpr (std::is_same_v<T, int64_t>) {
        if (!e.is_number_integer()) malformed(where, fmt::format("{} is not an integer", e.dump()));
        v.push_back(e.get<int64_t>());
      } else if constexpr (std::is_floating_point_v<T>) {
        v.push_back(real_from_json<T>(e, where));
      } else {
        using R = typename T::value_type;
        if (!e.is_array() || e.size() != 2) malformed(where, fmt::format("{} is not a complex [re, im]", e.dump()));
        v.push_back(T(real_from_json<R>(e[0], where), real_from_json<R>(e[1], where)));
      }
    }
    return Tensor::from_col_major<T>(*shape, std::span<const T>(v));
  });
}

json op_attributes(const Op& op) {
  return std::visit(
      [](const auto& o) -> json {
        using T = std::decay_t<decltype(o)>;
        json a = json::object();
        if constexpr (!std::is_same_v<T, ExtensionOp>)
          std::apply([&](const auto&... f) { ((a[std::string(f.name)] = to_json_attr(o.*(f.member))), ...); },
                     T::attrs());
        return a;
      },
      op);
}

void read_attributes(Op& op, const json& attrs, const std::string& where) {
  std::visit(
      [&](auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (!std::is_same_v<T, ExtensionOp>) {
          if (!attrs.is_object()) malformed(where, "\"attributes\" must be an object");
          size_t known = 0;
          std::apply(
              [&](const auto&... f) {
                (([&] {
                   std::string key(f.name);
                   if (!attrs.contains(key))
                     malformed(where, fmt::format("'{}' is missing attribute '{}'", T::kName, key));
                   from_json_attr(attrs[key], o.*(f.member), fmt::format("{}.attributes.{}", where, key));
                   ++known;
                 }()),
                 ...);
              },
              T::attrs());
          if (attrs.size() != known)
            for (const auto& [key, value] : attrs.items()) {
              bool ok = false;
              std::apply([&](const auto&... f) { ((ok = ok || f.name == key), ...); }, T::attrs());
              if (!ok) malformed(where, fmt::format("'{}' has no attribute '{}'", T::kName, key));
            }
        }
      },
      op);
}

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) malformed(where, fmt::format("missing \"{}\"", key));
  return j[key];
}
std::string string_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) malformed(where, fmt::format("\"{}\" must be a string", key));
  return v.get<std::string>();
}
TensorType type_field(const json& j, const std::string& where) {
  std::string t = string_field(j, "type", where);
  auto type = TensorType::parse(t);
  if (!type) malformed(where, fmt::format("'{}' is not a tensor type like f64[n,4]", escape_for_message(t, '\'')));
  return *type;
}

}  // namespace

std::string program_to_json(const Program& p, int indent) {
  auto names = value_names(p);
  auto ref = [&](ValueId id) { return names.count(id) ? names[id] : fmt::format("%?{}", id); };
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["name"] = p.name;
  j["params"] = json::array();
  for (const Parameter& par : p.params) j["params"].push_back({{"name", par.name}, {"type", par.value.type.to_string()}});
  j["instructions"] = json::array();
  size_t printed = 0;  // results so far
  for (size_t i = 0; i < p.instructions.size(); printed += p.instructions[i++].results.size()) {
    const Instruction& inst = p.instructions[i];
    json e;
    // One result: "result" and "type"; several: "results" and "types", arrays in the same order.
    if (inst.results.size() == 1) {
      e["result"] = fmt::format("%{}", printed);
    } else {
      e["results"] = json::array();
      for (size_t r = 0; r < inst.results.size(); ++r) e["results"].push_back(fmt::format("%{}", printed + r));
    }
    e["op"] = std::string(op_name(inst.op));
    e["operands"] = json::array();
    for (const Value& v : inst.operands) e["operands"].push_back(ref(v.id));
    if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) {
      try {
        e["payload"] = json::parse(ext->payload->to_json());
      } catch (const json::exception& err) {
        fail(ErrorKind::invalid_argument, "'{}' at %{} in @{}: the payload's to_json() is not valid JSON ({})",
             ext->family(), printed, p.name, err.what());
      }
    } else {
      e["attributes"] = op_attributes(inst.op);
    }
    if (inst.results.size() == 1) {
      e["type"] = inst.results[0].type.to_string();
    } else {
      e["types"] = json::array();
      for (const Value& r : inst.results) e["types"].push_back(r.type.to_string());
    }
    j["instructions"].push_back(std::move(e));
  }
  j["constraints"] = json::array();
  for (const ShapeConstraint& c : p.constraints) {
    json e = {{"lhs", c.lhs.to_string()}, {"rhs", c.rhs.to_string()}, {"what", c.what}};
    if (c.at >= 0) e["at"] = ref(c.at);
    j["constraints"].push_back(std::move(e));
  }
  j["outputs"] = json::array();
  for (const Value& v : p.outputs) j["outputs"].push_back(ref(v.id));
  try {
    return j.dump(indent);
  } catch (const json::type_error& e) {  // a string that is not UTF-8 (the text form and the builder accept any bytes)
    std::string_view what = e.what();
    what.remove_prefix(std::min(what.find("] ") + 2, what.size()));
    fail(ErrorKind::invalid_argument,
         "program @{} cannot be written as JSON: a string in it is not valid UTF-8 ({}); JSON holds UTF-8 text only, "
         "so re-encode its names and constraint texts as UTF-8", p.name, what);
  }
}

Program program_from_json(std::string_view text, const ExtensionRegistry* registry) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorKind::parse, "malformed JSON program: not valid JSON ({})", e.what());
  }
  if (!j.is_object()) malformed("top level", "expected an object");
  if (!j.contains("format") || j["format"] != kFormat)
    malformed("format", fmt::format("expected \"format\": \"{}\"", kFormat));
  if (!j.contains("version") || j["version"] != kVersion)
    malformed("version", fmt::format("expected \"version\": {} (this build reads version {} only)", kVersion, kVersion));
  std::string name = string_field(j, "name", "top level");
  Builder b = [&] {
    try {
      return Builder(name, registry);
    } catch (const Error& e) {
      malformed("name", e.what());
    }
  }();
  std::map<std::string, Value> values;
  auto lookup = [&](const json& r, const std::string& where) {
    if (!r.is_string() || !values.count(r.get<std::string>()))
      malformed(where, fmt::format("use of undefined value {}", r.dump()));
    return values[r.get<std::string>()];
  };
  auto array = [&](const json& obj, const char* key, const std::string& where) -> const json& {
    const json& a = field(obj, key, where);
    if (!a.is_array()) malformed(where, fmt::format("\"{}\" must be an array", key));
    return a;
  };
  const json& params = array(j, "params", "top level");
  for (size_t i = 0; i < params.size(); ++i) {
    std::string where = fmt::format("params[{}]", i);
    std::string pname = string_field(params[i], "name", where);
    TensorType type = type_field(params[i], where);
    try {
      values[fmt::format("%{}", pname)] = b.parameter(pname, type);
    } catch (const Error& e) {
      malformed(where, e.what());
    }
  }
  const json& insts = array(j, "instructions", "top level");
  size_t printed = 0;  // results so far
  for (size_t i = 0; i < insts.size(); ++i) {
    std::string where = fmt::format("instructions[{}]", i);
    const json& e = insts[i];
    // "result" + "type" for one result, "results" + "types" (arrays of equal length) for several.
    const bool several = e.is_object() && e.contains("results");
    if (several && (e.contains("result") || e.contains("type")))
      malformed(where, "give either \"result\" and \"type\" (one result) or \"results\" and \"types\" (several), "
                "not both");
    std::vector<std::string> results;
    std::vector<TensorType> types;
    if (several) {
      const json& rs = array(e, "results", where);
      const json& ts = array(e, "types", where);
      if (rs.empty() || rs.size() != ts.size())
        malformed(where, fmt::format("\"results\" has {} entries and \"types\" {}; give one type per result, at least "
                                     "one", rs.size(), ts.size()));
      for (size_t r = 0; r < rs.size(); ++r) {
        std::string rw = fmt::format("{}.results[{}]", where, r);
        if (!rs[r].is_string()) malformed(rw, "expected a string");
        results.push_back(rs[r].get<std::string>());
        json holder = {{"type", ts[r]}};
        types.push_back(type_field(holder, fmt::format("{}.types[{}]", where, r)));
      }
    } else {
      results.push_back(string_field(e, "result", where));
      types.push_back(type_field(e, where));
    }
    for (size_t r = 0; r < results.size(); ++r)
      if (results[r] != fmt::format("%{}", printed + r))
        malformed(where, fmt::format("expected result \"%{}\", got {}", printed + r, quote_for_message(results[r])));
    std::string opname = string_field(e, "op", where);
    std::vector<Value> operands;
    const json& ops = array(e, "operands", where);
    for (size_t k = 0; k < ops.size(); ++k) operands.push_back(lookup(ops[k], fmt::format("{}.operands[{}]", where, k)));
    Op op;
    if (auto kind = std_op_from_name(opname)) {
      op = make_std_op(*kind);
      read_attributes(op, field(e, "attributes", where), where);
    } else {
      if (opname.find('.') == std::string::npos)
        malformed(where, fmt::format("unknown op '{}'", escape_for_message(opname, '\'')));
      const ExtensionSemantics* sem = registry ? registry->find(opname) : nullptr;
      if (!sem) fail_unknown_family(opname, fmt::format("JSON program {}", where));
      std::unique_ptr<ExtensionPayload> payload;
      try {
        payload = sem->parse_json(field(e, "payload", where).dump());
      } catch (const Error& err) {
        malformed(where + ".payload", err.what());
      }
      op = ExtensionOp{std::shared_ptr<const ExtensionPayload>(std::move(payload))};
    }
    std::vector<Value> vs;
    try {
      vs = b.emit_results(std::move(op), std::move(operands));
    } catch (const Error& err) {
      throw Error(err.kind(), fmt::format("JSON program {}: {}", where, err.what()));
    }
    if (vs.size() != results.size())
      malformed(where, fmt::format("'{}' gives {} result{} but {} {} recorded", opname, vs.size(),
                                   vs.size() == 1 ? "" : "s", results.size(), results.size() == 1 ? "is" : "are"));
    for (size_t r = 0; r < vs.size(); ++r) {
      if (vs[r].type != types[r])
        malformed(where, fmt::format("'{}'{} is recorded with type {} but its type rule gives {}", opname,
                                     vs.size() == 1 ? "" : fmt::format(" result {}", r), types[r].to_string(),
                                     vs[r].type.to_string()));
      values[results[r]] = vs[r];
    }
    printed += vs.size();
  }
  std::vector<ShapeConstraint> constraints;
  const json& cs = array(j, "constraints", "top level");
  for (size_t i = 0; i < cs.size(); ++i) {
    std::string where = fmt::format("constraints[{}]", i);
    auto lhs = Dim::parse(string_field(cs[i], "lhs", where)), rhs = Dim::parse(string_field(cs[i], "rhs", where));
    if (!lhs || !rhs) malformed(where, "\"lhs\" and \"rhs\" must be extents");
    ShapeConstraint c{*lhs, *rhs, -1, string_field(cs[i], "what", where)};
    if (cs[i].contains("at")) c.at = lookup(cs[i]["at"], where + ".at").id;
    constraints.push_back(std::move(c));
  }
  std::vector<Value> outs;
  const json& o = array(j, "outputs", "top level");
  for (size_t k = 0; k < o.size(); ++k) outs.push_back(lookup(o[k], fmt::format("outputs[{}]", k)));
  Program p = b.finish(std::move(outs));
  merge_listed_constraints(p, std::move(constraints));
  verify(p, registry);
  return p;
}

}  // namespace einstage
