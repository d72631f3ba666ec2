#include "runtime/jit/KernelCache.h"

#include "ir/Error.h"
#include "ir/Hash.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <unistd.h>

namespace einstage {

namespace {

constexpr char kMagic[8] = {'E', 'I', 'N', 'J', 'O', 'B', 'J', '1'};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

bool get_u64(const std::vector<char>& in, size_t& pos, uint64_t& v) {
  if (pos + sizeof v > in.size()) return false;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The object stored in `path` if the file is complete, uncorrupted and made for `key`; empty otherwise.
std::optional<std::vector<char>> read_cached(const std::string& path, const std::string& key, bool& rejected) {
  rejected = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rejected = true;
  if (file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  size_t pos = sizeof kMagic;
  uint64_t key_size = 0, payload_size = 0, checksum = 0;
  if (!get_u64(file, pos, key_size) || key_size > file.size() - pos) return std::nullopt;
  if (std::string_view(file.data() + pos, key_size) != key) return std::nullopt;
  pos += key_size;
  if (!get_u64(file, pos, payload_size) || !get_u64(file, pos, checksum)) return std::nullopt;
  if (payload_size != file.size() - pos || payload_size == 0) return std::nullopt;
  if (Fnv1a().bytes(file.data() + pos, payload_size).value() != checksum) return std::nullopt;
  rejected = false;
  return std::vector<char>(file.begin() + static_cast<std::ptrdiff_t>(pos), file.end());
}

// Writes header + object to a temporary file beside `path` and renames it into place; false on any failure (the
// disk cache is an optimisation: failing to write it is not an error).
bool write_cached(const std::string& path, const std::string& key, const std::vector<char>& object) {
  std::string header(kMagic, sizeof kMagic);
  put_u64(header, key.size());
  header += key;
  put_u64(header, object.size());
  put_u64(header, Fnv1a().bytes(object.data(), object.size()).value());
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::remove(tmp.c_str());
  return !ec;
}

}  // namespace

KernelCache::KernelCache(std::string cache_dir) : cache_dir_(std::move(cache_dir)), jit_(Jit::create()) {}
KernelCache::~KernelCache() = default;

std::string KernelCache::default_cache_dir() {
  if (const char* dir = std::getenv("EINSTAGE_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/einstage";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/einstage";
  return "";
}

KernelCache& KernelCache::process_default() {
  static KernelCache cache(default_cache_dir());  // a failure throws here and is retried by the next caller
  return cache;
}

std::string KernelCache::disk_key(const std::string& detail) const {
  const JitHost& h = jit_->host();
  return "llvm " + h.llvm_version + "\ntriple " + h.triple + "\ncpu " + h.cpu + "\nfeatures " + h.features + "\n" +
         detail;
}

std::string KernelCache::file_for(const std::string& symbol, const std::string& key) const {
  if (cache_dir_.empty()) return "";
  return fmt::format("{}/{}-{:016x}.o", cache_dir_, symbol, hash_bytes(key));
}

namespace {

std::string micro_kernel_detail(const MicroKernelSpec& spec) {
  return "kernel " + spec.symbol() + " generator " + std::to_string(kMicroKernelGeneratorVersion) + "\n";
}

}  // namespace

std::string KernelCache::cache_file(const MicroKernelSpec& spec) const {
  return file_for(spec.symbol(), disk_key(micro_kernel_detail(spec)));
}

void* KernelCache::load_or_compile(const std::string& symbol, const std::string& detail,
                                   const std::function<std::vector<char>(Jit&)>& compile) {
  if (auto it = kernels_.find(symbol); it != kernels_.end()) return it->second;  // linked while we waited

  std::string key = disk_key(detail);
  std::string path = file_for(symbol, key);
  auto t0 = std::chrono::steady_clock::now();
  std::optional<std::vector<char>> object;
  if (!path.empty()) {
    bool rejected = false;
    object = read_cached(path, key, rejected);
    if (rejected) ++stats_.disk_rejected;
  }
  const bool from_disk = object.has_value();
  if (object) {
    jit_->add_object(*object, symbol);
    ++stats_.disk_hits;
  } else {
    object = compile(*jit_);
    ++stats_.kernels_compiled;
    jit_->add_object(*object, symbol);
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(cache_dir_, ec);
      if (write_cached(path, key, *object)) ++stats_.disk_writes;
    }
  }
  void* fn = jit_->lookup(symbol);
  (from_disk ? stats_.load_ms : stats_.compile_ms) += ms_since(t0);
  kernels_.emplace(symbol, fn);
  return fn;
}

MicroKernelFn KernelCache::micro_kernel(const MicroKernelSpec& spec) {
  {
    std::shared_lock read(fast_mutex_);
    for (const auto& [known, fn] : fast_)
      if (known == spec) return fn;
  }
  std::lock_guard lock(mutex_);  // held through codegen: a second thread waits for the first compile
  void* address = load_or_compile(spec.symbol(), micro_kernel_detail(spec),
                                  [&](Jit& jit) { return compile_micro_kernel(jit, spec); });
  auto fn = reinterpret_cast<MicroKernelFn>(address);
  std::unique_lock write(fast_mutex_);
  for (const auto& [known, known_fn] : fast_)
    if (known == spec) return known_fn;
  fast_.emplace_back(spec, fn);
  return fn;
}

void* KernelCache::compiled_function(const std::string& symbol, const std::string& detail,
                                     const std::function<std::vector<char>(Jit&)>& compile) {
  std::lock_guard lock(mutex_);
  return load_or_compile(symbol, detail, compile);
}

JitStats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace einstage
