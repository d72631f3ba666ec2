// `einstage show A.npy [B.npy ...]`: reads .npy files and prints each one's stored form (format version, dtype,
// shape, C or Fortran order) next to how einstage holds it (column-major, strides) and its values as nested rows.
// All files are read before anything is printed, so a bad file gives an error and no partial listing. `show --cpu`
// prints the CPU and the kernel parameters in force instead (Cpu.cpp).
#include "ir/Npy.h"
#include "tools/einstage/Command.h"
#include "tools/einstage/EinsumArgs.h"

#include <fmt/format.h>

#include <vector>

namespace einstage::cli {

namespace {

constexpr std::string_view kShowHelp =
    "usage: einstage show A.npy [B.npy ...]\n"
    "       einstage show --cpu\n"
    "\n"
    "Prints each .npy file: how it is stored (format version, dtype, shape, C or Fortran order), how einstage holds\n"
    "it in memory (always column-major: first index fastest), and its values as nested rows, element (i, j, ...)\n"
    "being NumPy's a[i, j, ...] whatever the file's order. Dtypes: f4 f8 c8 c16 i8, and widened on reading b1\n"
    "i1 i2 i4 u1 u2 u4 (to i64) and f2 (to f32), in either byte order; uint64 is refused.\n"
    "\n"
    "\n"
    "With --cpu: the CPU (model, vector features, cache sizes), the LLVM version and the JIT's target, and every\n"
    "CPU-dependent kernel parameter in force with where it comes from: the model, a tuning file stored by\n"
    "'einstage tune', or EINSTAGE_TUNING.\n"
    "\n"
    "options:\n"
    "  --cpu        print the CPU and the kernel parameters instead of files\n"
    "  -h, --help   print this help\n";

std::string python_shape(const Shape& s) {
  if (s.size() == 1) return fmt::format("({},)", s[0]);
  return fmt::format("({})", fmt::join(s, ", "));
}

}  // namespace

int run_show(std::span<const std::string_view> args) {
  if (wants_help(args)) {
    fmt::print("{}", kShowHelp);
    return 0;
  }
  std::vector<std::string> paths;
  bool cpu = false;
  ArgScanner scan("show", args);
  while (scan.next()) {
    if (scan.flag("--cpu")) cpu = true;
    else paths.emplace_back(scan.positional());
  }
  if (cpu) {
    if (!paths.empty()) usage_error("show: --cpu takes no files; usage: einstage show --cpu");
    return run_show_cpu();
  }
  if (paths.empty()) usage_error("show: no .npy files given; usage: einstage show A.npy [B.npy ...]");

  struct Loaded {
    NpyHeader header;
    Tensor tensor;
  };
  std::vector<Loaded> loaded;
  for (const std::string& p : paths) {
    Loaded l;
    l.tensor = read_npy(p, &l.header);
    loaded.push_back(std::move(l));
  }
  for (size_t i = 0; i < loaded.size(); ++i) {
    const NpyHeader& h = loaded[i].header;
    const Tensor& t = loaded[i].tensor;
    if (i) fmt::print("\n");
    fmt::print("{}\n", paths[i]);
    fmt::print("  file:   .npy {}.{}, dtype {}, shape {}, {}\n", h.version_major, h.version_minor, h.descr,
               python_shape(h.shape),
               h.order == NpyOrder::fortran ? "Fortran order (fortran_order True: first index fastest)"
                                            : "C order (fortran_order False: last index fastest)");
    fmt::print("  memory: {}{}, column-major, strides {}\n", name(t.dtype()), shape_to_string(t.shape()),
               shape_to_string(t.strides()));
    std::string text = t.to_string();
    fmt::print("{}\n", text.substr(text.find('\n') + 1));  // the values; the header line repeats dtype[shape]
  }
  return 0;
}

}  // namespace einstage::cli
