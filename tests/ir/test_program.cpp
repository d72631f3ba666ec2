// The IR core: dims and types, the standard ops' type rules (results computed by hand), the builder's and the
// verifier's error messages, the extension registry, parse errors, constraints checked at run time, hashing, and a
// seeded property test that random well-typed programs survive print/parse and JSON round trips.
#include "ir/AttrText.h"
#include "ir/Extension.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "test_program_family.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

using namespace einstage;

namespace {

Dim sym(const char* s) { return Dim::symbol(s); }
TensorType f64(std::vector<Dim> dims) { return {DType::f64, std::move(dims)}; }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  FAIL("no error");
  return ErrorKind::runtime;
}

ExtensionRegistry test_registry() {
  ExtensionRegistry r;
  testing::register_test_families(r);
  return r;
}

// Builds one op on parameters of the given types and returns the result type.
TensorType type_of(Op op, std::vector<TensorType> in) {
  Builder b("t");
  std::vector<Value> vs;
  for (size_t i = 0; i < in.size(); ++i) vs.push_back(b.parameter(fmt::format("a{}", i), in[i]));
  return b.emit(std::move(op), vs).type;
}

}  // namespace

TEST_CASE("dims: constants, symbols, canonical products") {
  Dim n = sym("n"), m = sym("m");
  CHECK((n * Dim(3) * m).to_string() == "3*m*n");
  CHECK((m * n) == (n * m));
  CHECK((n * Dim(0)) == Dim(0));
  CHECK(product({n, Dim(2), Dim(3)}).to_string() == "6*n");
  CHECK(Dim::parse("2*n*m") == Dim(2) * m * n);
  CHECK(Dim::parse("n*3")->to_string() == "3*n");
  CHECK_FALSE(Dim::parse("n+1"));
  CHECK_FALSE(Dim::parse("-1"));
  CHECK_FALSE(Dim::parse(""));
  CHECK((n * m).evaluate({{"n", 2}, {"m", 5}}) == 10);
  CHECK_FALSE(n.evaluate({{"m", 5}}));
  CHECK(message_of([] { Dim::symbol("2x"); }) ==
        "'2x' is not a valid symbolic dim name; use an identifier such as n");
  CHECK(message_of([] { Dim::symbol(std::string_view("n\0\nm\xc3", 5)); }) ==
        "'n\\0\\nm\\xc3' is not a valid symbolic dim name; use an identifier such as n");
  CHECK(message_of([] { Dim(-3); }) == "extent -3 is negative; extents must be >= 0");
}

TEST_CASE("tensor types print and parse") {
  TensorType t{DType::f64, {sym("n"), 4}};
  CHECK(t.to_string() == "f64[n,4]");
  CHECK(TensorType::parse("f64[n,4]") == t);
  CHECK(TensorType::parse("c64[]") == TensorType{DType::c64, {}});
  CHECK(TensorType::parse("i64[2*n,0]")->to_string() == "i64[2*n,0]");
  CHECK_FALSE(TensorType::parse("f16[2]"));
  CHECK_FALSE(TensorType::parse("f64[2,]"));
  CHECK_FALSE(TensorType::parse("f64"));
}

TEST_CASE("type rules of the standard ops") {
  // dot_general: [lhs free, rhs free, batch]
  CHECK(type_of(DotGeneral{{0}, {2}, {0}, {1}}, {f64({6, 2, 3}), f64({6, 3, 4})}) == f64({2, 4, 6}));
  CHECK(type_of(DotGeneral{{2}, {1}, {2}, {0}}, {f64({2, 3, 6}), f64({3, 4, 6})}) == f64({2, 4, 6}));
  CHECK(type_of(DotGeneral{{}, {}, {}, {}}, {f64({2}), f64({3})}) == f64({2, 3}));
  CHECK(type_of(DotGeneral{{}, {0, 1}, {}, {1, 0}}, {f64({2, 3}), f64({3, 2})}) == f64({}));
  CHECK(type_of(Transpose{{2, 0, 1}}, {f64({2, 3, 4})}) == f64({4, 2, 3}));
  CHECK(type_of(Reshape{{6, 1}}, {f64({2, 3})}) == f64({6, 1}));
  CHECK(type_of(BroadcastInDim{{1}, {2, 3, 4}}, {f64({3})}) == f64({2, 3, 4}));
  CHECK(type_of(BroadcastInDim{{0, 2}, {5, 3, 4}}, {f64({1, 4})}) == f64({5, 3, 4}));
  CHECK(type_of(ReduceSum{{0, 2}}, {f64({2, 3, 4})}) == f64({3}));
  CHECK(type_of(ReduceSum{{}}, {f64({2})}) == f64({2}));
  CHECK(type_of(ExtractDiag{0, 1}, {f64({2, 2, 3})}) == f64({2, 3}));
  CHECK(type_of(ExtractDiag{2, 0}, {f64({4, 3, 4})}) == f64({3, 4}));
  CHECK(type_of(EmbedDiag{0, 1}, {f64({2, 3})}) == f64({2, 2, 3}));
  CHECK(type_of(EmbedDiag{2, 0}, {f64({3, 4})}) == f64({4, 3, 4}));  // inverse of the extract_diag{2, 0} above
  CHECK(type_of(Add{}, {f64({2}), f64({2})}) == f64({2}));
  CHECK(type_of(Real{}, {TensorType{DType::c64, {3}}}) == TensorType{DType::f32, {3}});
  CHECK(type_of(Imag{}, {TensorType{DType::c128, {}}}) == f64({}));
  CHECK(type_of(Conj{}, {f64({2})}) == f64({2}));
  CHECK(type_of(Convert{DType::c64}, {f64({2})}) == TensorType{DType::c64, {2}});
  CHECK(type_of(Constant{Tensor::zeros(DType::i64, {2, 0})}, {}) == TensorType{DType::i64, {2, 0}});
  CHECK(type_of(Abs{}, {TensorType{DType::c64, {3}}}) == TensorType{DType::f32, {3}});
  CHECK(type_of(Abs{}, {TensorType{DType::i64, {2}}}) == TensorType{DType::i64, {2}});
  CHECK(type_of(Sign{}, {TensorType{DType::c128, {2}}}) == TensorType{DType::c128, {2}});
  CHECK(type_of(StopGradient{}, {f64({2, 3})}) == f64({2, 3}));
  CHECK(type_of(Pow{-0.5}, {TensorType{DType::c64, {2}}}) == TensorType{DType::c64, {2}});
  CHECK(type_of(Select{Comparison::eq}, {f64({2}), f64({2}), TensorType{DType::c64, {2}}, TensorType{DType::c64, {2}}}) ==
        TensorType{DType::c64, {2}});
  // symbolic extents flow through; a constant wins over a symbol it is unified with
  CHECK(type_of(Add{}, {f64({sym("n")}), f64({3})}) == f64({3}));
  CHECK(type_of(DotGeneral{{}, {1}, {}, {0}}, {f64({sym("n"), sym("k")}), f64({3, 4})}) == f64({sym("n"), 4}));
  CHECK(type_of(Reshape{{sym("n"), 3}}, {f64({Dim(3) * sym("n")})}) == f64({sym("n"), 3}));
}

