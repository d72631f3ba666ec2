// NumPy .npy reading and writing for Tensor, so data crosses to and from NumPy without a silent transpose.
//
// Supported: format versions 1.0, 2.0 and 3.0; fortran_order True and False both ways. Read: f4 f8 c8 c16 i8 as
// einstage's f32 f64 c64 c128 i64, and widened on reading (every value exact): bool, int8-int32 and uint8-uint32 to
// i64, float16 to f32; either byte order for every dtype (big-endian data is swapped once). uint64 is refused (its
// values above 2^63-1 do not fit in i64). Written: einstage's five dtypes, little-endian. A C-order file is read into
// column-major storage with its element (i, j, ...) unchanged (the bytes are reordered once), and write_npy can
// produce either order (NpyLayout::as_stored skips that reordering for callers that take strided tensors). Every
// malformed input (bad magic, unknown version, corrupt header dict, unsupported dtype, truncated data, trailing bytes,
// a shape whose size does not fit in 64 bits) is an einstage::Error naming the file, what was found and what was
// expected. read_npy reads the data straight into the tensor's storage (reordered,
// swapped or widened data through a 1 MiB staging chunk, never a second whole-size buffer), and write_npy writes the
// header and then the data straight from the tensor through write_file_atomically (ir/FileIO.h), so a failure never
// leaves a partial file. The header dict is a Python literal and is parsed by a small hand parser (no JSON).
// Part of ir/; depends on ir/Tensor.h (and, in Npy.cpp, ir/FileIO.h).
#pragma once

#include "ir/Tensor.h"

#include <string>
#include <string_view>

namespace einstage {

/// The element order of the data section of a .npy file (its `fortran_order` flag).
enum class NpyOrder {
  fortran,  // fortran_order True: column-major, einstage's own order (no reordering on either side)
  c,        // fortran_order False: row-major, NumPy's default
};

std::string_view to_string(NpyOrder order);  // "fortran" or "c"

/// What a .npy header says, besides the data.
struct NpyHeader {
  int version_major = 1;
  int version_minor = 0;
  DType dtype = DType::f64;
  std::string descr;  // as written in the file, e.g. "<f8"
  int item_size = 8;   // bytes per element in the file (dtype may be wider: bool, small integers, float16 widen)
  NpyOrder order = NpyOrder::fortran;
  Shape shape;
  size_t data_offset = 0;  // bytes from the start of the file to the first element
};

/// The layout read_npy gives the tensor it returns.
enum class NpyLayout {
  col_major,  // always column-major storage: a C-order file's bytes are reordered once while reading
  as_stored,  // a C-order file of rank >= 2 whose elements need no widening or byte swap is read in one piece and
              // returned as a row-major view of its storage (strides ..., e1*e2, e2, 1), for callers that accept
              // any strides (einsum, which reads strided operands as cheaply as column-major ones); everything
              // else as col_major
};

/// Reads a .npy file into a tensor (column-major unless `layout` is as_stored); if header is not null, also returns
/// what the header said.
Tensor read_npy(const std::string& path, NpyHeader* header = nullptr, NpyLayout layout = NpyLayout::col_major);
/// The same for the bytes of a whole .npy file held in memory; `source` names them in error messages.
Tensor read_npy_bytes(std::string_view bytes, NpyHeader* header = nullptr, std::string_view source = "npy bytes",
                      NpyLayout layout = NpyLayout::col_major);
/// Parses only the preamble and header dict (data_offset says where the data starts).
NpyHeader parse_npy_header(std::string_view bytes, std::string_view source = "npy bytes");

/// Writes a tensor (any strides) as a .npy file with the data in the given order, version 1.0 unless the header needs
/// 2.0: with write_file_atomically (ir/FileIO.h), so a regular file is replaced in one rename, a symlink is followed,
/// a device or FIFO is written through, and an empty path or a directory fails naming it.
void write_npy(const std::string& path, const Tensor& tensor, NpyOrder order = NpyOrder::fortran);
/// The bytes of that .npy file.
std::string write_npy_bytes(const Tensor& tensor, NpyOrder order = NpyOrder::fortran);

}  // namespace einstage
