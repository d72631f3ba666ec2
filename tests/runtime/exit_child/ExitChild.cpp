// A process that exits while kernels are being compiled and specialised, for the runtime suite's exit test
// (test_context.cpp). Usage: einstage_test_exit_child SEED MODE, MODE "main" (main calls std::exit) or "worker"
// (a thread of its own calls std::exit while main computes). The delay before exit() is drawn from SEED
// (0 to ~20 ms) and starts once warm_up_jit() has run, so repeated runs stop the process at different moments:
// while kernels compile in the foreground, while the specialiser compiles, while pool threads run kernels. (Not
// during the process's first code generation, the warm-up: runtime/Context.h says why that is left.)
// Exits with status 7 when exit() ran to the end; any crash shows as a signal.
// MODE "cache" instead runs one small f64 einsum on the default context and exits with status 20 + 1 if the JIT's
// warm-up ran + 2 if a kernel was compiled + 4 if one came from the disk cache (EINSTAGE_CACHE_DIR) + 8 if the
// code generations on its thread are not the cache's kernels and the warm-up's own (warm_up_code_generations()).
// MODE "statics" (SEED is then a CPU name, or "host") checks the warm-up's statics instead: WarmUpStatics.cpp; MODEs
// "handlers", "warm-up-fault", "specialise-fill" and "specialise-cold" (SEED ignored) check the JIT's process state:
// LlvmProcessChecks.cpp.
#include "extensions/einsum/exec/Einsum.h"
#include "runtime/Context.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/WarmUp.h"
#include "support/Random.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace einstage;
namespace es = einstage::einsum;

namespace einstage::test {
int check_warm_up_statics(const std::string& cpu);  // WarmUpStatics.cpp
int check_exit_handlers();                          // LlvmProcessChecks.cpp
int check_warm_up_fault();                          // LlvmProcessChecks.cpp
int check_specialise(bool fill);                    // LlvmProcessChecks.cpp
}

namespace {

[[noreturn]] void compute_forever(uint64_t seed) {
  test::SplitMix64 rng{seed};
  for (int64_t round = 0;; ++round) {
    // Shapes that change every few rounds: new micro-kernels, new direct tiles, new hot steps to specialise.
    const int64_t m = 3 + static_cast<int64_t>(rng.next() % 40), k = 2 + static_cast<int64_t>(rng.next() % 30),
                  n = 1 + static_cast<int64_t>(rng.next() % 40);
    std::vector<double> av(static_cast<size_t>(m * k), 0.5), bv(static_cast<size_t>(k * n), 0.25);
    const Tensor a = Tensor::from_col_major<double>({m, k}, av), b = Tensor::from_col_major<double>({k, n}, bv);
    const DType dtype = round % 2 ? DType::f32 : DType::f64;
    const Tensor ac = a.astype(dtype), bc = b.astype(dtype);
    for (int call = 0; call < 20; ++call) es::einsum("ij,jk->ik", {ac, bc});  // hot: its step gets specialised
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  if (std::strcmp(argv[2], "statics") == 0) return test::check_warm_up_statics(argv[1]);
  if (std::strcmp(argv[2], "handlers") == 0) return test::check_exit_handlers();
  if (std::strcmp(argv[2], "warm-up-fault") == 0) return test::check_warm_up_fault();
  if (std::strcmp(argv[2], "specialise-fill") == 0) return test::check_specialise(true);
  if (std::strcmp(argv[2], "specialise-cold") == 0) return test::check_specialise(false);
  if (std::strcmp(argv[2], "cache") == 0) {
    std::vector<double> av(12 * 10, 0.5), bv(10 * 9, 0.25);
    const Tensor a = Tensor::from_col_major<double>({12, 10}, av), b = Tensor::from_col_major<double>({10, 9}, bv);
    if (es::einsum("ij,jk->ik", {a, b}).to_col_major<double>().at(0) != 1.25) return 3;
    const DispatchStats stats = dispatch_stats();
    const int64_t other_codegens = Jit::codegens_on_this_thread() - stats.jit.kernels_compiled -
                                   (jit_warmed_up() ? warm_up_code_generations() : 0);
    return 20 + (jit_warmed_up() ? 1 : 0) + (stats.jit.kernels_compiled > 0 ? 2 : 0) + (stats.jit.disk_hits > 0 ? 4 : 0) +
           (other_codegens != 0 ? 8 : 0);
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const bool from_worker = std::strcmp(argv[2], "worker") == 0;
  test::SplitMix64 rng{seed * 7919 + 1};
  const auto delay = std::chrono::microseconds(rng.next() % 20000);
  warm_up_jit();  // LLVM's lazily made statics exist before the delay starts
  (void)default_context();
  if (from_worker) {
    std::thread([delay] {
      std::this_thread::sleep_for(delay);
      std::exit(7);
    }).detach();
    compute_forever(seed);
  }
  std::thread([seed] { compute_forever(seed + 1); }).detach();  // another thread computes while main exits
  const auto until = std::chrono::steady_clock::now() + delay;
  test::SplitMix64 work{seed};
  while (std::chrono::steady_clock::now() < until) {
    const int64_t m = 2 + static_cast<int64_t>(work.next() % 24);
    const Tensor a = Tensor::zeros(DType::f64, {m, m});
    es::einsum("ij,jk->ik", {a, a});
  }
  std::exit(7);
}
