// `einstage einsum`, `einstage plan` and `einstage lower`: a contraction on .npy files, the planner's report for
// given shapes, and the standard-op program an einsum lowers to. Each goes through the library's one path for the
// job (einsum::einsum, the planner's plan() + report, TraceContext + lower_to_standard_ops); nothing here knows a
// contraction rule.
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/op/Semantics.h"
#include "extensions/einsum/exec/SlicedEinsum.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/einsum/planner/Network.h"
#include "extensions/einsum/planner/Report.h"
#include "ir/Json.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "runtime/Context.h"
#include "runtime/Cpus.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"
#include "tools/einstage/Mpi.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

#include <cstdio>

namespace einstage::cli {

namespace {

// Slicing far below the unsliced width is where the tree search pays most (Sycamore m20 to 2^30 elements: 2^71.3 total
// at budget 5, 2^64.2 at budget 60), and plain auto does not search: `plan` and `einsum` say so on stderr when a sliced
// plan does over 2x the unsliced flops without a search of that budget (an explicit order is taken as given).
void note_slicing_overhead(std::string_view command, const einsum::PlanSpec& spec, const einsum::SlicedPlan& p) {
  using einsum::PlanKind;
  const bool explicit_order =
      spec.kind == PlanKind::path || spec.kind == PlanKind::tree || spec.kind == PlanKind::left_to_right;
  const bool searched = spec.kind == PlanKind::anneal ||
                        (spec.kind == PlanKind::automatic && spec.quality == einsum::PlanQuality::high);
  if (p.overhead <= 2.0 || explicit_order || (searched && spec.budget_s >= 60)) return;
  fmt::print(stderr, "{}: note: the sliced plan does {:.3g}x the unsliced flops; a tree search with a larger budget "
                     "often finds a much cheaper sliced tree, e.g. --optimize 'auto(quality=high,budget=60)' "
                     "(docs/planning.md, \"Deep cuts need budget\")\n", command, p.overhead);
}

constexpr std::string_view kEinsumHelp =
    "usage: einstage einsum SUBSCRIPTS A.npy [B.npy ...] [-o OUT.npy] [options]\n"
    "\n"
    "Contracts the .npy operands as SUBSCRIPTS says (NumPy's einsum notation: \"ij,jk->ik\", implicit output \"ij,jk\",\n"
    "\"...ij,...jk->...ik\", nested order \"(ij,jk),kl->il\") and writes the result to OUT.npy (Fortran order) or\n"
    "prints it. Files may be in C or Fortran order; element (i, j, ...) is NumPy's a[i, j, ...] either way.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE   write the result to FILE (.npy) instead of printing it\n"
    "  --optimize ORDER    auto (default), greedy, optimal, anneal, left-to-right, path:(0,1),(0,1),\n"
    "                      or a plan spec such as anneal(budget=2,seed=1)\n"
    "  --broadcast         allow length-1 broadcasting of named labels (`...` axes always broadcast)\n"
    "  --dtype T           convert every operand to T (f32, f64, c64, c128, i64) first; otherwise mixed dtypes\n"
    "                      promote like NumPy\n"
    "  --threads N         kernel threads ({threads})\n"
    "  --max-memory SIZE   contract in slices so that every intermediate of one slice fits SIZE bytes (a whole\n"
    "                      number with B, KiB, MiB or GiB, e.g. 256MiB); the slices run on the threads and are\n"
    "                      added in a fixed order, so the result is the same at any thread count\n"
    "  --mpi               under mpirun: spread the slices over the MPI ranks (every rank reads the inputs; rank 0\n"
    "                      adds the partial results in a fixed order, so the bits equal the one-process run, and\n"
    "                      only rank 0 prints or writes -o); needs an einstage built with MPI. Under mpirun\n"
    "                      without --mpi, einsum refuses to run (every rank would do the whole job)\n"
    "  --time              print the wall times of reading, planning and contracting to stderr (with --mpi: rank 0,\n"
    "                      the contraction timed from a barrier of all ranks to the reduced result)\n"
    "  --                  end of options: later arguments are files even if they start with '-' (subscripts\n"
    "                      starting with \"->\", such as NumPy's \"->\" for a scalar, need no --)\n"
    "  -h, --help          print this help\n";

constexpr std::string_view kPlanHelp =
    "usage: einstage plan SUBSCRIPTS --shapes 6x2x3,6x3x4 [options]\n"
    "\n"
    "Plans the contraction order for operands of the given shapes and prints the planner's report: each pairwise\n"
    "step with its flops and result size, then the totals (flops, largest intermediate, peak memory) and the speed-up\n"
    "over one naive loop nest. Long searches show a progress line on stderr when it is a terminal.\n"
    "\n"
    "options:\n"
    "  --shapes S          one shape per operand, extents joined by 'x', operands by ',' (\"scalar\" for rank 0)\n"
    "  --optimize ORDER    auto (default), greedy, optimal, anneal, left-to-right, path:(0,1),(0,1),\n"
    "                      or a plan spec such as anneal(budget=2,seed=1)\n"
    "  --broadcast         allow length-1 broadcasting of named labels\n"
    "  --threads N         threads for multi-trial searches; the plan does not depend on it\n"
    "                      ({threads})\n"
    "  --max-memory SIZE  slice the contraction so that every intermediate of one slice fits SIZE bytes (a whole\n"
    "                      number with B, KiB, MiB or GiB, e.g. 256MiB); reports the sliced labels, the number of\n"
    "                      slices, one slice's cost and the overhead over the unsliced tree\n"
    "  --dtype T           element type for --max-memory (f32, f64, c64, c128, i64; default f64)\n"
    "  --no-clock-guard    a budget counts work only: the same plan on any machine, however slow or busy, though it\n"
    "                      may take longer than the budget there (by default the clock also stops it at the budget)\n"
    "  --json              print the report as JSON\n"
    "  -h, --help          print this help\n";

constexpr std::string_view kLowerHelp =
    "usage: einstage lower SUBSCRIPTS --shapes 6x2x3,6x3x4 [options]\n"
    "\n"
    "Traces one einsum on parameters of the given shapes (named a, b, c, ...) and prints the program that\n"
    "lower_to_standard_ops makes of it: the planned pairwise steps as standard ops (extract_diag, reduce_sum,\n"
    "broadcast_in_dim, dot_general, mul, transpose, embed_diag).\n"
    "\n"
    "options:\n"
    "  --shapes S          one shape per operand (see 'einstage plan --help')\n"
    "  --format F          text (default), json or dot (Graphviz)\n"
    "  --optimize ORDER    the contraction order (see 'einstage plan --help')\n"
    "  --broadcast         allow length-1 broadcasting of named labels\n"
    "  --dtype T           the parameters' dtype (default f64)\n"
    "  -h, --help          print this help\n";

// The first line of a library error (notation errors add caret lines; the command line reports one line).
[[noreturn]] void rethrow_one_line(const Error& e) {
  std::string what = e.what();
  throw Error(e.kind(), what.substr(0, what.find('\n')));
}

std::string param_name(size_t k) { return k < 26 ? std::string(1, static_cast<char>('a' + k)) : fmt::format("t{}", k); }

}  // namespace

int run_einsum(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", with_threads_default(kEinsumHelp));
    return 0;
  }
  ArgScanner scan("einsum", args);
  std::string subscripts, value;
  std::optional<std::string> output;  // -o '' is given, and refused when writing, not taken for "print"
  std::vector<std::string> files;
  bool have_subscripts = false;
  std::optional<DType> dtype;
  std::optional<int64_t> max_memory;
  bool mpi = false, timing = false;
  einsum::EinsumOptions options;
  while (scan.next()) {
    if (scan.option("--output", &value, "-o")) { output = value; continue; }
    if (scan.option("--optimize", &value)) { options.plan = parse_optimize("einsum", value); continue; }
    if (scan.option("--dtype", &value)) { dtype = parse_dtype_arg("einsum", value); continue; }
    if (scan.option("--threads", &value)) { options.threads = parse_threads("einsum", value); continue; }
    if (scan.option("--max-memory", &value)) { max_memory = parse_max_memory("einsum", value); continue; }
    if (scan.flag("--broadcast")) { options.allow_broadcast = true; continue; }
    if (scan.flag("--mpi")) { mpi = true; continue; }
    if (scan.flag("--time")) { timing = true; continue; }
    std::string_view p = scan.positional(have_subscripts ? nullptr : subscripts_starting_with_dash);
    if (!have_subscripts) {
      subscripts = std::string(p);
      have_subscripts = true;
    } else {
      files.emplace_back(p);
    }
  }
  if (!have_subscripts) usage_error("einsum: no subscripts given; usage: einstage einsum SUBSCRIPTS A.npy [B.npy ...]");
  if (files.empty()) usage_error("einsum: no operand files given; usage: einstage einsum SUBSCRIPTS A.npy [B.npy ...]");
  if (max_memory) options.plan.max_memory = *max_memory;
  if (const std::optional<LauncherJob> job = launcher_job(); job && job->size > 1 && !mpi) {
    // N whole copies would each contract everything and all write -o: refused on every rank, said once by rank 0.
    if (job->rank != 0) return 2;
    if (output)
      usage_error("einsum: started by an MPI launcher as rank 0 of {} without --mpi: every rank would contract the "
                  "whole problem and write '{}'; add --mpi to spread the slices over the ranks, or run einstage "
                  "without mpirun",
                  job->size, *output);
    usage_error("einsum: started by an MPI launcher as rank 0 of {} without --mpi: every rank would contract the "
                "whole problem; add --mpi to spread the slices over the ranks, or run einstage without mpirun",
                job->size);
  }
  if (mpi && have_mpi() && !launcher_job())
    fmt::print(stderr, "einsum: note: --mpi outside an MPI launcher (no mpirun environment): running as one rank\n");
  auto read_operands = [&] {
    std::vector<Tensor> operands;
    for (const std::string& f : files) {
      // As stored: a C-order file is not reordered; the contraction reads its row-major strides directly.
      Tensor t = read_npy(f, nullptr, NpyLayout::as_stored);
      operands.push_back(dtype && t.dtype() != *dtype ? t.astype(*dtype) : t);
    }
    return operands;
  };
  // The command's own context: --threads is an explicit option, so a bad EINSTAGE_NUM_THREADS is never read.
  ConfigOptions config;
  if (options.threads != 0) config.threads = options.threads;
  options.threads = 0;  // the context's pool
  auto emit = [&](const Tensor& result) {
    if (output) write_npy(*output, result, NpyOrder::fortran);
    else fmt::print("{}\n", result.to_string());
  };
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  if (mpi) {
    return run_in_mpi_job([&](int rank, int ranks) {
      const auto t0 = Clock::now();
      const std::vector<Tensor> operands = read_operands();
      const double read_s = seconds_since(t0);
      Tensor result;
      double plan_s = 0, contract_s = 0;
      int threads = 1;
      try {
        ExecutionContext context(config);
        threads = context.threads();
        std::vector<einsum::TensorMeta> metas;
        for (const Tensor& t : operands) metas.push_back(einsum::TensorMeta::of(t));
        // Without --max-memory the job is one slice (rank 0 contracts it); the plan is the same on every rank.
        const int64_t limit = options.plan.max_memory > 0 ? options.plan.max_memory : int64_t{1} << 62;
        const auto t1 = Clock::now();
        const auto plan = einsum::SlicedEinsumPlan::prepare(subscripts, metas, limit, options);
        plan_s = seconds_since(t1);
        if (rank == 0 && options.plan.max_memory > 0) note_slicing_overhead("einsum", options.plan, plan.slicing());
        // Every rank starts contracting together, so the time is the job's, not one rank's head start.
        if (timing) mpi_barrier();
        const auto t2 = Clock::now();
        result = execute_distributed(plan, operands, context, rank, ranks);
        contract_s = seconds_since(t2);
      } catch (const Error& e) {
        rethrow_one_line(e);
      }
      if (rank != 0) return;
      emit(result);
      if (timing)
        fmt::print(stderr, "einsum: time: read {:.6f} s, plan {:.6f} s, contract {:.6f} s on {} ranks x {} threads\n",
                   read_s, plan_s, contract_s, ranks, threads);
    });
  }
  const auto t0 = Clock::now();
  const std::vector<Tensor> operands = read_operands();
  const double read_s = seconds_since(t0);
  Tensor result;
  int threads = 1;
  const auto t1 = Clock::now();
  try {
    ExecutionContext context(config);
    threads = context.threads();
    options.context = &context;
    if (options.plan.max_memory > 0) {
      // What one-shot einsum() does with a limit (the same plan and bits), with the plan at hand for the note.
      std::vector<einsum::TensorMeta> metas;
      for (const Tensor& t : operands) metas.push_back(einsum::TensorMeta::of(t));
      const auto plan = einsum::SlicedEinsumPlan::prepare(subscripts, metas, options.plan.max_memory, options);
      note_slicing_overhead("einsum", options.plan, plan.slicing());
      result = plan.execute(operands, context, &context.pool());
    } else {
      result = einsum::einsum(subscripts, operands, options);
    }
  } catch (const Error& e) {
    rethrow_one_line(e);
  }
  const double einsum_s = seconds_since(t1);
  emit(result);
  if (timing)
    fmt::print(stderr, "einsum: time: read {:.6f} s, plan and contract {:.6f} s on {} threads\n", read_s, einsum_s,
               threads);
  return 0;
}

