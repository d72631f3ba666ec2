// `einstage.linalg.v1`: payload text/JSON forms, equality and hash, the type rule, and the registration call.
#include "extensions/linalg/LinalgOp.h"

#include "extensions/linalg/LinalgAd.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>

namespace einstage::linalg {

namespace {

using json = nlohmann::json;

constexpr std::string_view kAttrs =
    "op (svd, qr, eigh, inv_upper or gap_factors), full (svd only), keep (svd and eigh), diagonal (gap_factors only), "
    "eps (svd, eigh and gap_factors)";
constexpr std::string_view kOps = "svd, qr, eigh, inv_upper or gap_factors";

bool has_eps(LinalgKind kind) {
  return kind == LinalgKind::svd || kind == LinalgKind::eigh || kind == LinalgKind::gap_factors;
}

std::optional<LinalgKind> kind_of(std::string_view text) {
  for (LinalgKind k :
       {LinalgKind::svd, LinalgKind::qr, LinalgKind::eigh, LinalgKind::inv_upper, LinalgKind::gap_factors})
    if (name(k) == text) return k;
  return std::nullopt;
}

// The one check of which attributes an op takes, shared by both readers.
LinalgAttrs make_checked(std::optional<LinalgKind> kind, std::optional<bool> full, std::optional<double> eps,
                         std::optional<int64_t> keep, std::optional<bool> diagonal, std::string_view got) {
  if (!kind) fail(ErrorKind::parse, "'{}' needs the attribute op = {} (got: {})", kLinalgFamily, kOps, got);
  if (full && *kind != LinalgKind::svd)
    fail(ErrorKind::parse, "'{}' op = {} takes no attribute 'full'; only svd does (got: {})", kLinalgFamily,
         name(*kind), got);
  if (eps && !has_eps(*kind))
    fail(ErrorKind::parse, "'{}' op = {} takes no attribute 'eps'; only svd, eigh and gap_factors do (got: {})", kLinalgFamily,
         name(*kind), got);
  if (eps && !(*eps >= 0))
    fail(ErrorKind::parse, "'{}' attribute 'eps' must be a number >= 0 (got {})", kLinalgFamily, *eps);
  if (keep && *kind != LinalgKind::svd && *kind != LinalgKind::eigh)
    fail(ErrorKind::parse, "'{}' op = {} takes no attribute 'keep'; only svd and eigh do (got: {})", kLinalgFamily,
         name(*kind), got);
  if (keep && *keep < 1)
    fail(ErrorKind::parse, "'{}' attribute 'keep' must be at least 1 (got {}); leave it out for the unsplit {}",
         kLinalgFamily, *keep, name(*kind));
  if (keep && full.value_or(false))
    fail(ErrorKind::parse, "'{}' svd takes 'keep' or 'full = true', not both (got: {})", kLinalgFamily, got);
  if (diagonal && *kind != LinalgKind::gap_factors)
    fail(ErrorKind::parse, "'{}' op = {} takes no attribute 'diagonal'; only gap_factors does (got: {})",
         kLinalgFamily, name(*kind), got);
  return LinalgAttrs(*kind, full.value_or(false), eps.value_or(kDefaultEps), keep.value_or(0),
                     diagonal.value_or(false));
}

// K = min(M, N): known when both extents are constants or they are the same dim.
Dim min_extent(const Dim& m, const Dim& n, std::string_view op, const TensorType& a, TypeContext& ctx) {
  if (m == n) return m;
  if (m.is_constant() && n.is_constant()) return Dim(std::min(m.constant(), n.constant()));
  ctx.error(ErrorKind::shape, "{}: operand 0 has type {}, and min({}, {}) has no symbolic form; give the matrix "
            "constant extents or the same symbol for both", op, a.to_string(), m.to_string(), n.to_string());
}

std::vector<Dim> with_batch(std::vector<Dim> head, const TensorType& a) {
  head.insert(head.end(), a.dims.begin() + 2, a.dims.end());
  return head;
}

// gap_factors: s_I [I, B...] and s_J [J, B...], real, the same batch axes -> H⁺, H⁻ [I, J, B...].
std::vector<TensorType> infer_gap_factors(const LinalgPayload& p, Types operands, TypeContext& ctx) {
  if (operands.size() != 2)
    ctx.error(ErrorKind::invalid_argument, "gap_factors takes 2 operands (singular values s_I [I, B...] and s_J "
              "[J, B...]) but {} were given", operands.size());
  const TensorType &si = operands[0], &sj = operands[1];
  for (int o = 0; o < 2; ++o) {
    const TensorType& s = operands[static_cast<size_t>(o)];
    if (s.dtype != DType::f32 && s.dtype != DType::f64)
      ctx.error(ErrorKind::dtype, "gap_factors: operand {} has type {}; expected f32 or f64 (singular values are "
                "real)", o, s.to_string());
    if (s.rank() < 1)
      ctx.error(ErrorKind::shape, "gap_factors: operand {} has type {}; expected a vector [K, B...] of rank 1 or "
                "more", o, s.to_string());
  }
  if (si.dtype != sj.dtype || si.rank() != sj.rank())
    ctx.error(ErrorKind::shape, "gap_factors: operands {} and {} differ in dtype or rank; expected the same dtype "
              "and batch axes", si.to_string(), sj.to_string());
  std::vector<Dim> dims{si.dims[0], p.diagonal() ? ctx.unify(si.dims[0], sj.dims[0], [] {
    return std::string("gap_factors with diagonal = true: operand 0's axis 0 vs operand 1's axis 0");
  }) : sj.dims[0]};
  for (int a = 1; a < si.rank(); ++a)
    dims.push_back(ctx.unify(si.dims[static_cast<size_t>(a)], sj.dims[static_cast<size_t>(a)],
                             [&] { return fmt::format("gap_factors: batch axis {} of operand 0 vs operand 1", a); }));
  return {TensorType{si.dtype, dims}, TensorType{si.dtype, dims}};
}

}  // namespace

std::string_view name(LinalgKind kind) {
  switch (kind) {
    case LinalgKind::svd: return "svd";
    case LinalgKind::qr: return "qr";
    case LinalgKind::inv_upper: return "inv_upper";
    case LinalgKind::eigh: return "eigh";
    case LinalgKind::gap_factors: return "gap_factors";
  }
  return "?";
}

LinalgAttrs::LinalgAttrs(LinalgKind kind, bool full, double eps, int64_t keep, bool diagonal)
    : kind_(kind), full_(full), eps_(eps), keep_(keep), diagonal_(diagonal) {}

std::string LinalgAttrs::to_text() const {
  switch (kind_) {
    case LinalgKind::svd:
      return fmt::format("eps = {}, full = {}, {}op = svd", format_float(eps_), full_ ? "true" : "false",
                         keep_ > 0 ? fmt::format("keep = {}, ", keep_) : "");
    case LinalgKind::qr:
    case LinalgKind::inv_upper: return fmt::format("op = {}", name(kind_));
    case LinalgKind::eigh:
      return fmt::format("eps = {}, {}op = eigh", format_float(eps_), keep_ > 0 ? fmt::format("keep = {}, ", keep_) : "");
    case LinalgKind::gap_factors:
      return fmt::format("diagonal = {}, eps = {}, op = gap_factors", diagonal_ ? "true" : "false",
                         format_float(eps_));
  }
  return {};
}

std::string LinalgAttrs::to_json() const {
  json j = json::object();
  j["op"] = std::string(name(kind_));
  if (kind_ == LinalgKind::svd) j["full"] = full_;
  if (kind_ == LinalgKind::gap_factors) j["diagonal"] = diagonal_;
  if (keep_ > 0) j["keep"] = keep_;
  if (has_eps(kind_)) j["eps"] = eps_;
  return j.dump();
}

bool LinalgAttrs::operator==(const LinalgAttrs& o) const {
  return kind_ == o.kind_ && full_ == o.full_ && eps_ == o.eps_ && keep_ == o.keep_ && diagonal_ == o.diagonal_;
}

LinalgAttrs LinalgAttrs::parse_text(std::string_view attr_text) {
  std::optional<LinalgKind> kind;
  std::optional<bool> full;
  std::optional<double> eps;
  std::optional<int64_t> keep;
  std::optional<bool> diagonal;
  for (const auto& [key, value] : split_attribute_text(attr_text)) {
    if (key == "op") {
      kind = kind_of(value);
      if (!kind) fail(ErrorKind::parse, "'{}' attribute 'op': expected {} (got {})", kLinalgFamily, kOps, value);
    } else if (key == "full") {
      if (value != "true" && value != "false")
        fail(ErrorKind::parse, "'{}' attribute 'full': expected true or false (got {})", kLinalgFamily, value);
      full = value == "true";
    } else if (key == "diagonal") {
      if (value != "true" && value != "false")
        fail(ErrorKind::parse, "'{}' attribute 'diagonal': expected true or false (got {})", kLinalgFamily, value);
      diagonal = value == "true";
    } else if (key == "eps") {
      eps = parse_double(value);
      if (!eps) fail(ErrorKind::parse, "'{}' attribute 'eps': expected a number such as 1e-12 (got {})",
                     kLinalgFamily, value);
    } else if (key == "keep") {
      int64_t k = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), k);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size())
        fail(ErrorKind::parse, "'{}' attribute 'keep': expected an integer such as 16 (got {})", kLinalgFamily, value);
      keep = k;
    } else {
      fail(ErrorKind::parse, "'{}' has no attribute '{}'; it takes {}", kLinalgFamily, key, kAttrs);
    }
  }
  return make_checked(kind, full, eps, keep, diagonal, attr_text);
}

