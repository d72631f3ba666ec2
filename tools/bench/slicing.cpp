// einstage_bench_slicing: slicing under a memory limit, planned and executed.
//
// Part 1 (planner): the grid, random-regular and Sycamore instances of docs/networks.md (all but the 100x100 scale
// test: 2D and 3D lattices, rrg3 n100/n200/n500, rrg3mis n200, Sycamore m20). Each is planned unsliced
// (auto(quality=high) at the given budget, work-only budget so the trees are the same on every machine), then sliced
// to a limit of 2^(floor(sc) - 8) elements (>= 256 slices) with plan_sliced(); the table gives the unsliced tc / sc,
// the slices, one slice's tc / sc, the total tc and the overhead (total sliced flops / unsliced flops; target <= 2),
// and the overhead over the sliced tree's own unsliced cost ("same tree"): below the first when the sliced search
// found a tree cheaper than the unsliced search did (then that tree is the better unsliced reference).
// Sycamore is also sliced to 2^42 elements (OMEinsum's knee) and to 2^30 (a node of 8 GiB of complex64, docs/scale.md).
// --cuts 1,2,4,8 slices every instance to 2^(floor(sc) - cut) for each cut instead: the overhead against the limit.
// --slice-pairs (SlicePairs.h): for the --only instances at each cut, the first choice of the sliced planner made
// exhaustively: every pair of summed labels fixed to extent 1 and the rest planned under the limit with plan_sliced
// (screened with --pair-screen SPEC, default greedy; the best --pair-replan N re-planned with the table's spec;
// --pair-sample M pairs spread over the rest of the screen's ranking re-planned as a check of it; with
// --pair-triples K every third label on the best K re-planned pairs, the best --pair-triple-replan N of those
// re-planned), on --pair-threads T threads (default 2; same results at any count). --pair-max N: the first N pairs only.
// Part 2 (executed): a grid of tensors whose unsliced largest intermediate is 2^cut times the limit (>= 16x asked),
// contracted unsliced (1 and 2 threads), then sliced on 1 and 2 threads in this process, then sliced by
// `mpirun -np 1` and `-np 2` running the einstage program beside this one (`einsum --mpi --time --threads 1`, as root
// with OpenMPI's allow-run-as-root settings, --oversubscribe; the time is rank 0's, from a barrier of all ranks to the
// reduced result, so start-up, reading and planning are not in it). The table gives wall times, the sliced time
// against the flop overhead's prediction (unsliced 1-thread time x overhead), the 2-thread and 2-rank speed-ups,
// the relative difference to the unsliced result (1e-12 in f64/c128, 1e-5 in f32/c64) and whether the 2-thread and
// mpirun results have the bits of the 1-thread sliced run; the load average before and after says how quiet the
// machine was. Timings are best-of (--min-time per in-process column, --mpi-repeats jobs per rank count).
//
//   einstage_bench_slicing [--bench-dir DIR] [--budget S] [--only a,b] [--cuts 8] [--skip-plan] [--skip-execute]
//                          [--grid SIDE] [--bond D] [--cut BITS] [--dtype T] [--min-time S] [--mpi-repeats N]
//                          [--skip-mpi] [--einstage PATH] [--mpirun PATH] [--json FILE]
//                          [--slice-pairs [--pair-screen SPEC] [--pair-replan N] [--pair-sample M] [--pair-triples K]
//                           [--pair-triple-replan N] [--pair-threads T] [--pair-max N]]
// Prints tables and writes JSON (default bench-slicing.json); names the CPU.
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/exec/SlicedEinsum.h"
#include "extensions/einsum/planner/Slicing.h"
#include "ir/Npy.h"
#include "runtime/Context.h"
#include "tools/bench/BenchUtil.h"
#include "tools/bench/Machine.h"
#include "tools/bench/Networks.h"
#include "tools/bench/SlicePairs.h"

#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>

#include <time.h>
#include <unistd.h>

using namespace einstage;
using namespace einstage::einsum;
using namespace einstage::bench;

