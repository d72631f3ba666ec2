// Modules: loading shared libraries by path (the tropical module, a wrong-ABI module, a library without the entry
// symbol, missing and non-library files), transactional registration of linked-in descriptors, and the tropical
// family's real uses (all-pairs shortest paths, Viterbi) against oracles written here.
#include "runtime/Runtime.h"

#include "RuntimeTestUtil.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>

#include <fstream>
#include <limits>

using namespace einstage;
using namespace einstage::runtime_test;

namespace {

// ---- a linked-in test module whose families can be told to misbehave ----

struct NamePayload final : ExtensionPayload {
  std::string fam;
  explicit NamePayload(std::string f) : fam(std::move(f)) {}
  std::string_view family() const override { return fam; }
  std::string to_text() const override { return ""; }
  std::string to_json() const override { return "{}"; }
  uint64_t hash() const override { return hash_bytes(fam); }
  bool equals(const ExtensionPayload&) const override { return true; }
  std::unique_ptr<ExtensionPayload> clone() const override { return std::make_unique<NamePayload>(fam); }
};

struct IdentityExecutor final : ExtensionExecutor {
  struct Op final : PreparedOp {
    Tensor run(std::span<const Tensor> in, ExecutionContext&) const override { return in[0].clone(); }
  };
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload&, std::span<const TensorType>,
                                            std::span<const TensorType>, ExecutionContext&) const override {
    return std::make_shared<Op>();
  }
};

ExtensionSemantics identity_semantics(std::string family) {
  ExtensionSemantics s;
  s.family = family;
  s.parse_text = [family](std::string_view) { return std::make_unique<NamePayload>(family); };
  s.parse_json = [family](std::string_view) { return std::make_unique<NamePayload>(family); };
  s.infer_type = [](const ExtensionPayload&, Types in, TypeContext&) { return in[0]; };
  return s;
}

void register_a(ModuleRegistrar& r) {
  r.semantics().register_family(identity_semantics("test.a.v1"));
  r.set_executor("test.a.v1", std::make_shared<IdentityExecutor>());
}
void register_b_throws(ModuleRegistrar&) { fail(ErrorKind::invalid_argument, "boom"); }
void register_b_without_executor(ModuleRegistrar& r) {
  r.semantics().register_family(identity_semantics("test.b.v1"));
}
void register_b_and_extra(ModuleRegistrar& r) {
  r.semantics().register_family(identity_semantics("test.b.v1"));
  r.semantics().register_family(identity_semantics("test.extra.v1"));
  r.set_executor("test.b.v1", std::make_shared<IdentityExecutor>());
}
void register_b(ModuleRegistrar& r) {
  r.semantics().register_family(identity_semantics("test.b.v1"));
  r.set_executor("test.b.v1", std::make_shared<IdentityExecutor>());
}

constexpr EinstageFamilyEntry kThrows[] = {{"test.a.v1", &register_a}, {"test.b.v1", &register_b_throws}};
constexpr EinstageFamilyEntry kNoExecutor[] = {{"test.a.v1", &register_a}, {"test.b.v1", &register_b_without_executor}};
constexpr EinstageFamilyEntry kExtra[] = {{"test.a.v1", &register_a}, {"test.b.v1", &register_b_and_extra}};
constexpr EinstageFamilyEntry kGood[] = {{"test.a.v1", &register_a}, {"test.b.v1", &register_b}};
constexpr EinstageFamilyEntry kOnlyB[] = {{"test.b.v1", &register_b}};
constexpr EinstageFamilyEntry kDuplicate[] = {{"test.a.v1", &register_a}, {"test.a.v1", &register_a}};

constexpr EinstageModuleDescriptor module_of(const EinstageFamilyEntry* f, size_t n, const char* name = "test.two") {
  return {kModuleAbiVersion, kBuildId, name, "0.1", f, n};
}

void check_nothing_registered(const Runtime& rt) {
  CHECK(rt.modules().empty());
  CHECK(rt.registry().families().empty());
}

}  // namespace