LinalgAttrs LinalgAttrs::parse_json(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(ErrorKind::parse, "'{}' payload: expected a JSON object (got {})", kLinalgFamily, json_text);
  std::optional<LinalgKind> kind;
  std::optional<bool> full;
  std::optional<double> eps;
  std::optional<int64_t> keep;
  std::optional<bool> diagonal;
  for (const auto& [key, v] : j.items()) {
    if (key == "op" && v.is_string() && (kind = kind_of(v.get<std::string>()))) continue;
    if (key == "full" && v.is_boolean()) {
      full = v.get<bool>();
    } else if (key == "diagonal" && v.is_boolean()) {
      diagonal = v.get<bool>();
    } else if (key == "eps" && v.is_number()) {
      eps = v.get<double>();
    } else if (key == "keep" && v.is_number_integer()) {
      keep = v.get<int64_t>();
    } else if (key == "op" || key == "full" || key == "eps" || key == "keep" || key == "diagonal") {
      fail(ErrorKind::parse, "'{}' payload: \"{}\" has the wrong value {}; expected {}", kLinalgFamily, key, v.dump(),
           key == "op"     ? "\"svd\", \"qr\", \"eigh\", \"inv_upper\" or \"gap_factors\""
           : key == "full" || key == "diagonal" ? "true or false"
           : key == "keep" ? "an integer"
                           : "a number");
    } else {
      fail(ErrorKind::parse, "'{}' payload: unknown key \"{}\"; it takes {}", kLinalgFamily, key, kAttrs);
    }
  }
  return make_checked(kind, full, eps, keep, diagonal, json_text);
}

