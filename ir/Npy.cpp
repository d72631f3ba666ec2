#include "ir/Npy.h"

#include "ir/FileIO.h"
#include "ir/Quote.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace einstage {

// Data sections are copied as-is; a big-endian host would need byte swapping, which nothing here does.
static_assert(std::endian::native == std::endian::little, "einstage's .npy I/O assumes a little-endian host");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlign = 64;  // NumPy pads the preamble + header to a multiple of 64 bytes

// The element types read from a file: a NumPy kind letter and item size, and the einstage dtype it becomes. bool,
// the narrower integers and float16 are widened (every value is exact in the wider type); written files always use
// einstage's own five dtypes, little-endian.
struct FileType {
  char kind;       // NumPy's dtype.kind: 'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex
  int size;        // bytes per element in the file
  DType dtype;     // what the tensor holds
  bool widened;    // the tensor's element type differs from the file's
};
constexpr FileType kFileTypes[] = {
    {'f', 4, DType::f32, false}, {'f', 8, DType::f64, false}, {'c', 8, DType::c64, false},
    {'c', 16, DType::c128, false}, {'i', 8, DType::i64, false}, {'b', 1, DType::i64, true},
    {'i', 1, DType::i64, true},  {'i', 2, DType::i64, true},  {'i', 4, DType::i64, true},
    {'u', 1, DType::i64, true},  {'u', 2, DType::i64, true},  {'u', 4, DType::i64, true},
    {'f', 2, DType::f32, true},
};
constexpr std::string_view kSupportedDescrs =
    "f4 (f32), f8 (f64), c8 (c64), c16 (c128), i8 (i64), and widened on reading: b1, i1, i2, i4, u1, u2, u4 (to i64) "
    "and f2 (to f32), in either byte order";

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::c64: return "<c8";
    case DType::c128: return "<c16";
    case DType::i64: return "<i8";
  }
  EIN_ASSERT(false, "no .npy descr for dtype {}", name(dtype));
  return {};
}

std::string hex_bytes(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i)
    out += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(bytes[i]));
  return out;
}

// ---- the header dict: a Python literal, parsed by hand ----

struct PyEntry;

struct PyValue {
  enum class Kind { string, integer, boolean, none, tuple, list, dict } kind = Kind::none;
  std::string text;     // string
  int64_t integer = 0;  // integer
  bool boolean = false;
  std::vector<PyValue> items;                          // tuple, list
  std::vector<PyEntry> entries;  // dict (keys must be strings)
  size_t pos = 0;                // where it starts in the header text
};

// One dict entry. A named struct, not std::pair<std::string, PyValue>: a pair member needs PyValue complete, and
// clang (unlike gcc) instantiates it inside PyValue's own definition.
struct PyEntry {
  std::string key;
  PyValue value;
};

std::string_view kind_name(PyValue::Kind k) {
  switch (k) {
    case PyValue::Kind::string: return "a string";
    case PyValue::Kind::integer: return "an integer";
    case PyValue::Kind::boolean: return "a boolean";
    case PyValue::Kind::none: return "None";
    case PyValue::Kind::tuple: return "a tuple";
    case PyValue::Kind::list: return "a list";
    case PyValue::Kind::dict: return "a dict";
  }
  return "a value";
}

