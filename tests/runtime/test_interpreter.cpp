// The reference interpreter (runtime/Interpreter.h): every standard op against a loop written here, input binding
// and its errors, constraint checks, extension delegation, release after last use, owned outputs.
#include "runtime/Interpreter.h"

#include "RuntimeTestUtil.h"
#include "ir/Extension.h"
#include "ir/Program.h"

#include <doctest/doctest.h>

#include <string>
#include <thread>

using namespace einstage;
using namespace einstage::runtime_test;

namespace {

TensorType f64(std::vector<Dim> dims) { return {DType::f64, std::move(dims)}; }
Dim sym(const char* s) { return Dim::symbol(s); }

Tensor kernels_free_double(const Tensor& x) {  // 2x by a plain loop
  Tensor out = Tensor::empty(DType::f64, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) out.data<double>()[i] = 2 * x.contiguous().data<double>()[i];
  return out;
}

// A family whose op only carries its name (the handler tests): the op has its first operand's type.
struct NamedPayload final : ExtensionPayload {
  explicit NamedPayload(std::string name) : name(std::move(name)) {}
  std::string name;
  std::string_view family() const override { return name; }
  std::string to_text() const override { return ""; }
  std::string to_json() const override { return "{}"; }
  uint64_t hash() const override { return 1; }
  bool equals(const ExtensionPayload&) const override { return true; }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<NamedPayload>(name); }
};

void register_payload_family(ExtensionRegistry& registry, const std::string& family) {
  ExtensionSemantics sem;
  sem.family = family;
  sem.module = "test";
  sem.parse_text = [family](std::string_view) { return std::make_unique<NamedPayload>(family); };
  sem.parse_json = [family](std::string_view) { return std::make_unique<NamedPayload>(family); };
  sem.infer_type = [](const ExtensionPayload&, Types in, TypeContext&) { return in[0]; };
  registry.register_family(sem);
}

}  // namespace

TEST_CASE("interpreter: dot_general with a symbolic batch matches the definitional loop, also on transposed views") {
  Builder b("bmm");
  Value x = b.parameter("x", f64({2, 3, sym("n")}));
  Value y = b.parameter("y", f64({4, 3, sym("n")}));
  Value yt = b.transpose(y, {1, 0, 2});                        // [3,4,n], a strided view at run time
  Value z = b.dot_general(x, yt, {1}, {0}, {2}, {2});          // [2,4,n]
  Value w = b.transpose(z, {2, 0, 1});                         // [n,2,4]
  Program p = b.finish({w});
  for (int64_t n : {1, 5}) {
    CAPTURE(n);
    Tensor xs = random_tensor(DType::f64, {2, 3, n}, 11 + n), ys = random_tensor(DType::f64, {4, 3, n}, 23 + n);
    auto out = evaluate(p, std::vector<Tensor>{xs, ys});
    REQUIRE(out.size() == 1);
    Tensor expect = naive_einsum<double>({"ijb", "kjb"}, "bik", {xs, ys});
    CHECK(out[0].shape() == Shape{n, 2, 4});
    CHECK(out[0].is_col_major());
    CHECK(max_abs_diff(out[0], expect) < 1e-13);
  }
}

TEST_CASE("interpreter: i64 dot_general, elementwise and reductions are exact") {
  Builder b("ints");
  Value x = b.parameter("x", {DType::i64, {3, 4}});
  Value y = b.parameter("y", {DType::i64, {4, 2}});
  Value z = b.dot_general(x, y, {1}, {0});                     // [3,2]
  Value s = b.reduce_sum(b.mul(z, z), {0});                    // [2]
  Value q = b.div(s, b.full({DType::i64, {2}}, 3));            // truncating division
  Program p = b.finish({z, q});
  Tensor xs = random_tensor(DType::i64, {3, 4}, 1), ys = random_tensor(DType::i64, {4, 2}, 2);
  auto out = evaluate(p, std::vector<Tensor>{xs, ys});
  Tensor zz = naive_einsum<int64_t>({"ij", "jk"}, "ik", {xs, ys});
  CHECK(bitwise_equal(out[0], zz));
  for (int64_t k = 0; k < 2; ++k) {
    int64_t sum = 0;
    for (int64_t i = 0; i < 3; ++i) sum += zz.at<int64_t>({i, k}) * zz.at<int64_t>({i, k});
    CHECK(out[1].at<int64_t>({k}) == sum / 3);
  }
}