int run_plan(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", with_threads_default(kPlanHelp));
    return 0;
  }
  ArgScanner scan("plan", args);
  std::string subscripts, shapes_text, value;
  bool have_subscripts = false, have_shapes = false, json = false, broadcast = false;
  std::optional<einsum::PlanSpec> spec;
  einsum::PlanOptions plan_options;
  std::optional<int> threads;
  std::optional<int64_t> max_memory;
  DType dtype = DType::f64;
  while (scan.next()) {
    if (scan.option("--shapes", &shapes_text)) { have_shapes = true; continue; }
    if (scan.option("--max-memory", &value)) { max_memory = parse_max_memory("plan", value); continue; }
    if (scan.option("--dtype", &value)) { dtype = parse_dtype_arg("plan", value); continue; }
    if (scan.option("--optimize", &value)) { spec = parse_optimize("plan", value); continue; }
    if (scan.option("--threads", &value)) { threads = parse_threads("plan", value); continue; }
    if (scan.flag("--json")) { json = true; continue; }
    if (scan.flag("--broadcast")) { broadcast = true; continue; }
    if (scan.flag("--no-clock-guard")) { plan_options.clock_guard = false; continue; }
    std::string_view p = scan.positional(have_subscripts ? nullptr : subscripts_starting_with_dash);
    if (have_subscripts) usage_error("plan: unexpected argument '{}'; usage: einstage plan SUBSCRIPTS --shapes ...", p);
    subscripts = std::string(p);
    have_subscripts = true;
  }
  if (!have_subscripts) usage_error("plan: no subscripts given; usage: einstage plan SUBSCRIPTS --shapes 6x2x3,6x3x4");
  if (!have_shapes) usage_error("plan: --shapes is required, e.g. --shapes 6x2x3,6x3x4");
  std::vector<Shape> shapes = parse_shapes("plan", shapes_text);
  plan_options.threads = threads ? *threads : default_threads();
  const bool show_progress = ::isatty(STDERR_FILENO) == 1;
  bool progress_shown = false;
  if (show_progress)
    plan_options.progress = [&](const einsum::PlanProgress& p) {
      if (p.elapsed_s < 0.3) return;  // short searches stay quiet
      progress_shown = true;
      if (p.trials_total > 0) {
        int width = 30, filled = static_cast<int>(width * static_cast<double>(p.trials_done) / p.trials_total);
        fmt::print(stderr, "\rplanning [{:<{}}] {}/{} trials, best {:.4g} flops, {:.1f} s", std::string(filled, '#'),
                   width, p.trials_done, p.trials_total, p.best_flops, p.elapsed_s);
      } else {
        fmt::print(stderr, "\rplanning: {} trials, best {:.4g} flops, {:.1f} s", p.trials_done, p.best_flops,
                   p.elapsed_s);
      }
      std::fflush(stderr);
    };
  try {
    einsum::Notation notation = einsum::parse_notation(subscripts, shapes.size());
    einsum::BoundEinsum bound = einsum::bind_einsum(notation, shapes, broadcast);
    einsum::PlanSpec chosen = spec ? *spec
                                   : (notation.order.empty() ? einsum::PlanSpec{} : einsum::PlanSpec::tree_plan(notation.order));
    auto note_timing = [](bool stopped_by_budget) {
      if (stopped_by_budget)
        fmt::print(stderr, "plan: note: the clock stopped planning before the budget's work was done (a slow or busy "
                           "machine), so this plan depends on timing; --no-clock-guard gives the reproducible one\n");
    };
    if (max_memory) chosen.max_memory = *max_memory;
    if (chosen.max_memory > 0) {
      const einsum::SliceLimit limit{max_memory_elements("plan", chosen.max_memory, dtype),
                                     static_cast<int>(size_of(dtype))};
      einsum::SlicedPlan sliced = einsum::plan_sliced(chosen, bound.subs, bound.extents, limit, plan_options);
      if (progress_shown) fmt::print(stderr, "\n");
      note_timing(sliced.stopped_by_budget);
      note_slicing_overhead("plan", chosen, sliced);
      if (json) fmt::print("{}\n", einsum::sliced_report_json(bound.subs, sliced, 2));
      else fmt::print("{}", einsum::sliced_report_text(bound.subs, sliced));
      return 0;
    }
    einsum::PlanResult result = einsum::plan_contraction(chosen, bound.subs, bound.extents, plan_options);
    if (progress_shown) fmt::print(stderr, "\n");
    note_timing(result.stopped_by_budget);
    if (json) fmt::print("{}\n", einsum::report_json(bound.subs, result.tree, result.cost, result.method, 2));
    else fmt::print("{}", einsum::report_text(bound.subs, result));
  } catch (const Error& e) {
    if (progress_shown) fmt::print(stderr, "\n");
    rethrow_one_line(e);
  }
  return 0;
}