TEST_CASE("modules: a module built for another ABI version or against another einstage build is refused by path, "
          "naming both versions and both builds") {
  Runtime rt;
  std::string path = EINSTAGE_BAD_ABI_MODULE_PATH;
  CHECK(error_of([&] { rt.load_module(path); }) ==
        "module '" + path + "' was built against einstage module ABI version 999, build '0.0.9 Other-1.0 Debug', but "
        "this einstage is ABI version 7, build '" + kBuildId + "'; rebuild the module against this einstage's "
        "installed headers (find_package(einstage) of this installation)");
  std::string other = EINSTAGE_OTHER_BUILD_MODULE_PATH;
  CHECK(error_of([&] { rt.load_module(other); }) ==
        "module '" + other + "' was built against einstage module ABI version 7, build '0.0.9 OtherCompiler-1.0 "
        "Debug', but this einstage is ABI version 7, build '" + kBuildId + "'; rebuild the module against this "
        "einstage's installed headers (find_package(einstage) of this installation)");
  check_nothing_registered(rt);
}

TEST_CASE("modules: missing entry symbol, missing file, directory and non-library files name the file") {
  Runtime rt;
  std::string no_entry = EINSTAGE_NO_ENTRY_MODULE_PATH;
  CHECK(error_of([&] { rt.load_module(no_entry); }) ==
        "cannot load module '" + no_entry + "': it has no entry point 'einstage_module_entry'; define it with "
        "EINSTAGE_DEFINE_MODULE_ENTRY (runtime/Module.h)");
  CHECK(error_of([&] { rt.load_module("/nonexistent/libnothing_module.so"); }) ==
        "cannot load module '/nonexistent/libnothing_module.so': no such file");
  test::TempDir dir;
  CHECK(error_of([&] { rt.load_module(dir.path().string()); }) ==
        "cannot load module '" + dir.path().string() + "': it is a directory, not a shared library");
  std::string text = (dir.path() / "libtext_module.so").string();
  std::ofstream(text) << "not a shared library\n";
  std::string msg = error_of([&] { rt.load_module(text); });
  CHECK(msg.rfind("cannot load module '" + text + "': ", 0) == 0);
  CHECK(msg.find("libtext_module.so") != std::string::npos);
  check_nothing_registered(rt);
}

TEST_CASE("modules: registration is transactional; every refusal names the module and the family") {
  Runtime rt;
  constexpr auto throws = module_of(kThrows, 2);
  CHECK(error_of([&] { rt.add_module(&throws); }) ==
        "module 'test.two' (linked in): registering family \"test.b.v1\" failed: boom");
  check_nothing_registered(rt);

  constexpr auto no_exec = module_of(kNoExecutor, 2);
  CHECK(error_of([&] { rt.add_module(&no_exec); }) ==
        "module 'test.two' (linked in): the registration function of family \"test.b.v1\" registered no executor for "
        "it; call registrar.set_executor(\"test.b.v1\", ...)");
  check_nothing_registered(rt);

  constexpr auto extra = module_of(kExtra, 2);
  CHECK(error_of([&] { rt.add_module(&extra); }) ==
        "module 'test.two' (linked in) registered family \"test.extra.v1\", which its descriptor does not list; list "
        "every family it provides");
  check_nothing_registered(rt);

  constexpr auto dup = module_of(kDuplicate, 2);
  CHECK(error_of([&] { rt.add_module(&dup); }) == "module 'test.two' (linked in) lists family \"test.a.v1\" twice");
  CHECK(error_of([&] { rt.add_module(nullptr); }) == "Runtime::add_module was given no descriptor (null)");
  // Before version 2 a descriptor had no build id field, so whatever the second field holds is not shown as one.
  constexpr EinstageModuleDescriptor old_abi = {1, kBuildId, "test.old", "0.1", kGood, 2};
  CHECK(error_of([&] { rt.add_module(&old_abi); }) ==
        "module 'test.old' (linked in) was built against einstage module ABI version 1, build unknown (no build id "
        "before ABI version 2), but this einstage is ABI version 7, build '" + std::string(kBuildId) + "'; rebuild "
        "the module against this einstage's installed headers (find_package(einstage) of this installation)");
  constexpr EinstageModuleDescriptor no_build = {kModuleAbiVersion, nullptr, "test.nobuild", "0.1", kGood, 2};
  CHECK(error_of([&] { rt.add_module(&no_build); }) ==
        "module 'test.nobuild' (linked in) was built against einstage module ABI version 7, build null, but this "
        "einstage is ABI version 7, build '" + std::string(kBuildId) + "'; rebuild the module against this "
        "einstage's installed headers (find_package(einstage) of this installation)");
  constexpr EinstageModuleDescriptor bad_name = {kModuleAbiVersion, kBuildId, "Test Module", "0.1", kGood,
                                                      2};
  CHECK(error_of([&] { rt.add_module(&bad_name); }) ==
        "module 'Test Module' (linked in): module name 'Test Module' is malformed; expected [a-z0-9_] segments joined "
        "by '.' (e.g. \"einstage.einsum\")");
  check_nothing_registered(rt);

  // A module providing b first, then one providing a and b: the second is refused whole (a stays unregistered).
  constexpr auto only_b = module_of(kOnlyB, 1, "test.first");
  const ModuleInfo& info = rt.add_module(&only_b);
  CHECK(info.name == "test.first");
  CHECK(info.origin == "linked");
  constexpr auto good = module_of(kGood, 2);
  CHECK(error_of([&] { rt.add_module(&good); }) ==
        "module 'test.two' (linked in) provides extension family \"test.b.v1\", which module 'test.first' (linked "
        "in) already provides; a family is registered once per Runtime");
  CHECK(rt.registry().families() == std::vector<std::string>{"test.b.v1"});
  CHECK(rt.modules().size() == 1);

  // On a fresh Runtime the good module registers both families, with the module's name filled in.
  Runtime fresh;
  fresh.add_module(&good);
  CHECK(fresh.registry().families() == std::vector<std::string>{"test.a.v1", "test.b.v1"});
  CHECK(fresh.registry().get("test.a.v1").module == "test.two");
}

