// The einstage command line's subcommands: each lives in its own .cpp, parses its own arguments, prints its own
// --help, and is listed in the one table in main.cpp. Part of tools/; may use every layer.
//
// Exit status: 0 on success, 2 for a usage error or bad input (unknown option, unreadable or malformed file),
// 1 for a failure while running. main() prints every error as one line "einstage: <message>" on stderr.
#pragma once

#include "ir/Quote.h"

#include <fmt/format.h>

#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace einstage::cli {

/// A mistake in the command line itself; main() prints it and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void usage_error(fmt::format_string<Args...> format, Args&&... args) {
  // Every string argument comes from the command line: escaped and shortened (ir/Quote.h).
  throw UsageError(fmt::vformat(fmt::string_view(format), fmt::make_format_args(shown_arg(args)...)));
}

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `einstage --help`
  /// Runs the command on the arguments after its name; returns the exit status.
  int (*run)(std::span<const std::string_view> args);
};

/// Prints an error escaping a command as one line "einstage: <prefix><message>" on stderr and returns the exit
/// status (2 for a usage error or bad input, 1 for a failure while running or an internal error).
int print_error(const std::exception& e, std::string_view prefix = {});

/// True if args contains -h or --help before any `--` (every command answers it by printing its help and succeeding).
bool wants_help(std::span<const std::string_view> args);

// The commands (one .cpp each).
int run_show(std::span<const std::string_view> args);
int run_einsum(std::span<const std::string_view> args);  // EinsumCommands.cpp
int run_plan(std::span<const std::string_view> args);    // EinsumCommands.cpp
int run_lower(std::span<const std::string_view> args);   // EinsumCommands.cpp
int run_run(std::span<const std::string_view> args);     // Run.cpp
int run_show_program(std::span<const std::string_view> args);  // Run.cpp
int run_demo(std::span<const std::string_view> args);    // Demo.cpp (also what `einstage` alone runs)
int run_grad(std::span<const std::string_view> args);    // Grad.cpp
int run_example(std::span<const std::string_view> args); // Example.cpp
int run_tune(std::span<const std::string_view> args);    // Cpu.cpp
int run_show_cpu();                                      // Cpu.cpp: `show --cpu`

}  // namespace einstage::cli
