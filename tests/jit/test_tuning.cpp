// Kernel tuning files (runtime/jit/Tuning.h): the model's parameters, the JSON written and read back, every refusal
// of a bad file pinned by its message, which file resolve_tuning uses for "", "off" and a named file, and that each
// execution context runs with its own Config::kernel_tuning (two in one process compile their own tiles, with the
// same bits). The oracle for the model's values is TileModel.h / Blocking.h called directly, for the products a
// plain loop (ProblemGen.h). That tuned values change no bits is checked across processes by
// tests/tools/test_cli_tuning.cpp.
#include "ProblemGen.h"

#include "ir/Error.h"
#include "ir/Scratch.h"
#include "runtime/Contract.h"
#include "runtime/Context.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/JitState.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/TileModel.h"
#include "runtime/jit/Tuning.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace einstage;
using einstage::testing::OwnedProblem;
using einstage::testing::check_against_oracle;
using einstage::testing::matmul_problem;

namespace {

constexpr CacheInfo kZen5{48 * 1024, 1024 * 1024, 32 * 1024 * 1024};

TuningKey key512() { return {"Test CPU (family 26 model 2 stepping 1)", "19.1.7", true}; }

std::string error_of(std::string_view text, bool stored, const KernelTuning& model) {
  try {
    (void)parse_tuning(text, key512(), stored, model);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_argument);
    return e.what();
  }
  return "";
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("tuning: the model's parameters are the tile model's tile and Blocking.h's blocks for it") {
  for (bool avx512 : {false, true}) {
    const KernelTuning t = model_tuning(avx512, kZen5);
    CHECK(t.avx512 == avx512);
    for (DType real : {DType::f32, DType::f64}) {
      const MicroKernelSpec spec = model_micro_kernel(real, vector_isa(avx512), kZen5);
      const GettBlocking b = blocking_for(kZen5, int64_t(size_of(real)), spec.mr, spec.nr);
      CHECK(t.of(real) == GemmParams{spec.mr, spec.nr, b.mc, b.nc});
      CHECK(model_kc(real, avx512, kZen5) == b.kc);
    }
  }
  // The Zen 5 values docs/reference.md quotes.
  const KernelTuning zen5 = model_tuning(true, kZen5);
  CHECK(zen5.f64 == GemmParams{24, 8, 240, 4096});
  CHECK(zen5.f32 == GemmParams{48, 8, 240, 4096});
  CHECK(model_kc(DType::f64, true, kZen5) == 256);
  // Another tile keeps the model's KC and gets MC and NC of the same model.
  const GettBlocking other = blocking_for_kc(kZen5, 8, 16, 12, 256);
  CHECK(other.kc == 256);
  CHECK(other.mc == 224);
  CHECK(other.nc == 4092);
}

TEST_CASE("tuning: a stored file reads back as written; its path depends on the key only") {
  const KernelTuning model = model_tuning(true, kZen5);
  KernelTuning tuned = model;
  tuned.f64 = {16, 12, 112, 4092};
  tuned.f32 = {64, 6, 192, 4092};
  const std::string text = tuning_json(tuned, key512(), {"f64 16x12 mc 112: 100.0 GFLOP/s, chosen"});
  CHECK(parse_tuning(text, key512(), true, model) == tuned);
  CHECK(text.find("\"format\": \"einstage-tuning 1\"") != std::string::npos);
  CHECK(tuning_path("", key512()).empty());
  const std::string path = tuning_path("/cache", key512());
  CHECK(path.starts_with("/cache/tuning-"));
  CHECK(path.ends_with(".json"));
  CHECK(path.size() == std::string("/cache/tuning-0123456789abcdef.json").size());
  CHECK(tuning_path("/cache", key512()) == path);
  TuningKey other_llvm = key512();
  other_llvm.llvm = "20.1.0";
  CHECK(tuning_path("/cache", other_llvm) != path);
  TuningKey other_cpu = key512();
  other_cpu.cpu = "Another CPU";
  CHECK(tuning_path("/cache", other_cpu) != path);
}

TEST_CASE("tuning: an EINSTAGE_TUNING file may set one dtype or one value; the rest stay the model's") {
  const KernelTuning model = model_tuning(true, kZen5);
  const KernelTuning t = parse_tuning(R"({"isa": "avx512", "f64": {"mc": 96}})", key512(), false, model);
  CHECK(t.f64 == GemmParams{24, 8, 96, 4096});
  CHECK(t.f32 == model.f32);
}

TEST_CASE("tuning: bad files are refused with what is wrong and what was expected") {
  const KernelTuning model = model_tuning(true, kZen5);
  const std::string stored = tuning_json(model, key512(), {});
  CHECK(error_of("{\"isa\": ", false, model) == "it is not JSON");
  CHECK(error_of("[1, 2]", false, model) == "it is not a JSON object");
  CHECK(error_of("{}", false, model) == "there is no \"isa\"");
  CHECK(error_of(R"({"isa": 512})", false, model) == "\"isa\" is 512; expected a string");
  CHECK(error_of(R"({"isa": "sse"})", false, model) == "\"isa\" is \"sse\"; expected \"avx512\" or \"avx2\"");
  CHECK(error_of(R"({"isa": "avx2"})", false, model) == "it was made for avx2, and this CPU's kernels are avx512");
  CHECK(error_of(R"({"isa": "avx512", "f64": 3})", false, model) ==
        "\"f64\" is not an object; expected {\"mr\": ..., \"nr\": ..., \"mc\": ..., \"nc\": ...}");
  CHECK(error_of(R"({"isa": "avx512", "f64": {"mr": "24"}})", false, model) ==
        "f64.mr is \"24\"; expected a whole number");
  CHECK(error_of(R"({"isa": "avx512", "f64": {"mr": 20}})", false, model) ==
        "f64.mr is 20; expected a multiple of 8 (the f64 lanes of an AVX-512 vector)");
  CHECK(error_of(R"({"isa": "avx512", "f32": {"mr": 64, "nr": 8}})", false, model) ==
        "the f32 tile 64 x 8 does not fit the 32 vector registers of AVX-512 (32 accumulators + 4 A vectors + 1 "
        "broadcast); choose fewer rows or columns");
  CHECK(error_of(R"({"isa": "avx512", "f64": {"mc": 100}})", false, model) ==
        "f64.mc is 100; expected a multiple of mr (24) from 1 to 65536");
  CHECK(error_of(R"({"isa": "avx512", "f64": {"nc": 0}})", false, model) ==
        "f64.nc is 0; expected a multiple of nr (8) from 1 to 65536");
  // A stored file must be this process's: its format, CPU and LLVM, and hold both dtypes.
  TuningKey other = key512();
  other.cpu = "Another CPU";
  CHECK(error_of(tuning_json(model, other, {}), true, model) ==
        "it was made for the CPU 'Another CPU', and this is 'Test CPU (family 26 model 2 stepping 1)'");
  other = key512();
  other.llvm = "20.1.0";
  CHECK(error_of(tuning_json(model, other, {}), true, model) ==
        "it was made with LLVM '20.1.0', and this einstage uses LLVM 19.1.7");
  CHECK(error_of(R"({"isa": "avx512"})", true, model) == "there is no \"format\"");
  std::string no_f32 = stored;
  no_f32.replace(no_f32.find("\"f32\""), 5, "\"f16\"");
  CHECK(error_of(no_f32, true, model) == "there is no \"f32\"");
  CHECK(error_of(stored, true, model).empty());
}

TEST_CASE("tuning: resolve_tuning takes the stored file, a named one or the model's, and says why not a file") {
  test::TempDir dir;
  const std::string cache = dir.path().string();
  const KernelTuning model = model_tuning(true, kZen5);
  KernelTuning tuned = model;
  tuned.f64 = {16, 12, 112, 4092};

  // Nothing stored yet: the model's, silently.
  TuningInForce t = resolve_tuning("", cache, key512(), model);
  CHECK(t.source == TuningSource::model);
  CHECK(t.params == model);
  CHECK(t.path.empty());
  CHECK(t.warning.empty());
  CHECK(resolve_tuning("", "", key512(), model).warning.empty());

  const std::string stored = tuning_path(cache, key512());
  write(stored, tuning_json(tuned, key512(), {}));
  t = resolve_tuning("", cache, key512(), model);
  CHECK(t.source == TuningSource::file);
  CHECK(t.params == tuned);
  CHECK(t.path == stored);
  CHECK(source_name(t.source) == "tuned");

  // "off" ignores it.
  t = resolve_tuning("off", cache, key512(), model);
  CHECK(t.source == TuningSource::model);
  CHECK(t.params == model);

  // A named file replaces it.
  const std::string named = dir.file("mine.json");
  write(named, R"({"isa": "avx512", "f32": {"mc": 96}})");
  t = resolve_tuning(named, cache, key512(), model);
  CHECK(t.source == TuningSource::override_file);
  CHECK(t.params.f64 == model.f64);
  CHECK(t.params.f32.mc == 96);
  CHECK(source_name(t.source) == "EINSTAGE_TUNING");

  // A bad stored file: the model's, with a warning naming the file and the fix.
  write(stored, R"({"isa": "avx512", "format": "einstage-tuning 1"})");
  t = resolve_tuning("", cache, key512(), model);
  CHECK(t.source == TuningSource::model);
  CHECK(t.params == model);
  CHECK(t.warning == "tuning file '" + stored +
                         "': there is no \"cpu\"; using the model's kernel parameters (run 'einstage tune' to "
                         "replace the file, or delete it)");
  // A directory where the file should be.
  std::filesystem::remove(stored);
  std::filesystem::create_directory(stored);
  t = resolve_tuning("", cache, key512(), model);
  CHECK(t.params == model);
  CHECK(t.warning.starts_with("cannot read '" + stored + "': it is a directory"));

  // A missing or bad named file: the model's, with a warning saying how to get rid of it.
  t = resolve_tuning(dir.file("missing.json"), cache, key512(), model);
  CHECK(t.params == model);
  CHECK(t.warning == "EINSTAGE_TUNING: cannot read '" + dir.file("missing.json") +
                         "': No such file or directory; using the model's kernel parameters (fix the file, set "
                         "EINSTAGE_TUNING=off, or unset it to use the stored tuning)");
  write(named, R"({"isa": "avx512", "f64": {"nr": 30}})");
  t = resolve_tuning(named, cache, key512(), model);
  CHECK(t.params == model);
  CHECK(t.warning.starts_with("EINSTAGE_TUNING: tuning file '" + named + "': the f64 tile 24 x 30 does not fit"));
}

namespace {

// A tuning with another f64 tile and other MC, NC blocks for the host's vector width (the f32 values the model's).
TuningInForce other_tuning(bool avx512) {
  TuningInForce t;
  t.params = model_tuning(avx512, host_cache_info());
  t.params.f64 = avx512 ? GemmParams{16, 12, 192, 1200} : GemmParams{8, 4, 192, 1200};
  t.source = TuningSource::override_file;
  return t;
}

}  // namespace

TEST_CASE("tuning: a GemmTuning puts the tile in force first and takes its MC and NC; KC and the direct tiles are "
          "the model's; the other vector width is the model's") {
  for (bool avx512 : {false, true}) {
    const GemmTuning tuned(other_tuning(avx512));
    for (bool width : {false, true})
      for (DType real : {DType::f32, DType::f64}) {
        INFO("avx512 " << avx512 << ", width " << width << ", " << name(real));
        const MicroKernelSpec model = model_micro_kernel(real, vector_isa(width), host_cache_info());
        CHECK(model_host_micro_kernel(real, width) == model);
        CHECK(default_micro_kernel(real, width) == model);
        const GettBlocking model_blocks = blocking_for(host_cache_info(), int64_t(size_of(real)), model.mr, model.nr);
        const GettBlocking def = default_blocking(real, width);
        CHECK((def.mc == model_blocks.mc && def.kc == model_blocks.kc && def.nc == model_blocks.nc));
        CHECK(GemmTuning::model().tile(real, width) == model);
        const GettBlocking b = tuned.blocking(real, width);
        CHECK(b.kc == model_kc(real, width, host_cache_info()));
        MicroKernelSpec want = model;
        if (width == avx512 && real == DType::f64) {
          want.mr = avx512 ? 16 : 8, want.nr = avx512 ? 12 : 4;
          CHECK(b.mc == 192);
          CHECK(b.nc == 1200);
        } else {
          CHECK((b.mc == model_blocks.mc && b.nc == model_blocks.nc));
        }
        CHECK(tuned.tile(real, width) == want);
        CHECK(tuned.candidates(real, width).front().spec == want);
        // The direct tiles grow from the model's tile (the first one is it, as a direct kernel of one k step per
        // loop iteration).
        MicroKernelSpec direct_base = model;
        direct_base.direct = true;
        direct_base.k_unroll = 1;
        CHECK(direct_kernel_candidates(real, width).front().spec == direct_base);
      }
  }
}

TEST_CASE("tuning: two contexts in one process run with their own kernel_tuning, with the same bits") {
  test::TempDir dir;
  const bool avx512 = host_tuning_key().avx512;
  const std::string file = dir.file("tile.json");
  write(file, avx512 ? R"({"isa": "avx512", "f64": {"mr": 16, "nr": 12, "mc": 192, "nc": 1200}})"
                     : R"({"isa": "avx2", "f64": {"mr": 8, "nr": 4, "mc": 192, "nc": 1200}})");
  std::filesystem::create_directory(dir.file("a"));
  std::filesystem::create_directory(dir.file("b"));
  ExecutionContext tuned(ConfigOptions{.threads = 1, .kernel_cache_dir = dir.file("a"), .kernel_tuning = file});
  ExecutionContext model(ConfigOptions{.threads = 1, .kernel_cache_dir = dir.file("b"), .kernel_tuning = "off"});
  const GemmTuning& t = tuned.jit().tuning();
  const GemmTuning& m = model.jit().tuning();
  CHECK(t.in_force().source == TuningSource::override_file);
  CHECK(t.in_force().path == file);
  CHECK(m.in_force().source == TuningSource::model);
  const MicroKernelSpec tile = t.tile(DType::f64, avx512);
  CHECK(tile.mr == (avx512 ? 16 : 8));
  CHECK(tile.nr == (avx512 ? 12 : 4));
  CHECK(t.blocking(DType::f64, avx512).mc == 192);
  CHECK(m.tile(DType::f64, avx512) == default_micro_kernel(DType::f64, avx512));
  CHECK(m.blocking(DType::f64, avx512).mc == default_blocking(DType::f64, avx512).mc);

  // A packed GEMM (A far beyond L1d: not direct) on each context, once through contract() and once through a GettPlan
  // made as a prepared step makes it: each context compiles its own tile, and the bits are the same.
  const int64_t n = 200, k = 264;  // K beyond one KC block of 256
  OwnedProblem x = matmul_problem(n, n, k, 1, DType::f64, false, 7), y = x;
  y.bind();
  contract(x.p, tuned, nullptr);
  contract(y.p, model, nullptr);
  CHECK(x.c.bytes == y.c.bytes);
  check_against_oracle<double>(x);
  CHECK(std::filesystem::exists(tuned.jit().kernels().cache_file(tile)));
  CHECK(!std::filesystem::exists(model.jit().kernels().cache_file(tile)));
  CHECK(std::filesystem::exists(model.jit().kernels().cache_file(m.tile(DType::f64, avx512))));
  OwnedProblem u = matmul_problem(n, n, k, 1, DType::f64, false, 8), v = u;
  v.bind();
  GettPlan(u.p, tuned.jit().kernels(), tuned.scratch(), true, &t).run(u.p, nullptr);
  GettPlan(v.p, model.jit().kernels(), model.scratch(), true, &m).run(v.p, nullptr);
  CHECK(u.c.bytes == v.c.bytes);
  check_against_oracle<double>(u);
}

TEST_CASE("tuning: a context's bad kernel_tuning file leaves it on the model's parameters, other contexts unaffected") {
  test::TempDir dir;
  const std::string bad = dir.file("bad.json");
  write(bad, "not json");
  ExecutionContext refused(ConfigOptions{.threads = 1, .kernel_cache_dir = "", .kernel_tuning = bad});
  ExecutionContext off(ConfigOptions{.threads = 1, .kernel_cache_dir = "", .kernel_tuning = "off"});
  const TuningInForce& r = refused.jit().tuning().in_force();
  CHECK(r.source == TuningSource::model);
  CHECK(r.warning == "EINSTAGE_TUNING: tuning file '" + bad + "': it is not JSON; using the model's kernel parameters "
                     "(fix the file, set EINSTAGE_TUNING=off, or unset it to use the stored tuning)");
  CHECK(r.params == off.jit().tuning().in_force().params);
  CHECK(off.jit().tuning().in_force().warning.empty());
}