TEST_CASE("the op table is consistent") {
  for (size_t i = 0; i < kStdOpCount; ++i) {
    auto k = static_cast<OpKind>(i);
    CHECK(std_op_from_name(op_kind_name(k)) == k);
    CHECK(kind(make_std_op(k)) == k);
    CHECK(op_name(make_std_op(k)) == op_kind_name(k));
  }
  CHECK_FALSE(std_op_from_name("extension"));
  CHECK(std_op_arity(OpKind::dot_general) == 2);
  CHECK(std_op_arity(OpKind::constant) == 0);
  CHECK(std_op_arity(OpKind::exp) == 1);
  CHECK(std_op_arity(OpKind::select) == 4);
}

TEST_CASE("builder errors name the op, the operand and both types") {
  Builder b("f");
  Value x = b.parameter("x", f64({3}));
  Value y = b.parameter("y", {DType::f32, {3}});
  Value m = b.parameter("m", f64({3, 5}));
  CHECK(message_of([&] { b.add(x, y); }) ==
        "'add' at %0 in @f: operand 1 has type f32[3] but operand 0 has f64[3]; operands must have equal dtypes "
        "(insert a convert)");
  CHECK(message_of([&] { b.dot_general(m, m, {1}, {0}); }) ==
        "'dot_general' at %0 in @f: contracting pair 0: lhs axis 1 vs rhs axis 0: extent 5 does not match extent 3");
  CHECK(kind_of([&] { b.dot_general(m, m, {1}, {0}); }) == ErrorKind::shape);
  CHECK(message_of([&] { b.transpose(m, {0, 0}); }) == "'transpose' at %0 in @f: perm = [0, 0] names axis 0 twice");
  CHECK(message_of([&] { b.reduce_sum(m, {2}); }) ==
        "'reduce_sum' at %0 in @f: axes[0] = 2 is out of range for operand rank 2; expected 0..1");
  CHECK(message_of([&] { b.reduce_sum(m, {1, 0}); }) ==
        "'reduce_sum' at %0 in @f: axes = [1, 0] must be strictly increasing");
  CHECK(message_of([&] { b.reshape(m, {4, 4}); }) ==
        "'reshape' at %0 in @f: cannot reshape f64[3,5] (15 elements) to [4,4] (16 elements)");
  CHECK(message_of([&] { b.extract_diag(m, 0, 1); }) ==
        "'extract_diag' at %0 in @f: diagonal axes 0 and 1 of f64[3,5]: extent 3 does not match extent 5");
  CHECK(message_of([&] { b.broadcast_in_dim(x, {0}, {4}); }) ==
        "'broadcast_in_dim' at %0 in @f: operand axis 0 (3) vs shape[0] (4); it must match or be 1: extent 3 does "
        "not match extent 4");
  CHECK(message_of([&] { b.exp(b.convert(x, DType::i64)); }) ==
        "'exp' at %1 in @f: operand 0 has type i64[3]; expected a floating dtype (f32, f64, c64, c128): insert a "
        "convert");
  CHECK(message_of([&] { b.pow(x, std::numeric_limits<double>::quiet_NaN()); }) ==
        "'pow' at %1 in @f: exponent = nan is not finite; expected a finite real number");
  CHECK(message_of([&] { b.pow(b.convert(x, DType::i64), 2); }) ==
        "'pow' at %2 in @f: operand 0 has type i64[3]; expected a floating dtype (f32, f64, c64, c128): insert a "
        "convert");
  CHECK(message_of([&] { b.convert(b.convert(x, DType::c128), DType::f64); }) ==
        "'convert' at %3 in @f: cannot convert c128[3] to f64: complex to real would drop the imaginary part; use "
        "real or imag");
  CHECK(message_of([&] { b.emit(Add{}, {x}); }) == "'add' at %3 in @f: takes 2 operands but 1 were given");
  Value stale = x;
  stale.type = f64({4});
  CHECK(message_of([&] { b.neg(stale); }) ==
        "'neg' at %3 in @f: operand 0 (%x) is given with type f64[4] but was defined with type f64[3]");
  CHECK(message_of([&] { b.neg(Value{99, f64({3})}); }) ==
        "'neg' at %3 in @f: operand 0 (value id 99) is not a value of this program; use values returned by this "
        "builder");
  CHECK(message_of([&] { b.parameter("x", f64({})); }) == "@f: parameter '%x' is defined twice");
  // nothing half-written: the failed calls appended nothing
  CHECK(b.program().instructions.size() == 3);
  CHECK(b.program().constraints.empty());
}

