// .npy reading and writing: NumPy-written fixtures (tests/data/make_npy_fixtures.py), byte-exact agreement with
// NumPy's writer, round trips for every dtype and both orders, atomic writes, and the error text of malformed files.
#include "ir/Npy.h"
#include "support/ErrorOf.h"
#include "support/Random.h"
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <sys/resource.h>

using namespace einstage;
using einstage::test::error_of;
using einstage::test::read_file_bytes;
using einstage::test::SplitMix64;
using einstage::test::TempDir;

namespace {

std::string fixture(const std::string& name) { return std::string(EINSTAGE_TEST_DATA_DIR) + "/" + name; }

// The fixture formula (see make_npy_fixtures.py): element (i, j, k) of a [2,3,4] array is its C-order position
// 12i + 4j + k; complex dtypes add an imaginary part 0.5 * that - 3.
template <typename T> T fixture_value(double v) {
  if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) {
    using R = typename T::value_type;
    return T(static_cast<R>(v), static_cast<R>(0.5 * v - 3.0));
  } else {
    return static_cast<T>(v);
  }
}

// The [2,3,4] fixture array built independently of any reader, from its C-order formula.
template <typename T> Tensor fixture_tensor() {
  Tensor t = Tensor::empty(dtype_v<T>, {2, 3, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) t.at<T>({i, j, k}) = fixture_value<T>(12.0 * i + 4.0 * j + k);
  return t;
}

const char* dtype_file_prefix(DType d) { return name(d).data(); }

// A .npy byte string with the given version, header dict text (padded by this helper) and data bytes.
std::string make_npy(int major, std::string dict, const std::string& data, bool pad = true) {
  size_t preamble = major == 1 ? 10 : 12;
  if (pad) {
    while ((preamble + dict.size() + 1) % 64) dict += ' ';
    dict += '\n';
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  return out + dict + data;
}

std::string f64_bytes(std::initializer_list<double> values) {
  std::string out;
  for (double v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

Tensor random_tensor(DType dtype, const Shape& shape, uint64_t seed) {
  SplitMix64 rng{seed};
  auto value = [&] { return rng.uniform() * 200.0 - 100.0; };  // [-100, 100)
  Tensor t = Tensor::empty(dtype, shape);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) {
        using R = typename T::value_type;
        p[i] = T(static_cast<R>(value()), static_cast<R>(value()));
      } else if constexpr (std::is_same_v<T, int64_t>) {
        p[i] = static_cast<int64_t>(rng.next());
      } else {
        p[i] = static_cast<T>(value());
      }
    }
  });
  return t;
}

}  // namespace

TEST_CASE("numpy fixtures: every dtype in both orders reads as the same logical array") {
  for (DType d : kAllDTypes) {
    dispatch_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      for (std::string order : {"c", "f"}) {
        std::string path = fixture(std::string(dtype_file_prefix(d)) + "_" + order + ".npy");
        CAPTURE(path);
        NpyHeader h;
        Tensor t = read_npy(path, &h);
        CHECK(h.version_major == 1);
        CHECK(h.order == (order == "f" ? NpyOrder::fortran : NpyOrder::c));
        CHECK(h.dtype == d);
        CHECK(t.dtype() == d);
        CHECK(t.shape() == Shape{2, 3, 4});
        CHECK(t.is_col_major());
        // Element (i, j, k) is NumPy's a[i, j, k], whatever the file's order.
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 3; ++j)
            for (int64_t k = 0; k < 4; ++k) {
              CAPTURE(i); CAPTURE(j); CAPTURE(k);
              CHECK(t.at<T>({i, j, k}) == fixture_value<T>(12.0 * i + 4.0 * j + k));
            }
        // The storage is column-major: the first index runs fastest.
        std::vector<T> col = t.template to_col_major<T>();
        CHECK(static_cast<const T*>(t.raw_data())[1] == fixture_value<T>(12.0));
        CHECK(col[2] == fixture_value<T>(4.0));
      }
    });
  }
}

