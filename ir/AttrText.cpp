#include "ir/AttrText.h"

#include "ir/Extension.h"
#include "ir/Quote.h"
#include "ir/Text.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace einstage {

std::string format_attr(int64_t v) { return fmt::format("{}", v); }
std::string format_attr(double v) { return format_float(v); }
std::string format_attr(const Axes& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
std::string format_attr(const std::vector<Dim>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
std::string format_attr(DType v) { return std::string(name(v)); }
std::string format_attr(Comparison v) { return std::string(name(v)); }

namespace {
template <typename T> std::string format_element(T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return fmt::format("{}", v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return format_float(v);
  } else {
    return fmt::format("({}, {})", format_float(v.real()), format_float(v.imag()));
  }
}

// "[...]" -> inner text, or nullopt.
std::optional<std::string_view> bracketed(std::string_view s) {
  s = trim(s);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  return s.substr(1, s.size() - 2);
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

template <typename T> std::optional<T> parse_element(std::string_view s) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return parse_int(s);
  } else if constexpr (std::is_same_v<T, double>) {
    return parse_double(s);
  } else if constexpr (std::is_same_v<T, float>) {
    return parse_float(s);
  } else {
    using R = typename T::value_type;
    if (s.size() < 2 || s.front() != '(' || s.back() != ')') return std::nullopt;
    auto parts = split_top_level(s.substr(1, s.size() - 2));
    if (parts.size() != 2) return std::nullopt;
    auto re = parse_element<R>(parts[0]), im = parse_element<R>(parts[1]);
    if (!re || !im) return std::nullopt;
    return T(*re, *im);
  }
}
}  // namespace

std::string format_attr(const Tensor& v) {
  std::vector<std::string> elems = dispatch_dtype(v.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<std::string> out;
    if (v.numel() == 0) return out;  // to_col_major needs storage, which an empty tensor need not have
    for (const T& x : v.to_col_major<T>()) out.push_back(format_element(x));
    return out;
  });
  TensorType t{v.dtype(), {}};
  for (int64_t e : v.shape()) t.dims.push_back(Dim(e));
  return fmt::format("{}<[{}]>", t.to_string(), fmt::join(elems, ", "));
}

void parse_attr(std::string_view text, int64_t& out, std::string_view what) {
  auto v = parse_int(trim(text));
  if (!v) fail(ErrorKind::parse, "{}: expected an integer, got '{}'", what, escape_for_message(text, '\''));
  out = *v;
}

void parse_attr(std::string_view text, double& out, std::string_view what) {
  auto v = parse_double(trim(text));
  if (!v) fail(ErrorKind::parse, "{}: expected a number like 2.5, got '{}'", what, escape_for_message(text, '\''));
  out = *v;
}

void parse_attr(std::string_view text, Axes& out, std::string_view what) {
  auto inner = bracketed(text);
  if (!inner) fail(ErrorKind::parse, "{}: expected a list of integers like [0, 1], got '{}'", what,
                       escape_for_message(text, '\''));
  Axes r;
  for (std::string_view item : split_top_level(*inner)) {
    auto v = parse_int(item);
    if (!v) fail(ErrorKind::parse, "{}: '{}' in {} is not an integer", what, escape_for_message(item, '\''),
                    escape_for_message(text, '\''));
    r.push_back(*v);
  }
  out = std::move(r);
}

void parse_attr(std::string_view text, std::vector<Dim>& out, std::string_view what) {
  auto inner = bracketed(text);
  if (!inner) fail(ErrorKind::parse, "{}: expected a list of extents like [n, 4], got '{}'", what,
                       escape_for_message(text, '\''));
  std::vector<Dim> r;
  for (std::string_view item : split_top_level(*inner)) {
    auto d = Dim::parse(item);
    if (!d) fail(ErrorKind::parse, "{}: '{}' in {} is not an extent (an integer, a symbol or a product)", what,
                    escape_for_message(item, '\''), escape_for_message(text, '\''));
    r.push_back(*d);
  }
  out = std::move(r);
}

