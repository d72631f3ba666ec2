// einstage_bench_contract: the JIT pairwise contraction kernel against OpenBLAS (CBLAS), NumPy einsum and
// torch.einsum on the same machine in the same run. Not a test: it prints a table and writes JSON.
//
// Rows are ContractionProblems built directly from an einsum string and label extents (column-major operands, as
// einstage's tensors are); peers get the same einsum on arrays holding the same bytes (tools/bench/peers.py, run
// with /usr/bin/python3; twice when tools/bench/Machine.h forces an OpenBLAS core, once forced ("SKX" columns) and
// once with OpenBLAS's own pick ("own"), else once; a run that fails shows "failed" in its columns). The OpenBLAS
// column is one dgemm/sgemm (or a loop of them for a batch with matrix-contiguous entries) of the same M, N, K: for permuted rows it is the
// GEMM rate without any transpose, i.e. an upper bound for a TTGT implementation. Times are the best of repeated
// calls after one warm-up; JIT compile time is reported separately, from the kernel cache's statistics and from
// child processes that time a first call with a cold and a warm disk cache.
//
// Usage: einstage_bench_contract [--threads N] [--min-time S] [--json FILE] [--quick] [--no-peers] [--peers FILE]
//                               [--filter TEXT]   (only rows whose name contains TEXT)
//        einstage_bench_contract --codegen CPU,CPU,... [ROUNDS]   (codegen time per kernel for LLVM CPU names; "host")
#include "ir/DType.h"
#include "tools/bench/Machine.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/JitState.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/Tuning.h"
#include "runtime/jit/WarmUp.h"
#include "runtime/kernels/Contraction.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#ifdef EINSTAGE_HAVE_OPENBLAS
extern "C" {
// CBLAS prototypes (column-major = 102, no-trans = 111), declared here so the build needs no cblas.h variant.
void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc);
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
char* openblas_get_corename(void);
}
#endif