TEST_CASE("numpy writes the same bytes as write_npy, for every dtype and both orders") {
  for (DType d : kAllDTypes) {
    dispatch_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      Tensor t = fixture_tensor<T>();
      std::string prefix = fixture(std::string(dtype_file_prefix(d)));
      CAPTURE(prefix);
      CHECK(write_npy_bytes(t, NpyOrder::c) == read_file_bytes(prefix + "_c.npy"));
      CHECK(write_npy_bytes(t, NpyOrder::fortran) == read_file_bytes(prefix + "_f.npy"));
      // From a permuted view too: the bytes depend on the values, not on the layout.
      Tensor view = t.permute({2, 0, 1}).contiguous().permute({1, 2, 0});
      REQUIRE(!view.is_col_major());
      CHECK(write_npy_bytes(view, NpyOrder::c) == read_file_bytes(prefix + "_c.npy"));
      CHECK(write_npy_bytes(view, NpyOrder::fortran) == read_file_bytes(prefix + "_f.npy"));
    });
  }
}

TEST_CASE("the reference 2x3 matrix read from C and Fortran order files") {
  for (std::string name : {"matrix_c.npy", "matrix_f.npy"}) {
    CAPTURE(name);
    Tensor m = read_npy(fixture(name));
    CHECK(m.to_row_major<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
    CHECK(m.to_col_major<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
    CHECK(m.to_string() == "f64[2,3]\n[[0, 1, 2],\n [3, 4, 5]]");
  }
}

TEST_CASE("header versions 2.0 and 3.0") {
  NpyHeader h2, h3;
  Tensor v2 = read_npy(fixture("f64_v2_f.npy"), &h2);
  Tensor v3 = read_npy(fixture("f64_v3_c.npy"), &h3);
  CHECK(h2.version_major == 2);
  CHECK(h2.order == NpyOrder::fortran);
  CHECK(h3.version_major == 3);
  CHECK(h3.order == NpyOrder::c);
  for (const Tensor* t : {&v2, &v3}) {
    REQUIRE(t->shape() == Shape{3, 2});
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) CHECK(t->at<double>({i, j}) == 2.0 * i + j);
  }
}

TEST_CASE("NpyLayout::as_stored: a C-order file is a row-major view of its bytes, everything else column-major") {
  // Same elements as the column-major read of every fixture; the storage of a C-order file of a native dtype is the
  // file's data section unchanged (row-major strides), so no reordering happens.
  for (DType d : kAllDTypes) {
    dispatch_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      for (std::string order : {"c", "f"}) {
        const std::string path = fixture(std::string(dtype_file_prefix(d)) + "_" + order + ".npy");
        CAPTURE(path);
        const Tensor want = read_npy(path);
        const Tensor got = read_npy(path, nullptr, NpyLayout::as_stored);
        REQUIRE(got.shape() == Shape{2, 3, 4});
        CHECK(got.to_col_major<T>() == want.to_col_major<T>());
        if (order == "c") {
          CHECK(got.strides() == Strides{12, 4, 1});
          CHECK(static_cast<const T*>(got.raw_data())[1] == fixture_value<T>(1.0));  // a[0, 0, 1]: the file's order
          CHECK(read_npy_bytes(read_file_bytes(path), nullptr, "bytes", NpyLayout::as_stored).strides() ==
                Strides{12, 4, 1});
        } else {
          CHECK(got.is_col_major());
        }
      }
    });
  }
  // Data that is widened (int32 to i64) or byte-swapped goes through the column-major path as before.
  for (std::string name : {"i32.npy", "f64_big_endian.npy"}) {
    CAPTURE(name);
    const Tensor want = read_npy(fixture(name));
    const Tensor got = read_npy(fixture(name), nullptr, NpyLayout::as_stored);
    CHECK(got.is_col_major());
    REQUIRE(got.dtype() == want.dtype());
    dispatch_dtype(got.dtype(), [&](auto tag) {
      using T = decltype(tag);
      CHECK(got.to_col_major<T>() == want.to_col_major<T>());
    });
  }
  // Rank 0, rank 1 and zero-size arrays are column-major either way.
  CHECK(read_npy(fixture("i64_vector.npy"), nullptr, NpyLayout::as_stored).to_col_major<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(read_npy(fixture("f64_empty.npy"), nullptr, NpyLayout::as_stored).numel() == 0);
}

