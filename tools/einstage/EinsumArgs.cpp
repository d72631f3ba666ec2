#include "tools/einstage/EinsumArgs.h"

#include "extensions/einsum/planner/Slicing.h"
#include "ir/Error.h"
#include "ir/Quote.h"
#include "runtime/Cpus.h"
#include "tools/einstage/Command.h"

#include <charconv>
#include <cstdlib>

namespace einstage::cli {

einsum::PlanSpec parse_optimize(std::string_view command, std::string_view text) {
  std::string spec(text);
  if (text == "left-to-right") spec = "left_to_right";
  else if (text.starts_with("path:")) spec = "path[" + std::string(text.substr(5)) + "]";
  try {
    return einsum::PlanSpec::parse(spec);
  } catch (const Error& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));  // the caret lines would break the one-line error
    usage_error("{}: bad --optimize value '{}': expected auto, greedy, optimal, anneal, left-to-right, "
                "path:(0,1),(0,1) or a plan spec such as anneal(budget=2) ({})", command, text, why);
  }
}

std::vector<Shape> parse_shapes(std::string_view command, std::string_view text) {
  std::vector<Shape> shapes;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    Shape shape;
    if (!item.empty() && item != "scalar") {
      size_t p = 0;
      for (;;) {
        size_t x = item.find('x', p);
        std::string_view num = item.substr(p, x == std::string_view::npos ? item.npos : x - p);
        int64_t v = -1;
        auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
        if (num.empty() || ec != std::errc() || end != num.data() + num.size() || v < 0)
          usage_error("{}: bad --shapes value '{}': '{}' is not an extent; expected e.g. 6x2x3,6x3x4", command, text,
                      num);
        shape.push_back(v);
        if (x == std::string_view::npos) break;
        p = x + 1;
      }
    }
    shapes.push_back(std::move(shape));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return shapes;
}

int64_t parse_max_memory(std::string_view command, std::string_view text) {
  try {
    return einsum::parse_memory_size(text, "--max-memory");
  } catch (const Error& e) {
    usage_error("{}: {}", command, e.what());
  }
}

double max_memory_elements(std::string_view command, int64_t bytes, DType dtype) {
  const int64_t element = static_cast<int64_t>(size_of(dtype));
  if (bytes < element)
    usage_error("{}: --max-memory {} is smaller than one {} element ({} bytes); give at least {}B", command,
                einsum::format_memory_size(bytes), name(dtype), element, element);
  return static_cast<double>(bytes / element);
}

int parse_threads(std::string_view command, std::string_view text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxThreads)
    usage_error("{}: bad --threads value '{}'; expected a count from 1 to {}", command, text, kMaxThreads);
  return n;
}

std::string with_threads_default(std::string_view help) {
  std::string line;
  const Environment& env = Config::process_environment();
  auto set = env.find("EINSTAGE_NUM_THREADS");
  if (set == env.end() || set->second.empty()) {
    line = fmt::format("default {}: every CPU this process may use, or EINSTAGE_NUM_THREADS", default_threads());
  } else {
    try {
      line = fmt::format("default {}: from EINSTAGE_NUM_THREADS", default_threads());
    } catch (const Error&) {  // help still prints; running would report the variable
      line = fmt::format("EINSTAGE_NUM_THREADS='{}' is not a count from 1 to {}", escape_for_message(set->second, '\''),
                         kMaxThreads);
    }
  }
  std::string out(help);
  for (size_t at = out.find("{threads}"); at != std::string::npos; at = out.find("{threads}", at + line.size()))
    out.replace(at, 9, line);
  return out;
}

DType parse_dtype_arg(std::string_view command, std::string_view text) {
  auto d = parse_dtype(text);
  if (!d) usage_error("{}: bad --dtype value '{}'; expected f32, f64, c64, c128 or i64", command, text);
  return *d;
}

bool subscripts_starting_with_dash(std::string_view arg) { return arg.starts_with("->"); }

bool ArgScanner::next() {
  if (started_) ++i_;
  started_ = true;
  if (!options_ended_ && i_ < args_.size() && args_[i_] == "--") {
    options_ended_ = true;
    ++i_;
  }
  return i_ < args_.size();
}

bool ArgScanner::option(std::string_view name, std::string* value, std::string_view alias) {
  if (options_ended_) return false;
  std::string_view a = args_[i_];
  for (std::string_view n : {name, alias}) {
    if (n.empty()) continue;
    if (a == n) {
      if (i_ + 1 >= args_.size()) usage_error("{}: option {} needs a value", command_, n);
      *value = std::string(args_[++i_]);
      return true;
    }
    if (a.size() > n.size() && a.starts_with(n) && a[n.size()] == '=') {
      *value = std::string(a.substr(n.size() + 1));
      return true;
    }
  }
  return false;
}

bool ArgScanner::flag(std::string_view name, std::string_view alias) {
  if (options_ended_) return false;
  std::string_view a = args_[i_];
  return a == name || (!alias.empty() && a == alias);
}

std::string_view ArgScanner::positional(bool (*also_positional)(std::string_view)) {
  std::string_view a = args_[i_];
  if (!options_ended_ && a.size() > 1 && a.starts_with("-") && !(also_positional && also_positional(a)))
    usage_error("{}: unknown option '{}'; run 'einstage {} --help'", command_, a, command_);
  return a;
}

}  // namespace einstage::cli
