// ir/Config.h: every environment setting in one struct. Config::from is pure, so precedence (option > variable >
// default) and every bad value are checked on maps, independent of this process's environment. The last case reads
// the library's sources: no file but ir/Config.cpp reads the environment.
#include "ir/Config.h"

#include "support/ErrorOf.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace einstage;
using einstage::test::error_of;
using einstage::test::kNoError;

TEST_CASE("config: defaults without any variable") {
  const Config c = Config::from({});
  CHECK(c.threads == 0);
  CHECK(c.kernel_cache_dir == "");
  CHECK(c.jit);
  CHECK(c.jit_specialise);
  CHECK(c.jit_direct);
  CHECK(c.scratch_cache_bytes == size_t{1} << 30);
  CHECK(!c.dump_passes);
  CHECK(c == Config{});
}

TEST_CASE("config: an explicit option beats the variable, which beats the default") {
  const Environment env = {{"EINSTAGE_NUM_THREADS", "3"},    {"EINSTAGE_JIT", "0"},
                           {"EINSTAGE_JIT_SPECIALISE", "0"}, {"EINSTAGE_JIT_DIRECT", "0"},
                           {"EINSTAGE_TENSOR_CACHE_MB", "7"}, {"EINSTAGE_DUMP_PASSES", "1"},
                           {"EINSTAGE_CACHE_DIR", "/env/cache"}};
  const Config from_env = Config::from(env);
  CHECK(from_env.threads == 3);
  CHECK(!from_env.jit);
  CHECK(!from_env.jit_specialise);
  CHECK(!from_env.jit_direct);
  CHECK(from_env.scratch_cache_bytes == size_t{7} << 20);
  CHECK(from_env.dump_passes);
  CHECK(from_env.kernel_cache_dir == "/env/cache");

  ConfigOptions options;
  options.threads = 2;
  options.jit = true;
  options.jit_specialise = true;
  options.jit_direct = true;
  options.scratch_cache_bytes = 0;
  options.dump_passes = false;
  options.kernel_cache_dir = "";
  const Config explicit_ = Config::from(env, options);
  CHECK(explicit_.threads == 2);
  CHECK(explicit_.jit);
  CHECK(explicit_.jit_specialise);
  CHECK(explicit_.jit_direct);
  CHECK(explicit_.scratch_cache_bytes == 0);
  CHECK(!explicit_.dump_passes);
  CHECK(explicit_.kernel_cache_dir == "");  // an explicit "" keeps kernels in memory, whatever the variables say
}

TEST_CASE("config: the kernel cache directory follows EINSTAGE_CACHE_DIR, then XDG_CACHE_HOME, then HOME") {
  Environment env = {{"EINSTAGE_CACHE_DIR", "/tmp/a"}, {"XDG_CACHE_HOME", "/tmp/x"}, {"HOME", "/tmp/h"}};
  CHECK(Config::from(env).kernel_cache_dir == "/tmp/a");
  env["EINSTAGE_CACHE_DIR"] = "";  // empty is unset
  CHECK(Config::from(env).kernel_cache_dir == "/tmp/x/einstage");
  env.erase("XDG_CACHE_HOME");
  CHECK(Config::from(env).kernel_cache_dir == "/tmp/h/.cache/einstage");
  env.erase("HOME");
  CHECK(Config::from(env).kernel_cache_dir == "");
}

