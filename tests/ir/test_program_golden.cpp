// Golden text forms of programs built through Builder, one file per case under tests/ir/golden/, plus the round
// trips every golden must survive (text -> program -> text, program -> JSON -> program -> text) and one DOT golden.
// EINSTAGE_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing; review the diff before committing.
#include "ir/Extension.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "support/DupFamily.h"
#include "support/Golden.h"
#include "test_program_family.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

using namespace einstage;

namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(EINSTAGE_SOURCE_DIR) / "tests" / "ir" / "golden";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_golden(const std::string& file, const std::string& actual) {
  einstage::test::check_golden_file(kGoldenDir / file, actual);
}

const ExtensionRegistry& registry() {
  static const ExtensionRegistry r = [] {
    ExtensionRegistry reg;
    testing::register_test_families(reg);
    testing::register_dup_family(reg);  // tests/ir/test_multi_result.cpp's golden
    return reg;
  }();
  return r;
}

Dim sym(const char* s) { return Dim::symbol(s); }

// ---- the cases ----

// The example program of docs/architecture.md, with the test family standing in for einsum.
Program loss() {
  Builder b("loss", &registry());
  Value x = b.parameter("x", {DType::f64, {sym("n"), 3}});
  Value w = b.parameter("w", {DType::f64, {3, 4}});
  Value y = b.extension(std::make_shared<testing::MatmulPayload>("j"), {x, w});
  Value s = b.extension(std::make_shared<testing::ScalePayload>(0.5), {y});
  Value sq = b.mul(s, s);
  return b.finish({b.reduce_sum(sq, {0, 1})});
}

// docs/behaviour.md §4.8 shapes: `bij,bjk->bik` needs a final transpose since dot_general puts batch last;
// `ijb,jkb->ikb` does not; `iij,jk->ik` takes the diagonal first; `ij,kl->ijkl` is an outer product by broadcasting.
Program batched_matmul() {
  Builder b("batched_matmul");
  Value x = b.parameter("x", {DType::f64, {6, 2, 3}});
  Value y = b.parameter("y", {DType::f64, {6, 3, 4}});
  Value d = b.dot_general(x, y, {2}, {1}, {0}, {0});
  Value u = b.parameter("u", {DType::f64, {2, 3, 6}});
  Value v = b.parameter("v", {DType::f64, {3, 4, 6}});
  Value e = b.dot_general(u, v, {1}, {0}, {2}, {2});
  return b.finish({b.transpose(d, {2, 0, 1}), e});
}

Program diagonal_and_outer() {
  Builder b("diagonal_and_outer");
  Value a = b.parameter("a", {DType::f64, {2, 2, 3}});
  Value c = b.parameter("c", {DType::f64, {3, 4}});
  Value diag = b.extract_diag(a, 0, 1);
  Value m = b.dot_general(diag, c, {1}, {0});
  Value p = b.parameter("p", {DType::f64, {2, 3}});
  Value q = b.parameter("q", {DType::f64, {4, 5}});
  Value pb = b.broadcast_in_dim(p, {0, 1}, {2, 3, 4, 5});
  Value qb = b.broadcast_in_dim(q, {2, 3}, {2, 3, 4, 5});
  Value outer = b.mul(pb, qb);
  Value back = b.embed_diag(diag, 0, 1);
  return b.finish({m, outer, back});
}

// Symbolic extents: reshape with a product, broadcasting a length-1 axis, and equalities recorded as constraints.
Program symbolic() {
  Builder b("symbolic", &registry());
  Value x = b.parameter("x", {DType::f32, {sym("n"), 3}});
  Value y = b.parameter("y", {DType::f32, {sym("m"), 3}});
  Value z = b.parameter("z", {DType::f32, {1, sym("k")}});
  Value s = b.add(x, y);
  Value flat = b.reshape(s, {Dim(3) * sym("n")});
  Value back = b.reshape(flat, {sym("n"), 3});
  Value t = b.transpose(back, {1, 0});
  Value zb = b.broadcast_in_dim(z, {0, 1}, {sym("n"), 3});
  Value prod = b.dot_general(t, zb, {0}, {1});
  b.require_equal(sym("k"), 3, "z axis 1 must match x axis 1");
  return b.finish({prod, b.extension(std::make_shared<testing::MatmulPayload>("k"), {x, t})});
}

