// Reading a saved program and its inputs from the command line (see ProgramArgs.h).
#include "tools/einstage/ProgramArgs.h"

#include "extensions/einsum/Module.h"
#include "extensions/linalg/Module.h"
#include "ir/Error.h"
#include "ir/Json.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "ir/Quote.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace einstage::cli {

namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::io, "cannot read program file '{}': no such file or not readable", shown_arg(path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void add_linked_modules(Runtime& runtime) {
  runtime.add_module(einsum::module_descriptor());
  runtime.add_module(linalg::module_descriptor());
}

std::string first_line(const Error& e) {
  std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

bool is_program_file(std::string_view path) { return path.ends_with(".json") || path.ends_with(".ir"); }

Program load_program_file(const std::string& path, const ExtensionRegistry* registry) {
  std::string text = read_text_file(path);
  try {
    return path.ends_with(".json") ? program_from_json(text, registry) : parse_program(text, registry);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", shown_arg(path), first_line(e)));
  }
}

void add_input_arg(std::string_view command, std::string_view value, std::map<std::string, std::string>* files) {
  auto eq = value.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == value.size())
    usage_error("{}: bad --input value '{}'; expected NAME=FILE.npy", command, value);
  if (!files->emplace(std::string(value.substr(0, eq)), std::string(value.substr(eq + 1))).second)
    usage_error("{}: parameter '{}' is given twice with --input", command, value.substr(0, eq));
}

std::string parameter_list(const Program& program) {
  std::vector<std::string> names;
  for (const Parameter& p : program.params) names.push_back(p.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::vector<Tensor> read_program_inputs(std::string_view command, const Program& program,
                                        const std::map<std::string, std::string>& files) {
  std::vector<Tensor> inputs;
  for (const Parameter& p : program.params) {
    auto it = files.find(p.name);
    if (it == files.end())
      usage_error("{}: no --input for parameter '{}' ({}) of @{}; give --input {}=FILE.npy", command, p.name,
                  p.value.type.to_string(), program.name, p.name);
    inputs.push_back(read_npy(it->second));
  }
  for (const auto& [name, file] : files)
    if (std::none_of(program.params.begin(), program.params.end(), [&](const Parameter& p) { return p.name == name; }))
      usage_error("{}: --input {}={}: @{} has no parameter '{}' (its parameters: {})", command, name, file,
                  program.name, name, parameter_list(program));
  return inputs;
}

}  // namespace einstage::cli