using namespace einstage;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Best time of fn over repeated calls after one warm-up, running for at least min_time seconds and 3 calls.
double best_time(const std::function<void()>& fn, double min_time) {
  fn();
  double best = 1e30, total = 0;
  for (int reps = 0; total < min_time || reps < 3; ++reps) {
    auto t0 = Clock::now();
    fn();
    double dt = seconds_since(t0);
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

struct Row {
  std::string name;
  std::string spec;                     // "ij,jk->ik" with one letter per label
  DType dtype = DType::f64;
  std::map<char, int64_t> extent;       // label -> extent
  // Derived
  std::vector<std::vector<int64_t>> shapes;  // A, B (for the peers)
  int64_t M = 1, N = 1, K = 1, batch = 1;
  bool blas_batch_loop = false;  // OpenBLAS peer is a loop of gemms over contiguous batch entries
};

struct Operands {
  std::vector<std::string> labels;  // A, B, C
};

Operands split_spec(const std::string& spec) {
  Operands ops;
  auto arrow = spec.find("->");
  std::string inputs = spec.substr(0, arrow);
  auto comma = inputs.find(',');
  ops.labels = {inputs.substr(0, comma), inputs.substr(comma + 1), spec.substr(arrow + 2)};
  return ops;
}

/// Column-major strides of a tensor with the given labels.
std::map<char, int64_t> strides_of(const std::string& labels, const std::map<char, int64_t>& extent) {
  std::map<char, int64_t> s;
  int64_t stride = 1;
  for (char l : labels) {
    s[l] = stride;
    stride *= extent.at(l);
  }
  return s;
}

/// Builds the ContractionProblem of a row (labels in A&B&C are batch, A&C m, B&C n, A&B k).
ContractionProblem make_problem(Row& row, const void* a, const void* b, void* c) {
  Operands ops = split_spec(row.spec);
  auto sa = strides_of(ops.labels[0], row.extent), sb = strides_of(ops.labels[1], row.extent),
       sc = strides_of(ops.labels[2], row.extent);
  ContractionProblem p;
  p.dtype = row.dtype;
  std::string all = ops.labels[0] + ops.labels[1];
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  row.M = row.N = row.K = row.batch = 1;
  for (char l : all) {
    bool in_a = sa.count(l), in_b = sb.count(l), in_c = sc.count(l);
    ContractionProblem::Axis ax{row.extent.at(l), in_a ? sa[l] : 0, in_b ? sb[l] : 0, in_c ? sc[l] : 0};
    if (in_a && in_b && in_c) p.batch.push_back(ax), row.batch *= ax.extent;
    else if (in_a && in_c) p.m.push_back(ax), row.M *= ax.extent;
    else if (in_b && in_c) p.n.push_back(ax), row.N *= ax.extent;
    else if (in_a && in_b) p.k.push_back(ax), row.K *= ax.extent;
    else fmt::print(stderr, "row {}: label {} is a one-sided sum, not a pairwise contraction\n", row.name, l), std::exit(2);
  }
  row.shapes.clear();
  for (int t = 0; t < 2; ++t) {
    std::vector<int64_t> shape;
    for (char l : ops.labels[t]) shape.push_back(row.extent.at(l));
    row.shapes.push_back(shape);
  }
  p.a = a;
  p.b = b;
  p.c = c;
  return p;
}

int64_t elements(const std::string& labels, const std::map<char, int64_t>& extent) {
  int64_t n = 1;
  for (char l : labels) n *= extent.at(l);
  return n;
}

double real_flops(const Row& row) {
  double f = 2.0 * double(row.M) * double(row.N) * double(row.K) * double(row.batch);
  return is_complex(row.dtype) ? 4 * f : f;
}

Row gemm_row(int64_t n, DType dtype) {
  Row r;
  r.name = fmt::format("ij,jk->ik {} {}", name(dtype), n);
  r.spec = "ij,jk->ik";
  r.dtype = dtype;
  r.extent = {{'i', n}, {'j', n}, {'k', n}};
  return r;
}

std::vector<Row> make_rows(bool quick) {
  std::vector<Row> rows;
  for (DType dt : {DType::f64, DType::f32})
    for (int64_t n : {64, 256, 1024, 2048})
      if (!quick || n <= 1024) rows.push_back(gemm_row(n, dt));
  auto add = [&](std::string name, std::string spec, DType dt, std::map<char, int64_t> ext) {
    Row r;
    r.name = std::move(name);
    r.spec = std::move(spec);
    r.dtype = dt;
    r.extent = std::move(ext);
    rows.push_back(std::move(r));
  };
  std::map<char, int64_t> e32 = {{'a', 32}, {'b', 32}, {'c', 32}, {'d', 32}, {'e', 32}, {'f', 32}};
  add("aebf,dfce->abcd f64 32^6", "aebf,dfce->abcd", DType::f64, e32);
  add("aebf,dfce->abcd f32 32^6", "aebf,dfce->abcd", DType::f32, e32);
  std::map<char, int64_t> e8 = {{'a', 8}, {'b', 8}, {'c', 8}, {'d', 8}, {'e', 8}, {'f', 8}};
  add("aebf,dfce->abcd f64 8^6", "aebf,dfce->abcd", DType::f64, e8);
  add("abcd,cdef->abef f64 8^6", "abcd,cdef->abef", DType::f64, e8);
  add("acbd,ecfd->abef f64 8^6", "acbd,ecfd->abef", DType::f64, e8);
  for (int64_t k : {16, 64})
    add(fmt::format("kac,bk->abc f64 k={} a=b=c=128", k), "kac,bk->abc", DType::f64,
        {{'k', k}, {'a', 128}, {'b', 128}, {'c', 128}});
  add("bij,bjk->bik f64 b=64 64^2", "bij,bjk->bik", DType::f64, {{'b', 64}, {'i', 64}, {'j', 64}, {'k', 64}});
  add("ijb,jkb->ikb f64 b=64 64^2", "ijb,jkb->ikb", DType::f64, {{'b', 64}, {'i', 64}, {'j', 64}, {'k', 64}});
  // Matrix-vector shaped steps (fewer than 8 columns): also timed on the portable kernel (column xport), which
  // contract() would otherwise be a candidate for.
  add("ij,j->i f64 1024", "ij,j->i", DType::f64, {{'i', 1024}, {'j', 1024}});
  add("ji,j->i f64 1024", "ji,j->i", DType::f64, {{'i', 1024}, {'j', 1024}});
  add("ij,j->i f64 256", "ij,j->i", DType::f64, {{'i', 256}, {'j', 256}});
  // Between the two: where splitting a matrix-vector product between threads starts to pay (Gett.h).
  add("ij,j->i f64 512", "ij,j->i", DType::f64, {{'i', 512}, {'j', 512}});
  add("i,ij->j f64 512", "i,ij->j", DType::f64, {{'i', 512}, {'j', 512}});
  add("i,ij->j f64 256", "i,ij->j", DType::f64, {{'i', 256}, {'j', 256}});
  add("ij,i->j f64 256", "ij,i->j", DType::f64, {{'i', 256}, {'j', 256}});
  add("i,ij->j f32 1000", "i,ij->j", DType::f32, {{'i', 1000}, {'j', 1000}});
  add("ij,jk->ik f64 1024x1024x4", "ij,jk->ik", DType::f64, {{'i', 1024}, {'j', 1024}, {'k', 4}});
  add("ij,jk->ik c128 512", "ij,jk->ik", DType::c128, {{'i', 512}, {'j', 512}, {'k', 512}});
  add("ij,jk->ik c64 512", "ij,jk->ik", DType::c64, {{'i', 512}, {'j', 512}, {'k', 512}});
  for (Row& r : rows) r.blas_batch_loop = r.spec == "ijb,jkb->ikb";
  return rows;
}

// Operand storage on 64-byte boundaries, as einstage's own tensors have (ir/Scratch.h) and torch's: a std::vector's
// data sits wherever malloc puts it (16 bytes past a page for a fresh mmap, anywhere in the heap after one is freed),
// and a matrix-vector row read 35-50% slower with its columns off the cache lines, for einstage and OpenBLAS alike, so
// the two libraries' rows differed by where each one's buffers happened to land.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  friend bool operator==(const Aligned64&, const Aligned64&) { return true; }
};
template <typename T>
using Buffer = std::vector<T, Aligned64<T>>;

template <typename T>
Buffer<T> random_data(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Buffer<T> v(static_cast<size_t>(n));
  for (T& x : v) {
    if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) x = T(u(rng), u(rng));
    else x = T(u(rng));
  }
  return v;
}