TEST_CASE("interpreter: broadcast_in_dim repeats length-1 axes and adds new ones; reshape is column-major") {
  Builder b("bcast");
  Value x = b.parameter("x", f64({3, 1}));
  Value y = b.broadcast_in_dim(x, {0, 2}, {3, 2, 4});          // y[i,j,k] = x[i,0]
  Value r = b.reshape(y, {6, 4});                              // column-major: r[i + 3j, k] = y[i,j,k]
  Program p = b.finish({y, r});
  Tensor xs = random_tensor(DType::f64, {3, 1}, 5);
  auto out = evaluate(p, std::vector<Tensor>{xs});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 4; ++k) {
        CHECK(out[0].at<double>({i, j, k}) == xs.at<double>({i, 0}));
        CHECK(out[1].at<double>({i + 3 * j, k}) == xs.at<double>({i, 0}));
      }
}

TEST_CASE("interpreter: reduce_sum, extract_diag and embed_diag follow their definitions") {
  Builder b("diag");
  Value x = b.parameter("x", f64({3, 2, 3}));
  Value d = b.extract_diag(x, 0, 2);                           // [3,2]: d[i,j] = x[i,j,i]
  Value e = b.embed_diag(d, 1, 2);                             // [3,2,2]: e[i,j,k] = (j==k) d[i,j]
  Value s = b.reduce_sum(x, {0, 2});                           // [2]
  Program p = b.finish({d, e, s});
  Tensor xs = random_tensor(DType::f64, {3, 2, 3}, 9);
  auto out = evaluate(p, std::vector<Tensor>{xs});
  CHECK(out[1].shape() == Shape{3, 2, 2});
  for (int64_t j = 0; j < 2; ++j) {
    double sum = 0;
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < 3; ++i) sum += xs.at<double>({i, j, k});
    CHECK(out[2].at<double>({j}) == doctest::Approx(sum).epsilon(1e-14));
    for (int64_t i = 0; i < 3; ++i) {
      CHECK(out[0].at<double>({i, j}) == xs.at<double>({i, j, i}));
      for (int64_t k = 0; k < 2; ++k) CHECK(out[1].at<double>({i, j, k}) == (j == k ? xs.at<double>({i, j, i}) : 0.0));
    }
  }
}

TEST_CASE("interpreter: slice and pad follow their definitions and are adjoint") {
  Builder b("window");
  Value x = b.parameter("x", f64({5, 4, sym("n")}));
  Value y = b.parameter("y", f64({2, 4, 1}));
  Value s = b.slice(x, {1, 0, 2}, {2, 4, 1}, {3, 1, 1});  // s[i,j,k] = x[1 + 3i, j, 2 + k]
  Value p = b.pad(y, {1, 0, 2}, {5, 4, sym("n")}, {3, 1, 1});
  Program prog = b.finish({s, p});
  Tensor xs = random_tensor(DType::f64, {5, 4, 3}, 21), ys = random_tensor(DType::f64, {2, 4, 1}, 22);
  auto out = evaluate(prog, std::vector<Tensor>{xs, ys});
  REQUIRE(out[0].shape() == Shape{2, 4, 1});
  REQUIRE(out[1].shape() == Shape{5, 4, 3});
  double sx = 0, xp = 0;  // <slice(x), y> and <x, pad(y)>
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 3; ++k) {
        const bool hit = i % 3 == 1 && k == 2;
        CHECK(out[1].at<double>({i, j, k}) == (hit ? ys.at<double>({(i - 1) / 3, j, 0}) : 0.0));
        if (hit) CHECK(out[0].at<double>({(i - 1) / 3, j, 0}) == xs.at<double>({i, j, k}));
        xp += xs.at<double>({i, j, k}) * out[1].at<double>({i, j, k});
      }
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) sx += out[0].at<double>({i, j, 0}) * ys.at<double>({i, j, 0});
  CHECK(sx == doctest::Approx(xp).epsilon(1e-14));
  // n = 2 leaves no element 2 on the last axis: the run refuses the slice
  Tensor narrow = random_tensor(DType::f64, {5, 4, 2}, 23);
  CHECK(error_of([&] { evaluate(prog, std::vector<Tensor>{narrow, ys}); }).find(
            "slice [2, 3) is out of range for axis 2 of extent 2") != std::string::npos);
}

