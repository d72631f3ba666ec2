#include "runtime/jit/KernelCache.h"

#include "ir/Error.h"
#include "ir/Quote.h"
#include "ir/FileIO.h"
#include "ir/Hash.h"
#include "runtime/jit/LlvmProcess.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include <sys/stat.h>

namespace einstage {

namespace {

constexpr char kMagic[8] = {'E', 'I', 'N', 'J', 'O', 'B', 'J', '1'};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

bool get_u64(std::string_view in, size_t& pos, uint64_t& v) {
  if (pos + sizeof v > in.size()) return false;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Cache entries are objects of one kernel; anything larger is not one of ours.
constexpr size_t kMaxEntryBytes = size_t{64} << 20;

// The object stored in `path` if the entry is a regular file, complete, uncorrupted and made for `key`; nullopt if
// there is no entry, or (with `problem` saying what is wrong, naming the path) if the entry cannot be used.
std::optional<std::vector<char>> read_cached(const std::string& path, const std::string& key, std::string& problem) {
  problem.clear();
  if (struct stat st; ::stat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  std::string file;
  try {
    file = read_regular_file(path, kMaxEntryBytes);
  } catch (const Error& e) {
    problem = e.what();
    return std::nullopt;
  }
  auto bad = [&](std::string_view what) {
    problem = fmt::format("'{}' is not a usable cache entry ({})", shown_arg(path), what);
    return std::nullopt;
  };
  if (file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return bad("no header");
  size_t pos = sizeof kMagic;
  uint64_t key_size = 0, payload_size = 0, checksum = 0;
  if (!get_u64(file, pos, key_size) || key_size > file.size() - pos) return bad("truncated header");
  if (std::string_view(file.data() + pos, key_size) != key) return bad("made for another kernel or host");
  pos += key_size;
  if (!get_u64(file, pos, payload_size) || !get_u64(file, pos, checksum)) return bad("truncated header");
  if (payload_size != file.size() - pos || payload_size == 0) return bad("truncated object");
  if (Fnv1a().bytes(file.data() + pos, payload_size).value() != checksum) return bad("checksum mismatch");
  return std::vector<char>(file.begin() + static_cast<std::ptrdiff_t>(pos), file.end());
}

// Writes header + object in place of the entry at `path` (write_file_atomically, so concurrent processes never see
// a partial file, and a FIFO or symlink found there is replaced); false on any failure (the disk cache is an
// optimisation: failing to write it is not an error).
bool write_cached(const std::string& path, const std::string& key, const std::vector<char>& object) {
  std::string bytes(kMagic, sizeof kMagic);
  put_u64(bytes, key.size());
  bytes += key;
  put_u64(bytes, object.size());
  put_u64(bytes, Fnv1a().bytes(object.data(), object.size()).value());
  bytes.append(object.data(), object.size());
  try {
    write_file_atomically(path, bytes, SpecialTarget::replace);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

KernelCache::KernelCache(std::string cache_dir, const JitTarget& target, void (*warm_up)())
    : cache_dir_(std::move(cache_dir)), warm_up_(warm_up), jit_(Jit::create(target)) {
  static std::atomic<uint64_t> next_serial{1};
  serial_ = next_serial.fetch_add(1, std::memory_order_relaxed);
}
KernelCache::~KernelCache() = default;

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
    std::string problem;
    object = read_cached(path, key, problem);
    if (!problem.empty()) {
      ++stats_.disk_rejected;
      std::fprintf(stderr, "einstage: warning: kernel cache: %s; recompiling\n", problem.c_str());
    }
  }
  const bool from_disk = object.has_value();
  if (object) {
    jit_->add_object(*object, symbol);
    ++stats_.disk_hits;
  } else {
    if (warm_up_) LlvmProcess::get().warm_up(warm_up_);
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

bool KernelCache::has_cached_file(const std::string& symbol, const std::string& detail) const {
  const std::string path = file_for(symbol, disk_key(detail));
  std::error_code ec;
  return !path.empty() && std::filesystem::is_regular_file(path, ec);
}

JitStats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace einstage