void parse_attr(std::string_view text, DType& out, std::string_view what) {
  auto d = parse_dtype(trim(text));
  if (!d) fail(ErrorKind::parse, "{}: '{}' is not a dtype; expected f32, f64, c64, c128 or i64", what,
                    escape_for_message(text, '\''));
  out = *d;
}

void parse_attr(std::string_view text, Comparison& out, std::string_view what) {
  auto c = parse_comparison(trim(text));
  if (!c) fail(ErrorKind::parse, "{}: '{}' is not a comparison; expected lt, le, gt, ge, eq or ne", what,
                    escape_for_message(text, '\''));
  out = *c;
}

void parse_attr(std::string_view text, Tensor& out, std::string_view what) {
  text = trim(text);
  size_t lt = text.find('<');
  if (lt == std::string_view::npos || text.back() != '>')
    fail(ErrorKind::parse, "{}: expected a tensor literal like f64[2]<[1, 2]>, got '{}'", what,
         escape_for_message(text, '\''));
  auto type = TensorType::parse(text.substr(0, lt));
  auto shape = type ? type->constant_shape() : std::nullopt;
  if (!shape) fail(ErrorKind::parse, "{}: '{}' is not a constant tensor type", what,
                      escape_for_message(text.substr(0, lt), '\''));
  auto inner = bracketed(text.substr(lt + 1, text.size() - lt - 2));
  if (!inner) fail(ErrorKind::parse, "{}: tensor elements must be a list in [ ], got '{}'", what,
                       escape_for_message(text, '\''));
  auto items = split_top_level(*inner);
  int64_t n = element_count(*shape);
  if (static_cast<int64_t>(items.size()) != n)
    fail(ErrorKind::parse, "{}: a {} literal needs {} elements but {} are given", what, type->to_string(), n,
         items.size());
  out = dispatch_dtype(type->dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> data;
    for (std::string_view item : items) {
      auto v = parse_element<T>(item);
      if (!v) fail(ErrorKind::parse, "{}: '{}' is not a {} element", what, escape_for_message(item, '\''),
                    name(type->dtype));
      data.push_back(*v);
    }
    return Tensor::from_col_major<T>(*shape, std::span<const T>(data));
  });
}

std::string format_op_attributes(const Op& op) {
  return std::visit(
      [](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, ExtensionOp>) {
          return o.payload->to_text();
        } else {
          std::string s;
          std::apply([&](const auto&... f) { ((s += (s.empty() ? "" : ", ") + std::string(f.name) + " = " +
                                                   format_attr(o.*(f.member))), ...); },
                     T::attrs());
          return s;
        }
      },
      op);
}

void parse_std_op_attributes(Op& op, std::string_view text, std::string_view where) {
  std::visit(
      [&](auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, ExtensionOp>) {
          EIN_ASSERT(false, "parse_std_op_attributes on an extension op");
        } else {
          std::string prefix = where.empty() ? "" : std::string(where) + ": ";
          auto entries = split_attribute_text(text);
          std::vector<std::string> names;
          std::apply([&](const auto&... f) { (names.emplace_back(f.name), ...); }, T::attrs());
          std::set<std::string> used;
          for (const auto& [key, value] : entries) {
            bool found = false;
            std::apply(
                [&](const auto&... f) {
                  ((f.name == key ? (parse_attr(value, o.*(f.member),
                                                fmt::format("{}attribute '{}' of '{}'", where.empty() ? "" : std::string(where) + ": ", key, T::kName)),
                                     found = true)
                                  : false),
                   ...);
                },
                T::attrs());
            if (!found)
              fail(ErrorKind::parse, "{}'{}' has no attribute '{}'; its attributes are [{}]", prefix, T::kName, key,
                   fmt::join(names, ", "));
            used.insert(key);
          }
          for (const std::string& n : names)
            if (!used.count(n)) fail(ErrorKind::parse, "{}'{}' is missing attribute '{}'", prefix, T::kName, n);
        }
      },
      op);
}

}  // namespace einstage