TEST_CASE("interpreter: complex real/imag/conj, unary math and convert") {
  Builder b("cplx");
  Value z = b.parameter("z", {DType::c128, {4}});
  Value x = b.parameter("x", f64({4}));
  Value re = b.real(z), im = b.imag(b.conj(z));
  Value ex = b.exp(b.neg(x));
  Value sq = b.sqrt(b.add(b.mul(x, x), b.full(f64({4}), 1.0)));
  Value lg = b.log(sq);
  Value cv = b.convert(x, DType::c128);
  Value ix = b.imag(x);
  Program p = b.finish({re, im, ex, lg, cv, b.sub(x, ix)});
  Tensor zs = random_tensor(DType::c128, {4}, 3), xs = random_tensor(DType::f64, {4}, 4);
  auto out = evaluate(p, std::vector<Tensor>{zs, xs});
  for (int64_t i = 0; i < 4; ++i) {
    c128 zi = zs.at<c128>({i});
    double xi = xs.at<double>({i});
    CHECK(out[0].at<double>({i}) == zi.real());
    CHECK(out[1].at<double>({i}) == -zi.imag());
    CHECK(out[2].at<double>({i}) == doctest::Approx(std::exp(-xi)));
    CHECK(out[3].at<double>({i}) == doctest::Approx(std::log(std::sqrt(xi * xi + 1))));
    CHECK(out[4].at<c128>({i}) == c128(xi, 0));
    CHECK(out[5].at<double>({i}) == xi);  // x - imag(x) = x - 0
  }
}

// The interpreter moves an operand into the step that last reads it and an output named once out of its slot: a
// value read twice by one step, read by a later step, or returned twice must still be there and distinct.
TEST_CASE("interpreter: values read twice, read later or returned twice are not moved away") {
  Builder b("moves");
  Value x = b.parameter("x", f64({2}));
  Value y = b.add(x, x);   // x twice in one step (and read again below)
  Value z = b.mul(y, x);   // x's last use; y read here and returned
  Value w = b.mul(z, z);   // z twice at its last use
  Program p = b.finish({w, y, y, z});
  Tensor xs = Tensor::from_col_major<double>({2}, {1.0, 2.0});
  auto out = evaluate(p, std::vector<Tensor>{xs});
  REQUIRE(out.size() == 4);
  CHECK(out[0].to_col_major<double>() == std::vector<double>{4.0, 64.0});
  CHECK(out[1].to_col_major<double>() == std::vector<double>{2.0, 4.0});
  CHECK(out[2].to_col_major<double>() == std::vector<double>{2.0, 4.0});
  CHECK(out[3].to_col_major<double>() == std::vector<double>{2.0, 8.0});
  CHECK_FALSE(out[1].shares_storage_with(out[2]));  // returned twice: the second is a copy
  CHECK(xs.to_col_major<double>() == std::vector<double>{1.0, 2.0});
}

TEST_CASE("interpreter: constants and inputs returned as outputs are owned copies") {
  Builder b("owned");
  Value x = b.parameter("x", f64({2}));
  Value c = b.constant(Tensor::from_col_major<double>({2}, {7.0, 8.0}));
  Program p = b.finish({x, c, x});
  Tensor xs = Tensor::from_col_major<double>({2}, {1.0, 2.0});
  auto out = evaluate(p, std::vector<Tensor>{xs});
  CHECK_FALSE(out[0].shares_storage_with(xs));
  CHECK_FALSE(out[2].shares_storage_with(out[0]));
  out[1].at<double>({0}) = -1;  // must not change the program's literal
  auto again = evaluate(p, std::vector<Tensor>{xs});
  CHECK(again[1].at<double>({0}) == 7.0);
}

TEST_CASE("interpreter: values are released after their last use") {
  Builder b("chain");
  Value x = b.parameter("x", f64({8}));
  Value v = x;
  for (int i = 0; i < 10; ++i) v = b.neg(v);
  Program p = b.finish({v});
  Interpreter interp(p);
  EvalStats stats;
  Tensor xs = random_tensor(DType::f64, {8}, 1);
  auto out = interp.run(std::vector<Tensor>{xs}, {}, &stats);
  CHECK(stats.instructions == 10);
  CHECK(stats.peak_live_values == 2);  // the operand and the result of one neg, never the whole chain
  CHECK(bitwise_equal(out[0], xs));
}