TEST_CASE("slice and pad: types, and errors that name the axis, show the arithmetic and suggest the fix") {
  CHECK(type_of(Slice{{2, 1}, {1, 0}, {2, 1}}, {f64({5, 3})}) == f64({2, 1}));
  CHECK(type_of(Slice{{0, 3}, {7, 0}, {1, 1}}, {f64({5, 3})}) == f64({0, 3}));  // empty: start is not checked
  CHECK(type_of(Slice{{2}, {1}, {1}}, {f64({sym("n")})}) == f64({2}));        // checked when the program runs
  CHECK(type_of(Pad{{5, sym("n")}, {1, 0}, {2, 1}}, {f64({2, 3})}) == f64({5, sym("n")}));
  Builder b("w");
  Value m = b.parameter("m", f64({3, 5}));
  CHECK(message_of([&] { b.slice(m, {0, 4}, {2, 2}, {1, 1}); }) ==
        "'slice' at %0 in @w: axis 1: start 4 + (2 elements - 1) * stride 1 = 5 is past the extent 5; lower start, "
        "size or stride");
  CHECK(message_of([&] { b.slice(m, {0, 0}, {2, 2}, {1, 0}); }) == "'slice' at %0 in @w: stride[1] = 0 must be at least 1");
  CHECK(message_of([&] { b.slice(m, {0, -1}, {2, 2}, {1, 1}); }) == "'slice' at %0 in @w: start[1] = -1 is negative");
  CHECK(message_of([&] { b.slice(m, {0}, {2, 2}, {1, 1}); }) ==
        "'slice' at %0 in @w: start has 1 entries but operand 0 (f64[3,5]) has rank 2; give one per axis");
  CHECK(message_of([&] { b.pad(m, {0, 0}, {4, 9}, {2, 2}); }) ==
        "'pad' at %0 in @w: axis 0: start 0 + (3 elements - 1) * stride 2 = 4 is past the extent 4; lower start or "
        "stride, or enlarge shape");
  CHECK(message_of([&] { b.pad(m, {0, 0}, {6}, {1, 1}); }) ==
        "'pad' at %0 in @w: shape has 1 entries but operand 0 (f64[3,5]) has rank 2; give one per axis");
}

TEST_CASE("symbolic equalities become constraints checked at run time") {
  Builder b("f");
  Value x = b.parameter("x", f64({sym("n"), 3}));
  Value y = b.parameter("y", f64({sym("m"), 3}));
  Value s = b.add(x, y);
  Program p = b.finish({s});
  REQUIRE(p.constraints.size() == 1);
  CHECK(p.constraints[0].lhs == sym("n"));
  CHECK(p.constraints[0].rhs == sym("m"));
  CHECK(p.constraints[0].at == s.id);
  CHECK(print_program(p) ==
        "program @f(%x: f64[n,3], %y: f64[m,3]) -> (f64[n,3]) {\n"
        "  %0 = add(%x, %y) : f64[n,3]\n"
        "  constraint n == m at %0 \"'add' operand 1 axis 0 (operand 0 is f64[n,3], operand 1 is f64[m,3])\"\n"
        "  return %0\n"
        "}\n");
  check_constraints(p, {{"n", 4}, {"m", 4}});
  CHECK(message_of([&] { check_constraints(p, {{"n", 4}, {"m", 5}}); }) ==
        "@f: shape constraint n == m at %0 does not hold: n = 4 but m = 5 ('add' operand 1 axis 0 (operand 0 is "
        "f64[n,3], operand 1 is f64[m,3]))");
  CHECK(message_of([&] { check_constraints(p, {{"n", 4}}); }) ==
        "@f: symbolic dim 'm' has no value; bind it from an input shape (needed by constraint n == m at %0)");
}

TEST_CASE("saved programs keep the constraints their instructions derive; listed ones only add") {
  // dot_general contracts k with j: the builder derives k == j, so a file that lists no constraint still has it.
  std::string text =
      "program @mm(%a: f64[n,k], %b: f64[j,4]) -> (f64[n,4]) {\n"
      "  %0 = dot_general(%a, %b) {lhs_batch = [], lhs_contracting = [1], rhs_batch = [], rhs_contracting = [0]} : "
      "f64[n,4]\n"
      "  return %0\n"
      "}\n";
  std::string json = R"({"format": "einstage.ir", "version": 1, "name": "mm",
      "params": [{"name": "a", "type": "f64[n,k]"}, {"name": "b", "type": "f64[j,4]"}],
      "instructions": [{"result": "%0", "op": "dot_general", "operands": ["%a", "%b"], "attributes":
        {"lhs_batch": [], "lhs_contracting": [1], "rhs_batch": [], "rhs_contracting": [0]}, "type": "f64[n,4]"}],
      "constraints": [], "outputs": ["%0"]})";
  const std::string violated =
      "@mm: shape constraint k == j at %0 does not hold: k = 3 but j = 5 ('dot_general' contracting pair 0: lhs "
      "axis 1 vs rhs axis 0)";
  for (const Program& p : {parse_program(text), program_from_json(json)}) {
    REQUIRE(p.constraints.size() == 1);
    CHECK(p.constraints[0].lhs == sym("k"));
    CHECK(p.constraints[0].rhs == sym("j"));
    std::vector<Shape> shapes = {{2, 3}, {5, 4}};
    CHECK(message_of([&] { check_constraints(p, bind_parameters(p, shapes)); }) == violated);
    CHECK(kind_of([&] { check_constraints(p, bind_parameters(p, shapes)); }) == ErrorKind::shape);
    shapes[1] = {3, 4};
    check_constraints(p, bind_parameters(p, shapes));
  }

  // Listed constraints come first and stay; a derived one they imply through a chain (k == m, m == j) is not added
  // again, so the text prints back unchanged; a listed extra constraint is kept.
  std::string chained = text.substr(0, text.find("  return")) +
                        "  constraint k == m \"by hand\"\n  constraint m == j \"by hand\"\n  return %0\n}\n";
  chained.replace(chained.find("%b: f64[j,4]"), 12, "%b: f64[j,4], %c: f64[m]");
  Program q = parse_program(chained);
  CHECK(q.constraints.size() == 2);
  CHECK(print_program(q) == chained);
  CHECK(print_program(parse_program(print_program(q))) == chained);
  Program extra =
      parse_program(text.substr(0, text.find("  return")) + "  constraint n == 7 \"by hand\"\n  return %0\n}\n");
  REQUIRE(extra.constraints.size() == 2);
  CHECK(extra.constraints[0].what == "by hand");
  CHECK(extra.constraints[1].lhs == sym("k"));
}

