// `einstage grad SUBSCRIPTS A.npy B.npy ... [--wrt 0,1] [--cotangent C.npy] [-o PREFIX] [--broadcast]`: the gradient
// of sum(einsum(...)) -- or, with a cotangent C, of <C, einsum(...)> -- with respect to the chosen operands, written
// as .npy files. `einstage grad PROGRAM.ir|PROGRAM.json --input NAME=FILE.npy ... [--wrt x,w]` does the same for a
// saved program with one scalar output, naming parameters instead of operand indices. Both go through one path:
// the einsum is traced into a program, and either program is differentiated with ad::vjp (compiler/ad/Ad.h, which
// merges each einsum with its vjp like every public AD transformation: one tree walk gives the value and the
// gradients) and run on the einsum and linalg modules (plus any --module), so the command exercises exactly the path a traced program
// takes. Everything is read and checked before anything is written.
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "ir/Quote.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"
#include "tools/einstage/ProgramArgs.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace einstage::cli {

namespace {

constexpr std::string_view kGradHelp =
    "usage: einstage grad SUBSCRIPTS A.npy [B.npy ...] [--wrt 0,1] [--cotangent C.npy] [-o PREFIX] [options]\n"
    "       einstage grad PROGRAM.ir|PROGRAM.json --input NAME=FILE.npy ... [--wrt NAME,NAME] [-o PREFIX] [options]\n"
    "\n"
    "Writes the gradient of sum(einsum(SUBSCRIPTS, A, B, ...)) with respect to the chosen operands, one .npy file\n"
    "per operand: PREFIX<k>.npy for operand k (default PREFIX: grad_). With --cotangent C.npy (the output's shape and\n"
    "dtype) it is the gradient of <C, einsum(...)> = sum(conj(C) * einsum(...)) instead, i.e. the vector-Jacobian\n"
    "product with C. Each gradient has its operand's shape and dtype, also where a length-1 axis broadcast.\n"
    "For complex tensors this is the adjoint cotangent J^H C (for a real loss L of complex z: dL/dx + i dL/dy;\n"
    "docs/ad.md explains the conventions).\n"
    "\n"
    "With a saved program (the JSON form, or the IR text form as 'einstage show-program' prints it) whose one output\n"
    "is a scalar, it writes the gradient of that output with respect to the parameters named by --wrt, one file\n"
    "PREFIX<NAME>.npy per parameter; each parameter's value comes from --input NAME=FILE.npy.\n"
    "\n"
    "options:\n"
    "  --wrt LIST          operand indices, comma-separated (default: every operand); for a program, parameter\n"
    "                      names (default: every floating-point parameter)\n"
    "  --input NAME=FILE   a program's parameter NAME (repeat for each parameter)\n"
    "  --module PATH       load an extension module from a shared library first (repeatable)\n"
    "  --cotangent FILE    the output cotangent C (default: ones, the gradient of the sum)\n"
    "  -o, --output PREFIX prefix of the written files (default grad_)\n"
    "  --broadcast         allow length-1 axes of named labels to broadcast (as '...' axes always do)\n"
    "  --optimize SPEC     contraction order: auto (default), greedy, optimal, path:(0,1),..., tree[...]; the reverse\n"
    "                      pass walks the same tree (per-operand reverse einsums rewrite an explicit path or tree)\n"
    "  --print-stages      print the vjp program and how each instruction was prepared: the contraction tree, the\n"
    "                      intermediates the reverse pass keeps or recomputes (EINSTAGE_AD_KEEP_BYTES bounds them)\n"
    "  -h, --help          print this help\n";

// The items of a comma-separated --wrt list, in order (an empty item stays, for the caller's error).
std::vector<std::string_view> wrt_items(std::string_view text) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

std::vector<int> parse_wrt(std::string_view text, size_t operands) {
  std::vector<int> out;
  std::set<int> seen;
  for (std::string_view item : wrt_items(text)) {
    int v = -1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
      usage_error("grad: --wrt '{}' is not a comma-separated list of operand indices (e.g. 0,1)", text);
    if (v < 0 || static_cast<size_t>(v) >= operands)
      usage_error("grad: --wrt names operand {} but {} operand file{} given (indices 0..{})", v, operands,
                  operands == 1 ? " was" : "s were", operands - 1);
    if (!seen.insert(v).second) usage_error("grad: --wrt names operand {} twice", v);
    out.push_back(v);
  }
  return out;
}

// Reads --wrt for a program: parameter names, comma-separated, each a floating-point parameter of `program`.
std::vector<int> parse_wrt_names(std::string_view text, const Program& program) {
  std::vector<int> out;
  for (std::string_view item : wrt_items(text)) {
    if (item.empty()) usage_error("grad: --wrt '{}' is not a comma-separated list of parameter names (e.g. x,w)", text);
    auto it = std::find_if(program.params.begin(), program.params.end(),
                           [&](const Parameter& p) { return p.name == item; });
    if (it == program.params.end())
      usage_error("grad: --wrt names '{}' but @{} has no parameter '{}' (its parameters: {})", item, program.name, item,
                  parameter_list(program));
    const int k = static_cast<int>(it - program.params.begin());
    if (std::find(out.begin(), out.end(), k) != out.end()) usage_error("grad: --wrt names parameter '{}' twice", item);
    if (!is_floating(it->value.type.dtype))
      usage_error("grad: --wrt names parameter '{}' of @{}, which is {}, but a gradient needs a floating-point "
                  "parameter (f32, f64, c64 or c128); leave '{}' out of --wrt", item, program.name,
                  it->value.type.to_string(), item);
    out.push_back(k);
  }
  return out;
}

// The one path both forms take: differentiates `program` (one output) with ad::vjp at the cotangent (ones, or the
// file at `cotangent_path`, checked against the output's type), runs it on `inputs`, and writes one gradient per
// `wrt` entry as PREFIX<key>.npy, printing "<file>: d/d <what>, <type>" for each. `output_what` names the output in
// messages; `key(k)` gives parameter k's file-name part and description.
void write_gradients(const Runtime& rt, const Program& program, std::vector<Tensor> inputs, std::span<const int> wrt,
                     const std::string& cotangent_path, const std::string& output_what, const std::string& prefix,
                     bool print_stages,
                     const std::function<std::pair<std::string, std::string>(int)>& key) {
  const TensorType out_type = program.outputs[0].type;
  Program vjp = ad::vjp(program, wrt, &rt.registry());
  Tensor cotangent;
  const Shape out_shape = *out_type.constant_shape();
  if (cotangent_path.empty()) {
    cotangent = dispatch_dtype(out_type.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> ones(static_cast<size_t>(element_count(out_shape)), T(1));
      return Tensor::from_col_major<T>(out_shape, std::span<const T>(ones));
    });
  } else {
    cotangent = read_npy(cotangent_path);
    if (cotangent.shape() != out_shape || cotangent.dtype() != out_type.dtype)
      fail(ErrorKind::shape, "grad: the cotangent {} is {}{} but the output of {} is {}; give a cotangent of the "
           "output's shape and dtype", shown_arg(cotangent_path), name(cotangent.dtype()), shape_to_string(cotangent.shape()),
           output_what, out_type.to_string());
  }
  inputs.push_back(cotangent);
  const Executable exe = rt.prepare(vjp);
  if (print_stages)
    fmt::print("== vjp program\n{}\n== prepared\n{}\n", print_program(vjp),
               exe.describe_prepared(std::span<const Tensor>(inputs)));
  std::vector<Tensor> results = exe.run(std::span<const Tensor>(inputs));  // output, then gradients
  for (size_t w = 0; w < wrt.size(); ++w) {
    auto [file_key, what] = key(wrt[w]);
    std::string path = fmt::format("{}{}.npy", prefix, file_key);
    const Tensor& g = results[1 + w];
    write_npy(path, g);
    fmt::print("{}: d/d {}, {}{}\n", path, what, name(g.dtype()), shape_to_string(g.shape()));
  }
}