struct Measured {
  double jit_first = 0, jit_best = 0;
  std::optional<double> blas_best;
  std::optional<double> portable_best;  // skinny rows (min(M, N) < 8) only
};

template <typename T>
Measured measure(Row& row, ThreadPool* pool, double min_time) {
  Operands ops = split_spec(row.spec);
  auto a = random_data<T>(elements(ops.labels[0], row.extent), 1);
  auto b = random_data<T>(elements(ops.labels[1], row.extent), 2);
  Buffer<T> c(static_cast<size_t>(elements(ops.labels[2], row.extent)));
  ContractionProblem p = make_problem(row, a.data(), b.data(), c.data());
  Measured m;
  auto t0 = Clock::now();
  KernelCache* kernels = &default_context().kernels();
  // The tile and blocks in force for default_context() (a stored tuning or EINSTAGE_TUNING, else the model's).
  const GemmTuning* tuning = &default_context().jit().tuning();
  contract_jit(p, pool, kernels, nullptr, nullptr, true, tuning);
  m.jit_first = seconds_since(t0);
  m.jit_best = best_time([&] { contract_jit(p, pool, kernels, nullptr, nullptr, true, tuning); }, min_time);
  if (std::min(row.M, row.N) < 8) m.portable_best = best_time([&] { contract_portable(p, pool); }, min_time);
#ifdef EINSTAGE_HAVE_OPENBLAS
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    // The same M, N, K as one column-major GEMM (or one per contiguous batch entry).
    int M = int(row.M), N = int(row.N), K = int(row.K);
    int64_t batches = row.blas_batch_loop ? row.batch : 1;
    if (!row.blas_batch_loop) M = int(row.M * row.batch);  // a batch that is not a gemm loop counts as rows
    Buffer<T> ga = random_data<T>(int64_t(M) * K * batches, 3), gb = random_data<T>(int64_t(K) * N * batches, 4);
    Buffer<T> gc(size_t(int64_t(M) * N * batches));
    m.blas_best = best_time(
        [&] {
          for (int64_t bt = 0; bt < batches; ++bt) {
            const T* pa = ga.data() + bt * M * K;
            const T* pb = gb.data() + bt * K * N;
            T* pc = gc.data() + bt * M * N;
            if constexpr (std::is_same_v<T, double>)
              cblas_dgemm(102, 111, 111, M, N, K, 1.0, pa, M, pb, K, 0.0, pc, M);
            else
              cblas_sgemm(102, 111, 111, M, N, K, 1.0f, pa, M, pb, K, 0.0f, pc, M);
          }
        },
        min_time);
  }
#endif
  return m;
}

// One run of peers.py: its label in the table ("SKX", "own"), in the JSON ("skylakex", "default"), the environment
// it ran under, and its rows or why there are none.
struct PeerRun {
  std::string label, json_label, env;
  std::optional<json> result;
  std::string failure;
};