class LiteralParser {
 public:
  LiteralParser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  PyValue parse_all() {
    PyValue v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) error("the end of the header after the dict");
    return v;
  }

  [[noreturn]] void fail_at(size_t pos, std::string_view message) const {
    fail(ErrorKind::parse, "{}: malformed .npy header: {} at character {} of the header {}", source_, message, pos,
         quote_for_message(text_));
  }

 private:
  [[noreturn]] void error(std::string_view expected) const {
    std::string found =
        pos_ < text_.size() ? quote_for_message(text_.substr(pos_, 1)) : std::string("the end of the header");
    fail_at(pos_, fmt::format("expected {} but found {}", expected, found));
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  PyValue parse_value(int depth) {
    if (depth > 16) error("a shallower literal (nesting deeper than 16)");
    skip_space();
    if (pos_ >= text_.size()) error("a value");
    PyValue v;
    v.pos = pos_;
    char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = PyValue::Kind::dict;
      while (!eat('}')) {
        skip_space();
        size_t key_pos = pos_;
        PyValue key = parse_value(depth + 1);
        if (key.kind != PyValue::Kind::string) fail_at(key_pos, "a dict key is not a string");
        if (!eat(':')) error("':' after a dict key");
        PyValue value = parse_value(depth + 1);
        v.entries.push_back(PyEntry{std::move(key.text), std::move(value)});
        if (!eat(',')) {
          if (!eat('}')) error("',' or '}' in the dict");
          break;
        }
      }
    } else if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      ++pos_;
      v.kind = c == '(' ? PyValue::Kind::tuple : PyValue::Kind::list;
      while (!eat(close)) {
        v.items.push_back(parse_value(depth + 1));
        if (!eat(',')) {
          if (!eat(close)) error(c == '(' ? "',' or ')' in the tuple" : "',' or ']' in the list");
          break;
        }
      }
    } else if (c == '\'' || c == '"') {
      v.kind = PyValue::Kind::string;
      v.text = parse_string();
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::Kind::integer;
      v.integer = parse_integer();
    } else {
      size_t end = pos_;
      while (end < text_.size() && std::isalpha(static_cast<unsigned char>(text_[end]))) ++end;
      std::string_view word = text_.substr(pos_, end - pos_);
      if (word == "True" || word == "False") {
        v.kind = PyValue::Kind::boolean;
        v.boolean = word == "True";
      } else if (word == "None") {
        v.kind = PyValue::Kind::none;
      } else {
        error("a value (a string, integer, True, False, None, tuple, list or dict)");
      }
      pos_ = end;
    }
    return v;
  }

  std::string parse_string() {
    char quote_char = text_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) error(fmt::format("the closing {} of a string", quote_char));
      char c = text_[pos_++];
      if (c == quote_char) return out;
      if (c == '\n') error(fmt::format("the closing {} of a string", quote_char));
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += c;
      }
    }
  }

  int64_t parse_integer() {
    size_t start = pos_;
    bool negative = false;
    if (text_[pos_] == '-' || text_[pos_] == '+') negative = text_[pos_++] == '-';
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) error("a digit");
    uint64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      value = value * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail_at(start, "an integer is too large");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;  // Python 2 long, old files
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
      error("an integer (no fraction or exponent)");
    return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
};

uint32_t read_le(std::string_view bytes, size_t at, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// How the file stores its elements, from the descr string ("<f8", ">i4", "|b1", "=f2").
struct FileLayout {
  FileType type;
  bool big_endian = false;
};

FileLayout layout_from_descr(const std::string& descr, std::string_view source) {
  auto unsupported = [&]() -> FileLayout {
    fail(ErrorKind::dtype, "{}: unsupported dtype '{}'; supported dtypes are {}", source,
         escape_for_message(descr, '\''), kSupportedDescrs);
  };
  if (descr.size() < 3 || std::string_view("<>|=").find(descr[0]) == std::string_view::npos) return unsupported();
  int size = 0;
  auto [end, ec] = std::from_chars(descr.data() + 2, descr.data() + descr.size(), size);
  if (ec != std::errc() || end != descr.data() + descr.size()) return unsupported();
  if (descr[1] == 'u' && size == 8)
    fail(ErrorKind::dtype, "{}: dtype '{}' (uint64) is not supported: its values above 2^63-1 do not fit in i64, "
         "einstage's widest integer; convert it in NumPy (a.astype(np.int64) when the values fit, else "
         "a.astype(np.float64))", source, descr);
  // '|' (no byte order) is what NumPy writes for one-byte types only.
  if (descr[0] == '|' && size != 1) return unsupported();
  for (const FileType& t : kFileTypes)
    if (t.kind == descr[1] && t.size == size) return FileLayout{t, descr[0] == '>' && size > 1};
  return unsupported();
}

// IEEE binary16 to binary32, exactly (every half value is a float value).
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    int shift = 0;
    while (!(mantissa & 0x400)) mantissa <<= 1, ++shift;
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  } else {
    bits = sign;
  }
  return std::bit_cast<float>(bits);
}

