// einstage: the command-line driver. `einstage <command> [arguments]`; the table below lists the commands, each
// implemented in its own .cpp (see Command.h); with no arguments it runs the demonstration (Demo.cpp).
#include "ir/Error.h"
#include "tools/einstage/Command.h"

#include <fmt/format.h>

#include <exception>
#include <vector>

namespace einstage::cli {
namespace {

constexpr Command kCommands[] = {
    {"show", "print .npy files: dtype, shape, stored order, memory layout and values; show --cpu: the CPU and the "
             "kernel parameters in force", run_show},
    {"einsum", "contract .npy files: einsum SUBSCRIPTS A.npy B.npy ... [-o OUT.npy]", run_einsum},
    {"plan", "print the contraction plan for given shapes: plan SUBSCRIPTS --shapes 6x2x3,6x3x4", run_plan},
    {"lower", "print an einsum lowered to standard ops: lower SUBSCRIPTS --shapes ...", run_lower},
    {"grad", "gradients as .npy files of sum(einsum(...)), or of a saved program's scalar output (grad --help)",
     run_grad},
    {"run", "run a saved program: run PROGRAM.json --input NAME=FILE.npy ...", run_run},
    {"show-program", "print a saved program as loaded, in the IR text form: show-program PROGRAM.ir", run_show_program},
    {"example", "worked examples: example ising-trg --beta B (the 2D Ising model by TRG vs Onsager)", run_example},
    {"tune", "time the JIT's GEMM tiles and blocks on this CPU (< 2 s) and store the choice for later processes",
     run_tune},
    {"demo", "a short tour of the pipeline (also what 'einstage' alone does)", run_demo},
};

void print_help() {
  fmt::print(
      "usage: einstage <command> [arguments]\n"
      "\n"
      "einstage is a tracing compiler with a staged runtime for tensor contractions (einsum).\n"
      "Tensors are column-major (first index fastest); .npy files are read in either order without a transpose.\n"
      "\n"
      "commands:\n");
  for (const Command& c : kCommands) fmt::print("  {:<13}{}\n", c.name, c.summary);
  fmt::print("\nRun 'einstage <command> --help' for a command's arguments.\n");
}

// Errors about the user's input or files are status 2; failures of einstage while running are status 1.
int status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::runtime:
    case ErrorKind::verification: return 1;
    default: return 2;
  }
}

int run(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) return run_demo({});
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return 0;
  }
  for (const Command& c : kCommands)
    if (c.name == args[0]) return c.run(std::span<const std::string_view>(args).subspan(1));
  if (args[0].starts_with("-")) usage_error("unknown option '{}'; run 'einstage --help' for the usage", args[0]);
  usage_error("unknown command '{}'; run 'einstage --help' for the list", args[0]);
}

}  // namespace

bool wants_help(std::span<const std::string_view> args) {
  for (std::string_view a : args) {
    if (a == "--") return false;  // after it, "-h" is a file name
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

int print_error(const std::exception& e, std::string_view prefix) {
  if (dynamic_cast<const UsageError*>(&e)) {
    fmt::print(stderr, "einstage: {}{}\n", prefix, e.what());
    return 2;
  }
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    fmt::print(stderr, "einstage: {}{}\n", prefix, error->what());
    return status_of(error->kind());
  }
  fmt::print(stderr, "einstage: {}internal error: {}\n", prefix, e.what());
  return 1;
}

}  // namespace einstage::cli

int main(int argc, char** argv) {
  try {
    return einstage::cli::run(argc, argv);
  } catch (const std::exception& e) {
    return einstage::cli::print_error(e);
  }
}