TEST_CASE("rank 0, rank 1 and zero-size fixtures") {
  Tensor s = read_npy(fixture("f64_scalar.npy"));
  CHECK(s.rank() == 0);
  CHECK(s.at<double>({}) == 2.5);
  Tensor v = read_npy(fixture("i64_vector.npy"));
  CHECK(v.to_col_major<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  Tensor e = read_npy(fixture("f64_empty.npy"));
  CHECK(e.shape() == Shape{2, 0, 3});
  CHECK(e.numel() == 0);
}

TEST_CASE("zero-size headers with huge extents: read when NumPy could make them, a clear error otherwise") {
  // np.save('z.npy', np.empty((0, 2**59))): a header and no data.
  Tensor z = read_npy_bytes(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 576460752303423488)}",
                                     ""));
  CHECK(z.shape() == Shape{0, int64_t{1} << 59});
  CHECK(z.numel() == 0);
  Tensor c = read_npy_bytes(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (576460752303423488, 0)}",
                                     ""));
  CHECK(c.shape() == Shape{int64_t{1} << 59, 0});
  auto err = [](const std::string& shape) {
    return error_of([&] {
      read_npy_bytes(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + "}", ""), nullptr,
                     "'z.npy'");
    });
  };
  CHECK(err("(0, 4611686018427387904, 4611686018427387904)") ==
        "'z.npy': the header's shape [0,4611686018427387904,4611686018427387904] has more elements than fit in 64 "
        "bits (counting its non-zero extents only, as NumPy does)");
  CHECK(err("(0, 1152921504606846976)") ==
        "'z.npy': the header's shape [0,1152921504606846976] needs more bytes than fit in 64 bits "
        "(1152921504606846976 elements of 8 bytes, counting its non-zero extents only)");
}

TEST_CASE("round trips for every dtype, both orders and odd shapes, from strided views") {
  const std::vector<Shape> shapes = {{}, {0}, {5}, {2, 3, 4}, {3, 0, 2}, {1, 7}, {4, 1, 3, 2}};
  uint64_t seed = 1;
  for (DType d : kAllDTypes)
    for (const Shape& shape : shapes)
      for (NpyOrder order : {NpyOrder::fortran, NpyOrder::c}) {
        ++seed;
        INFO("dtype " << name(d) << " shape " << shape_to_string(shape) << " order " << to_string(order) << " seed "
                      << seed);
        Tensor t = random_tensor(d, shape, seed);
        NpyHeader h;
        std::string bytes = write_npy_bytes(t, order);
        CHECK(bytes.size() % 64 == t.nbytes() % 64);  // the header is padded to 64 bytes
        Tensor back = read_npy_bytes(bytes, &h);
        CHECK(h.order == order);
        CHECK(h.dtype == d);
        CHECK(h.data_offset % 64 == 0);
        CHECK(bitwise_equal(back, t));
        if (t.rank() >= 2) {  // a transposed view writes its own values, not its parent's
          Tensor tt = t.transpose();
          CHECK(bitwise_equal(read_npy_bytes(write_npy_bytes(tt, order)), tt));
        }
        if (t.rank() >= 1 && t.extent(0) >= 3) {  // a strided slice
          Tensor sl = t.slice(0, 1, t.extent(0), 2);
          CHECK(bitwise_equal(read_npy_bytes(write_npy_bytes(sl, order)), sl));
        }
      }
}

TEST_CASE("write_npy writes files atomically and can overwrite") {
  TempDir dir;
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  std::string path = dir.file("m.npy");
  write_npy(path, m, NpyOrder::c);
  CHECK(read_file_bytes(path) == read_file_bytes(fixture("matrix_c.npy")));
  write_npy(path, m);  // overwrite, Fortran order by default
  CHECK(read_file_bytes(path) == read_file_bytes(fixture("matrix_f.npy")));
  NpyHeader h;
  CHECK(bitwise_equal(read_npy(path, &h), m));
  CHECK(h.order == NpyOrder::fortran);
  CHECK(dir.entries() == std::vector<std::string>{"m.npy"});  // no temporary file left behind

  // A failure leaves the existing file as it was and no temporary file.
  std::string before = read_file_bytes(path);
  CHECK(error_of([&] { write_npy(path, Tensor()); }) == "write_npy: the tensor is undefined");
  CHECK(read_file_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"m.npy"});

  // A directory in place of the file fails before anything is written (ir/FileIO.h has the other special cases).
  std::filesystem::create_directory(dir.file("sub"));
  std::filesystem::create_directory(dir.file("sub/x.npy"));
  std::string msg = error_of([&] { write_npy(dir.file("sub/x.npy"), m); });
  CHECK(msg == "cannot write '" + dir.file("sub/x.npy") + "': it is a directory; give a file name");
  CHECK(std::filesystem::is_empty(dir.file("sub/x.npy")));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.file("sub")), {}) == 1);

  msg = error_of([&] { write_npy(dir.file("missing/y.npy"), m); });
  CHECK(msg.find("cannot write '" + dir.file("missing/y.npy") + "': creating a temporary file in '" +
                 dir.file("missing") + "' failed: No such file or directory") == 0);
}

