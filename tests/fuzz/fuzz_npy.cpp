// libFuzzer target: the .npy reader (read_npy_bytes, which parses the header with parse_npy_header). An accepted
// file must write back (both element orders) to bytes that read to the same tensor: writing that tensor again gives
// the same bytes.
#include "FuzzCheck.h"
#include "ir/Error.h"
#include "ir/Npy.h"

#include <cstdint>

using namespace einstage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    NpyHeader header;
    Tensor t = read_npy_bytes(fuzz::as_text(data, size), &header, "fuzz.npy");
    fuzz::fuzz_check(t.shape() == header.shape, "tensor shape differs from the header's");
    for (NpyOrder order : {NpyOrder::fortran, NpyOrder::c}) {
      const std::string bytes = write_npy_bytes(t, order);
      Tensor back = read_npy_bytes(bytes, nullptr, "written.npy");
      fuzz::fuzz_check(write_npy_bytes(back, order) == bytes, "write(read(write(t))) differs from write(t)");
    }
  } catch (const Error&) {
  }
  return 0;
}