TEST_CASE("interpreter: inputs of a program without symbolic dims are checked the same way, with the same messages") {
  // bind() compares such inputs' shapes directly and runs the binding rules only on a mismatch, for their message.
  Builder b("g");
  Value x = b.parameter("x", f64({2, 3}));
  Value y = b.parameter("y", f64({2}));
  Program p = b.finish({b.reduce_sum(x, {1}), y});
  Interpreter interp(p);
  Tensor good = Tensor::zeros(DType::f64, {2, 3}), g2 = Tensor::zeros(DType::f64, {2});
  CHECK(interp.bind(std::vector<Tensor>{good, g2}).empty());
  CHECK(interp.run(std::vector<Tensor>{good, g2}).size() == 2);
  CHECK(error_of([&] { interp.run(std::vector<Tensor>{good}); }) ==
        "@g takes 2 inputs (%x: f64[2,3], %y: f64[2]) but 1 was given");
  CHECK(error_of([&] { interp.run(std::vector<Tensor>{good.astype(DType::c128), g2}); }) ==
        "@g: input 0 (%x) has dtype c128 but the parameter is f64[2,3]; convert it (Tensor::astype(f64))");
  CHECK(error_of([&] { interp.run(std::vector<Tensor>{Tensor(), g2}); }) ==
        "@g: input 0 (%x) is an undefined tensor; expected f64[2,3]");
  CHECK(error_of([&] { interp.run(std::vector<Tensor>{good, Tensor::zeros(DType::f64, {2, 1})}); }) ==
        "@g: input 1 (%y) has shape [2,1] but the parameter has type f64[2]");
  CHECK(error_of([&] { interp.run(std::vector<Tensor>{Tensor::zeros(DType::f64, {2, 4}), g2}); }) ==
        "@g: input 0 (%x) axis 1 has extent 4 but the parameter's type f64[2,3] requires 3");
}

TEST_CASE("interpreter: input errors name the parameter") {
  Builder b("f");
  Value x = b.parameter("x", f64({sym("n"), 3}));
  Value y = b.parameter("y", f64({sym("n")}));
  Program p = b.finish({b.reduce_sum(x, {1}), y});
  Tensor good = Tensor::zeros(DType::f64, {2, 3});
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{good}); }) ==
        "@f takes 2 inputs (%x: f64[n,3], %y: f64[n]) but 1 was given");
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{good.astype(DType::c128), Tensor::zeros(DType::f64, {2})}); }) ==
        "@f: input 0 (%x) has dtype c128 but the parameter is f64[n,3]; convert it (Tensor::astype(f64))");
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{good, Tensor::zeros(DType::f64, {2, 1})}); }) ==
        "@f: input 1 (%y) has shape [2,1] but the parameter has type f64[n]");
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{Tensor::zeros(DType::f64, {2, 4}), Tensor::zeros(DType::f64, {2})}); }) ==
        "@f: input 0 (%x) axis 1 has extent 4 but the parameter's type f64[n,3] requires 3");
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{good, Tensor::zeros(DType::f64, {5})}); }) ==
        "@f: symbolic dim 'n' is 2 from input 0 (%x) axis 0 but 5 from input 1 (%y) axis 0");
}

TEST_CASE("interpreter: recorded shape constraints are checked with the instruction, the symbols and both values") {
  Builder b("g");
  Value x = b.parameter("x", f64({sym("n")}));
  Value y = b.parameter("y", f64({sym("m")}));
  Program p = b.finish({b.add(x, y)});
  auto ok = evaluate(p, std::vector<Tensor>{Tensor::zeros(DType::f64, {3}), Tensor::zeros(DType::f64, {3})});
  CHECK(ok[0].shape() == Shape{3});
  std::string msg = error_of([&] {
    evaluate(p, std::vector<Tensor>{Tensor::zeros(DType::f64, {3}), Tensor::zeros(DType::f64, {4})});
  });
  CHECK(msg.find("shape constraint n == m at %0 does not hold: n = 3 but m = 4") != std::string::npos);
}