// `grad PROGRAM --input NAME=FILE ...`: the program's one output must be a real or complex scalar.
void grad_program(const Runtime& rt, const std::string& program_path, const std::map<std::string, std::string>& files,
                  const std::string* wrt_text, const std::string& cotangent_path, const std::string& prefix,
                  bool print_stages) {
  const Program program = load_program_file(program_path, &rt.registry());
  if (program.outputs.size() != 1)
    usage_error("grad: @{} has {} outputs but grad needs exactly one, a scalar; save a program that returns one "
                "scalar (e.g. the sum of the others)", program.name, program.outputs.size());
  const TensorType& out = program.outputs[0].type;
  if (out.rank() != 0)
    usage_error("grad: @{} returns {} but grad needs a scalar output; reduce it in the program first (e.g. with "
                "reduce_sum over every axis)", program.name, out.to_string());
  if (!is_floating(out.dtype))
    usage_error("grad: @{} returns {}; an integer output has no gradient; return a floating-point scalar",
                program.name, out.to_string());
  std::vector<int> wrt;
  if (wrt_text) {
    wrt = parse_wrt_names(*wrt_text, program);
  } else {
    for (size_t k = 0; k < program.params.size(); ++k)
      if (is_floating(program.params[k].value.type.dtype)) wrt.push_back(static_cast<int>(k));
    if (wrt.empty())
      usage_error("grad: @{} has no floating-point parameter to differentiate with respect to (its parameters: {})",
                  program.name, parameter_list(program));
  }
  std::vector<Tensor> inputs = read_program_inputs("grad", program, files);
  write_gradients(rt, program, std::move(inputs), wrt, cotangent_path, fmt::format("@{}", program.name), prefix,
                  print_stages, [&](int k) {
                    const std::string& p = program.params[static_cast<size_t>(k)].name;
                    return std::pair(p, fmt::format("{} ({})", p, files.at(p)));
                  });
}

}  // namespace