int run_lower(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kLowerHelp);
    return 0;
  }
  ArgScanner scan("lower", args);
  std::string subscripts, shapes_text, format = "text", value;
  bool have_subscripts = false, have_shapes = false;
  einsum::TraceEinsumOptions options;
  DType dtype = DType::f64;
  while (scan.next()) {
    if (scan.option("--shapes", &shapes_text)) { have_shapes = true; continue; }
    if (scan.option("--format", &format)) continue;
    if (scan.option("--optimize", &value)) { options.plan = parse_optimize("lower", value); continue; }
    if (scan.option("--dtype", &value)) { dtype = parse_dtype_arg("lower", value); continue; }
    if (scan.flag("--broadcast")) { options.allow_broadcast = true; continue; }
    std::string_view p = scan.positional(have_subscripts ? nullptr : subscripts_starting_with_dash);
    if (have_subscripts) usage_error("lower: unexpected argument '{}'; usage: einstage lower SUBSCRIPTS --shapes ...", p);
    subscripts = std::string(p);
    have_subscripts = true;
  }
  if (!have_subscripts) usage_error("lower: no subscripts given; usage: einstage lower SUBSCRIPTS --shapes 6x2x3,6x3x4");
  if (!have_shapes) usage_error("lower: --shapes is required, e.g. --shapes 6x2x3,6x3x4");
  if (format != "text" && format != "json" && format != "dot")
    usage_error("lower: bad --format value '{}'; expected text, json or dot", format);
  std::vector<Shape> shapes = parse_shapes("lower", shapes_text);
  try {
    ExtensionRegistry registry;
    einsum::register_einsum_semantics(registry);
    TraceContext ctx("lowered", &registry);
    std::vector<TracedTensor> params;
    for (size_t k = 0; k < shapes.size(); ++k)
      params.push_back(ctx.parameter(param_name(k), dtype, std::vector<Dim>(shapes[k].begin(), shapes[k].end())));
    TracedTensor y = einsum::einsum(ctx, subscripts, params, options);
    Program lowered = lower_to_standard_ops(ctx.finish({y}), {}, registry);
    if (format == "json") fmt::print("{}\n", program_to_json(lowered));
    else if (format == "dot") fmt::print("{}", print_dot(lowered));
    else fmt::print("{}", print_program(lowered));
  } catch (const Error& e) {
    rethrow_one_line(e);
  }
  return 0;
}

}  // namespace einstage::cli
