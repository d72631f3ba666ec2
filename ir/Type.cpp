#include "ir/Type.h"

#include "ir/Quote.h"
#include "ir/Size.h"
#include "ir/Text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

namespace einstage {

bool is_identifier(std::string_view text) {
  if (text.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(text[0])) return false;
  return std::all_of(text.begin(), text.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

Dim::Dim(int64_t extent) : factor_(extent) {
  if (extent < 0) fail(ErrorKind::shape, "extent {} is negative; extents must be >= 0", extent);
}

Dim Dim::symbol(std::string_view name) {
  if (!is_identifier(name))
    fail(ErrorKind::invalid_argument, "'{}' is not a valid symbolic dim name; use an identifier such as n",
         shown_arg(name));
  Dim d(1);
  d.symbols_.emplace_back(name);
  return d;
}

int64_t Dim::constant() const {
  EIN_ASSERT(is_constant(), "dim {} is not constant", to_string());
  return factor_;
}

Dim operator*(const Dim& a, const Dim& b) {
  Dim r(checked_mul(a.factor_, b.factor_, "extent product"));
  if (r.factor_ == 0) return r;  // zero annihilates the symbols: the extent is 0 whatever they are
  r.symbols_ = a.symbols_;
  r.symbols_.insert(r.symbols_.end(), b.symbols_.begin(), b.symbols_.end());
  std::sort(r.symbols_.begin(), r.symbols_.end());
  return r;
}

Dim product(const std::vector<Dim>& dims) {
  Dim r(1);
  for (const Dim& d : dims) r = r * d;
  return r;
}

std::optional<int64_t> Dim::evaluate(const DimBindings& bindings) const {
  int64_t r = factor_;
  for (const std::string& s : symbols_) {
    auto it = bindings.find(s);
    if (it == bindings.end()) return std::nullopt;
    r = checked_mul(r, it->second, "extent product");
  }
  return r;
}

std::string Dim::to_string() const {
  if (symbols_.empty()) return fmt::format("{}", factor_);
  if (factor_ == 1) return fmt::format("{}", fmt::join(symbols_, "*"));
  return fmt::format("{}*{}", factor_, fmt::join(symbols_, "*"));
}

std::optional<Dim> Dim::parse(std::string_view text) {
  // factor := integer | identifier; dim := factor ('*' factor)*. Canonical form is produced by operator*.
  Dim r(1);
  size_t start = 0;
  while (true) {
    size_t star = text.find('*', start);
    std::string_view part = text.substr(start, star == std::string_view::npos ? std::string_view::npos : star - start);
    if (part.empty()) return std::nullopt;
    if (part[0] >= '0' && part[0] <= '9') {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
      if (ec != std::errc() || p != part.data() + part.size()) return std::nullopt;
      r = r * Dim(v);
    } else if (is_identifier(part)) {
      r = r * Dim::symbol(part);
    } else {
      return std::nullopt;
    }
    if (star == std::string_view::npos) break;
    start = star + 1;
  }
  return r;
}

std::optional<std::vector<int64_t>> TensorType::constant_shape() const {
  std::vector<int64_t> shape;
  for (const Dim& d : dims) {
    if (!d.is_constant()) return std::nullopt;
    shape.push_back(d.constant());
  }
  return shape;
}

std::string TensorType::to_string() const {
  std::string s(name(dtype));
  s += '[';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += dims[i].to_string();
  }
  s += ']';
  return s;
}

std::optional<TensorType> TensorType::parse(std::string_view text) {
  size_t open = text.find('[');
  if (open == std::string_view::npos || text.back() != ']') return std::nullopt;
  auto dtype = parse_dtype(text.substr(0, open));
  if (!dtype) return std::nullopt;
  TensorType t{*dtype, {}};
  std::string_view inner = text.substr(open + 1, text.size() - open - 2);
  if (inner.empty()) return t;
  size_t start = 0;
  while (true) {
    size_t comma = inner.find(',', start);
    std::string_view part = inner.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto d = Dim::parse(trim(part));
    if (!d) return std::nullopt;
    t.dims.push_back(*d);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return t;
}

}  // namespace einstage