TEST_CASE("extension families: registry, type rule, constraints") {
  ExtensionRegistry reg = test_registry();
  CHECK(reg.families() == std::vector<std::string>{"test.matmul.v1", "test.scale.v1"});
  ExtensionSemantics again;
  again.family = "test.scale.v1";
  again.module = "other.module";
  CHECK(message_of([&] { reg.register_family(again); }) ==
        "extension family 'test.scale.v1' is already registered (by module 'einstage.test'); module 'other.module' "
        "cannot register it again: load each module once, or bump the family's version");
  ExtensionSemantics bad;
  bad.family = "NoVersion";
  bad.module = "m";
  CHECK(message_of([&] { reg.register_family(bad); }) ==
        "extension family name 'NoVersion' (module 'm') is malformed; expected lower-case segments joined by '.' "
        "ending in a version, e.g. 'einstage.einsum.v1'");
  ExtensionSemantics incomplete;
  incomplete.family = "test.new.v1";
  incomplete.module = "m";
  CHECK(message_of([&] { reg.register_family(incomplete); }) ==
        "extension family 'test.new.v1' (module 'm') has no parse_text rule; it is required");
  CHECK(is_family_name("einstage.einsum.v1"));
  CHECK_FALSE(is_family_name("einsum.v"));
  CHECK_FALSE(is_family_name("v1"));

  Builder b("g", &reg);
  Value x = b.parameter("x", f64({sym("n"), sym("k")}));
  Value w = b.parameter("w", f64({3, 4}));
  Value y = b.extension(std::make_shared<testing::MatmulPayload>("j"), {x, w});
  CHECK(y.type == f64({sym("n"), 4}));
  CHECK(message_of([&] { b.extension(std::make_shared<testing::MatmulPayload>("j"), {w, w}); }) ==
        "'test.matmul.v1' at %1 in @g: operand 1 axis 0 (label j): extent 4 does not match extent 3");
  Program p = b.finish({y});
  REQUIRE(p.constraints.size() == 1);
  CHECK(p.constraints[0].what == "'test.matmul.v1' operand 1 axis 0 (label j)");

  Builder nob("h");
  Value z = nob.parameter("z", f64({2}));
  CHECK(message_of([&] { nob.extension(std::make_shared<testing::ScalePayload>(2), {z}); }) ==
        "unknown extension family 'test.scale.v1'; register the module that provides it before use (e.g. its "
        "register function on the ExtensionRegistry, or load the module into the Runtime)");
}

