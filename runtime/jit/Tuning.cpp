#include "runtime/jit/Tuning.h"

#include "ir/Error.h"
#include "ir/FileIO.h"
#include "ir/Hash.h"
#include "ir/Quote.h"
#include "runtime/jit/MicroKernel.h"
#include "runtime/jit/TileModel.h"
#include "runtime/kernels/HostIsa.h"

#include <llvm/Config/llvm-config.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include <sys/stat.h>

namespace einstage {

namespace {

constexpr std::string_view kFormat = "einstage-tuning 1";
constexpr int64_t kMaxBlock = 65536;
// A tuning file is a few hundred bytes; anything much larger is not one.
constexpr size_t kMaxTuningBytes = size_t{1} << 20;

std::string cpu_model() {
  std::string brand;
  if (host_cpuid(0x80000000u, 0)[0] >= 0x80000004u) {
    for (uint32_t leaf = 0x80000002u; leaf <= 0x80000004u; ++leaf) {
      const std::array<uint32_t, 4> r = host_cpuid(leaf, 0);
      brand.append(reinterpret_cast<const char*>(r.data()), sizeof r);
    }
    brand = brand.c_str();  // up to the first NUL
    while (!brand.empty() && brand.back() == ' ') brand.pop_back();
    while (!brand.empty() && brand.front() == ' ') brand.erase(brand.begin());
  }
  if (brand.empty()) brand = "unknown CPU";
  const uint32_t eax = host_cpuid(1, 0)[0];
  const uint32_t base_family = (eax >> 8) & 15, base_model = (eax >> 4) & 15;
  const uint32_t family = base_family == 15 ? base_family + ((eax >> 20) & 255) : base_family;
  const uint32_t model = base_family == 6 || base_family == 15 ? base_model + (((eax >> 16) & 15) << 4) : base_model;
  return fmt::format("{} (family {} model {} stepping {})", brand, family, model, eax & 15);
}

// One dtype's values from the file's object `j` over `base` (the model's), checked for `isa`.
GemmParams read_params(const nlohmann::json& j, std::string_view dtype, DType real, const VectorIsa& isa,
                       const GemmParams& base) {
  if (!j.is_object()) fail(ErrorKind::invalid_argument, "\"{}\" is not an object; expected {{\"mr\": ..., \"nr\": ..., "
                           "\"mc\": ..., \"nc\": ...}}", dtype);
  GemmParams p = base;
  auto field = [&](const char* name, int64_t& out) {
    if (!j.contains(name)) return;
    const nlohmann::json& v = j.at(name);
    if (!v.is_number_integer())
      fail(ErrorKind::invalid_argument, "{}.{} is {}; expected a whole number", dtype, name, v.dump());
    out = v.get<int64_t>();
  };
  int64_t mr = p.mr, nr = p.nr;
  field("mr", mr);
  field("nr", nr);
  field("mc", p.mc);
  field("nc", p.nc);
  const int64_t lanes = isa.vector_bytes / static_cast<int64_t>(size_of(real));
  const char* isa_name = isa.vector_bytes == 64 ? "AVX-512" : "AVX2";
  if (mr < lanes || mr % lanes != 0 || mr > 64 * lanes)
    fail(ErrorKind::invalid_argument, "{}.mr is {}; expected a multiple of {} (the {} lanes of an {} vector)", dtype,
         mr, lanes, dtype, isa_name);
  if (nr < 1 || nr > 64 || !tile_fits(isa, {int(mr / lanes), int(nr)}))
    fail(ErrorKind::invalid_argument,
         "the {} tile {} x {} does not fit the {} vector registers of {} ({} accumulators + {} A vectors + 1 "
         "broadcast); choose fewer rows or columns",
         dtype, mr, nr, isa.registers, isa_name, (mr / lanes) * nr, mr / lanes);
  p.mr = int(mr), p.nr = int(nr);
  if (p.mc < 1 || p.mc > kMaxBlock || p.mc % p.mr != 0)
    fail(ErrorKind::invalid_argument, "{}.mc is {}; expected a multiple of mr ({}) from 1 to {}", dtype, p.mc, p.mr,
         kMaxBlock);
  if (p.nc < 1 || p.nc > kMaxBlock || p.nc % p.nr != 0)
    fail(ErrorKind::invalid_argument, "{}.nc is {}; expected a multiple of nr ({}) from 1 to {}", dtype, p.nc, p.nr,
         kMaxBlock);
  return p;
}

std::string string_field(const nlohmann::json& j, const char* name) {
  if (!j.contains(name)) fail(ErrorKind::invalid_argument, "there is no \"{}\"", name);
  if (!j.at(name).is_string())
    fail(ErrorKind::invalid_argument, "\"{}\" is {}; expected a string", name, j.at(name).dump());
  return j.at(name).get<std::string>();
}

}  // namespace

const TuningKey& host_tuning_key() {
  static const TuningKey& key = *new TuningKey{cpu_model(), LLVM_VERSION_STRING, kernels::host_isa().avx512f};
  return key;
}

KernelTuning model_tuning(bool avx512, const CacheInfo& caches) {
  KernelTuning t;
  t.avx512 = avx512;
  for (DType real : {DType::f32, DType::f64}) {
    const MicroKernelSpec spec = model_micro_kernel(real, vector_isa(avx512), caches);
    const GettBlocking b = blocking_for(caches, static_cast<int64_t>(size_of(real)), spec.mr, spec.nr);
    t.of(real) = {spec.mr, spec.nr, b.mc, b.nc};
  }
  return t;
}

int64_t model_kc(DType real, bool avx512, const CacheInfo& caches) {
  const MicroKernelSpec spec = model_micro_kernel(real, vector_isa(avx512), caches);
  return blocking_for(caches, static_cast<int64_t>(size_of(real)), spec.mr, spec.nr).kc;
}

std::string tuning_path(const std::string& cache_dir, const TuningKey& key) {
  if (cache_dir.empty()) return "";
  const std::string text = fmt::format("{}\n{}\n{}\n{}\n", kFormat, key.cpu, key.llvm, key.avx512 ? "avx512" : "avx2");
  return fmt::format("{}/tuning-{:016x}.json", cache_dir, hash_bytes(text));
}

std::string tuning_json(const KernelTuning& tuning, const TuningKey& key, const std::vector<std::string>& notes) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["cpu"] = key.cpu;
  j["llvm"] = key.llvm;
  j["isa"] = tuning.avx512 ? "avx512" : "avx2";
  for (DType real : {DType::f64, DType::f32}) {
    const GemmParams& p = tuning.of(real);
    j[std::string(name(real))] = {{"mr", p.mr}, {"nr", p.nr}, {"mc", p.mc}, {"nc", p.nc}};
  }
  j["notes"] = notes;
  return j.dump(2) + "\n";
}

