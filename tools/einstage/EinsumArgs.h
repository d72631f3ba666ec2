// Argument readers shared by the commands of the einstage command line: --optimize values, --shapes lists, --dtype
// names, --max-memory sizes, --threads counts (and the default their help shows), and a small option scanner (with
// `--`, used by every command). Part of tools/; may use every layer.
#pragma once

#include "extensions/einsum/planner/PlanSpec.h"
#include "ir/DType.h"
#include "ir/Tensor.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::cli {

/// Reads an --optimize value: auto | greedy | optimal | anneal | left-to-right | path:(0,1),(0,1) | any PlanSpec text
/// (e.g. "anneal(budget=2,seed=3)", "tree[(0,1),(3,2)]"). `command` prefixes the usage error.
einsum::PlanSpec parse_optimize(std::string_view command, std::string_view text);

/// Reads "6x2x3,6x3x4" (one shape per operand; "" or "scalar" for a rank-0 operand, e.g. "3x3,scalar").
std::vector<Shape> parse_shapes(std::string_view command, std::string_view text);

/// Reads a dtype name (f32, f64, c64, c128, i64).
DType parse_dtype_arg(std::string_view command, std::string_view text);

/// Reads a --threads value: a whole number from 1 to 1024.
/// --max-memory SIZE: bytes with a unit B, KiB, MiB or GiB (einsum::parse_memory_size); anything else is a usage
/// error naming the command.
int64_t parse_max_memory(std::string_view command, std::string_view text);
/// The largest intermediate in elements of `dtype` that `bytes` holds; a size below one element is a usage error.
double max_memory_elements(std::string_view command, int64_t bytes, DType dtype);

int parse_threads(std::string_view command, std::string_view text);

/// `help` with every "{threads}" replaced by what --threads defaults to here, e.g. "default 2: every CPU this process
/// may use" (runtime/Cpus.h default_threads(), so EINSTAGE_NUM_THREADS shows when it is set).
std::string with_threads_default(std::string_view help);

/// True for an argument that can only be einsum subscripts although it starts with '-': it starts with "->" (NumPy's
/// "->" for a scalar, "->i"), which no option does. Commands taking SUBSCRIPTS first accept it as that positional.
bool subscripts_starting_with_dash(std::string_view arg);

/// Walks a command's arguments: options with values (`--name value` or `--name=value`), flags, and positionals.
/// A lone `--` ends the options: every argument after it is positional, even one starting with '-'.
class ArgScanner {
 public:
  ArgScanner(std::string_view command, std::span<const std::string_view> args) : command_(command), args_(args) {}
  /// Advances to the next argument (stepping over the first `--`); false at the end.
  bool next();
  /// The current argument is `--name` or `--name=...` (or the short alias); for value options, reads the value.
  bool option(std::string_view name, std::string* value, std::string_view alias = {});
  bool flag(std::string_view name, std::string_view alias = {});
  /// The current argument if it is not an option, or if `also_positional` accepts it (after `--`, any argument);
  /// else fails with "unknown option".
  std::string_view positional(bool (*also_positional)(std::string_view) = nullptr);

 private:
  std::string_view command_;
  std::span<const std::string_view> args_;
  size_t i_ = 0;
  bool started_ = false;
  bool options_ended_ = false;  // `--` seen
};

}  // namespace einstage::cli