PeerRun run_peers(PeerRun run, const std::string& script, const json& rows, int threads) {
  std::string input = std::filesystem::temp_directory_path() / fmt::format("einstage-bench-peers-{}.json", ::getpid());
  std::ofstream(input) << rows.dump();
  std::string command = fmt::format("env {} OPENBLAS_NUM_THREADS={} /usr/bin/python3 '{}' < '{}'", run.env, threads,
                                    script, input);
  run.result = bench::run_peer_json(command, "peers.py", run.failure);
  std::filesystem::remove(input);
  if (!run.result) fmt::print(stderr, "peers.py ({}): {}\n", run.label, run.failure);
  return run;
}

// Child mode: time the first f64 256^3 contraction of a fresh process (kernel from codegen or from the disk cache).
int first_call_child() {
  Row row = gemm_row(256, DType::f64);
  auto a = random_data<double>(256 * 256, 1), b = random_data<double>(256 * 256, 2);
  Buffer<double> c(256 * 256);
  ContractionProblem p = make_problem(row, a.data(), b.data(), c.data());
  rusage r0{}, r1{};
  ::getrusage(RUSAGE_THREAD, &r0);
  auto t0 = Clock::now();
  contract_jit(p, nullptr, &default_context().kernels());
  double first = seconds_since(t0);
  ::getrusage(RUSAGE_THREAD, &r1);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec * 1e-3; };
  JitStats s = default_context().kernels().stats();
  // cpu_ms and page_faults (minor faults: first touches of memory and code pages): the calling thread's, over the call.
  json out = {{"first_call_ms", first * 1e3}, {"kernels_compiled", s.kernels_compiled}, {"disk_hits", s.disk_hits},
              {"compile_ms", s.compile_ms}, {"load_ms", s.load_ms},
              {"cpu_ms", ms(r1.ru_utime) + ms(r1.ru_stime) - ms(r0.ru_utime) - ms(r0.ru_stime)},
              {"page_faults", r1.ru_minflt - r0.ru_minflt}};
  std::puts(out.dump().c_str());
  return 0;
}

// Codegen mode: the code generation cost of one kernel for each named LLVM CPU ("host": the host's), in this
// process after the warm-up (runtime/jit/WarmUp.h) and one untimed compilation per CPU have paid LLVM's one-off
// costs. Each round compiles the host's default f64 micro-kernel (for that CPU's vector width) once per CPU, in turn;
// prints the median thread CPU time over `rounds` rounds.
int codegen_per_cpu(const std::string& cpus, int rounds) {
  auto cpu_ms = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  std::vector<std::unique_ptr<Jit>> jits;
  for (size_t at = 0; at <= cpus.size();) {
    const size_t comma = std::min(cpus.find(',', at), cpus.size());
    const std::string cpu = cpus.substr(at, comma - at);
    jits.push_back(Jit::create(JitTarget{cpu == "host" ? "" : cpu}));
    at = comma + 1;
  }
  make_code_generator_statics(*jits.front());
  std::vector<std::vector<double>> micro(jits.size());
  for (int r = -1; r < rounds; ++r)  // round -1: untimed
    for (size_t i = 0; i < jits.size(); ++i) {
      const double t0 = cpu_ms();
      (void)compile_micro_kernel(*jits[i], default_micro_kernel(DType::f64, jits[i]->host().has_avx512));
      if (r >= 0) micro[i].push_back(cpu_ms() - t0);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  fmt::print("code generation per kernel, median of {} rounds (thread CPU ms; LLVM {})\n{:<18} {:<24} {:>8}\n", rounds,
             jits.front()->host().llvm_version, "cpu", "micro-kernel", "ms");
  for (size_t i = 0; i < jits.size(); ++i)
    fmt::print("{:<18} {:<24} {:>8.2f}\n", jits[i]->host().cpu,
               default_micro_kernel(DType::f64, jits[i]->host().has_avx512).symbol(), median(micro[i]));
  return 0;
}

std::optional<json> spawn_first_call(const std::string& self, const std::string& cache_dir) {
  std::string command = fmt::format("EINSTAGE_CACHE_DIR='{}' '{}' --first-call-child", cache_dir, self);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string output;
  char buffer[1024];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  if (::pclose(pipe) != 0) return std::nullopt;
  return json::parse(output);
}

std::string ratio(std::optional<double> peer, double ours) {
  return peer ? fmt::format("{:.2f}", *peer / ours) : "-";
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double min_time = 0.3;
  bool quick = false, peers = true;
  std::string filter;  // run only rows whose name contains this
  std::string json_path = "bench-contract.json";
  std::string peers_script = EINSTAGE_BENCH_PEERS_SCRIPT;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fmt::print(stderr, "{} needs a value\n", arg), std::exit(2);
      return argv[++i];
    };
    if (arg == "--first-call-child") return first_call_child();
    if (arg == "--codegen") {
      const std::string cpus = value();
      return codegen_per_cpu(cpus, i + 1 < argc ? std::stoi(argv[++i]) : 15);
    }
    if (arg == "--threads") threads = std::stoi(value());
    else if (arg == "--min-time") min_time = std::stod(value());
    else if (arg == "--json") json_path = value();
    else if (arg == "--quick") quick = true, min_time = std::min(min_time, 0.1);
    else if (arg == "--no-peers") peers = false;
    else if (arg == "--peers") peers_script = value();
    else if (arg == "--filter") filter = value();
    else {
      fmt::print(stderr, "usage: einstage_bench_contract [--threads N] [--min-time S] [--json FILE] [--quick] "
                         "[--no-peers] [--peers FILE] [--filter TEXT]\n       einstage_bench_contract --codegen CPU,CPU,... [ROUNDS]\n");
      return 2;
    }
  }
  const bench::Machine machine = bench::detect_machine();
