// `einstage run PROGRAM.json|PROGRAM.ir --input name=FILE.npy ...`: runs a saved program on a Runtime that has the
// einsum and linalg modules linked in (plus any module given with --module), optionally showing the program after each stage:
// as loaded (traced), lowered to standard ops for the inputs' shapes, and planned (each extension op's prepared
// form, e.g. the contraction tree). `einstage show-program PROGRAM` prints the first of those alone, without inputs,
// or with --lower the second (symbols bound by --bind). Both lower partially (compiler/Lower.h): extension ops without
// a lowering rule (linalg's decompositions) stay in the lowered program and are reported.
#include "compiler/Lower.h"
#include "ir/Quote.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"
#include "tools/einstage/ProgramArgs.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

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
    "  --print-stages      print the program as loaded, lowered to standard ops (ops without a lowering rule,\n"
    "                      such as svd, stay and are listed), and planned\n"
    "  --threads N         kernel threads ({threads})\n"
    "  -h, --help          print this help\n";

constexpr std::string_view kShowProgramHelp =
    "usage: einstage show-program PROGRAM.json|PROGRAM.ir [--lower [--bind NAME=N ...]] [--module PATH ...]\n"
    "\n"
    "Prints a saved program as loaded, before lowering, in the text form of the IR (what 'einstage run' reads from a\n"
    ".ir file, and the '== traced ==' stage of 'einstage run --print-stages'). The program is parsed and verified\n"
    "against the extension families of the einsum and linalg modules and of any --module; no inputs are needed.\n"
    "With --lower it prints the program lowered to standard ops instead; extension ops without a lowering rule\n"
    "(svd, qr, eigh, ...) stay as they are, and stderr lists each one kept.\n"
    "\n"
    "options:\n"
    "  --lower             print the program lowered to standard ops (partially: see above)\n"
    "  --bind NAME=N       the value of symbolic dim NAME for --lower (repeat per symbol; einsum needs them all)\n"
    "  --module PATH       load an extension module from a shared library first (repeatable)\n"
    "  -h, --help          print this help\n";

// --bind NAME=N: a symbol's value for show-program --lower.
void add_binding_arg(std::string_view arg, DimBindings* bindings) {
  const size_t eq = arg.find('=');
  const std::string_view name = eq == std::string_view::npos ? arg : arg.substr(0, eq);
  const std::string_view number = eq == std::string_view::npos ? std::string_view() : arg.substr(eq + 1);
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (name.empty() || number.empty() || ec != std::errc() || end != number.data() + number.size() || n < 0)
    usage_error("show-program: --bind {} is not NAME=N; give a symbol's name and its value, a whole number >= 0 "
                "(e.g. --bind n=5)", quote_for_message(arg));
  if (bindings->count(std::string(name)))
    usage_error("show-program: --bind gives symbol '{}' twice; give each symbol once",
                escape_for_message(name, '\''));
  (*bindings)[std::string(name)] = n;
}

}  // namespace

int run_show_program(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kShowProgramHelp);
    return 0;
  }
  ArgScanner scan("show-program", args);
  std::string program_path, value;
  std::vector<std::string> modules;
  bool lower = false;
  DimBindings bindings;
  while (scan.next()) {
    if (scan.option("--module", &value)) { modules.push_back(value); continue; }
    if (scan.flag("--lower")) { lower = true; continue; }
    if (scan.option("--bind", &value)) {
      add_binding_arg(value, &bindings);
      continue;
    }
    std::string_view p = scan.positional();
    if (!program_path.empty()) usage_error("show-program: unexpected argument '{}'; give one program file", p);
    program_path = std::string(p);
  }
  if (program_path.empty())
    usage_error("show-program: no program file given; usage: einstage show-program PROGRAM.json|PROGRAM.ir");
  Runtime runtime;
  add_linked_modules(runtime);
  for (const std::string& m : modules) runtime.load_module(m);
  if (!bindings.empty() && !lower)
    usage_error("show-program: --bind gives symbol values for --lower; add --lower or drop --bind");
  Program program = load_program_file(program_path, &runtime.registry());
  if (!lower) {
    fmt::print("{}", print_program(program));
    return 0;
  }
  LoweredProgram lowered =
      lower_to_standard_ops(program, bindings, runtime.registry(), LowerOptions{.keep_unlowerable = true});
  fmt::print("{}", print_program(lowered.program));
  fmt::print(stderr, "{}", lowered.describe());
  return 0;
}

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
      add_input_arg("run", value, &input_files);
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
  add_linked_modules(runtime);
  for (const std::string& m : modules) runtime.load_module(m);

  Program program = load_program_file(program_path, &runtime.registry());
  std::vector<Tensor> inputs = read_program_inputs("run", program, input_files);
  if (!outputs_to.empty() && outputs_to.size() != program.outputs.size())
    usage_error("run: @{} has {} output{} but {} -o file{} given", program.name, program.outputs.size(),
                program.outputs.size() == 1 ? "" : "s", outputs_to.size(), outputs_to.size() == 1 ? " was" : "s were");

  Executable exe = runtime.prepare(program);
  if (print_stages) {
    fmt::print("== traced ==\n{}\n", print_program(program));
    fmt::print("== lowered (for these input shapes) ==\n");
    try {
      DimBindings bindings = Interpreter(program).bind(inputs);
      LoweredProgram lowered =
          lower_to_standard_ops(program, bindings, runtime.registry(), LowerOptions{.keep_unlowerable = true});
      fmt::print("{}{}\n", print_program(lowered.program), lowered.describe());
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