// One element of `layout` at `p` (any alignment), in the file's byte order, as the tensor's element type.
template <typename T>
T decode_element(const char* p, const FileLayout& layout) {
  unsigned char b[16];
  const int size = layout.type.size;
  std::memcpy(b, p, static_cast<size_t>(size));
  if (layout.big_endian) {  // complex: each part is swapped on its own
    const int part = layout.type.kind == 'c' ? size / 2 : size;
    for (int at = 0; at < size; at += part) std::reverse(b + at, b + at + part);
  }
  auto as = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, b, sizeof v);
    return v;
  };
  if constexpr (std::is_same_v<T, int64_t>) {
    switch (layout.type.kind) {
      case 'b': return b[0] != 0;
      case 'u': return size == 1 ? as(uint8_t{}) : size == 2 ? as(uint16_t{}) : as(uint32_t{});
      default: return size == 1 ? as(int8_t{}) : size == 2 ? as(int16_t{}) : size == 4 ? as(int32_t{}) : as(int64_t{});
    }
  } else if constexpr (std::is_same_v<T, float>) {
    return size == 2 ? half_to_float(as(uint16_t{})) : as(float{});
  } else {
    return as(T{});
  }
}

std::string file_source(const std::string& path) { return fmt::format("'{}'", shown_arg(path)); }

}  // namespace

std::string_view to_string(NpyOrder order) { return order == NpyOrder::fortran ? "fortran" : "c"; }

NpyHeader parse_npy_header(std::string_view bytes, std::string_view source) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic)
    fail(ErrorKind::parse, "{}: not a .npy file: it starts with bytes [{}] but a .npy file starts with \\x93NUMPY",
         source, hex_bytes(bytes.substr(0, std::min<size_t>(bytes.size(), 8))));
  if (bytes.size() < 10)
    fail(ErrorKind::parse, "{}: truncated .npy preamble: the file has {} bytes, fewer than the 10 of a version 1.0 "
         "preamble", source, bytes.size());
  NpyHeader h;
  h.version_major = static_cast<unsigned char>(bytes[6]);
  h.version_minor = static_cast<unsigned char>(bytes[7]);
  if (h.version_minor != 0 || h.version_major < 1 || h.version_major > 3)
    fail(ErrorKind::unsupported, "{}: unsupported .npy format version {}.{}; supported versions are 1.0, 2.0 and 3.0",
         source, h.version_major, h.version_minor);
  size_t length_bytes = h.version_major == 1 ? 2 : 4;
  size_t header_start = 8 + length_bytes;
  if (bytes.size() < header_start)
    fail(ErrorKind::parse, "{}: truncated .npy preamble: a version {}.0 preamble has {} bytes but the file has {}",
         source, h.version_major, header_start, bytes.size());
  size_t header_len = read_le(bytes, 8, static_cast<int>(length_bytes));
  if (bytes.size() - header_start < header_len)
    fail(ErrorKind::parse, "{}: truncated .npy header: the preamble announces {} header bytes but only {} follow",
         source, header_len, bytes.size() - header_start);
  h.data_offset = header_start + header_len;
  // Versions 1 and 2 are latin-1 and 3 is UTF-8; the keys and values we accept are ASCII either way.
  std::string_view text = bytes.substr(header_start, header_len);

  LiteralParser parser(text, source);
  PyValue dict = parser.parse_all();
  if (dict.kind != PyValue::Kind::dict)
    parser.fail_at(dict.pos, fmt::format("expected a dict but found {}", kind_name(dict.kind)));
  std::map<std::string, const PyValue*> keys;
  for (const auto& [key, value] : dict.entries) {
    if (key != "descr" && key != "fortran_order" && key != "shape")
      parser.fail_at(value.pos, fmt::format("unexpected key '{}' (the keys are 'descr', 'fortran_order' and 'shape')",
                                            escape_for_message(key, '\'')));
    if (!keys.emplace(key, &value).second)
      parser.fail_at(value.pos, fmt::format("key '{}' appears twice", escape_for_message(key, '\'')));
  }
  for (std::string_view key : {"descr", "fortran_order", "shape"})
    if (!keys.count(std::string(key)))
      parser.fail_at(dict.pos, fmt::format("missing key '{}' (the keys are 'descr', 'fortran_order' and 'shape')",
                                           key));

  const PyValue& descr = *keys["descr"];
  if (descr.kind != PyValue::Kind::string)
    fail(ErrorKind::dtype, "{}: unsupported dtype: 'descr' is {} (a structured dtype?) but einstage reads plain "
         "arrays with a dtype string, one of {}", source, kind_name(descr.kind), kSupportedDescrs);
  h.descr = descr.text;
  const FileLayout layout = layout_from_descr(descr.text, source);
  h.dtype = layout.type.dtype;
  h.item_size = layout.type.size;

  const PyValue& order = *keys["fortran_order"];
  if (order.kind != PyValue::Kind::boolean)
    parser.fail_at(order.pos, fmt::format("'fortran_order' is {} but must be True or False", kind_name(order.kind)));
  h.order = order.boolean ? NpyOrder::fortran : NpyOrder::c;

  const PyValue& shape = *keys["shape"];
  if (shape.kind != PyValue::Kind::tuple)
    parser.fail_at(shape.pos, fmt::format("'shape' is {} but must be a tuple of integers", kind_name(shape.kind)));
  for (const PyValue& e : shape.items) {
    if (e.kind != PyValue::Kind::integer || e.integer < 0)
      parser.fail_at(e.pos, "a 'shape' entry is not a non-negative integer");
    h.shape.push_back(e.integer);
  }
  // Zero-size arrays too: the product of the non-zero extents must fit, so strides and sizes never overflow.
  (void)checked_bytes(h.shape, std::max<size_t>(size_of(h.dtype), static_cast<size_t>(h.item_size)),
                      fmt::format("{}: the header's shape", source));
  return h;
}