#ifdef EINSTAGE_HAVE_OPENBLAS
  bench::reexec_with_openblas_env(machine, threads, argv);  // the linked OpenBLAS reads its core when loaded
#endif
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  KernelCache& cache = default_context().kernels();

  json report;
  report["machine"] = machine.to_json();
  report["machine"]["llvm_cpu"] = cache.host().cpu;
  report["machine"]["llvm"] = cache.host().llvm_version;
  report["machine"]["threads"] = threads;
  fmt::print("{}\nLLVM {} cpu {}, {} thread(s)\n", machine.summary(), cache.host().llvm_version, cache.host().cpu,
             threads);
#ifdef EINSTAGE_HAVE_OPENBLAS
  report["openblas_core"] = openblas_get_corename();
  fmt::print("OpenBLAS column: core {}\n", openblas_get_corename());
#else
  report["openblas_core"] = "OpenBLAS not linked";
  fmt::print("OpenBLAS column: not linked (no libopenblas at build time)\n");
#endif

  std::vector<Row> rows = make_rows(quick);
  std::erase_if(rows, [&](const Row& r) { return r.name.find(filter) == std::string::npos; });
  std::vector<Measured> results;
  for (Row& row : rows) {
    fmt::print(stderr, "measuring {}\n", row.name);
    results.push_back(dispatch_dtype(row.dtype, [&](auto zero) -> Measured {
      using T = decltype(zero);
      if constexpr (std::is_same_v<T, int64_t>) return {};
      else return measure<T>(row, pool.get(), min_time);
    }));
  }

  // Peers under the forced core and under OpenBLAS's own pick when Machine forces one, else once as the caller runs.
  std::vector<PeerRun> runs;
  if (peers) {
    json spec = json::array();
    for (const Row& row : rows)
      spec.push_back({{"name", row.name}, {"spec", row.spec}, {"shapes", row.shapes}, {"dtype", name(row.dtype)},
                      {"flops", real_flops(row)}, {"min_time", min_time}, {"threads", threads}});
    if (!machine.forced_core.empty()) {
      runs.push_back({"SKX", "skylakex", machine.peer_env(), std::nullopt, ""});
      runs.push_back({"own", "default", "-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE", std::nullopt, ""});
    } else {
      runs.push_back({"", "default", machine.peer_env(), std::nullopt, ""});
    }
    for (PeerRun& run : runs) {
      fmt::print(stderr, "running peers{}\n", run.env.empty() ? "" : " (" + run.env + ")");
      run = run_peers(run, peers_script, spec, threads);
    }
  }
  // A peer's time, or why there is none ("failed" for a run that failed, "-" for a value it does not measure).
  auto peer_cell = [&](const PeerRun& run, size_t i, const char* key, double ours) -> std::string {
    if (!run.result) return "failed";
    const json& v = (*run.result)["rows"][i][key];
    return v.is_number() ? fmt::format("{:.2f}", v.get<double>() / ours) : "-";
  };
  const std::vector<std::pair<const char*, const char*>> peer_columns = {
      {"numpy_einsum", "np"}, {"numpy_einsum_opt", "npo"}, {"torch_einsum", "torch"}};

  fmt::print("\nratios are peer time / einstage time (> 1: einstage faster); OpenBLAS = one GEMM of the same M,N,K\n");
  std::string heading = fmt::format("{:<36} {:>10} {:>8} {:>8} {:>7}", "row", "JIT ms", "GFLOP/s", "OB GF/s", "xOB");
  for (const PeerRun& run : runs)
    for (const auto& [key, label] : peer_columns)
      heading += fmt::format(" {:>9}", fmt::format("{} {}", label, run.label));
  fmt::print("{} {:>6}\n", heading, "xport");
  json out_rows = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const Measured& m = results[i];
    double flops = real_flops(row);
    std::string line = fmt::format("{:<36} {:>10.4f} {:>8.1f} {:>8} {:>7}", row.name, m.jit_best * 1e3,
                                   flops / m.jit_best * 1e-9,
                                   m.blas_best ? fmt::format("{:.1f}", flops / *m.blas_best * 1e-9) : "-",
                                   ratio(m.blas_best, m.jit_best));
    json r = {{"name", row.name}, {"spec", row.spec}, {"dtype", name(row.dtype)}, {"M", row.M}, {"N", row.N},
              {"K", row.K}, {"batch", row.batch}, {"real_flops", flops}, {"jit_s", m.jit_best},
              {"jit_first_call_s", m.jit_first}, {"jit_gflops", flops / m.jit_best * 1e-9}};
    for (const PeerRun& run : runs)
      for (const auto& [key, label] : peer_columns) {
        line += fmt::format(" {:>9}", peer_cell(run, i, key, m.jit_best));
        if (run.result && (*run.result)["rows"][i][key].is_number())
          r[fmt::format("{}_{}_s", key, run.json_label)] = (*run.result)["rows"][i][key];
      }
    fmt::print("{} {:>6}\n", line, ratio(m.portable_best, m.jit_best));
    if (m.blas_best) r["openblas_s"] = *m.blas_best;
    if (m.portable_best) r["portable_s"] = *m.portable_best;
    out_rows.push_back(r);
  }
  report["rows"] = out_rows;
  for (const PeerRun& run : runs) {
    json info = {{"env", run.env}};
    if (run.result) {
      for (const char* k : {"corename", "numpy", "torch"}) info[k] = (*run.result)[k];
      fmt::print("peers{}: OpenBLAS core {}, numpy {}, torch {}\n", run.label.empty() ? "" : " " + run.label,
                 info["corename"].dump(), info["numpy"].dump(), info["torch"].dump());
    } else {
      info["failed"] = run.failure;
      fmt::print("peers{}: {}\n", run.label.empty() ? "" : " " + run.label, run.failure);
    }
    report["peers_" + run.json_label] = info;
  }

  // JIT compile costs, separate from the steady state above.
  JitStats s = cache.stats();
  fmt::print("\nJIT in this process: {} kernels compiled in {:.1f} ms ({:.1f} ms each), {} loaded from disk in {:.2f} ms\n",
             s.kernels_compiled, s.compile_ms, s.kernels_compiled ? s.compile_ms / double(s.kernels_compiled) : 0.0,
             s.disk_hits, s.load_ms);
  report["jit_stats"] = {{"kernels_compiled", s.kernels_compiled}, {"compile_ms", s.compile_ms},
                         {"disk_hits", s.disk_hits}, {"load_ms", s.load_ms}};
  std::string cold_dir = std::filesystem::temp_directory_path() / fmt::format("einstage-bench-cache-{}", ::getpid());
  std::filesystem::remove_all(cold_dir);
  auto cold = spawn_first_call(self, cold_dir);
  auto warm = spawn_first_call(self, cold_dir);
  std::filesystem::remove_all(cold_dir);
  if (cold && warm) {
    fmt::print("first f64 256^3 call in a new process: {:.2f} ms with an empty disk cache ({} compiled, {:.1f} ms "
               "codegen), {:.2f} ms with a warm one ({} loaded, {:.2f} ms)\n",
               (*cold)["first_call_ms"].get<double>(), (*cold)["kernels_compiled"].get<int64_t>(),
               (*cold)["compile_ms"].get<double>(), (*warm)["first_call_ms"].get<double>(),
               (*warm)["disk_hits"].get<int64_t>(), (*warm)["load_ms"].get<double>());
    report["first_call_cold"] = *cold;
    report["first_call_warm"] = *warm;
  }
  std::ofstream(json_path) << report.dump(2) << "\n";
  fmt::print("wrote {}\n", json_path);
  return 0;
}
