// Property test: seeded random programs, built by trying random ops with random attributes on random values (the
// builder rejects ill-typed attempts without side effects), must print, parse back to equal ops and types, and
// survive the JSON round trip; the verifier must accept them. The seed is printed on failure.
#include "ir/Extension.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "support/Random.h"
#include "test_program_family.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace einstage;

namespace {

// The suites' SplitMix64 (deterministic on every platform) with this file's draws.
struct Rng : einstage::test::SplitMix64 {
  bool coin() { return next() & 1; }
  double real() {
    switch (below(8)) {
      case 0: return std::numeric_limits<double>::quiet_NaN();
      case 1: return -std::numeric_limits<double>::infinity();
      case 2: return 1e-310;  // subnormal
      default: return (static_cast<double>(below(2000)) - 1000) / static_cast<double>(1 + below(97));
    }
  }
};

Dim random_dim(Rng& r) {
  switch (r.below(6)) {
    case 0: return Dim::symbol("n");
    case 1: return Dim::symbol("m");
    case 2: return Dim(1);
    default: return Dim(2 + r.below(2));
  }
}

Axes random_subset(Rng& r, int rank, bool shuffled) {
  Axes a;
  for (int i = 0; i < rank; ++i)
    if (r.coin()) a.push_back(i);
  if (shuffled)
    for (size_t i = a.size(); i > 1; --i) std::swap(a[i - 1], a[static_cast<size_t>(r.below(static_cast<int64_t>(i)))]);
  return a;
}

Tensor random_tensor(Rng& r) {
  DType d = kAllDTypes[r.below(5)];
  Shape shape;
  for (int64_t i = 0, rank = r.below(3); i < rank; ++i) shape.push_back(r.below(3));
  Tensor t = Tensor::zeros(d, shape);
  if (t.numel() == 0) return t;
  std::vector<int64_t> idx(shape.size(), 0);
  dispatch_dtype(d, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, int64_t>) p[i] = static_cast<int64_t>(r.next() >> 1) * (r.coin() ? 1 : -1);
      else if constexpr (std::is_floating_point_v<T>) p[i] = static_cast<T>(r.real());
      else p[i] = T(static_cast<typename T::value_type>(r.real()), static_cast<typename T::value_type>(r.real()));
    }
  });
  return t;
}

Op random_op(Rng& r, const std::vector<Value>& pool, std::vector<Value>& operands) {
  auto pick = [&] { return pool[static_cast<size_t>(r.below(static_cast<int64_t>(pool.size())))]; };
  Value x = pick();
  int rank = x.type.rank();
  operands = {x};
  switch (r.below(16)) {
    case 0: {
      Value y = pick();
      operands.push_back(y);
      DotGeneral op;
      std::vector<bool> used(static_cast<size_t>(y.type.rank()), false);
      for (int a = 0; a < rank; ++a)
        for (int b = 0; b < y.type.rank(); ++b)
          if (!used[b] && x.type.dims[a] == y.type.dims[b] && r.coin()) {
            used[b] = true;
            (r.coin() ? op.lhs_contracting : op.lhs_batch).push_back(a);
            (op.lhs_contracting.size() > op.rhs_contracting.size() ? op.rhs_contracting : op.rhs_batch).push_back(b);
            break;
          }
      return op;
    }
    case 1: {
      Axes perm(static_cast<size_t>(rank));
      for (int i = 0; i < rank; ++i) perm[i] = i;
      for (int i = rank; i > 1; --i) std::swap(perm[i - 1], perm[r.below(i)]);
      return Transpose{perm};
    }
    case 2: {
      Dim p = product(x.type.dims);
      return Reshape{r.coin() ? std::vector<Dim>{p} : std::vector<Dim>{Dim(1), p}};
    }
    case 3: {
      int extra = static_cast<int>(r.below(3));
      std::vector<Dim> shape;
      Axes dims;
      int k = 0;
      for (int i = 0; i < rank + extra; ++i) {
        bool take = k < rank && (rank + extra - i == rank - k || r.coin());
        if (take) {
          dims.push_back(i);
          shape.push_back(x.type.dims[k] == Dim(1) ? random_dim(r) : x.type.dims[k]);
          ++k;
        } else {
          shape.push_back(random_dim(r));
        }
      }
      return BroadcastInDim{dims, shape};
    }
    case 4: {
      Axes axes = random_subset(r, rank, false);  // complex operands are rejected by the max ops' type rules
      switch (r.below(3)) {
        case 0: return ReduceMax{axes};
        case 1: return FirstMaxMask{axes};
        default: return ReduceSum{axes};
      }
    }
    case 5: return ExtractDiag{r.below(std::max(rank, 1)), r.below(std::max(rank, 1))};
    case 6: return EmbedDiag{r.below(rank + 1), r.below(rank + 1)};
    case 7: case 8: {
      if (r.below(3) == 0) {  // select: a pair compared, a pair selected (x's shape, often x's type)
        operands.push_back(r.coin() ? x : pick());
        Value v = r.coin() ? x : pick();
        operands.push_back(v);
        operands.push_back(r.coin() ? v : pick());
        return Select{kAllComparisons[static_cast<size_t>(r.below(6))]};
      }
      operands.push_back(r.coin() ? x : pick());
      Op ops[] = {Add{}, Sub{}, Mul{}, Div{}};
      return ops[r.below(4)];
    }
    case 9: case 10: {
      Op ops[] = {Neg{}, Conj{}, Real{}, Imag{}, Exp{}, Log{}, Sqrt{}, Sin{}, Cos{}, Tanh{}, Sinh{}, Cosh{},
                  Abs{}, Sign{}, StopGradient{}, Pow{r.real()}};  // a non-finite exponent is rejected
      return ops[r.below(16)];
    }
    case 11:
      if (r.coin()) {  // a random window; one past the operand is rejected by the type rule
        Slice s;
        Pad p;
        for (int i = 0; i < rank; ++i) {
          s.start.push_back(r.below(2));
          s.stride.push_back(1 + r.below(2));
          s.size.push_back(Dim(r.below(3)));
          p.shape.push_back(r.coin() ? random_dim(r) : Dim(4 + r.below(3)));
        }
        p.start = s.start;
        p.stride = s.stride;
        if (r.coin()) return p;
        return s;
      }
      return Convert{kAllDTypes[r.below(5)]};
    case 12: operands.clear(); return Constant{random_tensor(r)};
    case 13: {
      double f = r.real();  // the test family's JSON holds plain numbers, so keep the factor finite
      return ExtensionOp{std::make_shared<testing::ScalePayload>(std::isfinite(f) ? f : 0.5)};
    }
    case 14: {
      operands.push_back(pick());
      return ExtensionOp{std::make_shared<testing::MatmulPayload>(r.coin() ? "j" : "a \"quoted\", label")};
    }
    default: {
      // a value of a fresh shape, so binary ops meet differing symbols and record constraints
      operands.clear();
      return Constant{random_tensor(r)};
    }
  }
}

}  // namespace