Program elementwise() {
  Builder b("elementwise");
  Value z = b.parameter("z", {DType::c128, {2, sym("n")}});
  Value x = b.parameter("x", {DType::f32, {4}});
  Value i = b.parameter("i", {DType::i64, {4}});
  Value e = b.exp(b.log(b.sqrt(b.conj(z))));
  Value r = b.real(e), im = b.imag(e);
  Value twice = b.add(r, r);  // its own statement: argument order is unspecified, and the golden numbers add first
  Value q = b.div(b.sub(r, im), twice);
  Value xn = b.neg(b.convert(i, DType::f32));
  Value xm = b.mul(x, xn);
  return b.finish({q, b.convert(xm, DType::c64), b.convert(q, DType::c128)});
}

// The ops tensor-network programs need beside the smooth elementwise ones (issue 16).
Program nonsmooth() {
  Builder b("nonsmooth");
  Value z = b.parameter("z", {DType::c128, {2, sym("n")}});
  Value x = b.parameter("x", {DType::f64, {3}});
  Value modulus = b.abs(z);
  Value phase = b.pow(b.sign(z), -1.5);
  Value frozen = b.pow(b.stop_gradient(x), 0.1);
  return b.finish({modulus, phase, frozen});
}

// slice and pad (its transpose) over a symbolic extent.
Program slicing() {
  Builder b("slicing");
  Value x = b.parameter("x", {DType::f64, {6, sym("n")}});
  Value s = b.slice(x, {1, 0}, {3, 2}, {2, 1});
  return b.finish({s, b.pad(s, {1, 0}, {6, sym("n")}, {2, 1})});
}

// reduce_max and the mask its derivative uses, over a symbolic extent.
Program maxima() {
  Builder b("maxima");
  Value x = b.parameter("x", {DType::f64, {3, sym("n")}});
  Value i = b.parameter("i", {DType::i64, {4}});
  return b.finish({b.reduce_max(x, {0, 1}), b.first_max_mask(x, {1}), b.reduce_max(i, {0})});
}

// select with each comparison: reals compared, complex numbers selected and compared, over a symbolic extent.
Program selection() {
  Builder b("selection");
  Value u = b.parameter("u", {DType::f64, {3, sym("n")}});
  Value v = b.parameter("v", {DType::f64, {3, sym("n")}});
  Value z = b.parameter("z", {DType::c128, {3, sym("n")}});
  Value zero = b.full(u.type, 0.0);
  Value relu = b.select(Comparison::gt, u, zero, u, zero);
  Value low = b.select(Comparison::lt, u, v, u, v);
  Value high = b.select(Comparison::ge, u, v, u, v);
  Value zc = b.conj(z);
  Value picked = b.select(Comparison::le, u, v, z, zc);
  Value real_z = b.select(Comparison::eq, z, zc, u, v);
  Value complex_z = b.select(Comparison::ne, z, zc, u, v);
  return b.finish({relu, low, high, picked, real_z, complex_z});
}

Program constants() {
  Builder b("constants");
  Value a = b.constant(Tensor::from_row_major<double>({2, 3}, {1, 2, 3, 4.5, -0.1, 1e300}));
  Value c = b.constant(Tensor::from_col_major<c128>(
      {3}, {c128(1, -2), c128(std::numeric_limits<double>::quiet_NaN(), 0),
            c128(std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity())}));
  Value f = b.constant(Tensor::scalar<float>(0.1f));
  Value i = b.constant(Tensor::from_col_major<int64_t>({2}, {-7, 9007199254740993}));
  Value zeros = b.full({DType::f64, {sym("n"), 2}}, 0.0);
  Value x = b.parameter("x", {DType::f64, {sym("n"), 2}});
  Value empty = b.constant(Tensor::zeros(DType::f64, {0, 2}));
  return b.finish({a, c, f, i, b.add(x, zeros), empty});
}