std::vector<TensorType> infer_linalg_types(const LinalgPayload& p, Types operands, TypeContext& ctx) {
  const std::string_view op = name(p.kind());
  if (p.kind() == LinalgKind::gap_factors) return infer_gap_factors(p, operands, ctx);
  if (operands.size() != 1)
    ctx.error(ErrorKind::invalid_argument, "{} takes 1 operand (a matrix or a batch [M, N, B...]) but {} were given",
              op, operands.size());
  const TensorType& a = operands[0];
  if (!is_floating(a.dtype))
    ctx.error(ErrorKind::dtype, "{}: operand 0 has type {}; expected f32, f64, c64 or c128 (convert it first)", op,
              a.to_string());
  if (a.rank() < 2)
    ctx.error(ErrorKind::shape, "{}: operand 0 has type {} of rank {}; expected a matrix [M, N, B...] of rank 2 or "
              "more (reshape a vector to [N, 1])", op, a.to_string(), a.rank());
  const Dim& m = a.dims[0];
  const Dim& n = a.dims[1];
  const DType real = real_part_type(a.dtype);
  switch (p.kind()) {
    case LinalgKind::svd: {
      Dim k = min_extent(m, n, op, a, ctx);
      if (p.keep() > 0) {
        if (!k.is_constant())
          ctx.error(ErrorKind::shape, "svd with keep = {}: operand 0 has type {}; the split needs constant matrix "
                    "extents", p.keep(), a.to_string());
        if (p.keep() >= k.constant())
          ctx.error(ErrorKind::shape, "svd with keep = {}: operand 0 has type {} with {} singular triplets; keep must "
                    "be below that (leave keep out to keep all of them)", p.keep(), a.to_string(), k.constant());
        const Dim kept(p.keep()), rest(k.constant() - p.keep());
        return {TensorType{a.dtype, with_batch({m, kept}, a)}, TensorType{real, with_batch({kept}, a)},
                TensorType{a.dtype, with_batch({kept, n}, a)}, TensorType{a.dtype, with_batch({m, rest}, a)},
                TensorType{real, with_batch({rest}, a)}, TensorType{a.dtype, with_batch({rest, n}, a)}};
      }
      if (p.full())
        return {TensorType{a.dtype, with_batch({m, m}, a)}, TensorType{real, with_batch({k}, a)},
                TensorType{a.dtype, with_batch({n, n}, a)}};
      return {TensorType{a.dtype, with_batch({m, k}, a)}, TensorType{real, with_batch({k}, a)},
              TensorType{a.dtype, with_batch({k, n}, a)}};
    }
    case LinalgKind::qr: {
      Dim k = min_extent(m, n, op, a, ctx);
      return {TensorType{a.dtype, with_batch({m, k}, a)}, TensorType{a.dtype, with_batch({k, n}, a)}};
    }
    case LinalgKind::eigh:
    case LinalgKind::inv_upper: {
      if (m.is_constant() && n.is_constant() && m != n)
        ctx.error(ErrorKind::shape, "{}: operand 0 has type {}; expected a square matrix [N, N, B...] (axis 0 "
                  "has extent {}, axis 1 extent {})", op, a.to_string(), m.to_string(), n.to_string());
      Dim sq = ctx.unify(m, n, [&] { return fmt::format("{}: operand 0's axis 0 vs axis 1 (a square matrix)", op); });
      if (p.kind() == LinalgKind::inv_upper) return {TensorType{a.dtype, with_batch({sq, sq}, a)}};
      if (p.keep() > 0) {
        if (!sq.is_constant())
          ctx.error(ErrorKind::shape, "eigh with keep = {}: operand 0 has type {}; keep needs a constant matrix "
                    "extent", p.keep(), a.to_string());
        if (p.keep() > sq.constant())
          ctx.error(ErrorKind::shape, "eigh with keep = {}: operand 0 has type {} with {} eigenvalues; keep must be "
                    "at most that (leave keep out for all eigenvectors)", p.keep(), a.to_string(), sq.constant());
        return {TensorType{real, with_batch({sq}, a)}, TensorType{a.dtype, with_batch({sq, Dim(p.keep())}, a)}};
      }
      return {TensorType{real, with_batch({sq}, a)}, TensorType{a.dtype, with_batch({sq, sq}, a)}};
    }
    case LinalgKind::gap_factors: break;  // above
  }
  ctx.error(ErrorKind::invalid_argument, "unknown op");
}

void register_linalg_semantics(ExtensionRegistry& registry) {
  ExtensionSemantics sem = make_semantics<LinalgPayload>(std::string(kLinalgModule), infer_linalg_types);
  sem.linearize_results = linearize_linalg;
  registry.register_family(std::move(sem));
}

}  // namespace einstage::linalg
