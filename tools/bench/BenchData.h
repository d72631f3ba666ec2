// Where the benchmark programs find their data: the folder of networks and instances that is not part of the
// repository (cotengra/*.json, einsum-benchmark/*.json; docs/networks.md says what they are and where they come
// from). It is given by --bench-dir DIR or the environment variable EINSTAGE_BENCH_DIR; there is no default path.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace einstage::bench {

/// The benchmark data folder when none is given by --bench-dir: the environment variable EINSTAGE_BENCH_DIR, else
/// empty (the data is not part of the repository; docs/networks.md says what the folder holds and where it comes
/// from). Benchmarks that can run without it skip the file networks and say so; the others stop with
/// missing_bench_dir_message().
inline std::filesystem::path default_bench_dir() {
  const char* dir = std::getenv("EINSTAGE_BENCH_DIR");
  return dir && *dir ? std::filesystem::path(dir) : std::filesystem::path();
}

/// What to do when the benchmark data folder is not given (or does not exist).
inline std::string missing_bench_dir_message(const std::filesystem::path& dir) {
  return dir.empty() ? std::string("no benchmark data folder: pass --bench-dir DIR or set EINSTAGE_BENCH_DIR (DIR holds "
                                   "cotengra/ and einsum-benchmark/; docs/networks.md)")
                     : "benchmark data folder '" + dir.string() +
                           "' does not exist: pass --bench-dir DIR or set EINSTAGE_BENCH_DIR (docs/networks.md)";
}

}  // namespace einstage::bench