namespace {

struct PlanRow {
  std::string instance;
  double limit_log2 = 0;
  double unsliced_tc = 0, unsliced_sc = 0;
  double slices = 0, slice_tc = 0, slice_sc = 0, total_tc = 0, overhead = 0, slice_peak = 0;
  double unsliced_s = 0, sliced_s = 0;
  size_t sliced_labels = 0;
  double same_tree_overhead = 0;  // total sliced flops / the sliced tree's flops on the unsliced extents
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<PlanRow> plan_part(const std::vector<Instance>& instances, double budget, const std::vector<int>& cuts) {
  std::vector<PlanRow> rows;
  fmt::print("{:<18} {:>7} {:>6} {:>6} {:>9} {:>8} {:>6} {:>8} {:>8} {:>9} {:>8}\n", "instance", "tc", "sc", "limit",
             "slices", "slice tc", "sc", "total tc", "overhead", "same tree", "plan s");
  for (const Instance& inst : instances) {
    PlanSpec spec = PlanSpec::automatic_plan(PlanQuality::high);
    spec.budget_s = budget;
    PlanOptions options;
    options.clock_guard = false;
    const double t0 = now_s();
    const PlanResult base = plan_contraction(spec, inst.subscripts, inst.extents, options);
    const double t1 = now_s();
    std::vector<double> limits;
    for (int cut : cuts) limits.push_back(std::floor(base.cost.sc) - cut);
    if (inst.name == "sycamore_m20" && cuts == std::vector<int>{8}) limits.insert(limits.end(), {42, 30});
    for (double bits : limits) {
      // The unsliced tree is planned once; plan_sliced plans it again (same work, same tree), so time that apart.
      const double s0 = now_s();
      const SlicedPlan p = plan_sliced(spec, inst.subscripts, inst.extents, {std::exp2(bits)}, options);
      const double s1 = now_s();
      PlanRow r{inst.name, bits, base.cost.tc, base.cost.sc, p.num_slices, p.slice_cost.tc, p.slice_cost.sc,
                std::log2(p.total_flops), p.overhead, p.slice_cost.peak_memory, t1 - t0, (s1 - s0) - (t1 - t0),
                p.sliced.size()};
      r.same_tree_overhead = p.same_tree_overhead;
      fmt::print("{:<18} {:>7.2f} {:>6.2f} {:>6} {:>9.3g} {:>8.2f} {:>6.2f} {:>8.2f} {:>7.3f}x {:>8.3f}x {:>8.2f}\n",
                 r.instance, r.unsliced_tc, r.unsliced_sc, fmt::format("2^{:.0f}", bits), r.slices, r.slice_tc,
                 r.slice_sc, r.total_tc, r.overhead, r.same_tree_overhead, r.unsliced_s + std::max(0.0, r.sliced_s));
      std::fflush(stdout);
      rows.push_back(r);
    }
  }
  return rows;
}

double rel_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.astype(DType::c128).to_col_major<std::complex<double>>();
  const auto y = b.astype(DType::c128).to_col_major<std::complex<double>>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(std::abs(x[i])) || !std::isfinite(std::abs(y[i]))) return NAN;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1e-300, std::max(std::abs(x[i]), std::abs(y[i]))));
  return worst;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return in ? one + " " + five + " " + fifteen : "unknown";
}

// Wall and process CPU seconds of fn: best of at least five calls and `min_time` seconds, after a warm-up call (which
// compiles kernels). The CPU time counts every thread of this process, so cpu / wall on an idle machine is how many
// threads were busy, and a 2-thread run's CPU time above the 1-thread run's is the threads' overhead (waiting, sharing
// caches), which the machine's load hardly changes: the load-robust half of the speed-up.
struct Timed {
  double wall = 1e300, cpu = 1e300;
};
Timed time_both(const std::function<void()>& fn, double min_time) {
  auto cpu_now = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  fn();
  Timed best;
  double total = 0;
  for (int reps = 0; total < min_time || reps < 5; ++reps) {
    const double w0 = now_s(), c0 = cpu_now();
    fn();
    const double w = now_s() - w0, c = cpu_now() - c0;
    best.wall = std::min(best.wall, w), best.cpu = std::min(best.cpu, c);
    total += w;
  }
  return best;
}

struct ExecuteArgs {
  int side = 8, cut = 4;
  int64_t bond = 4;
  DType dtype = DType::f64;
  double min_time = 1.0;  // best_time's minimum per in-process column
  int mpi_repeats = 3;    // mpirun jobs per rank count (best contract time)
  bool mpi = true;
  fs::path einstage, mpirun = "mpirun";
};

