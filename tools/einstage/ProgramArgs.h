// Reading a saved program and its inputs from the command line, shared by the commands that take PROGRAM.json or
// PROGRAM.ir (`run`, `grad PROGRAM`, `show-program`): the modules linked into the command line (einsum and linalg),
// loading the file with the runtime's registry (the error names the file), collecting --input NAME=FILE pairs, and reading one .npy per parameter with errors that name the
// parameter and list the program's own. Part of tools/; may use every layer.
#pragma once

#include "ir/Error.h"
#include "ir/Extension.h"
#include "ir/Program.h"
#include "ir/Tensor.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace einstage {
class Runtime;
}

namespace einstage::cli {

/// Adds the extension modules linked into the command line to `runtime`: einsum (einstage.einsum.v1) and linalg
/// (einstage.linalg.v1), so saved programs using either load, run and differentiate without --module.
void add_linked_modules(Runtime& runtime);

/// True for a file name the program commands read: it ends in .json (the JSON form) or .ir (the IR text form).
bool is_program_file(std::string_view path);

/// Loads a saved program: the JSON form if `path` ends in .json, else the IR text form. A parse error names the file.
Program load_program_file(const std::string& path, const ExtensionRegistry* registry);

/// Records one `--input NAME=FILE` value; a malformed value or a NAME given twice is a usage error naming `command`.
void add_input_arg(std::string_view command, std::string_view value, std::map<std::string, std::string>* files);

/// Reads one .npy per parameter of `program`, in parameter order. A parameter without --input, or an --input whose
/// NAME is no parameter, is a usage error naming `command`, the parameter and the program's parameters.
std::vector<Tensor> read_program_inputs(std::string_view command, const Program& program,
                                        const std::map<std::string, std::string>& files);

/// The first line of an error's message (a parse error's later lines show the source; the commands print one line).
std::string first_line(const Error& e);

/// The program's parameter names, comma-separated (for messages).
std::string parameter_list(const Program& program);

}  // namespace einstage::cli
