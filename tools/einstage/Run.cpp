// `einstage run PROGRAM.json|PROGRAM.ir --input name=FILE.npy ...`: runs a saved program on a Runtime that has the
// einsum module linked in (plus any module given with --module), optionally showing the program after each stage:
// as loaded (traced), lowered to standard ops for the inputs' shapes, and planned (each extension op's prepared
// form, e.g. the contraction tree).
#include "compiler/Lower.h"
#include "ir/Quote.h"
#include "extensions/einsum/Module.h"
#include "ir/Json.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

namespace einstage::cli {

namespace {

constexpr std::string_view kRunHelp =
    "usage: einstage run PROGRAM.json|PROGRAM.ir --input NAME=FILE.npy ... [options]\n"
    "\n"
    "Runs a saved program (the JSON form, or the text form of the IR) on .npy inputs, one --input per parameter,\n"
    "and prints its outputs or writes them with -o. Symbolic dims are bound from the inputs' shapes; einsum ops are\n"
    "planned for those shapes the first time they run.\n"
    "\n"
    "options:\n"
    "  --input NAME=FILE   the value of parameter NAME (repeat for each parameter)\n"
    "  -o, --output FILE   write the next output to FILE (.npy, Fortran order); give one per output\n"
    "  --module PATH       load an extension module from a shared library first (repeatable)\n"
    "  --print-stages      print the program as loaded, lowered to standard ops, and planned\n"
    "  --threads N         kernel threads ({threads})\n"
    "  -h, --help          print this help\n";

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::io, "cannot read program file '{}': no such file or not readable", shown_arg(path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const Error& e) {
  std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

int run_run(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", with_threads_default(kRunHelp));
    return 0;
  }
  ArgScanner scan("run", args);
  std::string program_path, value;
  std::map<std::string, std::string> input_files;
  std::vector<std::string> outputs_to, modules;
  bool print_stages = false;
  int threads = 0;  // RuntimeOptions' default: default_threads()
  while (scan.next()) {
    if (scan.option("--input", &value)) {
      auto eq = value.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
        usage_error("run: bad --input value '{}'; expected NAME=FILE.npy", value);
      if (!input_files.emplace(value.substr(0, eq), value.substr(eq + 1)).second)
        usage_error("run: parameter '{}' is given twice with --input", value.substr(0, eq));
      continue;
    }
    if (scan.option("--output", &value, "-o")) { outputs_to.push_back(value); continue; }
    if (scan.option("--module", &value)) { modules.push_back(value); continue; }
    if (scan.option("--threads", &value)) { threads = parse_threads("run", value); continue; }
    if (scan.flag("--print-stages")) { print_stages = true; continue; }
    std::string_view p = scan.positional();
    if (!program_path.empty()) usage_error("run: unexpected argument '{}'; give one program file", p);
    program_path = std::string(p);
  }
  if (program_path.empty()) usage_error("run: no program file given; usage: einstage run PROGRAM.json --input NAME=FILE.npy");

  Runtime runtime(RuntimeOptions{threads});
  runtime.add_module(einsum::module_descriptor());
  for (const std::string& m : modules) runtime.load_module(m);

  std::string text = read_text_file(program_path);
  Program program;
  try {
    program = program_path.ends_with(".json") ? program_from_json(text, &runtime.registry())
                                              : parse_program(text, &runtime.registry());
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", shown_arg(program_path), first_line(e)));
  }

  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  for (const Parameter& p : program.params) {
    names.push_back(p.name);
    auto it = input_files.find(p.name);
    if (it == input_files.end())
      usage_error("run: no --input for parameter '{}' ({}) of @{}; give --input {}=FILE.npy", p.name,
                  p.value.type.to_string(), program.name, p.name);
    inputs.push_back(read_npy(it->second));
  }
  for (const auto& [name, file] : input_files)
    if (std::find(names.begin(), names.end(), name) == names.end())
      usage_error("run: --input {}={}: @{} has no parameter '{}' (its parameters: {})", name, file, program.name, name,
                  fmt::join(names, ", "));
  if (!outputs_to.empty() && outputs_to.size() != program.outputs.size())
    usage_error("run: @{} has {} output{} but {} -o file{} given", program.name, program.outputs.size(),
                program.outputs.size() == 1 ? "" : "s", outputs_to.size(), outputs_to.size() == 1 ? " was" : "s were");

  Executable exe = runtime.prepare(program);
  if (print_stages) {
    fmt::print("== traced ==\n{}\n", print_program(program));
    fmt::print("== lowered (for these input shapes) ==\n");
    try {
      DimBindings bindings = Interpreter(program).bind(inputs);
      fmt::print("{}\n", print_program(lower_to_standard_ops(program, bindings, runtime.registry())));
    } catch (const Error& e) {
      fmt::print("(not lowered: {})\n\n", first_line(e));
    }
    std::string planned = exe.describe_prepared(inputs);
    fmt::print("== planned ==\n{}\n", planned.empty() ? "(no extension ops)\n" : planned);
    fmt::print("== outputs ==\n");
  }
  std::vector<Tensor> outputs = exe.run(inputs);
  auto value_name = value_names(program);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs_to.empty()) {
      write_npy(outputs_to[i], outputs[i], NpyOrder::fortran);
      continue;
    }
    fmt::print("output {} ({}): {}\n", i, value_name[program.outputs[i].id], outputs[i].to_string());
  }
  return 0;
}

}  // namespace einstage::cli