TEST_CASE("modules: paths, module and family names are echoed escaped (newline, escape, non-UTF-8 bytes)") {
  Runtime rt;
  CHECK(error_of([&] { rt.load_module("/nonexistent/lib\nx\xff_module.so"); }) ==
        "cannot load module '/nonexistent/lib\\nx\\xff_module.so': no such file");
  constexpr EinstageModuleDescriptor bad_name = {kModuleAbiVersion, kBuildId, "evil\n\x1b[31m\xfe", "0.1", kGood, 2};
  CHECK(error_of([&] { rt.add_module(&bad_name); }) ==
        "module 'evil\\n\\x1b[31m\\xfe' (linked in): module name 'evil\\n\\x1b[31m\\xfe' is malformed; expected "
        "[a-z0-9_] segments joined by '.' (e.g. \"einstage.einsum\")");
  static constexpr EinstageFamilyEntry bad_family[] = {{"test.a.v1\r\n'x", &register_a}};
  constexpr auto bad = module_of(bad_family, 1);
  CHECK(error_of([&] { rt.add_module(&bad); }) ==
        "module 'test.two' (linked in): family 0 is named 'test.a.v1\\r\\n\\'x', which is not a family name; expected "
        "[a-z0-9_] segments joined by '.' ending in .v<N> (e.g. \"einstage.einsum.v1\")");
  check_nothing_registered(rt);
}

TEST_CASE("modules: the same library loaded twice into one Runtime is refused naming the family and its origin") {
  Runtime rt;
  std::string path = EINSTAGE_TROPICAL_MODULE_PATH;
  const ModuleInfo& info = rt.load_module(path);
  CHECK(info.name == "einstage.tropical");
  CHECK(info.version == "1.0.0");
  CHECK(info.families == std::vector<std::string>{"einstage.tropical.v1"});
  CHECK(error_of([&] { rt.load_module(path); }) ==
        "module 'einstage.tropical' ('" + path + "') provides extension family \"einstage.tropical.v1\", which module "
        "'einstage.tropical' ('" + path + "') already provides; a family is registered once per Runtime");
  CHECK(rt.modules().size() == 1);
  // Another Runtime may load the same library again.
  Runtime other;
  CHECK(other.load_module(path).families.size() == 1);
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A random weighted digraph on n nodes: d[i][i] = 0, an edge with probability ~1/2 (weight 1..9), else +inf.
Tensor random_graph(int64_t n, uint64_t seed) {
  SplitMix64 rng{seed};
  Tensor d = Tensor::empty(DType::f64, {n, n});
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i)
      d.at<double>({i, j}) = i == j ? 0.0 : (rng.next() % 2 ? static_cast<double>(1 + rng.next() % 9) : kInf);
  return d;
}

}  // namespace