namespace {

// Reads `n` bytes of the data section, in file order, into `out`.
using DataReader = std::function<void(char* out, size_t n)>;

constexpr size_t kChunkBytes = size_t(1) << 20;  // staging for data that is reordered, swapped or widened

// Fills `dst` (the tensor, or a slice of it whose axes before `axis` have extent 1) from the file's row-major data,
// which holds dst's elements in C order. Whole slices along `axis` are staged a chunk at a time and scattered with
// copy_from; a slice larger than a chunk is split along the next axis.
void fill_c_order(Tensor dst, int axis, const FileLayout& layout, const DataReader& read, std::vector<char>& raw,
                  Tensor& staged) {
  const Shape& shape = dst.shape();
  int64_t slice = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) slice *= shape[i];
  const size_t slice_bytes = static_cast<size_t>(slice) * std::max<size_t>(size_of(dst.dtype()), layout.type.size);
  if (slice_bytes > kChunkBytes && axis + 1 < dst.rank()) {
    for (int64_t i = 0; i < shape[axis]; ++i)
      fill_c_order(dst.slice(axis, i, i + 1), axis + 1, layout, read, raw, staged);
    return;
  }
  const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / std::max<size_t>(slice_bytes, 1)));
  for (int64_t begin = 0; begin < shape[axis]; begin += per_chunk) {
    const int64_t end = std::min(shape[axis], begin + per_chunk);
    Tensor part = dst.slice(axis, begin, end);
    const int64_t count = part.numel();
    const size_t file_bytes = static_cast<size_t>(count) * static_cast<size_t>(layout.type.size);
    if (layout.type.widened || layout.big_endian) {
      read(raw.data(), file_bytes);
      dispatch_dtype(dst.dtype(), [&](auto zero) {
        using T = decltype(zero);
        T* out = static_cast<T*>(staged.raw_data());
        for (int64_t i = 0; i < count; ++i) out[i] = decode_element<T>(raw.data() + i * layout.type.size, layout);
      });
    } else {
      read(static_cast<char*>(staged.raw_data()), file_bytes);
    }
    Strides row_major(part.shape().size());
    int64_t stride = 1;
    for (int i = part.rank() - 1; i >= 0; --i) row_major[i] = stride, stride *= part.shape()[i];
    part.copy_from(Tensor::view_of(dst.dtype(), part.shape(), std::move(row_major), staged.raw_data()));
  }
}