TEST_CASE("parse errors") {
  ExtensionRegistry reg = test_registry();
  auto parse_error = [&](const std::string& body) {
    return message_of([&] { parse_program("program @f(%x: f64[3]) -> (f64[3]) {\n" + body + "}\n", &reg); });
  };
  CHECK(parse_error("  %0 = matmul(%x, %x) : f64[3]\n  return %0\n") ==
        "line 2: unknown op 'matmul'; standard ops are [dot_general, transpose, reshape, broadcast_in_dim, "
        "reduce_sum, reduce_max, first_max_mask, extract_diag, embed_diag, slice, pad, add, sub, mul, div, select, neg, "
        "conj, real, imag, exp, log, sqrt, "
        "sin, cos, tanh, sinh, cosh, abs, sign, stop_gradient, pow, convert, constant], extension ops are spelled "
        "family.name.vN");
  CHECK(parse_error("  %0 = acme.fft.v2(%x) {n = 3} : f64[3]\n  return %0\n") ==
        "line 2: unknown extension family 'acme.fft.v2'; register the module that provides it before use (e.g. its "
        "register function on the ExtensionRegistry, or load the module into the Runtime)");
  // einstage's own families: the message names the CMake target and the register function.
  CHECK(parse_error("  %0 = einstage.linalg.v1(%x) {kind = \"svd\"} : f64[3]\n  return %0\n") ==
        "line 2: unknown extension family 'einstage.linalg.v1'; register its module before use: link the CMake target "
        "einstage::einstage_linalg and call linalg::register_linalg_semantics(registry) on this ExtensionRegistry (or "
        "load the module into a Runtime and trace with runtime.registry())");
  CHECK(kind_of([&] { parse_program("program @f() -> () {\n  %0 = acme.fft.v2() : f64[]\n  return\n}\n", &reg); }) ==
        ErrorKind::not_found);
  CHECK(parse_error("  %0 = neg(%y) : f64[3]\n  return %0\n") == "line 2: use of undefined value '%y'");
  CHECK(parse_error("  %0 = neg(%x) : f64[4]\n  return %0\n") ==
        "line 2: 'neg' is printed with type f64[4] but its type rule gives f64[3]");
  CHECK(parse_error("  %0 = add(%x, %x) : f64[3]\n  return %1\n") == "line 3: use of undefined value '%1'");
  CHECK(parse_error("  %1 = neg(%x) : f64[3]\n  return %1\n") ==
        "line 2: expected result '%0' (results are numbered densely), got '%1'");
  CHECK(parse_error("  %0 = reduce_sum(%x) {axis = [0]} : f64[]\n  return %0\n") ==
        "line 2: 'reduce_sum' has no attribute 'axis'; its attributes are [axes]");
  CHECK(parse_error("  %0 = transpose(%x) : f64[3]\n  return %0\n") ==
        "line 2: 'transpose' is missing attribute 'perm'");
  CHECK(parse_error("  %0 = transpose(%x) {perm = [a]} : f64[3]\n  return %0\n") ==
        "line 2: attribute 'perm' of 'transpose': 'a' in [a] is not an integer");
  CHECK(parse_error("  %0 = add(%x, %x) : f64[3]\n  return %0\n  return %0\n") ==
        "line 4: expected '}' after 'return'");
  CHECK(parse_error("  %0 = test.scale.v1(%x) {factor = abc} : f64[3]\n  return %0\n") ==
        "line 2: 'test.scale.v1' attribute 'factor': 'abc' is not a number");
  CHECK(parse_error("  %0 = dot_general(%x, %x) {lhs_batch = [], lhs_contracting = [0], rhs_batch = [], "
                    "rhs_contracting = [0]} : f64[]\n  return %0\n") ==
        "line 3: output 0 has type f64[] but the header declares f64[3]");
  CHECK(message_of([] { parse_program("func @f() {\n}\n"); }) ==
        "line 1: expected 'program @name(...) -> (...) {', got 'func @f() {'");
  CHECK(kind_of([] { parse_program(""); }) == ErrorKind::parse);
}

TEST_CASE("malformed JSON programs") {
  ExtensionRegistry reg = test_registry();
  CHECK(message_of([&] { program_from_json("{\"format\": ", &reg); }).starts_with(
      "malformed JSON program: not valid JSON ("));
  CHECK(message_of([&] { program_from_json("[1, 2]", &reg); }) == "malformed JSON program: top level: expected an object");
  CHECK(message_of([&] { program_from_json("{\"format\": \"einstage.ir\", \"version\": 2}", &reg); }) ==
        "malformed JSON program: version: expected \"version\": 1 (this build reads version 1 only)");
  std::string head = R"({"format": "einstage.ir", "version": 1, "name": "f", "params": [{"name": "x", "type": "f64[3]"}], )";
  CHECK(message_of([&] { program_from_json(head + R"("instructions": [{"result": "%0", "op": "neg", "operands": ["%z"], "attributes": {}, "type": "f64[3]"}], "constraints": [], "outputs": []})", &reg); }) ==
        "malformed JSON program: instructions[0].operands[0]: use of undefined value \"%z\"");
  CHECK(message_of([&] { program_from_json(head + R"("instructions": [{"result": "%0", "op": "transpose", "operands": ["%x"], "attributes": {"perm": "0"}, "type": "f64[3]"}], "constraints": [], "outputs": []})", &reg); }) ==
        "malformed JSON program: instructions[0].attributes.perm: expected an array of integers");
  CHECK(message_of([&] { program_from_json(head + R"("instructions": [], "outputs": []})", &reg); }) ==
        "malformed JSON program: top level: missing \"constraints\"");
  CHECK(message_of([&] { program_from_json(head + R"("instructions": [{"result": "%0", "op": "frob", "operands": [], "type": "f64[3]"}], "constraints": [], "outputs": []})", &reg); }) ==
        "malformed JSON program: instructions[0]: unknown op 'frob'");
  CHECK(message_of([&] { program_from_json(head + R"("instructions": [{"result": "%0", "op": "acme.fft.v2", "operands": [], "payload": {}, "type": "f64[3]"}], "constraints": [], "outputs": []})", &reg); }) ==
        "JSON program instructions[0]: unknown extension family 'acme.fft.v2'; register the module that provides it "
        "before use (e.g. its register function on the ExtensionRegistry, or load the module into the Runtime)");
  CHECK(message_of([&] { program_from_json(head + R"("instructions": [{"result": "%0", "op": "add", "operands": ["%x", "%x"], "attributes": {}, "type": "f64[4]"}], "constraints": [], "outputs": []})", &reg); }) ==
        "malformed JSON program: instructions[0]: 'add' is recorded with type f64[4] but its type rule gives f64[3]");
}

TEST_CASE("a program holding text that is not UTF-8 cannot be written as JSON (an einstage::Error)") {
  Builder b("f");
  Value x = b.parameter("x", {DType::f64, {3}});
  Program p = b.finish({x});
  p.constraints.push_back(ShapeConstraint{Dim(3), Dim(3), -1, "bad \xff byte"});  // found by fuzzing the text form
  CHECK(message_of([&] { program_to_json(p); }) ==
        "program @f cannot be written as JSON: a string in it is not valid UTF-8 (invalid UTF-8 byte at index 4: 0xFF); "
        "JSON holds UTF-8 text only, so re-encode its names and constraint texts as UTF-8");
}