TEST_CASE("random programs round-trip through text and JSON") {
  ExtensionRegistry reg;
  testing::register_test_families(reg);
  size_t total_instructions = 0, total_constraints = 0;
  std::vector<size_t> per_kind(kOpKindCount, 0);
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    INFO("seed " << seed);
    Rng r{seed};
    Builder b("random", &reg);
    std::vector<Value> pool;
    for (int i = 0, n = 1 + static_cast<int>(r.below(3)); i < n; ++i) {
      TensorType t{r.coin() ? DType::f64 : DType::c128, {}};
      for (int64_t k = 0, rank = r.below(4); k < rank; ++k) t.dims.push_back(random_dim(r));
      pool.push_back(b.parameter(fmt::format("p{}", i), t));
    }
    int made = 0;
    for (int attempt = 0; attempt < 400 && made < 25; ++attempt) {
      std::vector<Value> operands;
      Op op = random_op(r, pool, operands);
      size_t before = b.program().instructions.size();
      try {
        pool.push_back(b.emit(op, operands));
        ++made;
      } catch (const Error&) {
        CHECK(b.program().instructions.size() == before);  // rejected attempts leave nothing behind
      }
    }
    CHECK(made >= 10);
    std::vector<Value> outs(pool.end() - std::min<size_t>(3, pool.size()), pool.end());
    Program p = b.finish(outs);
    total_instructions += p.instructions.size();
    total_constraints += p.constraints.size();
    for (const Instruction& inst : p.instructions) ++per_kind[static_cast<size_t>(kind(inst.op))];

    std::string text = print_program(p);
    CAPTURE(text);
    Program q = parse_program(text, &reg);
    CHECK(print_program(q) == text);
    REQUIRE(q.instructions.size() == p.instructions.size());
    for (size_t i = 0; i < p.instructions.size(); ++i) {
      CHECK(q.instructions[i].op == p.instructions[i].op);
      CHECK(hash_op(q.instructions[i].op) == hash_op(p.instructions[i].op));
      CHECK(q.instructions[i].result().type == p.instructions[i].result().type);
    }
    CHECK(q.constraints == p.constraints);
    Program j = program_from_json(program_to_json(p), &reg);
    CHECK(print_program(j) == text);
    for (size_t i = 0; i < p.instructions.size(); ++i) CHECK(j.instructions[i].op == p.instructions[i].op);
    verify(j, &reg);
  }
  // the generator must exercise what it claims to
  CHECK(total_instructions >= 60 * 10);
  CHECK(total_constraints > 0);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    CAPTURE(op_kind_name(static_cast<OpKind>(k)));
    CHECK(per_kind[k] > 0);
  }
}