int run_grad(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kGradHelp);
    return 0;
  }
  ArgScanner scan("grad", args);
  std::vector<std::string> positional, modules;
  std::map<std::string, std::string> input_files;
  std::string wrt_text, cotangent_path, prefix = "grad_", value;
  bool have_wrt = false, print_stages = false, einsum_options = false;
  einsum::TraceEinsumOptions options;
  while (scan.next()) {
    if (scan.option("--wrt", &wrt_text)) { have_wrt = true; continue; }
    if (scan.option("--cotangent", &cotangent_path)) continue;
    if (scan.option("--output", &prefix, "-o")) continue;
    if (scan.option("--input", &value)) { add_input_arg("grad", value, &input_files); continue; }
    if (scan.option("--module", &value)) { modules.push_back(value); continue; }
    if (scan.option("--optimize", &value)) {
      options.plan = parse_optimize("grad", value);
      einsum_options = true;
      continue;
    }
    if (scan.flag("--broadcast")) { options.allow_broadcast = einsum_options = true; continue; }
    if (scan.flag("--print-stages")) { print_stages = true; continue; }
    positional.emplace_back(scan.positional(positional.empty() ? subscripts_starting_with_dash : nullptr));
  }
  if (prefix.empty())
    usage_error("grad: the output prefix (-o) is empty; give one such as grad_ (the files are PREFIX0.npy, "
                "PREFIX1.npy, ...) or a directory such as out/");
  Runtime rt;
  add_linked_modules(rt);
  for (const std::string& m : modules) rt.load_module(m);

  if (!positional.empty() && is_program_file(positional[0])) {
    if (positional.size() > 1)
      usage_error("grad: unexpected argument '{}' after the program {}; give a program's inputs as --input "
                  "NAME=FILE.npy", positional[1], positional[0]);
    if (einsum_options)
      usage_error("grad: --optimize and --broadcast apply to 'grad SUBSCRIPTS' only; a saved program's einsums keep "
                  "the options they were traced with");
    grad_program(rt, positional[0], input_files, have_wrt ? &wrt_text : nullptr, cotangent_path, prefix, print_stages);
    return 0;
  }
  if (!input_files.empty())
    usage_error("grad: --input names a program's parameter, but no PROGRAM.ir or PROGRAM.json was given; for an "
                "einsum give the operand files after SUBSCRIPTS");
  if (positional.size() < 2)
    usage_error("grad: expected SUBSCRIPTS and at least one .npy file; usage: einstage grad SUBSCRIPTS A.npy "
                "[B.npy ...] [--wrt 0,1]");
  const std::string subscripts = positional[0];
  std::vector<Tensor> operands;
  for (size_t k = 1; k < positional.size(); ++k) operands.push_back(read_npy(positional[k]));
  std::vector<int> wrt;
  if (have_wrt) {
    wrt = parse_wrt(wrt_text, operands.size());
  } else {
    for (size_t k = 0; k < operands.size(); ++k) wrt.push_back(static_cast<int>(k));
  }

  TraceContext ctx("einsum", &rt.registry());
  std::vector<TracedTensor> params;
  for (size_t k = 0; k < operands.size(); ++k) {
    std::vector<Dim> dims(operands[k].shape().begin(), operands[k].shape().end());
    params.push_back(ctx.parameter(fmt::format("a{}", k), operands[k].dtype(), dims));
  }
  TracedTensor y = einsum::einsum(ctx, subscripts, std::span<const TracedTensor>(params), options);
  Program program = ctx.finish({y});
  write_gradients(rt, program, operands, wrt, cotangent_path, quote_for_message(subscripts), prefix, print_stages,
                  [&](int k) {
                    return std::pair(std::to_string(k),
                                     fmt::format("operand {} ({})", k, positional[1 + static_cast<size_t>(k)]));
                  });
  return 0;
}

}  // namespace einstage::cli