// One timed `mpirun -np ranks einstage einsum ... --mpi --time`: the contract time rank 0 prints (from a barrier of
// all ranks to the reduced result), or nullopt when the job failed (its output is printed).
std::optional<double> mpi_contract_time(const ExecuteArgs& a, const fs::path& dir, const std::string& subscripts,
                                        size_t operands, int64_t limit_bytes, int ranks, const fs::path& out) {
  std::string files;
  for (size_t i = 0; i < operands; ++i) files += fmt::format(" '{}'", (dir / fmt::format("t{}.npy", i)).string());
  // As root OpenMPI needs its allow-run-as-root settings; shared memory between the ranks (btl self,vader), one
  // kernel thread per rank, so two ranks use the two cores as two threads would.
  const std::string command = fmt::format(
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader '{}' --oversubscribe "
      "-np {} '{}' einsum '{}'{} --max-memory {}B --threads 1 --mpi --time -o '{}' 2>&1",
      a.mpirun.string(), ranks, a.einstage.string(), subscripts, files, limit_bytes, out.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  const size_t at = output.find(", contract ");
  if (status != 0 || at == std::string::npos) {
    fmt::print("  mpirun -np {} failed (status {}):\n{}\n", ranks, status, output);
    return std::nullopt;
  }
  return std::stod(output.substr(at + std::strlen(", contract ")));
}

nlohmann::json execute_part(const ExecuteArgs& a, const Machine& machine) {
  auto [text, shapes] = grid_workload(a.side, a.bond);
  std::vector<Tensor> ops;
  SplitMix64 rng(12345);
  std::vector<TensorMeta> metas;
  for (const Shape& s : shapes) {
    Tensor t = Tensor::empty(DType::f64, s);
    // Values 0.5..1.5 times bond^(-bonds/sites): no cancellation, so relative differences mean something, and the
    // sum of bond^bonds products stays near 1 (finite in f32 too).
    const double scale = std::pow(static_cast<double>(a.bond), -2.0 * (a.side - 1) / a.side);
    for (int64_t k = 0; k < t.numel(); ++k) t.data<double>()[k] = (0.5 + rng.uniform()) * scale;
    if (a.dtype != DType::f64) t = t.astype(a.dtype);
    ops.push_back(t);
    metas.push_back(TensorMeta::of(t));
  }
  const std::string load_before = load_average();
  ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  const EinsumPlan unsliced = EinsumPlan::prepare(text, metas);
  const TreeCost cost = evaluate(unsliced.subscripts(), unsliced.extents(), unsliced.tree());
  const double limit_elements = std::exp2(std::floor(cost.sc) - a.cut);
  const int64_t limit_bytes = static_cast<int64_t>(limit_elements) * static_cast<int64_t>(size_of(a.dtype));
  const SlicedEinsumPlan sliced = SlicedEinsumPlan::prepare(text, metas, limit_bytes);
  const SlicedPlan& sp = sliced.slicing();
  const double peak_over_limit = cost.max_intermediate / limit_elements;
  fmt::print("\nexecuted: grid {}x{} bond {} ({} tensors), {}; load average before: {}\n", a.side, a.side, a.bond,
             ops.size(), name(a.dtype), load_before);
  fmt::print("  unsliced: tc {:.2f}, largest intermediate 2^{:.2f} elements, peak {:.3g} elements\n", cost.tc, cost.sc,
             cost.peak_memory);
  fmt::print("  limit 2^{:.0f} elements ({}): unsliced largest / limit = {:.0f}x{}; {} slices ({} labels), {} chunks, "
             "slice tc {:.2f} sc {:.2f}, flop overhead {:.3f}x\n", std::log2(limit_elements),
             format_memory_size(limit_bytes), peak_over_limit, peak_over_limit < 16 ? " (BELOW the 16x asked)" : "",
             sliced.num_slices(), sp.sliced.size(), sliced.num_chunks(), sp.slice_cost.tc, sp.slice_cost.sc,
             sp.overhead);
  std::fflush(stdout);

  Tensor want, want2, got1, got2;
  const Timed tu1 = time_both([&] { want = unsliced.execute(ops, one); }, a.min_time);
  const Timed tu2 = time_both([&] { want2 = unsliced.execute(ops, two); }, a.min_time);
  const Timed ts1 = time_both([&] { got1 = sliced.execute(ops, one, &one.pool()); }, a.min_time);
  const Timed ts2 = time_both([&] { got2 = sliced.execute(ops, two, &two.pool()); }, a.min_time);
  const double u1 = tu1.wall, u2 = tu2.wall, s1 = ts1.wall, s2 = ts2.wall;
  const double predicted = u1 * sp.overhead;
  // The same prediction in CPU seconds, which a busy machine disturbs less than wall seconds.
  const double cpu_over_predicted = ts1.cpu / (tu1.cpu * sp.overhead);
  const double diff = rel_diff(got1, want);
  const bool precise = a.dtype == DType::f64 || a.dtype == DType::c128;
  const double tolerance = precise ? 1e-12 : 1e-5;

  // mpirun -np 1 and 2: the same plan in every rank (planning is deterministic), one kernel thread each.
  std::optional<double> m1, m2;
  bool mpi_bits_1 = false, mpi_bits_2 = false;
  std::string mpi_note;
  if (!a.mpi) {
    mpi_note = "skipped (--skip-mpi)";
  } else if (!fs::exists(a.einstage)) {
    mpi_note = fmt::format("skipped: no einstage program at {} (--einstage PATH)", a.einstage.string());
  } else {
    const fs::path dir = fs::temp_directory_path() / fmt::format("einstage-bench-slicing-{}", ::getpid());
    fs::create_directories(dir);
    for (size_t i = 0; i < ops.size(); ++i) write_npy((dir / fmt::format("t{}.npy", i)).string(), ops[i]);
    auto best_of = [&](int ranks, bool& bits) {
      std::optional<double> best;
      for (int k = 0; k < a.mpi_repeats; ++k) {
        const fs::path out = dir / fmt::format("out{}.npy", ranks);
        const auto t = mpi_contract_time(a, dir, text, ops.size(), limit_bytes, ranks, out);
        if (!t) return best;
        best = best ? std::min(*best, *t) : *t;
        bits = same_bits(read_npy(out.string()), got1);
      }
      return best;
    };
    m1 = best_of(1, mpi_bits_1);
    m2 = best_of(2, mpi_bits_2);
    fs::remove_all(dir);
    if (!m1 || !m2) mpi_note = "failed (see above)";
  }
  const std::string load_after = load_average();

  auto row = [](std::string_view what, double s, std::string cpu, std::string_view vs, std::string_view bits) {
    fmt::print("| {:<28} | {:>9.4f} | {:>9} | {:<45} | {:<28} |\n", what, s, cpu, vs, bits);
  };
  auto cpu = [](double c) { return fmt::format("{:.4f}", c); };
  fmt::print("\n| {:<28} | {:>9} | {:>9} | {:<45} | {:<28} |\n", "run", "wall s", "cpu s", "against", "result");
  fmt::print("|{:-<30}|{:-<11}|{:-<11}|{:-<47}|{:-<30}|\n", "", "", "", "", "");
  row("unsliced, 1 thread", u1, cpu(tu1.cpu), "", "");
  row("unsliced, 2 threads", u2, cpu(tu2.cpu), fmt::format("{:.2f}x 1 thread", u1 / u2), "");
  row("sliced, 1 thread", s1, cpu(ts1.cpu),
      fmt::format("{:.2f}x flop-predicted {:.4f} s (cpu {:.2f}x)", s1 / predicted, predicted, cpu_over_predicted),
      fmt::format("rel diff {:.1e} ({})", diff, diff <= tolerance ? "ok" : "ABOVE tolerance"));
  row("sliced, 2 threads", s2, cpu(ts2.cpu),
      fmt::format("{:.2f}x speed-up (cpu {:.2f}x 1 thread)", s1 / s2, ts2.cpu / ts1.cpu),
      same_bits(got1, got2) ? "bits = 1 thread" : "bits DIFFER");
  if (m1 && m2) {
    row("mpirun -np 1, 1 thread", *m1, "-", fmt::format("{:.2f}x in-process 1 thread", *m1 / s1),
        mpi_bits_1 ? "bits = in-process" : "bits DIFFER");
    row("mpirun -np 2, 1 thread each", *m2, "-", fmt::format("{:.2f}x speed-up over -np 1", *m1 / *m2),
        mpi_bits_2 ? "bits = in-process" : "bits DIFFER");
  } else {
    fmt::print("mpirun: {}\n", mpi_note);
  }
  fmt::print("targets: sliced 1 thread <= 1.5x flop-predicted; 2 threads >= 1.8x; mpirun -np 2 >= 1.7x -np 1; rel diff "
             "<= {:.0e}\n", tolerance);
  fmt::print("load average before {}, after {}; {}\n", load_before, load_after, machine.summary());
  const double total = sliced.num_slices() * sp.slice_cost.flops;
  fmt::print("sliced rate: {:.3g} multiply-adds/s on 1 thread, {:.3g} on 2 ({} per slice: {:.3g} multiply-adds)\n",
             total / s1, total / s2, name(a.dtype), sp.slice_cost.flops);
  nlohmann::json out{{"network", fmt::format("grid{}x{}_bond{}", a.side, a.side, a.bond)},
                     {"dtype", std::string(name(a.dtype))},
                     {"load_average_before", load_before},
                     {"load_average_after", load_after},
                     {"unsliced_tc", cost.tc},
                     {"unsliced_sc", cost.sc},
                     {"limit_elements", limit_elements},
                     {"peak_over_limit", peak_over_limit},
                     {"slices", sliced.num_slices()},
                     {"chunks", sliced.num_chunks()},
                     {"overhead", sp.overhead},
                     {"unsliced_1t_s", u1},
                     {"unsliced_2t_s", u2},
                     {"sliced_1t_s", s1},
                     {"sliced_2t_s", s2},
                     {"unsliced_1t_cpu_s", tu1.cpu},
                     {"unsliced_2t_cpu_s", tu2.cpu},
                     {"sliced_1t_cpu_s", ts1.cpu},
                     {"sliced_2t_cpu_s", ts2.cpu},
                     {"flop_predicted_s", predicted},
                     {"wall_over_predicted", s1 / predicted},
                     {"cpu_over_predicted", cpu_over_predicted},
                     {"speedup_2t", s1 / s2},
                     {"rate_1t", total / s1},
                     {"rate_2t", total / s2},
                     {"bits_identical_1_2", same_bits(got1, got2)},
                     {"rel_diff", diff},
                     {"rel_diff_ok", diff <= tolerance}};
  if (m1 && m2) {
    out["mpi_np1_contract_s"] = *m1;
    out["mpi_np2_contract_s"] = *m2;
    out["mpi_speedup_np2"] = *m1 / *m2;
    out["mpi_bits_identical"] = mpi_bits_1 && mpi_bits_2;
  } else {
    out["mpi"] = mpi_note;
  }
  return out;
}

int run(int argc, char** argv) {
  fs::path bench_dir = default_bench_dir();
  double budget = 1.0;
  std::vector<std::string> only = {"grid2d_16x16_d2", "grid2d_8x8_d16", "grid2d_24x30_d2", "grid3d_6x6x10_d2",
                                   "rrg3_n100",       "rrg3_n200",      "rrg3_n500",       "rrg3mis_n200",
                                   "sycamore_m20"};
  bool do_plan = true, do_execute = true, slice_pairs = false;
  PairStudyArgs pairs;
  std::vector<int> cuts = {8};
  ExecuteArgs exec;
  // The CLI beside this program (the build puts both in tools/).
  exec.einstage = fs::read_symlink("/proc/self/exe").parent_path() / "einstage";
  std::string json_path = "bench-slicing.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--bench-dir") bench_dir = value();
    else if (a == "--budget") budget = std::stod(value());
    else if (a == "--only") only = split_list(value());
    else if (a == "--skip-plan") do_plan = false;
    else if (a == "--cuts") {
      cuts.clear();
      for (const std::string& c : split_list(value())) cuts.push_back(std::stoi(c));
    }
    else if (a == "--skip-execute") do_execute = false;
    else if (a == "--slice-pairs") slice_pairs = true;
    else if (a == "--pair-screen") pairs.screen_spec = value();
    else if (a == "--pair-replan") pairs.replan = std::max(1, std::stoi(value()));
    else if (a == "--pair-sample") pairs.sample = std::max(0, std::stoi(value()));
    else if (a == "--pair-triples") pairs.triple_pairs = std::max(0, std::stoi(value()));
    else if (a == "--pair-triple-replan") pairs.triple_replan = std::max(1, std::stoi(value()));
    else if (a == "--pair-threads") pairs.threads = std::max(1, std::stoi(value()));
    else if (a == "--pair-max") pairs.max_pairs = std::max(1, std::stoi(value()));
    else if (a == "--grid") exec.side = std::stoi(value());
    else if (a == "--bond") exec.bond = std::stoll(value());
    else if (a == "--cut") exec.cut = std::stoi(value());
    else if (a == "--min-time") exec.min_time = std::stod(value());
    else if (a == "--mpi-repeats") exec.mpi_repeats = std::max(1, std::stoi(value()));
    else if (a == "--skip-mpi") exec.mpi = false;
    else if (a == "--einstage") exec.einstage = value();
    else if (a == "--mpirun") exec.mpirun = value();
    else if (a == "--json") json_path = value();
    else if (a == "--dtype") {
      const auto d = parse_dtype(value());
      if (!d) die("--dtype takes f32, f64, c64, c128 or i64");
      exec.dtype = *d;
    }
    else die("unknown argument " + a);
  }
  const Machine machine = detect_machine();
  fmt::print("{}\n", machine.summary());
  nlohmann::json out{{"machine", machine.to_json()}, {"budget_s", budget}};
  std::vector<Instance> chosen;
  if (do_plan || slice_pairs) {
    std::vector<Instance> all = generated(false);
    if (!bench_dir.empty() && fs::exists(bench_dir / "cotengra"))
      for (Instance& i : load_cotengra(bench_dir / "cotengra")) all.push_back(std::move(i));
    else
      fmt::print("(cotengra networks skipped: {})\n", missing_bench_dir_message(bench_dir));
    for (const std::string& name : only) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Instance& i) { return i.name == name; });
      if (it == all.end()) fmt::print("(skipped {}: not found; --bench-dir?)\n", name);
      else chosen.push_back(*it);
    }
  }
  if (do_plan) {
    std::string cut_text;
    for (int c : cuts) cut_text += fmt::format("{}{}", cut_text.empty() ? "" : ", ", c);
    fmt::print("\nslicing overhead, auto(quality=high,budget={}) work-only; limit 2^(floor(sc)-cut), cut {} (8: >= 256 "
               "slices)\n", budget, cut_text);
    nlohmann::json rows = nlohmann::json::array();
    for (const PlanRow& r : plan_part(chosen, budget, cuts))
      rows.push_back({{"instance", r.instance}, {"limit_log2", r.limit_log2}, {"unsliced_tc", r.unsliced_tc},
                      {"unsliced_sc", r.unsliced_sc}, {"slices", r.slices}, {"sliced_labels", r.sliced_labels},
                      {"slice_tc", r.slice_tc}, {"slice_sc", r.slice_sc}, {"total_tc", r.total_tc},
                      {"overhead", r.overhead}, {"same_tree_overhead", r.same_tree_overhead},
                      {"slice_peak_elements", r.slice_peak},
                      {"unsliced_plan_s", r.unsliced_s}});
    out["planner"] = rows;
  }
  if (slice_pairs) {
    // The limit as in the planner table: 2^(floor(sc) - cut) of the unsliced auto(quality=high) tree.
    nlohmann::json studies = nlohmann::json::array();
    for (const Instance& inst : chosen) {
      PlanSpec spec = PlanSpec::automatic_plan(PlanQuality::high);
      spec.budget_s = budget;
      PlanOptions options;
      options.clock_guard = false;
      const PlanResult base = plan_contraction(spec, inst.subscripts, inst.extents, options);
      fmt::print("\n{}: unsliced tc {:.2f} sc {:.2f} ({})\n", inst.name, base.cost.tc, base.cost.sc, spec.to_string());
      for (int cut : cuts) {
        nlohmann::json study =
            pair_study(inst, spec, std::exp2(std::floor(base.cost.sc) - cut), base.cost.flops, pairs);
        study["unsliced_tc"] = base.cost.tc;
        study["unsliced_sc"] = base.cost.sc;
        studies.push_back(study);
      }
    }
    out["slice_pairs"] = studies;
  }
  if (do_execute) out["execute"] = execute_part(exec, machine);
  std::ofstream(json_path) << out.dump(2) << "\n";
  fmt::print("\nwrote {}\n", json_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A planner error (e.g. a limit below an operand's size at a deep --cuts) is one line and status 1, not terminate.
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    die(e.what());
  }
}