TEST_CASE("config: a bad value is an error naming the variable, its value and the accepted forms") {
  auto message = [](const char* name, const char* value) { return error_of([&] { Config::from({{name, value}}); }); };
  CHECK(message("EINSTAGE_JIT", "yes") ==
        "environment variable EINSTAGE_JIT is 'yes'; expected 0 or 1 (0 runs every contraction on the portable "
        "kernel), or unset it for the default (1)");
  CHECK(message("EINSTAGE_JIT_SPECIALISE", "off") ==
        "environment variable EINSTAGE_JIT_SPECIALISE is 'off'; expected 0 or 1 (0 compiles no shape-specialised step "
        "kernels), or unset it for the default (1)");
  CHECK(message("EINSTAGE_JIT_DIRECT", "00") ==
        "environment variable EINSTAGE_JIT_DIRECT is '00'; expected 0 or 1 (0 forces the JIT's packed path), or unset "
        "it for the default (1)");
  CHECK(message("EINSTAGE_AD_KEEP_BYTES", "-5") ==
        "environment variable EINSTAGE_AD_KEEP_BYTES is '-5'; expected a whole number of bytes >= 0 (the forward "
        "intermediates an einsum's reverse pass keeps; the rest are recomputed), or unset it to keep every one");
  CHECK(Config::from({{"EINSTAGE_AD_KEEP_BYTES", "4096"}}).ad_keep_bytes == 4096);
  CHECK(message("EINSTAGE_DUMP_PASSES", "true") ==
        "environment variable EINSTAGE_DUMP_PASSES is 'true'; expected 0 or 1 (1 prints the program after every "
        "compiler pass), or unset it for the default (0)");
  CHECK(message("EINSTAGE_TENSOR_CACHE_MB", "1G") ==
        "environment variable EINSTAGE_TENSOR_CACHE_MB is '1G'; expected a whole number of MiB from 0 (keep no freed "
        "block) to 1048576, or unset it for the default (1024 MiB)");
  CHECK(message("EINSTAGE_TENSOR_CACHE_MB", "1048577") ==
        "environment variable EINSTAGE_TENSOR_CACHE_MB is '1048577'; expected a whole number of MiB from 0 (keep no "
        "freed block) to 1048576, or unset it for the default (1024 MiB)");
  CHECK(message("EINSTAGE_NUM_THREADS", "3x") ==
        "environment variable EINSTAGE_NUM_THREADS is '3x'; expected a whole number of threads from 1 to 1024, or "
        "unset it to use every CPU this process may use");
  // The value is echoed escaped, on one line.
  CHECK(message("EINSTAGE_JIT", "1\n'") ==
        "environment variable EINSTAGE_JIT is '1\\n\\''; expected 0 or 1 (0 runs every contraction on the portable "
        "kernel), or unset it for the default (1)");
  // Only "0" and "1" are switches; "1" is accepted.
  CHECK(message("EINSTAGE_JIT", "1") == kNoError);
  CHECK(message("EINSTAGE_TENSOR_CACHE_MB", "0") == kNoError);
}

TEST_CASE("config: an explicit option is used without reading its (bad) variable; a bad option is an error") {
  ConfigOptions options;
  options.jit = false;
  options.threads = 4;
  const Environment env = {{"EINSTAGE_JIT", "maybe"}, {"EINSTAGE_NUM_THREADS", "many"}};
  CHECK(error_of([&] { Config::from(env, options); }) == kNoError);
  CHECK(Config::from(env, options).threads == 4);
  options.threads = -1;
  CHECK(error_of([&] { Config::from({}, options); }) ==
        "the thread count is -1; expected 0 (the default: every CPU this process may use) or a count from 1 to 1024");
  options.threads = 1025;
  CHECK(error_of([&] { Config::from({}, options); }) ==
        "the thread count is 1025; expected 0 (the default: every CPU this process may use) or a count from 1 to "
        "1024");
}

TEST_CASE("config: no library source but ir/Config.cpp reads the environment") {
  namespace fs = std::filesystem;
  const fs::path root = EINSTAGE_SOURCE_DIR;
  std::vector<std::string> readers;
  int files = 0;
  for (const char* layer : {"ir", "compiler", "runtime", "extensions"})
    for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      ++files;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      bool reads = s.find("getenv") != std::string::npos;  // getenv, secure_getenv
      for (const char* use : {"**environ", "environ[", "char** environ"}) reads |= s.find(use) != std::string::npos;
      if (reads)
        readers.push_back(fs::relative(entry.path(), root).generic_string());
    }
  CHECK(files > 50);  // the walk found the sources
  CHECK(readers == std::vector<std::string>{"ir/Config.cpp"});
}