TEST_CASE("interpreter: product dims bind the remaining factor") {
  Builder b("h");
  Value x = b.parameter("x", f64({Dim(2) * sym("n")}));
  Value y = b.parameter("y", f64({sym("n"), 2}));
  Program p = b.finish({b.add(x, b.reshape(y, {Dim(2) * sym("n")}))});
  Tensor xs = random_tensor(DType::f64, {6}, 1), ys = random_tensor(DType::f64, {3, 2}, 2);
  auto out = evaluate(p, std::vector<Tensor>{xs, ys});
  for (int64_t i = 0; i < 6; ++i) CHECK(out[0].at<double>({i}) == xs.at<double>({i}) + ys.at<double>({i % 3, i / 3}));
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{Tensor::zeros(DType::f64, {8}), ys}); }) ==
        "@h: input 0 (%x) axis 0 has extent 8 but the parameter's type f64[2*n] requires 2*n = 6");
}

TEST_CASE("interpreter: extension ops go to the handler; without one the family is named") {
  ExtensionRegistry registry;
  register_payload_family(registry, "test.double.v1");
  Builder b("e", &registry);
  Value x = b.parameter("x", f64({3}));
  Program p = b.finish({b.neg(b.extension(std::make_shared<NamedPayload>("test.double.v1"), {x}))});
  Tensor xs = random_tensor(DType::f64, {3}, 2);
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{xs}); }) ==
        "'test.double.v1' at %0 in @e: no executor for extension family \"test.double.v1\"; run the program with a "
        "Runtime that has loaded the module providing it, or lower it first (lower_to_standard_ops)");
  EvalOptions opts;
  std::string seen;
  opts.extension = [&](const Instruction&, const std::string& where, std::span<const Tensor> in, const DimBindings&) {
    seen = where;
    return std::vector<Tensor>{kernels_free_double(in[0])};
  };
  auto out = evaluate(p, std::vector<Tensor>{xs}, opts);
  CHECK(seen == "%0 in @e");
  for (int64_t i = 0; i < 3; ++i) CHECK(out[0].at<double>({i}) == -2 * xs.at<double>({i}));
  opts.extension = [](const Instruction&, const std::string&, std::span<const Tensor>, const DimBindings&) {
    return std::vector<Tensor>{Tensor::zeros(DType::f64, {4})};
  };
  CHECK(error_of([&] { evaluate(p, std::vector<Tensor>{xs}, opts); }) ==
        "'test.double.v1' at %0 in @e: the module's executor returned f64[4] but the type rule says f64[3]");
}

TEST_CASE("interpreter: disjoint slices of one block are handed out as outputs without a copy, overlapping ones copied") {
  // The einsum vjp packs every operand's cotangent into one vector and hands out slices; copying them all made a
  // gradient program's outputs cost as much as its contractions.
  struct Payload final : ExtensionPayload {
    explicit Payload(int64_t offset) : offset(offset) {}
    int64_t offset;
    std::string_view family() const override { return "test.slice.v1"; }
    std::string to_text() const override { return fmt::format("offset = {}", offset); }
    std::string to_json() const override { return "{}"; }
    uint64_t hash() const override { return static_cast<uint64_t>(offset); }
    bool equals(const ExtensionPayload& o) const override {
      return static_cast<const Payload&>(o).offset == offset;
    }
    std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<Payload>(offset); }
  };
  ExtensionRegistry registry;
  ExtensionSemantics sem;
  sem.family = "test.slice.v1";
  sem.module = "test";
  sem.parse_text = [](std::string_view) { return std::make_unique<Payload>(0); };
  sem.parse_json = [](std::string_view) { return std::make_unique<Payload>(0); };
  sem.infer_type = [](const ExtensionPayload&, Types in, TypeContext&) { return in[0]; };
  registry.register_family(sem);
  Builder b("s", &registry);
  Value x = b.parameter("x", f64({3}));
  Value lo = b.extension(std::make_shared<Payload>(0), {x}), hi = b.extension(std::make_shared<Payload>(3), {x}),
        mid = b.extension(std::make_shared<Payload>(2), {x});
  Program p = b.finish({lo, hi, mid});
  Tensor block = Tensor::from_col_major<double>({6}, {1, 2, 3, 4, 5, 6});
  EvalOptions opts;
  opts.extension = [&](const Instruction& inst, const std::string&, std::span<const Tensor>, const DimBindings&) {
    const auto& payload = static_cast<const Payload&>(*std::get<ExtensionOp>(inst.op).payload);
    return std::vector<Tensor>{block.slice(0, payload.offset, payload.offset + 3)};
  };
  auto out = evaluate(p, std::vector<Tensor>{Tensor::zeros(DType::f64, {3})}, opts);
  CHECK(out[0].shares_storage_with(block));  // [0, 3)
  CHECK(out[1].shares_storage_with(block));  // [3, 6): disjoint from the first
  CHECK_FALSE(out[2].shares_storage_with(block));  // [2, 5) overlaps both: a copy
  CHECK(out[1].overlaps(block));
  CHECK_FALSE(out[0].overlaps(out[1]));
  out[2].at<double>({0}) = -1;
  CHECK(out[0].at<double>({2}) == 3.0);
  CHECK(out[2].at<double>({2}) == 5.0);
}