TEST_CASE("modules: the tropical module loaded by path computes all-pairs shortest paths (min-plus squaring)") {
  Runtime rt;
  rt.load_module(EINSTAGE_TROPICAL_MODULE_PATH);
  // Three squarings cover paths of up to 8 edges: every shortest path in a graph of at most 9 nodes.
  Program p = parse_program(R"(program @apsp(%d: f64[n,n]) -> (f64[n,n]) {
  %0 = einstage.tropical.v1(%d, %d) {semiring = "min_plus", subscripts = "ij,jk->ik"} : f64[n,n]
  %1 = einstage.tropical.v1(%0, %0) {semiring = "min_plus", subscripts = "ij,jk->ik"} : f64[n,n]
  %2 = einstage.tropical.v1(%1, %1) {semiring = "min_plus", subscripts = "ij,jk->ik"} : f64[n,n]
  return %2
}
)", &rt.registry());
  Executable exe = rt.prepare(p);
  for (int64_t n : {9, 6}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      CAPTURE(n);
      CAPTURE(seed);
      Tensor d = random_graph(n, seed);
      // Floyd-Warshall oracle.
      std::vector<std::vector<double>> fw(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n)));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) fw[i][j] = d.at<double>({i, j});
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) fw[i][j] = std::min(fw[i][j], fw[i][k] + fw[k][j]);
      auto out = exe.run({d});
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) CHECK(out[0].at<double>({i, j}) == fw[i][j]);
    }
  }
  // Two shapes, each prepared once; the rest were hits.
  CHECK(rt.cache_stats().entries == 2);
  CHECK(rt.cache_stats().misses == 2);
  CHECK(rt.cache_stats().hits == 16);
}

TEST_CASE("modules: a Viterbi decoder mixes standard ops with the tropical module's max-plus steps") {
  Runtime rt;
  rt.load_module(EINSTAGE_TROPICAL_MODULE_PATH);
  // score_t[j] = max_i(score_{t-1}[i] + log_trans[i,j]) + log_emit_t[j]; best = max_j score_T[j].
  Program p = parse_program(R"(program @viterbi(%init: f64[s], %trans: f64[s,s], %e0: f64[s], %e1: f64[s], %e2: f64[s], %e3: f64[s]) -> (f64[]) {
  %0 = add(%init, %e0) : f64[s]
  %1 = einstage.tropical.v1(%0, %trans) {semiring = "max_plus", subscripts = "i,ij->j"} : f64[s]
  %2 = add(%1, %e1) : f64[s]
  %3 = einstage.tropical.v1(%2, %trans) {semiring = "max_plus", subscripts = "i,ij->j"} : f64[s]
  %4 = add(%3, %e2) : f64[s]
  %5 = einstage.tropical.v1(%4, %trans) {semiring = "max_plus", subscripts = "i,ij->j"} : f64[s]
  %6 = add(%5, %e3) : f64[s]
  %7 = einstage.tropical.v1(%6) {semiring = "max_plus", subscripts = "i->"} : f64[]
  return %7
}
)", &rt.registry());
  Executable exe = rt.prepare(p);
  const int64_t s = 3;
  std::vector<Tensor> in = {random_tensor(DType::f64, {s}, 1), random_tensor(DType::f64, {s, s}, 2)};
  for (uint64_t t = 0; t < 4; ++t) in.push_back(random_tensor(DType::f64, {s}, 10 + t));
  // Brute force over all s^4 state sequences.
  double best = -kInf;
  for (int64_t code = 0; code < s * s * s * s; ++code) {
    int64_t q[4] = {code % s, code / s % s, code / (s * s) % s, code / (s * s * s)};
    double score = in[0].at<double>({q[0]}) + in[2].at<double>({q[0]});
    for (int t = 1; t < 4; ++t) score += in[1].at<double>({q[t - 1], q[t]}) + in[2 + t].at<double>({q[t]});
    best = std::max(best, score);
  }
  auto out = exe.run(in);
  CHECK(out[0].at<double>({}) == doctest::Approx(best).epsilon(1e-14));
}