TEST_CASE("the verifier names the instruction and shows the lines around it") {
  Builder b("f");
  Value x = b.parameter("x", f64({3}));
  Value a = b.neg(x);
  Value c = b.exp(a);
  Value d = b.add(a, c);
  Program good = b.finish({d});
  verify(good);

  Program wrong_type = good;
  wrong_type.instructions[1].results[0].type = f64({4});
  wrong_type.instructions[2].operands[1].type = f64({4});
  wrong_type.outputs[0].type = f64({3});
  CHECK(message_of([&] { verify(wrong_type); }) ==
        "'exp' at %1 in @f: result type is f64[4] but the type rule gives f64[3]\n"
        "while verifying:\n"
        "  program @f(%x: f64[3]) -> (f64[3]) {\n"
        "    %0 = neg(%x) : f64[3]\n"
        ">   %1 = exp(%0) : f64[4]\n"
        "    %2 = add(%0, %1) : f64[3]\n"
        "    return %2\n"
        "  }");
  CHECK(kind_of([&] { verify(wrong_type); }) == ErrorKind::verification);

  Program undefined = good;
  undefined.instructions[0].operands[0].id = 42;
  CHECK(message_of([&] { verify(undefined); }) ==
        "'neg' at %0 in @f: operand 0 (%?42) is not defined before this use\n"
        "while verifying:\n"
        "  program @f(%x: f64[3]) -> (f64[3]) {\n"
        ">   %0 = neg(%?42) : f64[3]\n"
        "    %1 = exp(%0) : f64[3]\n"
        "    %2 = add(%0, %1) : f64[3]\n"
        "    return %2");

  Program use_before_def = good;
  std::swap(use_before_def.instructions[0], use_before_def.instructions[1]);
  CHECK(message_of([&] { verify(use_before_def); }).starts_with(
      "'exp' at %0 in @f: operand 0 (%?1) is not defined before this use\n"));

  Program bad_rule = good;
  bad_rule.instructions[2].operands[1] = Value{x.id, x.type};
  bad_rule.instructions[2].op = DotGeneral{{}, {0}, {}, {1}};
  CHECK(message_of([&] { verify(bad_rule); }).starts_with(
      "'dot_general' at %2 in @f: rhs_contracting[0] = 1 is out of range for operand rank 1; expected 0..0\n"
      "while verifying:\n"));

  Program bad_output = good;
  bad_output.outputs[0].id = 77;
  CHECK(message_of([&] { verify(bad_output); }).starts_with("@f: output 0 (%?77) is not a defined value\n"));

  Program twice = good;
  twice.instructions[1].results[0].id = twice.instructions[0].results[0].id;
  twice.instructions[2].operands[1].id = twice.instructions[0].results[0].id;
  CHECK(message_of([&] { verify(twice); }).starts_with(
      "'exp' at %1 in @f: result value id 1 is negative or already defined (SSA values are defined once)\n"));
}

TEST_CASE("op equality and hashing") {
  CHECK(Op(Transpose{{1, 0}}) == Op(Transpose{{1, 0}}));
  CHECK_FALSE(Op(Transpose{{1, 0}}) == Op(Transpose{{0, 1}}));
  CHECK(hash_op(Transpose{{1, 0}}) == hash_op(Transpose{{1, 0}}));
  CHECK(hash_op(Transpose{{1, 0}}) != hash_op(Transpose{{0, 1}}));
  CHECK(hash_op(Add{}) != hash_op(Mul{}));
  Op c1 = Constant{Tensor::from_col_major<double>({2}, {1, 2})};
  Op c2 = Constant{Tensor::from_col_major<double>({2}, {1, 2})};
  CHECK(c1 == c2);
  CHECK(hash_op(c1) == hash_op(c2));
  Op e1 = ExtensionOp{std::make_shared<testing::ScalePayload>(2)};
  Op e2 = ExtensionOp{std::make_shared<testing::ScalePayload>(2)};
  Op e3 = ExtensionOp{std::make_shared<testing::ScalePayload>(3)};
  CHECK(e1 == e2);
  CHECK_FALSE(e1 == e3);
  CHECK(hash_op(e1) == hash_op(e2));
  CHECK(kind(e1) == OpKind::extension);
  CHECK(op_name(e1) == "test.scale.v1");
}

TEST_CASE("attribute text: tensors, floats, strings") {
  Tensor t = Tensor::from_row_major<double>({2, 2}, {1, 2, 3, 0.1});
  CHECK(format_attr(t) == "f64[2,2]<[1, 3, 2, 0.1]>");  // column-major element order
  Tensor back;
  parse_attr(format_attr(t), back, "t");
  CHECK(bitwise_equal(back, t));
  CHECK(format_attr(Tensor::scalar<c64>(c64(1.5f, -0.25f))) == "c64[]<[(1.5, -0.25)]>");
  CHECK(format_float(0.1f) == "0.1");
  CHECK(format_float(1.0 / 3) == "0.3333333333333333");
  CHECK(parse_double("-inf") == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(*parse_double("nan")));
  CHECK_FALSE(parse_double("1.5x"));
  CHECK(format_string_literal("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  CHECK(parse_string_literal(format_string_literal("a\"b\\c\n")) == "a\"b\\c\n");
  CHECK(split_attribute_text("s = \"x, y = z\", l = [1, 2], t = f64[2]<[1, 2]>") ==
        std::vector<std::pair<std::string, std::string>>{{"s", "\"x, y = z\""}, {"l", "[1, 2]"}, {"t", "f64[2]<[1, 2]>"}});
  CHECK(message_of([] { split_attribute_text("a = 1, a = 2"); }) == "attribute 'a' is given twice");
  double exponent = 0;
  parse_attr(format_attr(-1.0 / 3), exponent, "exponent");
  CHECK(exponent == -1.0 / 3);
  CHECK(message_of([] { double e; parse_attr("2.5.1", e, "attribute 'exponent' of 'pow'"); }) ==
        "attribute 'exponent' of 'pow': expected a number like 2.5, got '2.5.1'");
  CHECK(message_of([] { Tensor u; parse_attr("f64[3]<[1, 2]>", u, "value"); }) ==
        "value: a f64[3] literal needs 3 elements but 2 are given");
}