KernelTuning parse_tuning(std::string_view text, const TuningKey& key, bool stored, const KernelTuning& model) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) fail(ErrorKind::invalid_argument, "it is not JSON");
  if (!j.is_object()) fail(ErrorKind::invalid_argument, "it is not a JSON object");
  const std::string isa = string_field(j, "isa");
  const std::string want_isa = key.avx512 ? "avx512" : "avx2";
  if (isa != "avx512" && isa != "avx2")
    fail(ErrorKind::invalid_argument, "\"isa\" is {}; expected \"avx512\" or \"avx2\"", j.at("isa").dump());
  if (isa != want_isa)
    fail(ErrorKind::invalid_argument, "it was made for {}, and this CPU's kernels are {}", isa, want_isa);
  if (stored) {
    if (const std::string format = string_field(j, "format"); format != kFormat)
      fail(ErrorKind::invalid_argument, "its format is '{}'; expected '{}'", format, kFormat);
    if (const std::string cpu = string_field(j, "cpu"); cpu != key.cpu)
      fail(ErrorKind::invalid_argument, "it was made for the CPU '{}', and this is '{}'", cpu, key.cpu);
    if (const std::string llvm = string_field(j, "llvm"); llvm != key.llvm)
      fail(ErrorKind::invalid_argument, "it was made with LLVM '{}', and this einstage uses LLVM {}", llvm,
           key.llvm);
  }
  KernelTuning t = model;
  const VectorIsa vector = vector_isa(key.avx512);
  for (DType real : {DType::f64, DType::f32}) {
    const std::string dtype(name(real));
    if (j.contains(dtype)) t.of(real) = read_params(j.at(dtype), dtype, real, vector, model.of(real));
    else if (stored) fail(ErrorKind::invalid_argument, "there is no \"{}\"", dtype);
  }
  return t;
}

