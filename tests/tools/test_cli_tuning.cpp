// Kernel tuning across processes (runtime/jit/Tuning.h, `einstage tune`, `einstage show --cpu`): the same einsums
// give the same bits with no tuning, with a stored tuning file and with an EINSTAGE_TUNING file, at 1 and 2 threads,
// where the files choose other register tiles and small MC and NC blocks (many blocks per problem, K over several KC
// blocks). The oracle is the run with EINSTAGE_TUNING=off at one thread: its bytes, compared exactly.
#include "ir/Npy.h"
#include "runtime/jit/Tuning.h"
#include "support/Cli.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace einstage;

namespace {

using test::run_cli;

// Values whose sums round differently in another order: k-dependent, mixed signs, many magnitudes.
Tensor mixed(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(DType::f64, std::move(shape));
  for (int64_t k = 0; k < t.numel(); ++k) {
    const uint64_t h = (uint64_t(k) + seed) * 0x9E3779B97F4A7C15ull;
    t.data<double>()[k] = (double(h >> 11) / double(uint64_t{1} << 53) - 0.5) * double(1 + (h >> 60));
  }
  return t;
}

// A tuning file's JSON for the CPU's vector width: f64 and f32 tiles of `vectors` vectors by nr columns (AVX-512) or
// nr_avx2 columns (AVX2), MC two tiles high and NC three tiles wide.
std::string odd_tuning(bool avx512, int vectors, int nr, int nr_avx2) {
  const int cols = avx512 ? nr : nr_avx2;
  const int lanes64 = avx512 ? 8 : 4, lanes32 = 2 * lanes64;
  return fmt::format(R"({{"isa": "{}", "f64": {{"mr": {}, "nr": {}, "mc": {}, "nc": {}}},)"
                     R"( "f32": {{"mr": {}, "nr": {}, "mc": {}, "nc": {}}}}})",
                     avx512 ? "avx512" : "avx2", vectors * lanes64, cols, 2 * vectors * lanes64, 3 * cols,
                     vectors * lanes32, cols, 2 * vectors * lanes32, 3 * cols);
}

struct Case {
  const char* subscripts;
  const char* dtype;
  std::vector<Shape> shapes;
};

}  // namespace