TEST_CASE("hand-written headers: spacing, quotes, Python 2 longs, no padding") {
  Tensor a = read_npy_bytes(make_npy(1, "{ \"shape\" : (3L,) ,\"fortran_order\":False,'descr':'<f8'}",
                                     f64_bytes({1, 2, 3})));
  CHECK(a.to_col_major<double>() == std::vector<double>{1, 2, 3});
  Tensor b = read_npy_bytes(make_npy(2, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 1)}",
                                     f64_bytes({1, 2}), false));
  CHECK(b.shape() == Shape{2, 1});
}

TEST_CASE("malformed files: the error names the source, what was found and what was expected") {
  const std::string ok_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = f64_bytes({1, 2});
  auto err = [](const std::string& bytes) { return error_of([&] { read_npy_bytes(bytes, nullptr, "'x.npy'"); }); };

  CHECK(err("PK\x03\x04zipfile") ==
        "'x.npy': not a .npy file: it starts with bytes [50 4b 03 04 7a 69 70 66] but a .npy file starts with "
        "\\x93NUMPY");
  CHECK(err("") == "'x.npy': not a .npy file: it starts with bytes [] but a .npy file starts with \\x93NUMPY");
  CHECK(err(std::string("\x93NUMPY\x01", 7)) ==
        "'x.npy': truncated .npy preamble: the file has 7 bytes, fewer than the 10 of a version 1.0 preamble");
  CHECK(err(make_npy(4, ok_dict, two)) ==
        "'x.npy': unsupported .npy format version 4.0; supported versions are 1.0, 2.0 and 3.0");
  CHECK(err(make_npy(1, ok_dict, two).substr(0, 40)) ==
        "'x.npy': truncated .npy header: the preamble announces 118 header bytes but only 30 follow");

  // The header dict.
  std::string msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': False}", ""));
  CHECK(msg.find("'x.npy': malformed .npy header: missing key 'shape' (the keys are 'descr', 'fortran_order' and "
                 "'shape') at character 0 of the header \"{'descr': '<f8', 'fortran_order': False}   ") == 0);
  CHECK(msg.find("   \\n\"") == msg.size() - 6);  // the padding and the newline, escaped to keep one line
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': 0, 'shape': (2,)}", two));
  CHECK(msg.find("'x.npy': malformed .npy header: 'fortran_order' is an integer but must be True or False at "
                 "character 34 of the header") == 0);
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': [2]}", two));
  CHECK(msg.find("'x.npy': malformed .npy header: 'shape' is a list but must be a tuple of integers") == 0);
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, -1)}", two));
  CHECK(msg.find("'x.npy': malformed .npy header: a 'shape' entry is not a non-negative integer at character 54") == 0);
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'extra': 1}", two));
  CHECK(msg.find("'x.npy': malformed .npy header: unexpected key 'extra' (the keys are 'descr', 'fortran_order' and "
                 "'shape')") == 0);
  msg = err(make_npy(1, "{'descr': '<f8, 'fortran_order': False, 'shape': (2,)}", two));
  CHECK(msg.find("'x.npy': malformed .npy header: expected ',' or '}' in the dict but found \"f\" at character 17") == 0);
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,)} junk", two));
  CHECK(msg.find("'x.npy': malformed .npy header: expected the end of the header after the dict but found \"j\" at "
                 "character 56") == 0);
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': Maybe, 'shape': (2,)}", two));
  CHECK(msg.find("expected a value (a string, integer, True, False, None, tuple, list or dict) but found \"M\"") !=
        std::string::npos);
  msg = err(make_npy(1, "('descr', '<f8')", two));
  CHECK(msg.find("'x.npy': malformed .npy header: expected a dict but found a tuple at character 0") == 0);
  msg = err(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2.5,)}", two));
  CHECK(msg.find("expected an integer (no fraction or exponent) but found \".\"") != std::string::npos);
  msg = err(make_npy(1, "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,)}", two));
  CHECK(msg == "'x.npy': unsupported dtype: 'descr' is a list (a structured dtype?) but einstage reads plain arrays "
               "with a dtype string, one of f4 (f32), f8 (f64), c8 (c64), c16 (c128), i8 (i64), and widened on reading: b1, i1, "
               "i2, i4, u1, u2, u4 (to i64) and f2 (to f32), in either byte order");

  // Data length.
  CHECK(err(make_npy(1, ok_dict, two.substr(0, 12))) ==
        "'x.npy': truncated data: shape [2] of dtype <f8 needs 16 bytes after the header but the file has only 12");
  CHECK(err(make_npy(1, ok_dict, two + "xyz")) ==
        "'x.npy': 3 unexpected bytes after the data: shape [2] of dtype <f8 needs 16 bytes after the header but the "
        "file has 19");
  // The default source name for bytes.
  CHECK(error_of([&] { read_npy_bytes("nope"); }).find("npy bytes: not a .npy file") == 0);
}