Program no_outputs() {
  Builder b("no_outputs");
  b.parameter("x", {DType::f64, {}});
  return b.finish({});
}

const std::vector<std::pair<std::string, std::function<Program()>>>& cases() {
  static const std::vector<std::pair<std::string, std::function<Program()>>> c = {
      {"loss", loss},
      {"batched_matmul", batched_matmul},
      {"diagonal_and_outer", diagonal_and_outer},
      {"symbolic", symbolic},
      {"elementwise", elementwise},
      {"nonsmooth", nonsmooth},
      {"slicing", slicing},
      {"maxima", maxima},
      {"selection", selection},
      {"constants", constants},
      {"no_outputs", no_outputs},
      {"multi_result", [] { return testing::dup_pairs_program(registry()); }},
  };
  return c;
}

}  // namespace

TEST_CASE("golden text of built programs") {
  for (const auto& [name, build] : cases()) {
    CAPTURE(name);
    check_golden(name + ".ir", print_program(build()));
  }
}

TEST_CASE("every golden round-trips through text and JSON") {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kGoldenDir)) {
    if (entry.path().extension() != ".ir") continue;
    ++n;
    std::string text = read_text(entry.path());
    CAPTURE(entry.path().filename().string());
    Program p = parse_program(text, &registry());
    CHECK(print_program(p) == text);
    std::string json = program_to_json(p);
    Program q = program_from_json(json, &registry());
    CHECK(print_program(q) == text);
    CHECK(program_to_json(q) == json);
    CHECK(program_to_json(q, -1) == program_to_json(p, -1));
  }
  CHECK(n == cases().size());
}

TEST_CASE("the architecture example (docs/architecture.md) parses") {
  // The einsum family is registered by its own module; a stand-in with the same payload text shows that
  // attribute text with strings, '->' and bare words passes through to the family's parser untouched.
  struct Raw final : ExtensionPayload {
    std::string text;
    explicit Raw(std::string t) : text(std::move(t)) {}
    std::string_view family() const override { return "einstage.einsum.v1"; }
    std::string to_text() const override { return text; }
    std::string to_json() const override { return nlohmann::json(text).dump(); }
    uint64_t hash() const override { return hash_bytes(text); }
    bool equals(const ExtensionPayload& o) const override { return static_cast<const Raw&>(o).text == text; }
    std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<Raw>(text); }
  };
  ExtensionRegistry reg;
  ExtensionSemantics s;
  s.family = "einstage.einsum.v1";
  s.module = "test.stand_in";
  s.parse_text = [](std::string_view t) -> std::unique_ptr<ExtensionPayload> {
    CHECK(split_attribute_text(t).size() == 3);
    return std::make_unique<Raw>(std::string(t));
  };
  s.parse_json = [](std::string_view t) -> std::unique_ptr<ExtensionPayload> {
    return std::make_unique<Raw>(nlohmann::json::parse(t).get<std::string>());
  };
  s.infer_type = [](const ExtensionPayload&, Types in, TypeContext& ctx) {
    ctx.unify(in[0].dims[1], in[1].dims[0], "label j");
    return TensorType{in[0].dtype, {in[0].dims[0], in[1].dims[1]}};
  };
  reg.register_family(std::move(s));
  const std::string text =
      "program @loss(%x: f64[n,3], %w: f64[3,4]) -> (f64[]) {\n"
      "  %0 = einstage.einsum.v1(%x, %w) {subscripts = \"ij,jk->ik\", plan = auto, broadcast = false} : f64[n,4]\n"
      "  %1 = mul(%0, %0) : f64[n,4]\n"
      "  %2 = reduce_sum(%1) {axes = [0, 1]} : f64[]\n"
      "  return %2\n"
      "}\n";
  Program p = parse_program(text, &reg);
  CHECK(print_program(p) == text);
  CHECK(print_program(program_from_json(program_to_json(p), &reg)) == text);
}

TEST_CASE("DOT output of the loss program") { check_golden("loss.dot", print_dot(loss())); }

TEST_CASE("DOT and JSON output of the selection program") {
  check_golden("selection.dot", print_dot(selection()));
  check_golden("selection.json", program_to_json(selection()));
}