TEST_CASE("reduce_max and first_max_mask: real operands, increasing axes, the reduced type") {
  Builder b("f");
  Value m = b.parameter("m", f64({3, 5}));
  CHECK(message_of([&] { b.reduce_max(m, {1, 1}); }) == "'reduce_max' at %0 in @f: axes = [1, 1] names axis 1 twice");
  Value z = b.convert(m, DType::c128);
  CHECK(message_of([&] { b.first_max_mask(z, {0}); }) ==
        "'first_max_mask' at %1 in @f: operand 0 has type c128[3,5]; expected a real dtype (f32, f64, i64): complex "
        "numbers have no maximum (take abs or real first)");
  CHECK(kind_of([&] { b.reduce_max(z, {}); }) == ErrorKind::dtype);
  CHECK(b.reduce_max(m, {1}).type.to_string() == "f64[3]");
  CHECK(b.first_max_mask(m, {0, 1}).type.to_string() == "f64[3,5]");
}

TEST_CASE("select: compared and selected dtypes, one shape, ordered comparisons of complex operands refused") {
  Builder b("f");
  Value a = b.parameter("a", f64({3, sym("n")}));
  Value i = b.parameter("i", {DType::i64, {3, sym("n")}});
  Value z = b.parameter("z", {DType::c128, {3, sym("n")}});
  Value v = b.parameter("v", f64({4}));
  Value w = b.parameter("w", f64({4, sym("n")}));
  CHECK(message_of([&] { b.select(Comparison::lt, a, i, a, a); }) ==
        "'select' at %0 in @f: operand 1 (b) has type i64[3,n] but operand 0 (a) has f64[3,n]; the compared operands "
        "must have equal dtypes (insert a convert)");
  CHECK(message_of([&] { b.select(Comparison::eq, a, a, a, z); }) ==
        "'select' at %0 in @f: operand 3 (y) has type c128[3,n] but operand 2 (x) has f64[3,n]; the selected operands "
        "must have equal dtypes (insert a convert)");
  CHECK(message_of([&] { b.select(Comparison::ge, z, z, a, a); }) ==
        "'select' at %0 in @f: cmp = ge needs real compared operands but operand 0 (a) has type c128[3,n]: complex "
        "numbers have no order (compare their abs or real parts, or use eq or ne)");
  CHECK(kind_of([&] { b.select(Comparison::lt, z, z, a, a); }) == ErrorKind::dtype);
  CHECK(message_of([&] { b.select(Comparison::lt, a, a, a, v); }) ==
        "'select' at %0 in @f: operand 3 (y) has type f64[4] but operand 0 (a) has f64[3,n]; all four operands must "
        "have equal shapes (insert a broadcast_in_dim)");
  CHECK(message_of([&] { b.select(Comparison::lt, a, a, w, a); }) ==
        "'select' at %0 in @f: operand 2 (x) axis 0 (operand 0 is f64[3,n], operand 2 is f64[4,n]): extent 3 does not "
        "match extent 4");
  CHECK(kind_of([&] { b.select(Comparison::lt, a, a, w, a); }) == ErrorKind::shape);
  CHECK(b.program().instructions.empty());  // every refused select left nothing behind
  // eq and ne compare complex numbers; the result has the selected dtype
  CHECK(b.select(Comparison::ne, z, z, a, a).type.to_string() == "f64[3,n]");
  CHECK(b.select(Comparison::le, i, i, z, z).type.to_string() == "c128[3,n]");
  // a symbolic extent against a constant one: the constant wins and the equality becomes a constraint
  Value m = b.parameter("m", f64({sym("k"), 5}));
  Value c = b.parameter("c", f64({4, 5}));
  CHECK(b.select(Comparison::gt, m, m, c, c).type.to_string() == "f64[4,5]");
  Program p = b.finish({});
  REQUIRE(p.constraints.size() == 1);
  CHECK(p.constraints[0].what == "'select' operand 2 (x) axis 0 (operand 0 is f64[k,5], operand 2 is f64[4,5])");
}

TEST_CASE("select's comparison attribute: its text and JSON spellings, and the errors for others") {
  for (Comparison c : kAllComparisons) {
    Comparison back = Comparison::ne;
    parse_attr(format_attr(c), back, "cmp");
    CHECK(back == c);
  }
  CHECK(format_attr(Comparison::le) == "le");
  CHECK(message_of([] { Comparison c; parse_attr("<", c, "attribute 'cmp' of 'select'"); }) ==
        "attribute 'cmp' of 'select': '<' is not a comparison; expected lt, le, gt, ge, eq or ne");
  ExtensionRegistry reg = test_registry();
  const std::string head = "program @f(%x: f64[3]) -> (f64[3]) {\n";
  CHECK(message_of([&] {
          parse_program(head + "  %0 = select(%x, %x, %x, %x) {cmp = lq} : f64[3]\n  return %0\n}\n", &reg);
        }) == "line 2: attribute 'cmp' of 'select': 'lq' is not a comparison; expected lt, le, gt, ge, eq or ne");
  CHECK(message_of([&] { parse_program(head + "  %0 = select(%x, %x, %x, %x) : f64[3]\n  return %0\n}\n", &reg); }) ==
        "line 2: 'select' is missing attribute 'cmp'");
  Builder b("f");
  Value x = b.parameter("x", f64({3}));
  std::string json = program_to_json(b.finish({b.select(Comparison::ge, x, x, x, x)}), -1);
  const std::string attr = "\"attributes\":{\"cmp\":\"ge\"}";
  REQUIRE(json.find(attr) != std::string::npos);
  std::string bad = json;
  bad.replace(bad.find(attr), attr.size(), "\"attributes\":{\"cmp\":\"<\"}");
  CHECK(message_of([&] { program_from_json(bad, &reg); }) ==
        "malformed JSON program: instructions[0].attributes.cmp: \"<\" is not a comparison (lt, le, gt, ge, eq, ne)");
}