TEST_CASE("NumPy-written bool, int32 and big-endian files are read, widened to i64 where needed") {
  NpyHeader h;
  Tensor b = read_npy(fixture("bool.npy"), &h);
  CHECK(h.descr == "|b1");
  CHECK(h.item_size == 1);
  CHECK(b.dtype() == DType::i64);
  CHECK(b.to_col_major<int64_t>() == std::vector<int64_t>{1, 0, 1});
  Tensor i = read_npy(fixture("i32.npy"), &h);
  CHECK(h.descr == "<i4");
  CHECK(i.shape() == Shape{2, 3});
  CHECK(i.to_row_major<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  Tensor f = read_npy(fixture("f64_big_endian.npy"), &h);
  CHECK(h.descr == ">f8");
  CHECK(f.dtype() == DType::f64);
  CHECK(f.to_row_major<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
}

namespace {

// The bytes of `values` as `Bytes`-sized elements, little- or big-endian.
template <typename Bytes>
std::string element_bytes(std::initializer_list<Bytes> values, bool big_endian) {
  std::string out;
  for (Bytes v : values) {
    std::string e(reinterpret_cast<const char*>(&v), sizeof v);
    if (big_endian) std::reverse(e.begin(), e.end());
    out += e;
  }
  return out;
}

// Reads a hand-built rank-1 file of the given descr and data.
Tensor read_vector(const std::string& descr, const std::string& data, size_t n) {
  return read_npy_bytes(make_npy(1, fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({},)}}", descr, n),
                                 data));
}

}  // namespace