TEST_CASE("interpreter: many slices of one block, in any order, strided or not, are kept or copied by the pairwise "
          "rule (seeded)") {
  // Outputs are checked against sorted lists of blocks and byte ranges: the oracle here is the rule pair by pair (an
  // output is handed out as it is when it is a column-major slice that overlaps no output handed out before it).
  struct Payload final : ExtensionPayload {
    explicit Payload(int index) : index(index) {}
    int index;
    std::string_view family() const override { return "test.pick.v1"; }
    std::string to_text() const override { return fmt::format("index = {}", index); }
    std::string to_json() const override { return "{}"; }
    uint64_t hash() const override { return static_cast<uint64_t>(index); }
    bool equals(const ExtensionPayload& o) const override { return static_cast<const Payload&>(o).index == index; }
    std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<Payload>(index); }
  };
  ExtensionRegistry registry;
  ExtensionSemantics sem;
  sem.family = "test.pick.v1";
  sem.module = "test";
  sem.parse_text = [](std::string_view) { return std::make_unique<Payload>(0); };
  sem.parse_json = [](std::string_view) { return std::make_unique<Payload>(0); };
  sem.infer_type = [](const ExtensionPayload&, Types in, TypeContext&) { return in[0]; };
  registry.register_family(sem);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    uint64_t state = seed * 0x9E3779B97F4A7C15ull;
    auto next = [&](int64_t bound) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(bound));
    };
    const int64_t len = 1 + next(4), outputs = 2 + next(30);
    Tensor block = Tensor::empty(DType::f64, {64});
    for (int64_t i = 0; i < 64; ++i) block.data<double>()[i] = static_cast<double>(i);
    std::vector<Tensor> slices;
    for (int64_t o = 0; o < outputs; ++o) {
      const int64_t step = 1 + next(2), begin = next(64 - (len - 1) * step);
      slices.push_back(block.slice(0, begin, begin + (len - 1) * step + 1, step));
    }
    Builder b("pick", &registry);
    Value x = b.parameter("x", f64({len}));
    std::vector<Value> outs;
    for (int o = 0; o < static_cast<int>(outputs); ++o) outs.push_back(b.extension(std::make_shared<Payload>(o), {x}));
    Program p = b.finish(outs);
    EvalOptions opts;
    opts.extension = [&](const Instruction& inst, const std::string&, std::span<const Tensor>, const DimBindings&) {
      return std::vector<Tensor>{slices[static_cast<size_t>(static_cast<const Payload&>(*std::get<ExtensionOp>(inst.op).payload).index)]};
    };
    auto out = evaluate(p, std::vector<Tensor>{Tensor::zeros(DType::f64, {len})}, opts);
    REQUIRE(out.size() == static_cast<size_t>(outputs));
    std::vector<Tensor> kept;
    for (size_t o = 0; o < out.size(); ++o) {
      CAPTURE(o);
      bool overlapping = false;
      for (const Tensor& k : kept) overlapping = overlapping || slices[o].overlaps(k);
      const bool keep = slices[o].is_col_major() && !overlapping;
      CHECK(out[o].shares_storage_with(block) == keep);
      CHECK(out[o].to_col_major<double>() == slices[o].to_col_major<double>());
      if (keep) kept.push_back(slices[o]);
    }
  }
}