// The tensor `h` describes, its data read through `read` straight into the tensor's storage: data that is already
// einstage's element type and order is read in one piece; big-endian data of the same width is swapped in place;
// widened or row-major data goes through a chunk of staging, never a second whole-size buffer.
Tensor read_npy_data(const NpyHeader& h, size_t available, const DataReader& read, std::string_view source,
                     NpyLayout want) {
  const size_t expected = static_cast<size_t>(
      checked_bytes(h.shape, static_cast<size_t>(h.item_size), fmt::format("{}: the data of shape", source)));
  if (available < expected)
    fail(ErrorKind::io, "{}: truncated data: shape {} of dtype {} needs {} bytes after the header but the file has "
         "only {}", source, shape_to_string(h.shape), h.descr, expected, available);
  if (available > expected)
    fail(ErrorKind::io, "{}: {} unexpected bytes after the data: shape {} of dtype {} needs {} bytes after the header "
         "but the file has {}", source, available - expected, shape_to_string(h.shape), h.descr, expected, available);
  const FileLayout layout = layout_from_descr(h.descr, source);
  if (want == NpyLayout::as_stored && h.order == NpyOrder::c && h.shape.size() > 1 && !layout.type.widened &&
      !layout.big_endian) {
    // Row-major data of einstage's element type: the bytes are the column-major storage of the reversed shape, so
    // they are read in one piece and the reversed view is returned (element (i, j, ...) is NumPy's a[i, j, ...]).
    Tensor stored = Tensor::empty(h.dtype, Shape(h.shape.rbegin(), h.shape.rend()));
    if (stored.numel() > 0) read(static_cast<char*>(stored.raw_data()), expected);
    return stored.transpose();
  }
  Tensor t = Tensor::empty(h.dtype, h.shape);
  const int64_t count = t.numel();
  if (count == 0) return t;
  char* out = static_cast<char*>(t.raw_data());
  if (h.order == NpyOrder::c && h.shape.size() > 1) {
    std::vector<char> raw(kChunkBytes);
    Tensor staged = Tensor::empty(h.dtype, {static_cast<int64_t>(kChunkBytes / size_of(h.dtype))});
    fill_c_order(t, 0, layout, read, raw, staged);
  } else if (!layout.type.widened) {
    read(out, expected);
    if (layout.big_endian)  // same width: swap each element where it lies
      dispatch_dtype(h.dtype, [&](auto zero) {
        using T = decltype(zero);
        T* p = reinterpret_cast<T*>(out);
        for (int64_t i = 0; i < count; ++i) p[i] = decode_element<T>(out + i * layout.type.size, layout);
      });
  } else {
    std::vector<char> raw(kChunkBytes);
    const int64_t per_chunk = static_cast<int64_t>(kChunkBytes) / layout.type.size;
    dispatch_dtype(h.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* p = reinterpret_cast<T*>(out);
      for (int64_t begin = 0; begin < count; begin += per_chunk) {
        const int64_t n = std::min(count - begin, per_chunk);
        read(raw.data(), static_cast<size_t>(n * layout.type.size));
        for (int64_t i = 0; i < n; ++i) p[begin + i] = decode_element<T>(raw.data() + i * layout.type.size, layout);
      }
    });
  }
  return t;
}

}  // namespace

Tensor read_npy_bytes(std::string_view bytes, NpyHeader* header_out, std::string_view source, NpyLayout layout) {
  NpyHeader h = parse_npy_header(bytes, source);
  size_t at = h.data_offset;
  Tensor t = read_npy_data(h, bytes.size() - h.data_offset, [&](char* out, size_t n) {
    std::memcpy(out, bytes.data() + at, n);
    at += n;
  }, source, layout);
  if (header_out) *header_out = std::move(h);
  return t;
}