TEST_CASE("every readable dtype in both byte orders, with the widening documented in ir/Npy.h") {
  for (bool big : {false, true}) {
    CAPTURE(big);
    const char o = big ? '>' : '<';
    const std::vector<int64_t> signed_values{-128, -1, 0, 127};
    CHECK(read_vector(std::string(1, o) + "i1", element_bytes<int8_t>({-128, -1, 0, 127}, big), 4)
              .to_col_major<int64_t>() == signed_values);
    CHECK(read_vector(std::string(1, o) + "i2", element_bytes<int16_t>({-32768, -1, 0, 32767}, big), 4)
              .to_col_major<int64_t>() == std::vector<int64_t>{-32768, -1, 0, 32767});
    CHECK(read_vector(std::string(1, o) + "i4", element_bytes<int32_t>({INT32_MIN, -1, 0, INT32_MAX}, big), 4)
              .to_col_major<int64_t>() == std::vector<int64_t>{INT32_MIN, -1, 0, INT32_MAX});
    CHECK(read_vector(std::string(1, o) + "i8", element_bytes<int64_t>({INT64_MIN, -1, 0, INT64_MAX}, big), 4)
              .to_col_major<int64_t>() == std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX});
    CHECK(read_vector(std::string(1, o) + "u1", element_bytes<uint8_t>({0, 1, 255}, big), 3).to_col_major<int64_t>() ==
          std::vector<int64_t>{0, 1, 255});
    CHECK(read_vector(std::string(1, o) + "u2", element_bytes<uint16_t>({0, 1, 65535}, big), 3)
              .to_col_major<int64_t>() == std::vector<int64_t>{0, 1, 65535});
    CHECK(read_vector(std::string(1, o) + "u4", element_bytes<uint32_t>({0, 1, UINT32_MAX}, big), 3)
              .to_col_major<int64_t>() == std::vector<int64_t>{0, 1, UINT32_MAX});
    CHECK(read_vector(std::string(1, o) + "b1", element_bytes<uint8_t>({1, 0, 1}, big), 3).to_col_major<int64_t>() ==
          std::vector<int64_t>{1, 0, 1});
    // float16: 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 2^-14 (smallest normal), inf, -0.
    Tensor h = read_vector(std::string(1, o) + "f2",
                           element_bytes<uint16_t>({0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00, 0x8000}, big), 7);
    CHECK(h.dtype() == DType::f32);
    const std::vector<float> hv = h.to_col_major<float>();
    CHECK(hv[0] == 1.0f);
    CHECK(hv[1] == -2.0f);
    CHECK(hv[2] == 65504.0f);
    CHECK(hv[3] == std::ldexp(1.0f, -24));
    CHECK(hv[4] == std::ldexp(1.0f, -14));
    CHECK(std::isinf(hv[5]));
    CHECK((hv[6] == 0.0f && std::signbit(hv[6])));
    CHECK(std::isnan(read_vector(std::string(1, o) + "f2", element_bytes<uint16_t>({0x7e00}, big), 1)
                         .to_col_major<float>()[0]));
    CHECK(read_vector(std::string(1, o) + "f4", element_bytes<float>({1.5f, -0.25f}, big), 2).to_col_major<float>() ==
          std::vector<float>{1.5f, -0.25f});
    CHECK(read_vector(std::string(1, o) + "f8", element_bytes<double>({1.5, -0.25}, big), 2).to_col_major<double>() ==
          std::vector<double>{1.5, -0.25});
    CHECK(read_vector(std::string(1, o) + "c8", element_bytes<float>({1.5f, -2.0f}, big), 1).to_col_major<c64>() ==
          std::vector<c64>{{1.5f, -2.0f}});
    CHECK(read_vector(std::string(1, o) + "c16", element_bytes<double>({1.5, -2.0}, big), 1).to_col_major<c128>() ==
          std::vector<c128>{{1.5, -2.0}});
  }
  // C order of a widened big-endian matrix keeps element (i, j).
  Tensor m = read_npy_bytes(make_npy(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2, 3)}",
                                     element_bytes<int16_t>({0, 1, 2, 3, 4, 5}, true)));
  CHECK(m.at<int64_t>({1, 0}) == 3);
  CHECK(m.at<int64_t>({0, 2}) == 2);
}