TEST_CASE("modules: the tropical type rule names the op, operand and label; its payload round-trips") {
  Runtime rt;
  rt.load_module(EINSTAGE_TROPICAL_MODULE_PATH);
  std::string msg = error_of([&] {
    parse_program(R"(program @bad(%a: f64[2,3], %b: f64[4,5]) -> (f64[2,5]) {
  %0 = einstage.tropical.v1(%a, %b) {semiring = "max_plus", subscripts = "ij,jk->ik"} : f64[2,5]
  return %0
}
)", &rt.registry());
  });
  CHECK(msg.find("'einstage.tropical.v1' at %0 in @bad: operand 1 axis 0 (label j): extent 3 does not match extent 4") !=
        std::string::npos);
  CHECK(error_of([&] {
          parse_program(R"(program @bad(%a: f64[2]) -> (f64[2]) {
  %0 = einstage.tropical.v1(%a) {semiring = "plus_times", subscripts = "i->i"} : f64[2]
  return %0
}
)", &rt.registry());
        }).find("'einstage.tropical.v1' attribute 'semiring': expected \"max_plus\" or \"min_plus\", got \"plus_times\"") !=
        std::string::npos);
  std::string text = R"(program @ok(%a: f64[n,m]) -> (f64[m]) {
  %0 = einstage.tropical.v1(%a) {semiring = "min_plus", subscripts = "ij->j"} : f64[m]
  return %0
}
)";
  CHECK(print_program(parse_program(text, &rt.registry())) == text);
}

namespace {

struct WrongShapeExecutor final : ExtensionExecutor {
  struct Op final : PreparedOp {
    Tensor run(std::span<const Tensor>, ExecutionContext&) const override { return Tensor::zeros(DType::f64, {7}); }
  };
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload&, std::span<const TensorType>,
                                            std::span<const TensorType>, ExecutionContext&) const override {
    return std::make_shared<Op>();
  }
};

struct RefusingExecutor final : ExtensionExecutor {
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload&, std::span<const TensorType> in,
                                            std::span<const TensorType>, ExecutionContext&) const override {
    fail(ErrorKind::unsupported, "extent {} is too large for this test family", in[0].dims[0].constant());
  }
};

void register_wrong(ModuleRegistrar& r) {
  r.semantics().register_family(identity_semantics("test.wrong.v1"));
  r.set_executor("test.wrong.v1", std::make_shared<WrongShapeExecutor>());
}
void register_refusing(ModuleRegistrar& r) {
  r.semantics().register_family(identity_semantics("test.refuse.v1"));
  r.set_executor("test.refuse.v1", std::make_shared<RefusingExecutor>());
}
constexpr EinstageFamilyEntry kBroken[] = {{"test.wrong.v1", &register_wrong}, {"test.refuse.v1", &register_refusing}};

}  // namespace

TEST_CASE("modules: an executor's wrong result and its prepare errors name the family and the instruction") {
  Runtime rt;
  constexpr auto broken = module_of(kBroken, 2, "test.broken");
  rt.add_module(&broken);
  Program p = parse_program("program @p(%x: f64[n]) -> (f64[n], f64[n]) {\n"
                            "  %0 = test.wrong.v1(%x) : f64[n]\n"
                            "  %1 = test.refuse.v1(%x) : f64[n]\n"
                            "  return %0, %1\n}\n",
                            &rt.registry());
  Executable exe = rt.prepare(p);
  Tensor x = Tensor::zeros(DType::f64, {3});
  CHECK(error_of([&] { exe.run({x}); }) ==
        "'test.wrong.v1' at %0 in @p: the module's executor returned f64[7] but the type rule says f64[n] = [3]");
  Program q = parse_program("program @q(%x: f64[n]) -> (f64[n]) {\n  %0 = test.refuse.v1(%x) : f64[n]\n  return %0\n}\n",
                            &rt.registry());
  Executable exq = rt.prepare(q);
  CHECK(error_of([&] { exq.run({x}); }) == "'test.refuse.v1' at %0 in @q: extent 3 is too large for this test family");
  CHECK(error_of([&] { exq.run({x}); }) == "'test.refuse.v1' at %0 in @q: extent 3 is too large for this test family");
  // A failed prepare is not cached: the second run tried again (1 miss for test.wrong.v1, 2 for test.refuse.v1).
  CHECK(rt.cache_stats().misses == 3);
  CHECK(rt.cache_stats().entries == 1);  // only test.wrong.v1's prepared op
}
