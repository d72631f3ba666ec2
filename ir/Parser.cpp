#include "ir/Parser.h"

#include "ir/AttrText.h"
#include "ir/Extension.h"
#include "ir/Quote.h"
#include "ir/Text.h"
#include "ir/Verifier.h"

#include <fmt/format.h>

namespace einstage {

namespace {

// Index of the bracket closing the one at `open` (respecting nesting and string literals), or npos.
size_t matching(std::string_view s, size_t open) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) return i;
    }
  }
  return std::string_view::npos;
}

class TextParser {
 public:
  TextParser(std::string_view text, const ExtensionRegistry* registry) : registry_(registry) {
    size_t start = 0;
    while (start <= text.size()) {
      size_t nl = text.find('\n', start);
      lines_.push_back(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
      if (nl == std::string_view::npos) break;
      start = nl + 1;
    }
  }

  Program parse() {
    size_t n = next_line();
    if (n == lines_.size()) error(lines_.size(), "empty text; expected 'program @name(...) -> (...) {{'");
    std::vector<TensorType> out_types;
    Builder b = header(n, out_types);
    std::vector<ShapeConstraint> constraints;
    size_t k = 0;  // instruction results so far: the next one is %k
    while (true) {
      n = next_line();
      if (n == lines_.size()) error(n, "unexpected end of text; expected 'return' and '}}'");
      std::string_view line = trim(lines_[n]);
      if (line.starts_with("%")) {
        if (!constraints.empty()) error(n, "instructions must come before the constraint lines");
        k += instruction(b, n, line, k);
      } else if (line.starts_with("constraint ")) {
        constraints.push_back(constraint(n, line.substr(11)));
      } else if (line == "return" || line.starts_with("return ")) {
        std::vector<Value> outs;
        for (std::string_view name : split_top_level(line.substr(6))) outs.push_back(lookup(n, name));
        if (outs.size() != out_types.size())
          error(n, "'return' gives {} values but the header declares {} result types", outs.size(), out_types.size());
        for (size_t i = 0; i < outs.size(); ++i)
          if (outs[i].type != out_types[i])
            error(n, "output {} has type {} but the header declares {}", i, outs[i].type.to_string(),
                  out_types[i].to_string());
        size_t close = next_line();
        if (close == lines_.size() || trim(lines_[close]) != "}") error(close, "expected '}}' after 'return'");
        if (size_t rest = next_line(); rest != lines_.size()) error(rest, "unexpected text after the program's '}}'");
        Program p = with_line(n, [&] { return b.finish(std::move(outs)); });
        merge_listed_constraints(p, std::move(constraints));
        verify(p, registry_);
        return p;
      } else {
        error(n, "expected an instruction '%k = op(...) : type' (or '%k, %l = op(...) : type, type'), a 'constraint' "
              "or 'return', got '{}'", line);
      }
    }
  }

 private:
  // Every string argument is program text: escaped and shortened (ir/Quote.h) so a NUL, a control character or a
  // huge line cannot cut or flood the message.
  template <typename... Args>
  [[noreturn]] void error(size_t line, fmt::format_string<Args...> format, Args&&... args) const {
    const std::string message = fmt::vformat(fmt::string_view(format), fmt::make_format_args(shown_arg(args)...));
    throw Error(ErrorKind::parse, fmt::format("line {}: {}", line + 1, message));
  }

  // Runs f, prefixing any einstage::Error with the line number (keeping its kind).
  template <typename F> auto with_line(size_t line, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("line {}: {}", line + 1, e.what()));
    }
  }

  size_t next_line() {
    while (pos_ < lines_.size() && trim(lines_[pos_]).empty()) ++pos_;
    return pos_ < lines_.size() ? pos_++ : lines_.size();
  }

  Builder header(size_t n, std::vector<TensorType>& out_types) {
    std::string_view line = trim(lines_[n]);
    if (!line.starts_with("program @")) error(n, "expected 'program @name(...) -> (...) {{', got '{}'", line);
    size_t open = line.find('(');
    if (open == std::string_view::npos) error(n, "expected '(' after the program name");
    std::string name(line.substr(9, open - 9));
    size_t close = matching(line, open);
    if (close == std::string_view::npos) error(n, "unbalanced '(' in the parameter list");
    Builder b = with_line(n, [&] { return Builder(name, registry_); });
    for (std::string_view param : split_top_level(line.substr(open + 1, close - open - 1))) {
      size_t colon = param.find(": ");
      if (!param.starts_with("%") || colon == std::string_view::npos)
        error(n, "expected a parameter '%name: type', got '{}'", param);
      std::string pname(param.substr(1, colon - 1));
      auto type = TensorType::parse(param.substr(colon + 2));
      if (!type) error(n, "'{}' is not a tensor type like f64[n,4]", param.substr(colon + 2));
      Value v = with_line(n, [&] { return b.parameter(pname, *type); });
      values_[fmt::format("%{}", pname)] = v;
    }
    std::string_view rest = trim(line.substr(close + 1));
    if (!rest.starts_with("-> (") || !rest.ends_with(") {"))
      error(n, "expected '-> (result types) {{' after the parameters, got '{}'", rest);
    for (std::string_view t : split_top_level(rest.substr(4, rest.size() - 7))) {
      auto type = TensorType::parse(t);
      if (!type) error(n, "'{}' is not a tensor type like f64[n,4]", t);
      out_types.push_back(*type);
    }
    return b;
  }

  Value lookup(size_t n, std::string_view name) {
    auto it = values_.find(std::string(trim(name)));
    if (it == values_.end()) error(n, "use of undefined value '{}'", trim(name));
    return it->second;
  }

  // Reads one instruction whose first result must be %k; returns its number of results.
  size_t instruction(Builder& b, size_t n, std::string_view line, size_t k) {
    size_t eq = line.find(" = ");
    if (eq == std::string_view::npos) error(n, "expected '%{} = op(...) : type'", k);
    std::vector<std::string_view> names = split_top_level(line.substr(0, eq));
    for (size_t r = 0; r < names.size(); ++r)
      if (names[r] != fmt::format("%{}", k + r))
        error(n, "expected result '%{}' (results are numbered densely), got '{}'", k + r, names[r]);
    std::string_view rest = line.substr(eq + 3);
    size_t open = rest.find('(');
    if (open == std::string_view::npos) error(n, "expected '(' after the op name");
    std::string_view name = rest.substr(0, open);
    size_t close = matching(rest, open);
    if (close == std::string_view::npos) error(n, "unbalanced '(' in the operand list");
    std::vector<Value> operands;
    for (std::string_view o : split_top_level(rest.substr(open + 1, close - open - 1))) operands.push_back(lookup(n, o));
    rest = rest.substr(close + 1);
    std::string_view attrs;
    bool has_attrs = false;
    if (rest.starts_with(" {")) {
      size_t end = matching(rest, 1);
      if (end == std::string_view::npos) error(n, "unbalanced '{{' in the attributes");
      attrs = rest.substr(2, end - 2);
      has_attrs = true;
      rest = rest.substr(end + 1);
    }
    if (!rest.starts_with(" : ")) error(n, "expected ' : type' at the end of the instruction");
    std::vector<TensorType> types;
    for (std::string_view t : split_top_level(rest.substr(3))) {
      auto type = TensorType::parse(t);
      if (!type) error(n, "'{}' is not a tensor type like f64[n,4]", t);
      types.push_back(*type);
    }
    if (types.size() != names.size())
      error(n, "{} result{} named but {} type{} given; give one type per result", names.size(),
            names.size() == 1 ? " is" : "s are", types.size(), types.size() == 1 ? " is" : "s are");

    Op op = make_op(n, name, attrs, has_attrs);
    std::vector<Value> results = with_line(n, [&] { return b.emit_results(std::move(op), std::move(operands)); });
    if (results.size() != names.size()) {
      std::vector<std::string> wanted;
      for (size_t r = 0; r < results.size(); ++r) wanted.push_back(fmt::format("%{}", k + r));
      error(n, "'{}' gives {} result{} but {} {} named; name each result: '{} = ...'", name, results.size(),
            results.size() == 1 ? "" : "s", names.size(), names.size() == 1 ? "is" : "are",
            fmt::format("{}", fmt::join(wanted, ", ")));
    }
    for (size_t r = 0; r < results.size(); ++r) {
      if (results[r].type != types[r])
        error(n, "'{}'{} is printed with type {} but its type rule gives {}", name,
              results.size() == 1 ? "" : fmt::format(" result {}", r), types[r].to_string(),
              results[r].type.to_string());
      values_[fmt::format("%{}", k + r)] = results[r];
    }
    return results.size();
  }

  Op make_op(size_t n, std::string_view name, std::string_view attrs, bool has_attrs) {
    if (auto kind = std_op_from_name(name)) {
      Op op = make_std_op(*kind);
      if (has_attrs && attrs.empty()) error(n, "empty attribute braces; omit them when an op has no attributes");
      with_line(n, [&] {
        parse_std_op_attributes(op, attrs, "");
        return 0;
      });
      return op;
    }
    if (name.find('.') == std::string_view::npos) {
      std::vector<std::string_view> known;
      for (size_t i = 0; i < kStdOpCount; ++i) known.push_back(op_kind_name(static_cast<OpKind>(i)));
      error(n, "unknown op '{}'; standard ops are [{}], extension ops are spelled family.name.vN", name,
            fmt::join(known, ", "));
    }
    const ExtensionSemantics* sem = registry_ ? registry_->find(name) : nullptr;
    if (!sem) fail_unknown_family(name, fmt::format("line {}", n + 1));
    std::unique_ptr<ExtensionPayload> payload = with_line(n, [&] { return sem->parse_text(attrs); });
    EIN_ASSERT(payload && payload->family() == name, "family {} parsed a payload of another family", name);
    return ExtensionOp{std::shared_ptr<const ExtensionPayload>(std::move(payload))};
  }

  ShapeConstraint constraint(size_t n, std::string_view s) {
    // lhs == rhs [at %v] "what"
    size_t eq = s.find(" == ");
    size_t quote = s.find('"');
    if (eq == std::string_view::npos || quote == std::string_view::npos || quote < eq)
      error(n, "expected 'constraint <dim> == <dim> [at %v] \"what\"'");
    ShapeConstraint c;
    auto lhs = Dim::parse(trim(s.substr(0, eq)));
    std::string_view mid = trim(s.substr(eq + 4, quote - eq - 4));
    std::string_view rhs_text = mid;
    if (size_t at = mid.find(" at "); at != std::string_view::npos) {
      rhs_text = mid.substr(0, at);
      c.at = lookup(n, mid.substr(at + 4)).id;
    }
    auto rhs = Dim::parse(trim(rhs_text));
    auto what = parse_string_literal(trim(s.substr(quote)));
    if (!lhs || !rhs || !what) error(n, "expected 'constraint <dim> == <dim> [at %v] \"what\"'");
    c.lhs = *lhs;
    c.rhs = *rhs;
    c.what = *what;
    return c;
  }

  std::vector<std::string_view> lines_;
  size_t pos_ = 0;
  const ExtensionRegistry* registry_;
  std::map<std::string, Value> values_;
};

}  // namespace

Program parse_program(std::string_view text, const ExtensionRegistry* registry) {
  return TextParser(text, registry).parse();
}

}  // namespace einstage