TEST_CASE("uint64 and other dtypes are refused naming the file and the supported dtypes") {
  const std::string supported =
      "supported dtypes are f4 (f32), f8 (f64), c8 (c64), c16 (c128), i8 (i64), and widened on reading: b1, i1, i2, "
      "i4, u1, u2, u4 (to i64) and f2 (to f32), in either byte order";
  auto err = [](const std::string& descr) {
    return error_of([&] {
      read_npy_bytes(make_npy(1, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (0,)}", ""), nullptr,
                     "'x.npy'");
    });
  };
  CHECK(err("<u8") == "'x.npy': dtype '<u8' (uint64) is not supported: its values above 2^63-1 do not fit in i64, "
                      "einstage's widest integer; convert it in NumPy (a.astype(np.int64) when the values fit, else "
                      "a.astype(np.float64))");
  CHECK(err(">u8").find("'x.npy': dtype '>u8' (uint64) is not supported") == 0);
  for (std::string descr : {"<U5", "|S3", "<M8[ns]", "|O", "<f16", "|f4", "<i3", "f8", "<f8 "})
    CHECK(err(descr) == fmt::format("'x.npy': unsupported dtype '{}'; {}", descr, supported));
  ErrorKind kind = ErrorKind::runtime;
  try {
    read_npy_bytes(make_npy(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (0,)}", ""));
  } catch (const Error& e) {
    kind = e.kind();
  }
  CHECK(kind == ErrorKind::dtype);
}

TEST_CASE("files that cannot be read") {
  TempDir dir;
  CHECK(error_of([&] { read_npy(dir.file("absent.npy")); }) ==
        fmt::format("cannot open '{}' for reading: No such file or directory", dir.file("absent.npy")));
  CHECK(error_of([&] { read_npy(dir.path().string()); }) ==
        fmt::format("cannot read '{}': it is a directory, not a .npy file", dir.path().string()));
  // A path is user text: a newline or a byte that is not UTF-8 is echoed escaped, on one line.
  CHECK(error_of([&] { read_npy("absent\n\xff.npy"); }) ==
        "cannot open 'absent\\n\\xff.npy' for reading: No such file or directory");
  // A NumPy file cut short on disk.
  std::string cut = read_file_bytes(fixture("f64_c.npy"));
  einstage::test::write_file_bytes(dir.file("cut.npy"), cut.substr(0, cut.size() - 8));
  CHECK(error_of([&] { read_npy(dir.file("cut.npy")); }) ==
        fmt::format("'{}': truncated data: shape [2,3,4] of dtype <f8 needs 192 bytes after the header but the file "
                    "has only 184", dir.file("cut.npy")));
}

namespace {

// A value for element (i, j, k) that differs between neighbours along every axis and fits in an int16.
int64_t streaming_value(int64_t i, int64_t j, int64_t k) { return (i * 7919 + j * 131 + k * 3) % 30011 - 15000; }

}  // namespace

TEST_CASE("files larger than the read staging chunk: every element lands in place, from a file and from bytes") {
  // 3 x 300 x 700 elements: one C-order slice along axis 0 (1.7 MB as i64) is larger than a chunk, so the reader
  // also splits along axis 1; Fortran order and widened data are staged a chunk at a time too.
  TempDir dir;
  const Shape shape{3, 300, 700};
  for (NpyOrder order : {NpyOrder::c, NpyOrder::fortran}) {
    for (std::string descr : {">i2", "<i2", "<i8", ">i8"}) {
      CAPTURE(to_string(order));
      CAPTURE(descr);
      std::string data;
      auto append = [&](int64_t i, int64_t j, int64_t k) {
        const int64_t v = streaming_value(i, j, k);
        const auto narrow = static_cast<int16_t>(v);
        std::string e = descr[2] == '2' ? std::string(reinterpret_cast<const char*>(&narrow), 2)
                                        : std::string(reinterpret_cast<const char*>(&v), 8);
        if (descr[0] == '>') std::reverse(e.begin(), e.end());
        data += e;
      };
      if (order == NpyOrder::c) {
        for (int64_t i = 0; i < shape[0]; ++i)
          for (int64_t j = 0; j < shape[1]; ++j)
            for (int64_t k = 0; k < shape[2]; ++k) append(i, j, k);
      } else {
        for (int64_t k = 0; k < shape[2]; ++k)
          for (int64_t j = 0; j < shape[1]; ++j)
            for (int64_t i = 0; i < shape[0]; ++i) append(i, j, k);
      }
      const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': (3, 300, 700)}}", descr,
                                           order == NpyOrder::fortran ? "True" : "False");
      const std::string bytes = make_npy(1, dict, data);
      const std::string path = dir.file("big.npy");
      {
        std::ofstream out(path, std::ios::binary);
        out << bytes;
      }
      for (const Tensor& t : {read_npy(path), read_npy_bytes(bytes)}) {
        REQUIRE(t.dtype() == DType::i64);
        REQUIRE(t.shape() == shape);
        CHECK(t.is_col_major());
        int64_t wrong = 0;
        for (int64_t i = 0; i < shape[0]; ++i)
          for (int64_t j = 0; j < shape[1]; ++j)
            for (int64_t k = 0; k < shape[2]; ++k) wrong += t.at<int64_t>({i, j, k}) != streaming_value(i, j, k);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("a write that fails half-way (file size limit) leaves neither a partial file nor a temporary") {
  TempDir dir;
  const std::string path = dir.file("out.npy");
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  write_npy(path, m);
  const std::string before = read_file_bytes(path);
  Tensor big = Tensor::zeros(DType::f64, {64, 128});  // 64 KiB of data after a 128-byte header

  struct rlimit old_limit;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // past the limit, write() fails with EFBIG instead of a signal
  struct rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
  std::string replacing = error_of([&] { write_npy(path, big); });
  std::string creating = error_of([&] { write_npy(dir.file("new.npy"), big); });
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  std::signal(SIGXFSZ, old_handler);

  CHECK(replacing == "cannot write '" + path + "': writing 65664 bytes failed after 4096: File too large");
  CHECK(creating ==
        "cannot write '" + dir.file("new.npy") + "': writing 65664 bytes failed after 4096: File too large");
  CHECK(read_file_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"out.npy"});
}