Tensor read_npy(const std::string& path, NpyHeader* header_out, NpyLayout layout) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(ErrorKind::io, "cannot read '{}': it is a directory, not a .npy file", shown_arg(path));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::io, "cannot open '{}' for reading: {}", shown_arg(path), std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) fail(ErrorKind::io, "cannot read '{}': its size is unknown", shown_arg(path));
  const size_t size = static_cast<size_t>(st.st_size);
  size_t done = 0;  // bytes of the file read so far
  auto read_exactly = [&](char* out, size_t n) {
    for (size_t got = 0; got < n;) {
      ssize_t r = ::read(fd, out + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(ErrorKind::io, "reading '{}' failed after {} bytes: {}", shown_arg(path), done + got, std::strerror(errno));
      if (r == 0) fail(ErrorKind::io, "reading '{}' failed after {} bytes: the file shrank while being read", shown_arg(path),
                       done + got);
      got += static_cast<size_t>(r);
    }
    done += n;
  };
  // The preamble says how long the header is (2 bytes at offset 8 in version 1, 4 in later versions); only the
  // preamble and header are read here, and parse_npy_header reports whatever they lack.
  std::string head(std::min<size_t>(size, 12), '\0');
  read_exactly(head.data(), head.size());
  if (head.size() == 12 && head.starts_with(kMagic) && head[7] == 0 && head[6] >= 1 && head[6] <= 3) {
    const size_t header_end = head[6] == 1 ? 10 + read_le(head, 8, 2) : 12 + read_le(head, 8, 4);
    const size_t have = head.size();
    head.resize(std::max(have, std::min(size, header_end)));
    read_exactly(head.data() + have, head.size() - have);
  }
  const std::string source = file_source(path);
  NpyHeader h = parse_npy_header(head, source);
  // A version 1 header may end before byte 12: the bytes already read past it are the first data bytes.
  std::string_view early = std::string_view(head).substr(h.data_offset);
  Tensor t = read_npy_data(h, size - h.data_offset, [&](char* out, size_t n) {
    const size_t from_head = std::min(n, early.size());
    std::memcpy(out, early.data(), from_head);
    early.remove_prefix(from_head);
    read_exactly(out + from_head, n - from_head);
  }, source, layout);
  if (header_out) *header_out = std::move(h);
  return t;
}

namespace {

// The header of the .npy file for `tensor` and the tensor holding its data section's bytes (the tensor itself when
// it is already in that order, so writing copies nothing).
std::pair<std::string, Tensor> npy_parts(const Tensor& tensor, NpyOrder order) {
  if (!tensor.defined()) fail(ErrorKind::invalid_argument, "write_npy: the tensor is undefined");
  const Shape& shape = tensor.shape();
  std::string shape_text;
  if (shape.size() == 1) shape_text = fmt::format("({},)", shape[0]);
  else shape_text = fmt::format("({})", fmt::join(shape, ", "));
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr_of(tensor.dtype()),
                                 order == NpyOrder::fortran ? "True" : "False", shape_text);
  // Version 1.0 stores the header length in 2 bytes; longer headers (rank in the thousands) need 2.0.
  auto padded = [&](size_t preamble) { return (preamble + dict.size() + 1 + kAlign - 1) / kAlign * kAlign; };
  int version = padded(10) - 10 <= 0xffff ? 1 : 2;
  size_t preamble = version == 1 ? 10 : 12;
  size_t total = padded(preamble);
  size_t header_len = total - preamble;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';

  Tensor data;
  if (order == NpyOrder::fortran || tensor.rank() <= 1) {
    data = tensor.contiguous();
  } else {
    // Row-major bytes of shape s are the column-major bytes of the reversed view.
    data = tensor.transpose().contiguous();
  }
  std::string header;
  header.reserve(total);
  header += kMagic;
  header += static_cast<char>(version);
  header += '\0';
  for (size_t i = 0; i < preamble - 8; ++i) header += static_cast<char>((header_len >> (8 * i)) & 0xff);
  header += dict;
  EIN_ASSERT(header.size() == total, "npy header size {} != {}", header.size(), total);
  return {std::move(header), std::move(data)};
}

std::string_view data_bytes(const Tensor& data) {
  return data.nbytes() ? std::string_view(static_cast<const char*>(data.raw_data()), data.nbytes()) : "";
}

}  // namespace

std::string write_npy_bytes(const Tensor& tensor, NpyOrder order) {
  auto [header, data] = npy_parts(tensor, order);
  header.append(data_bytes(data));
  return header;
}

void write_npy(const std::string& path, const Tensor& tensor, NpyOrder order) {
  auto [header, data] = npy_parts(tensor, order);  // everything that can fail on the tensor fails here
  // Header and data go to the file straight from where they are: no whole-file buffer.
  const std::string_view pieces[] = {header, data_bytes(data)};
  write_file_atomically(path, pieces);
}

}  // namespace einstage