TEST_CASE("docs/ir.md documents every standard op") {
  std::ifstream in(std::filesystem::path(EINSTAGE_SOURCE_DIR) / "docs" / "ir.md");
  REQUIRE(in);
  std::stringstream s;
  s << in.rdbuf();
  std::string doc = s.str();
  for (size_t i = 0; i < kStdOpCount; ++i) {
    std::string_view name = op_kind_name(static_cast<OpKind>(i));
    CAPTURE(name);
    CHECK(doc.find(fmt::format("### `{}`", name)) != std::string::npos);
    // each section shows an example line of the op's text form
    CHECK(doc.find(fmt::format("= {}(", name)) != std::string::npos);
  }
}

TEST_CASE("binding symbolic dims from input shapes") {
  Builder b("f");
  Value x = b.parameter("x", f64({sym("n"), 3}));
  Value y = b.parameter("y", f64({sym("n"), sym("m")}));
  Value z = b.parameter("z", f64({Dim(2) * sym("m")}));
  Program p = b.finish({x, y, z});
  std::vector<Shape> ok = {{4, 3}, {4, 5}, {10}};
  DimBindings bound = bind_parameters(p, ok);
  CHECK(bound == DimBindings{{"m", 5}, {"n", 4}});
  CHECK(evaluate_shape(z.type, bound) == Shape{10});
  CHECK(message_of([&] { evaluate_shape(f64({sym("k")}), bound); }) ==
        "symbolic dim 'k' of f64[k] has no value; bind it from an input shape");
  std::vector<Shape> bad_const = {{4, 2}, {4, 5}, {10}};
  CHECK(message_of([&] { bind_parameters(p, bad_const); }) ==
        "@f: input 0 (%x) axis 1 has extent 2 but the parameter's type f64[n,3] requires 3");
  std::vector<Shape> disagree = {{4, 3}, {6, 5}, {10}};
  CHECK(message_of([&] { bind_parameters(p, disagree); }) ==
        "@f: symbolic dim 'n' is 4 from input 0 (%x) axis 0 but 6 from input 1 (%y) axis 0");
  std::vector<Shape> bad_product = {{4, 3}, {4, 5}, {11}};
  CHECK(message_of([&] { bind_parameters(p, bad_product); }) ==
        "@f: input 2 (%z) axis 0 has extent 11 but the parameter's type f64[2*m] requires 2*m = 10");
  std::vector<Shape> bad_rank = {{4}, {4, 5}, {10}};
  CHECK(message_of([&] { bind_parameters(p, bad_rank); }) ==
        "@f: input 0 (%x) has shape [4] but the parameter has type f64[n,3]");
}

TEST_CASE("a builder continues an existing program, as passes do") {
  Builder b("f");
  Value x = b.parameter("x", f64({sym("n")}));
  Value y = b.neg(x);
  Program p = b.finish({y});
  Builder more(p);
  Value z = more.add(y, y);
  Value w = more.parameter("w", f64({}));
  Value s = more.add(more.reduce_sum(z, {0}), w);
  Value filled = more.full(f64({}), 2.5);
  // Names in messages come from where each value is defined: a parameter, or a result of the continued program.
  Value stale = y;
  stale.type = f64({4});
  CHECK(message_of([&] { more.neg(stale); }) ==
        "'neg' at %5 in @f: operand 0 (%0) is given with type f64[4] but was defined with type f64[n]");
  Value stale_w = w;
  stale_w.type = f64({1});
  CHECK(message_of([&] { more.neg(stale_w); }) ==
        "'neg' at %5 in @f: operand 0 (%w) is given with type f64[1] but was defined with type f64[]");
  Program q = more.finish({more.mul(s, filled)});
  CHECK(print_program(q) ==
        "program @f(%x: f64[n], %w: f64[]) -> (f64[]) {\n"
        "  %0 = neg(%x) : f64[n]\n"
        "  %1 = add(%0, %0) : f64[n]\n"
        "  %2 = reduce_sum(%1) {axes = [0]} : f64[]\n"
        "  %3 = add(%2, %w) : f64[]\n"
        "  %4 = constant() {value = f64[]<[2.5]>} : f64[]\n"
        "  %5 = mul(%3, %4) : f64[]\n"
        "  return %5\n"
        "}\n");
  CHECK(message_of([&] { Builder c("g"); c.require_equal(3, 4, "the two inputs' lengths"); }) ==
        "@g: the two inputs' lengths: extent 3 does not match extent 4");
  CHECK(message_of([] { Builder c("not a name"); }) ==
        "program name 'not a name' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  // Names that are not identifiers are echoed escaped: the message stays one line and keeps what follows a NUL.
  CHECK(message_of([] { Builder c(std::string("f\n\0g\xff", 5)); }) ==
        "program name 'f\\n\\0g\\xff' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  CHECK(message_of([] { Builder c("g"); c.parameter("x\ry", TensorType{DType::f64, {}}); }) ==
        "@g: parameter name 'x\\ry' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  Program named;
  named.name = "p\nq";
  CHECK(message_of([&] { verify(named); }) == "program name 'p\\nq' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  named.name = "p";
  named.params.push_back({"\x1b[0m", Value{0, TensorType{DType::f64, {}}}});
  CHECK(message_of([&] { verify(named); }) ==
        "@p: parameter name '%\\x1b[0m' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
}