TuningInForce resolve_tuning(const std::string& setting, const std::string& cache_dir, const TuningKey& key,
                             const KernelTuning& model) {
  TuningInForce out;
  out.params = model;
  if (setting == "off") return out;
  const bool named = !setting.empty();
  out.path = named ? setting : tuning_path(cache_dir, key);
  if (out.path.empty()) return out;
  if (!named) {
    struct stat st;
    if (::stat(out.path.c_str(), &st) != 0 && errno == ENOENT) {
      out.path.clear();  // not tuned yet
      return out;
    }
  }
  std::string what;
  try {
    const std::string text = read_regular_file(out.path, kMaxTuningBytes);  // its errors name the file
    try {
      out.params = parse_tuning(text, key, !named, model);
      out.source = named ? TuningSource::override_file : TuningSource::file;
      return out;
    } catch (const Error& e) {
      what = fmt::format("tuning file '{}': {}", shown_arg(out.path), e.what());
    }
  } catch (const Error& e) {
    what = e.what();
  }
  out.params = model;
  out.warning = named ? fmt::format("EINSTAGE_TUNING: {}; using the model's kernel parameters (fix the file, set "
                                    "EINSTAGE_TUNING=off, or unset it to use the stored tuning)",
                                    what)
                      : fmt::format("{}; using the model's kernel parameters (run 'einstage tune' to replace the "
                                    "file, or delete it)",
                                    what);
  return out;
}

TuningInForce host_tuning(const Config& config) {
  const KernelTuning model = model_tuning(host_tuning_key().avx512, host_cache_info());
  TuningInForce t = resolve_tuning(config.kernel_tuning, config.kernel_cache_dir, host_tuning_key(), model);
  if (!t.warning.empty()) std::fprintf(stderr, "einstage: warning: %s\n", t.warning.c_str());
  return t;
}

int GemmTuning::index(DType real, bool avx512) {
  EIN_ASSERT(real == DType::f32 || real == DType::f64, "GEMM parameters are for real dtypes");
  return (real == DType::f64 ? 1 : 0) + (avx512 ? 2 : 0);
}

GemmTuning::GemmTuning(TuningInForce in_force) : in_force_(std::move(in_force)) {
  const CacheInfo& caches = host_cache_info();
  for (bool wide : {false, true}) {
    const KernelTuning params = in_force_.params.avx512 == wide ? in_force_.params : model_tuning(wide, caches);
    for (DType real : {DType::f32, DType::f64}) {
      const GemmParams& p = params.of(real);
      MicroKernelSpec tile = model_host_micro_kernel(real, wide);
      tile.mr = p.mr, tile.nr = p.nr;
      blocks_[index(real, wide)] = {p.mc, model_kc(real, wide, caches), p.nc};
      candidates_[index(real, wide)] = micro_kernel_candidates(tile);
    }
  }
}

const GemmTuning& GemmTuning::model() {
  // Never destroyed: a thread may still set up a contraction while another calls exit().
  static const GemmTuning& model = *new GemmTuning([] {
    TuningInForce t;
    t.params = model_tuning(host_tuning_key().avx512, host_cache_info());
    return t;
  }());
  return model;
}

std::string_view source_name(TuningSource source) {
  switch (source) {
    case TuningSource::model: return "model";
    case TuningSource::file: return "tuned";
    case TuningSource::override_file: return "EINSTAGE_TUNING";
  }
  return "model";
}

}  // namespace einstage