TEST_CASE("interpreter: an extension handler that runs programs on the same thread leaves the caller's values intact") {
  // A call's value table and operand list are kept by its Interpreter between calls; a call nested in another (a
  // handler evaluating a program, as a module may) must take buffers of its own.
  ExtensionRegistry registry;
  register_payload_family(registry, "test.nested.v1");
  // inner(u) = -u by a chain of several values, so its table would overwrite the outer one if they were shared.
  Builder ib("inner");
  Value u = ib.parameter("u", f64({3}));
  Value n1 = ib.neg(u);
  Value n2 = ib.add(n1, u);
  Value n3 = ib.add(n2, n1);  // -u
  Program inner = ib.finish({n3, n1});
  Builder b("outer", &registry);
  Value x = b.parameter("x", f64({3}));
  Value y = b.neg(x);                                              // -x
  Value z = b.extension(std::make_shared<NamedPayload>("test.nested.v1"), {y});  // inner(-x)[0] = x
  Value w = b.add(y, z);                                           // 0
  Value v = b.add(b.add(x, y), b.add(z, z));                       // 2x
  Program p = b.finish({w, y, v, z});
  Interpreter outer(p);
  Interpreter nested(inner);
  int calls = 0;
  EvalOptions opts;
  opts.extension = [&](const Instruction&, const std::string&, std::span<const Tensor> operands, const DimBindings&) {
    ++calls;
    for (int k = 0; k < 3; ++k) (void)nested.run(operands);  // nested calls, one after another
    std::vector<Tensor> r = nested.run(operands);
    return std::vector<Tensor>{r[0]};
  };
  for (int rep = 0; rep < 3; ++rep) {
    Tensor xs = Tensor::from_col_major<double>({3}, {1.0 + rep, -2.0, 3.5});
    auto out = outer.run(std::vector<Tensor>{xs}, opts);
    REQUIRE(out.size() == 4);
    CHECK(out[0].to_col_major<double>() == std::vector<double>{0, 0, 0});
    CHECK(out[1].to_col_major<double>() == std::vector<double>{-1.0 - rep, 2.0, -3.5});
    CHECK(out[2].to_col_major<double>() == std::vector<double>{2 * (1.0 + rep), -4.0, 7.0});
    CHECK(out[3].to_col_major<double>() == std::vector<double>{1.0 + rep, -2.0, 3.5});
  }
  CHECK(calls == 3);
}

TEST_CASE("interpreter: after a call its kept buffers hold none of the inputs' storage") {
  // A call's operand list is kept by the Interpreter with its tensors' vectors (so that assigning an input
  // allocates nothing); their storage must still be dropped after each step.
  std::shared_ptr<std::byte> block(new std::byte[3 * sizeof(double)], std::default_delete<std::byte[]>());
  const std::weak_ptr<std::byte> watch = block;
  Tensor x = Tensor::in_block(DType::f64, {3}, std::move(block), 0);
  for (int i = 0; i < 3; ++i) x.data<double>()[i] = 1.0 + i;
  Builder b("hold");
  Value xv = b.parameter("x", f64({3}));
  Value y = b.neg(xv);
  Value z = b.add(xv, y);  // x read by two steps: the first copies it into its operands
  Value w = b.add(z, xv);
  Program p = b.finish({w, y});
  Interpreter interp(p);
  for (int rep = 0; rep < 2; ++rep) {
    auto out = interp.run(std::vector<Tensor>{x});
    CHECK(out[0].to_col_major<double>() == std::vector<double>{1, 2, 3});
    CHECK(out[1].to_col_major<double>() == std::vector<double>{-1, -2, -3});
  }
  x = Tensor();
  CHECK(watch.expired());
}

TEST_CASE("interpreter: one Interpreter run from two threads at once gives each call its own buffers") {
  // The kept buffers are the Interpreter's, shared by its calls: two calls at once must each take a set.
  Builder b("poly");
  Value x = b.parameter("x", f64({64}));
  Value y = b.mul(x, x);
  Value z = b.add(y, x);
  Value w = b.sub(b.mul(z, x), y);  // x^3
  Program p = b.finish({w, z});
  const Interpreter interp(p);
  auto worker = [&](double base, int* failures) {
    for (int rep = 0; rep < 300; ++rep) {
      const double v = base + rep;
      std::vector<double> xs(64, v);
      auto out = interp.run(std::vector<Tensor>{Tensor::from_col_major<double>({64}, xs)});
      const std::vector<double> cube = out[0].to_col_major<double>(), square_plus = out[1].to_col_major<double>();
      for (int i = 0; i < 64; ++i)
        if (cube[i] != v * v * v || square_plus[i] != v * v + v) ++*failures;
    }
  };
  int failures_a = 0, failures_b = 0;
  std::thread a(worker, 1.0, &failures_a), c(worker, 1000.0, &failures_b);
  a.join();
  c.join();
  CHECK(failures_a == 0);
  CHECK(failures_b == 0);
}