TEST_CASE("tuning: the same einsums give the same bits with no tuning, a stored tuning and EINSTAGE_TUNING, at 1 and "
          "2 threads") {
  test::TempDir dir, cache;
  const std::string cache_env = fmt::format("EINSTAGE_CACHE_DIR='{}'", cache.path().string());
  const bool avx512 = host_tuning_key().avx512;
  // The stored file, keyed as this CPU's processes look it up, with a 2-vector x 12 (AVX2: x 4) tile.
  const std::string stored = tuning_path(cache.path().string(), host_tuning_key());
  {
    KernelTuning t = parse_tuning(odd_tuning(avx512, 2, 12, 4), host_tuning_key(), false,
                                  model_tuning(avx512, host_cache_info()));
    std::ofstream(stored) << tuning_json(t, host_tuning_key(), {"written by tests/tools/test_cli_tuning.cpp"});
  }
  // The named file: one vector by 16 (AVX2: 6) columns.
  std::ofstream(dir.file("override.json")) << odd_tuning(avx512, 1, 16, 6);

  const std::vector<std::pair<std::string, std::string>> tunings = {
      {"off", cache_env + " EINSTAGE_TUNING=off"},
      {"stored", cache_env},
      {"EINSTAGE_TUNING", cache_env + " EINSTAGE_TUNING=override.json"},
  };
  // What show --cpu says is in force under each.
  for (const auto& [what, env] : tunings) {
    test::CliRun r = run_cli("show --cpu", dir, env);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    const std::string line = what == "stored" ? "tuning:    tuned, from " + stored + "\n"
                             : what == "off"  ? std::string("tuning:    model (EINSTAGE_TUNING=off)\n")
                                              : std::string("tuning:    EINSTAGE_TUNING=override.json\n");
    CHECK(r.out.find(line) != std::string::npos);
    CHECK(r.out.find("register tile (packed GEMM)") != std::string::npos);
  }

  const std::vector<Case> cases = {
      {"ij,jk->ik", "f64", {{200, 700}, {700, 150}}},
      {"ij,jk->ik", "f32", {{130, 600}, {600, 90}}},
      {"ij,jk->ik", "c128", {{60, 300}, {300, 50}}},
      {"aebf,dfce->abcd", "f64", {{12, 20, 10, 24}, {14, 24, 11, 20}}},
      {"bij,bjk->bik", "f64", {{3, 70, 300}, {3, 300, 40}}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& cs = cases[c];
    std::string files;
    for (size_t i = 0; i < cs.shapes.size(); ++i) {
      const std::string name = fmt::format("in{}_{}.npy", c, i);
      write_npy(dir.file(name), mixed(cs.shapes[i], 17 * c + i));
      files += " " + name;
    }
    std::string reference;
    for (const auto& [what, env] : tunings)
      for (int threads : {1, 2}) {
        INFO(cs.subscripts, " ", cs.dtype, " tuning ", what, " threads ", threads);
        test::CliRun r = run_cli(fmt::format("einsum '{}'{} --dtype {} --threads {} -o out.npy", cs.subscripts, files,
                                             cs.dtype, threads),
                                 dir, env);
        REQUIRE(r.status == 0);
        CHECK(r.err.empty());
        const std::string bytes = test::read_file_bytes(dir.file("out.npy"));
        if (reference.empty()) reference = bytes;
        else CHECK(bytes == reference);
      }
  }

  // A bad stored file: one warning naming it, and the model's bits.
  std::ofstream(stored) << "{\"isa\": ";
  write_npy(dir.file("a.npy"), mixed({200, 700}, 0));
  write_npy(dir.file("b.npy"), mixed({700, 150}, 1));
  test::CliRun good = run_cli("einsum 'ij,jk->ik' a.npy b.npy -o good.npy", dir, cache_env + " EINSTAGE_TUNING=off");
  test::CliRun bad = run_cli("einsum 'ij,jk->ik' a.npy b.npy -o bad.npy", dir, cache_env);
  CHECK(good.status == 0);
  CHECK(bad.status == 0);
  CHECK(bad.err == fmt::format("einstage: warning: tuning file '{}': it is not JSON; using the model's kernel "
                               "parameters (run 'einstage tune' to replace the file, or delete it)\n",
                               stored));
  CHECK(test::read_file_bytes(dir.file("good.npy")) == test::read_file_bytes(dir.file("bad.npy")));
}

TEST_CASE("tuning: einstage tune --print-only measures and stores nothing; tune stores a file show --cpu uses") {
  test::TempDir dir, cache;
  const std::string env = fmt::format("EINSTAGE_CACHE_DIR='{}'", cache.path().string());
  test::CliRun r = run_cli("tune --print-only", dir, env);
  CHECK(r.status == 0);
  CHECK(r.out.find("f64: tile ") != std::string::npos);
  CHECK(r.out.find("stored in") == std::string::npos);
  const std::string stored = tuning_path(cache.path().string(), host_tuning_key());
  CHECK_FALSE(std::filesystem::exists(stored));
  r = run_cli("tune", dir, env);
  CHECK(r.status == 0);
  CHECK(r.out.find("stored in " + stored + "\n") != std::string::npos);
  r = run_cli("show --cpu", dir, env);
  CHECK(r.out.find("tuning:    tuned, from " + stored + "\n") != std::string::npos);
  r = run_cli("tune extra", dir, env);
  CHECK(r.status == 2);
  CHECK(r.err == "einstage: tune: unexpected argument 'extra'; usage: einstage tune [--print-only]\n");
  r = run_cli("show --cpu a.npy", dir, env);
  CHECK(r.status == 2);
  CHECK(r.err == "einstage: show: --cpu takes no files; usage: einstage show --cpu\n");
}
