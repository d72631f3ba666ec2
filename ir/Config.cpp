#include "ir/Config.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace einstage {

namespace {

// Every variable Config reads (the snapshot holds these and nothing else).
constexpr const char* kVariables[] = {"EINSTAGE_NUM_THREADS", "EINSTAGE_CACHE_DIR",      "XDG_CACHE_HOME",
                                      "HOME",                 "EINSTAGE_JIT",            "EINSTAGE_JIT_SPECIALISE",
                                      "EINSTAGE_JIT_DIRECT",  "EINSTAGE_TENSOR_CACHE_MB", "EINSTAGE_DUMP_PASSES",
                                      "EINSTAGE_AD_KEEP_BYTES", "EINSTAGE_TUNING"};

// The variable's value; nullptr when it is unset or empty.
const std::string* value_of(const Environment& env, std::string_view name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

[[noreturn]] void bad_value(std::string_view name, const std::string& value, std::string_view expected) {
  fail(ErrorKind::invalid_argument, "environment variable {} is '{}'; expected {}", name,
       escape_for_message(value, '\''), expected);
}

template <typename Int>
std::optional<Int> whole_number(std::string_view s) {
  Int v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A 0-or-1 switch: the option if given, else the variable, else `fallback`.
bool flag(const Environment& env, std::string_view name, const std::optional<bool>& option, bool fallback,
          std::string_view meaning) {
  if (option) return *option;
  const std::string* v = value_of(env, name);
  if (!v) return fallback;
  if (*v == "0") return false;
  if (*v == "1") return true;
  bad_value(name, *v, fmt::format("0 or 1 ({}), or unset it for the default ({})", meaning, fallback ? 1 : 0));
}

}  // namespace

Config Config::from(const Environment& env, const ConfigOptions& options) {
  Config c;
  if (options.threads) {
    if (*options.threads < 0 || *options.threads > kMaxThreads)
      fail(ErrorKind::invalid_argument,
           "the thread count is {}; expected 0 (the default: every CPU this process may use) or a count from 1 to {}",
           *options.threads, kMaxThreads);
    c.threads = *options.threads;
  } else if (const std::string* v = value_of(env, "EINSTAGE_NUM_THREADS")) {
    std::optional<int> n = whole_number<int>(*v);
    if (!n || *n < 1 || *n > kMaxThreads)
      bad_value("EINSTAGE_NUM_THREADS", *v,
                fmt::format("a whole number of threads from 1 to {}, or unset it to use every CPU this process may "
                            "use",
                            kMaxThreads));
    c.threads = *n;
  }

  if (options.kernel_cache_dir) c.kernel_cache_dir = *options.kernel_cache_dir;
  else if (const std::string* dir = value_of(env, "EINSTAGE_CACHE_DIR")) c.kernel_cache_dir = *dir;
  else if (const std::string* xdg = value_of(env, "XDG_CACHE_HOME")) c.kernel_cache_dir = *xdg + "/einstage";
  else if (const std::string* home = value_of(env, "HOME")) c.kernel_cache_dir = *home + "/.cache/einstage";

  if (options.kernel_tuning) c.kernel_tuning = *options.kernel_tuning;
  else if (const std::string* v = value_of(env, "EINSTAGE_TUNING")) c.kernel_tuning = *v;

  c.jit = flag(env, "EINSTAGE_JIT", options.jit, true, "0 runs every contraction on the portable kernel");
  c.jit_specialise = flag(env, "EINSTAGE_JIT_SPECIALISE", options.jit_specialise, true,
                          "0 compiles no shape-specialised step kernels");
  c.jit_direct = flag(env, "EINSTAGE_JIT_DIRECT", options.jit_direct, true, "0 forces the JIT's packed path");
  c.dump_passes = flag(env, "EINSTAGE_DUMP_PASSES", options.dump_passes, false,
                       "1 prints the program after every compiler pass");

  if (options.scratch_cache_bytes) {
    c.scratch_cache_bytes = *options.scratch_cache_bytes;
  } else if (const std::string* v = value_of(env, "EINSTAGE_TENSOR_CACHE_MB")) {
    std::optional<uint64_t> mb = whole_number<uint64_t>(*v);
    if (!mb || *mb > kMaxScratchCacheMb)
      bad_value("EINSTAGE_TENSOR_CACHE_MB", *v,
                fmt::format("a whole number of MiB from 0 (keep no freed block) to {}, or unset it for the default "
                            "({} MiB)",
                            kMaxScratchCacheMb, Config{}.scratch_cache_bytes >> 20));
    c.scratch_cache_bytes = static_cast<size_t>(*mb) << 20;
  }

  if (options.ad_keep_bytes) {
    if (*options.ad_keep_bytes < -1)
      fail(ErrorKind::invalid_argument, "the byte limit on kept intermediates is {}; expected a byte count >= 0, or "
           "-1 for no limit", *options.ad_keep_bytes);
    c.ad_keep_bytes = *options.ad_keep_bytes;
  } else if (const std::string* v = value_of(env, "EINSTAGE_AD_KEEP_BYTES")) {
    std::optional<int64_t> bytes = whole_number<int64_t>(*v);
    if (!bytes || *bytes < 0)
      bad_value("EINSTAGE_AD_KEEP_BYTES", *v,
                "a whole number of bytes >= 0 (the forward intermediates an einsum's reverse pass keeps; the rest are "
                "recomputed), or unset it to keep every one");
    c.ad_keep_bytes = *bytes;
  }
  return c;
}

Environment Config::current_environment() {
  Environment e;
  for (const char* name : kVariables)
    if (const char* v = std::getenv(name)) e.emplace(name, v);  // the library's only getenv
  return e;
}

const Environment& Config::process_environment() {
  // Never destroyed (like Config::process's result): threads may read the configuration while another calls exit().
  static const Environment& env = *new Environment(current_environment());
  return env;
}

const Config& Config::process() {
  // Computed once; a bad variable is kept as its error so every call raises it. Never destroyed: pool threads and
  // kernels being compiled read it while another thread may be running exit()'s handlers.
  struct Resolved {
    Config config;
    std::optional<Error> error;
  };
  static const Resolved& resolved = *new Resolved([] {
    try {
      return Resolved{from(process_environment()), std::nullopt};
    } catch (const Error& e) {
      return Resolved{Config{}, e};
    }
  }());
  if (resolved.error) throw *resolved.error;
  return resolved.config;
}

Config Config::process(const ConfigOptions& options) { return from(current_environment(), options); }

}  // namespace einstage
