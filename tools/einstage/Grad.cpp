// `einstage grad SUBSCRIPTS A.npy B.npy ... [--wrt 0,1] [--cotangent C.npy] [-o PREFIX] [--broadcast]`: the gradient
// of sum(einsum(...)) -- or, with a cotangent C, of <C, einsum(...)> -- with respect to the chosen operands, written
// as .npy files. The einsum is traced into a program, differentiated with ad::vjp (compiler/ad/Ad.h) and run on the
// einsum module, so the command exercises exactly the path a traced program takes. Everything is read and checked
// before anything is written.
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/TraceEinsum.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "ir/Quote.h"
#include "runtime/Runtime.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"

#include <fmt/format.h>

#include <charconv>
#include <set>
#include <vector>

namespace einstage::cli {

namespace {

constexpr std::string_view kGradHelp =
    "usage: einstage grad SUBSCRIPTS A.npy [B.npy ...] [--wrt 0,1] [--cotangent C.npy] [-o PREFIX] [options]\n"
    "\n"
    "Writes the gradient of sum(einsum(SUBSCRIPTS, A, B, ...)) with respect to the chosen operands, one .npy file\n"
    "per operand: PREFIX<k>.npy for operand k (default PREFIX: grad_). With --cotangent C.npy (the output's shape and\n"
    "dtype) it is the gradient of <C, einsum(...)> = sum(conj(C) * einsum(...)) instead, i.e. the vector-Jacobian\n"
    "product with C. Each gradient has its operand's shape and dtype, also where a length-1 axis broadcast.\n"
    "For complex tensors this is the adjoint cotangent J^H C (for a real loss L of complex z: dL/dx + i dL/dy;\n"
    "docs/ad.md explains the conventions).\n"
    "\n"
    "options:\n"
    "  --wrt LIST          operand indices, comma-separated (default: every operand)\n"
    "  --cotangent FILE    the output cotangent C (default: ones, the gradient of the sum)\n"
    "  -o, --output PREFIX prefix of the written files (default grad_)\n"
    "  --broadcast         allow length-1 axes of named labels to broadcast (as '...' axes always do)\n"
    "  --optimize SPEC     contraction order: auto (default), greedy, optimal, path:(0,1),..., tree[...]; the reverse\n"
    "                      pass walks the same tree (per-operand reverse einsums rewrite an explicit path or tree)\n"
    "  --print-stages      print the vjp program and how each instruction was prepared: the contraction tree, the\n"
    "                      intermediates the reverse pass keeps or recomputes (EINSTAGE_AD_KEEP_BYTES bounds them)\n"
    "  -h, --help          print this help\n";

std::vector<int> parse_wrt(std::string_view text, size_t operands) {
  std::vector<int> out;
  std::set<int> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    int v = -1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
      usage_error("grad: --wrt '{}' is not a comma-separated list of operand indices (e.g. 0,1)", text);
    if (v < 0 || static_cast<size_t>(v) >= operands)
      usage_error("grad: --wrt names operand {} but {} operand file{} given (indices 0..{})", v, operands,
                  operands == 1 ? " was" : "s were", operands - 1);
    if (!seen.insert(v).second) usage_error("grad: --wrt names operand {} twice", v);
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace

int run_grad(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kGradHelp);
    return 0;
  }
  ArgScanner scan("grad", args);
  std::vector<std::string> positional;
  std::string wrt_text, cotangent_path, prefix = "grad_", value;
  bool have_wrt = false, print_stages = false;
  einsum::TraceEinsumOptions options;
  while (scan.next()) {
    if (scan.option("--wrt", &wrt_text)) { have_wrt = true; continue; }
    if (scan.option("--cotangent", &cotangent_path)) continue;
    if (scan.option("--output", &prefix, "-o")) continue;
    if (scan.option("--optimize", &value)) { options.plan = parse_optimize("grad", value); continue; }
    if (scan.flag("--broadcast")) { options.allow_broadcast = true; continue; }
    if (scan.flag("--print-stages")) { print_stages = true; continue; }
    positional.emplace_back(scan.positional(positional.empty() ? subscripts_starting_with_dash : nullptr));
  }
  if (prefix.empty())
    usage_error("grad: the output prefix (-o) is empty; give one such as grad_ (the files are PREFIX0.npy, "
                "PREFIX1.npy, ...) or a directory such as out/");
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

  Runtime rt;
  rt.add_module(einsum::module_descriptor());
  TraceContext ctx("einsum", &rt.registry());
  std::vector<TracedTensor> params;
  for (size_t k = 0; k < operands.size(); ++k) {
    std::vector<Dim> dims(operands[k].shape().begin(), operands[k].shape().end());
    params.push_back(ctx.parameter(fmt::format("a{}", k), operands[k].dtype(), dims));
  }
  TracedTensor y = einsum::einsum(ctx, subscripts, std::span<const TracedTensor>(params), options);
  const TensorType out_type = y.type();
  Program program = ctx.finish({y});
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
           quote_for_message(subscripts), out_type.to_string());
  }
  std::vector<Tensor> inputs = operands;
  inputs.push_back(cotangent);
  const Executable exe = rt.prepare(vjp);
  if (print_stages)
    fmt::print("== vjp program\n{}\n== prepared\n{}\n", print_program(vjp),
               exe.describe_prepared(std::span<const Tensor>(inputs)));
  std::vector<Tensor> results = exe.run(std::span<const Tensor>(inputs));  // output, then gradients
  for (size_t w = 0; w < wrt.size(); ++w) {
    std::string path = fmt::format("{}{}.npy", prefix, wrt[w]);
    const Tensor& g = results[1 + w];
    write_npy(path, g);
    fmt::print("{}: d/d operand {} ({}), {}{}\n", path, wrt[w], positional[1 + wrt[w]], name(g.dtype()),
               shape_to_string(g.shape()));
  }
  return 0;
}

}  // namespace einstage::cli
