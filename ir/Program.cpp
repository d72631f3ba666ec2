#include "ir/Program.h"

#include "ir/Extension.h"
#include "ir/Quote.h"
#include "ir/Verifier.h"

#include <fmt/format.h>

namespace einstage {

static_assert(std::is_nothrow_move_constructible_v<Op> && std::is_nothrow_move_assignable_v<Op>);
Instruction::Instruction() = default;
Instruction::Instruction(Op op, std::vector<Value> operands, std::vector<Value> results)
    : op(std::move(op)), operands(std::move(operands)), results(std::move(results)) {}
Instruction::Instruction(const Instruction&) = default;
Instruction::Instruction(Instruction&&) noexcept = default;
Instruction& Instruction::operator=(const Instruction&) = default;
Instruction& Instruction::operator=(Instruction&&) noexcept = default;
Instruction::~Instruction() = default;

const Value& Instruction::result() const {
  EIN_ASSERT(results.size() == 1, "'{}' has {} results; result() is for single-result instructions", op_name(op),
             results.size());
  return results[0];
}

ValueId Program::next_value_id() const {
  ValueId next = 0;
  for (const Parameter& p : params) next = std::max(next, p.value.id + 1);
  for (const Instruction& i : instructions)
    for (const Value& r : i.results) next = std::max(next, r.id + 1);
  return next;
}

std::map<ValueId, std::string> value_names(const Program& program) {
  std::map<ValueId, std::string> names;
  for (const Parameter& p : program.params) names[p.value.id] = fmt::format("%{}", p.name);
  size_t k = 0;
  for (const Instruction& inst : program.instructions)
    for (const Value& r : inst.results) names[r.id] = fmt::format("%{}", k++);
  return names;
}

std::string instruction_name(const Program& program, size_t k) {
  size_t printed = 0;
  for (size_t i = 0; i < k && i < program.instructions.size(); ++i) printed += program.instructions[i].results.size();
  return fmt::format("%{}", printed);
}

std::vector<TensorType> infer_result_types(const Op& op, Types operands, TypeContext& ctx,
                                           const ExtensionRegistry* registry) {
  if (const auto* ext = std::get_if<ExtensionOp>(&op)) {
    const ExtensionSemantics* sem = registry ? registry->find(ext->family()) : nullptr;
    if (!sem) fail_unknown_family(ext->family(), "");
    std::vector<TensorType> types = sem->infer_types ? sem->infer_types(*ext->payload, operands, ctx)
                                                     : std::vector<TensorType>{sem->infer_type(*ext->payload, operands, ctx)};
    if (types.empty())
      ctx.error(ErrorKind::invalid_argument, "the type rule of module '{}' gives no result; an instruction has at "
                "least one", sem->module);
    if (sem->verify) sem->verify(*ext->payload, operands, ctx);
    return types;
  }
  return {infer_std_op(op, operands, ctx)};
}

void merge_listed_constraints(Program& program, std::vector<ShapeConstraint> listed) {
  // Union-find over the printed form of dims: a derived lhs == rhs is implied when both land in one class.
  std::map<std::string, std::string> parent;
  auto find = [&](std::string d) {
    while (parent.count(d) && parent[d] != d) d = parent[d];
    return d;
  };
  auto join = [&](const ShapeConstraint& c) {
    std::string a = find(c.lhs.to_string()), b = find(c.rhs.to_string());
    parent[a] = a;
    parent[b] = a;
  };
  for (const ShapeConstraint& c : listed) join(c);
  std::vector<ShapeConstraint> derived = std::move(program.constraints);
  program.constraints = std::move(listed);
  for (ShapeConstraint& c : derived) {
    if (find(c.lhs.to_string()) == find(c.rhs.to_string())) continue;
    join(c);
    program.constraints.push_back(std::move(c));
  }
}

void check_constraints(const Program& program, const DimBindings& bindings) {
  // Runs before every evaluation: the printed names are made only for a message (value_names builds a map of all).
  auto at = [&](const ShapeConstraint& c) -> std::string {
    if (c.at < 0) return "";
    auto names = value_names(program);
    return fmt::format(" at {}", names.count(c.at) ? names[c.at] : "?");
  };
  for (const ShapeConstraint& c : program.constraints) {
    auto l = c.lhs.evaluate(bindings), r = c.rhs.evaluate(bindings);
    for (const Dim* d : {&c.lhs, &c.rhs})
      for (const std::string& s : d->symbols())
        if (!bindings.count(s))
          fail(ErrorKind::invalid_argument, "@{}: symbolic dim '{}' has no value; bind it from an input shape "
               "(needed by constraint {} == {}{})", program.name, s, c.lhs.to_string(), c.rhs.to_string(), at(c));
    if (*l != *r)
      fail(ErrorKind::shape, "@{}: shape constraint {} == {}{} does not hold: {} = {} but {} = {} ({})", program.name,
           c.lhs.to_string(), c.rhs.to_string(), at(c), c.lhs.to_string(), *l, c.rhs.to_string(), *r, c.what);
  }
}

DimBindings bind_parameters(const Program& p, std::span<const Shape> shapes) {
  if (shapes.size() != p.params.size())
    fail(ErrorKind::invalid_argument, "@{}: {} input shapes given but the program has {} parameters", p.name,
         shapes.size(), p.params.size());
  DimBindings bound;
  // symbol -> (input, axis) it was bound from, for messages (named only when one is made: this runs every evaluation)
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> bound_from;
  auto where = [&](size_t i, size_t a) { return fmt::format("input {} (%{}) axis {}", i, p.params[i].name, a); };
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TensorType& t = p.params[i].value.type;
    if (static_cast<int>(shapes[i].size()) != t.rank())
      fail(ErrorKind::shape, "@{}: input {} (%{}) has shape {} but the parameter has type {}", p.name, i,
           p.params[i].name, shape_to_string(shapes[i]), t.to_string());
    for (size_t a = 0; a < shapes[i].size(); ++a) {
      const Dim& d = t.dims[a];
      int64_t e = shapes[i][a];
      if (d.is_constant() && d.constant() != e)
        fail(ErrorKind::shape, "@{}: {} has extent {} but the parameter's type {} requires {}", p.name, where(i, a),
             e, t.to_string(), d.constant());
      if (!d.is_symbol()) continue;
      const std::string& s = d.symbols()[0];
      if (auto it = bound.find(s); it != bound.end()) {
        if (it->second != e)
          fail(ErrorKind::shape, "@{}: symbolic dim '{}' is {} from {} but {} from {}", p.name, s, it->second,
               where(bound_from[s].first, bound_from[s].second), e, where(i, a));
      } else {
        bound.emplace(s, e);
        bound_from.emplace(s, std::pair{i, a});
      }
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TensorType& t = p.params[i].value.type;
    for (size_t a = 0; a < shapes[i].size(); ++a) {
      const Dim& d = t.dims[a];
      if (d.is_constant() || d.is_symbol()) continue;
      auto v = d.evaluate(bound);
      if (!v)
        fail(ErrorKind::shape, "@{}: {} has extent {} = {}, whose symbols no parameter gives as a plain dim", p.name,
             where(i, a), d.to_string(), shapes[i][a]);
      if (*v != shapes[i][a])
        fail(ErrorKind::shape, "@{}: {} has extent {} but the parameter's type {} requires {} = {}", p.name,
             where(i, a), shapes[i][a], t.to_string(), d.to_string(), *v);
    }
  }
  return bound;
}

Shape evaluate_shape(const TensorType& type, const DimBindings& bindings) {
  Shape shape;
  for (const Dim& d : type.dims) {
    auto v = d.evaluate(bindings);
    if (!v)
      for (const std::string& s : d.symbols())
        if (!bindings.count(s))
          fail(ErrorKind::invalid_argument, "symbolic dim '{}' of {} has no value; bind it from an input shape", s,
               type.to_string());
    shape.push_back(*v);
  }
  return shape;
}

// ---- Builder ----

Builder::Builder(std::string program_name, const ExtensionRegistry* registry) : registry_(registry) {
  if (!is_identifier(program_name))
    fail(ErrorKind::invalid_argument, "program name '{}' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)",
         shown_arg(program_name));
  program_.name = std::move(program_name);
}

Builder::Builder(Program program, const ExtensionRegistry* registry) : program_(std::move(program)), registry_(registry) {
  next_id_ = program_.next_value_id();
  defs_.resize(static_cast<size_t>(next_id_));
  for (size_t k = 0; k < program_.params.size(); ++k)
    defs_[static_cast<size_t>(program_.params[k].value.id)] = {-1 - static_cast<int32_t>(k), 0};
  for (size_t i = 0; i < program_.instructions.size(); ++i) {
    const std::vector<Value>& rs = program_.instructions[i].results;
    for (size_t r = 0; r < rs.size(); ++r)
      defs_[static_cast<size_t>(rs[r].id)] = {static_cast<int32_t>(i), static_cast<int32_t>(r)};
    printed_results_ += rs.size();
  }
}

Value Builder::parameter(std::string_view name, TensorType type) {
  if (!is_identifier(name))
    fail(ErrorKind::invalid_argument, "@{}: parameter name '{}' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)",
         program_.name, shown_arg(name));
  for (const Parameter& p : program_.params)
    if (p.name == name) fail(ErrorKind::invalid_argument, "@{}: parameter '%{}' is defined twice", program_.name, name);
  Value v{next_id_++, std::move(type)};
  defs_.push_back({-1 - static_cast<int32_t>(program_.params.size()), 0});
  program_.params.push_back({std::string(name), v});
  return v;
}

const TensorType& Builder::defined_type(Def d) const {
  return d.inst >= 0 ? program_.instructions[static_cast<size_t>(d.inst)].results[static_cast<size_t>(d.result)].type
                     : program_.params[static_cast<size_t>(-1 - d.inst)].value.type;
}

void Builder::check_operand(const Value& v, size_t index, std::string_view op) const {
  // The instruction's and the value's printed names are made only for a message.
  auto where = [&] { return fmt::format("%{} in @{}", printed_results_, program_.name); };
  if (v.id < 0 || v.id >= next_id_ || defs_[static_cast<size_t>(v.id)].inst == Def::kUndefined)
    fail(ErrorKind::invalid_argument, "'{}' at {}: operand {} (value id {}) is not a value of this program; use "
         "values returned by this builder", op, where(), index, v.id);
  const Def d = defs_[static_cast<size_t>(v.id)];
  const TensorType& type = defined_type(d);
  if (type != v.type) {
    std::string name;
    if (d.inst < 0) {
      name = "%" + program_.params[static_cast<size_t>(-1 - d.inst)].name;
    } else {
      size_t printed = static_cast<size_t>(d.result);
      for (size_t i = 0; i < static_cast<size_t>(d.inst); ++i) printed += program_.instructions[i].results.size();
      name = fmt::format("%{}", printed);
    }
    fail(ErrorKind::invalid_argument, "'{}' at {}: operand {} ({}) is given with type {} but was defined with type {}",
         op, where(), index, name, v.type.to_string(), type.to_string());
  }
}

std::vector<Value> Builder::append(Op op, std::vector<Value> operands, bool single) {
  std::string_view name = op_name(op);
  for (size_t i = 0; i < operands.size(); ++i) check_operand(operands[i], i, name);
  std::vector<TensorType> types;
  types.reserve(operands.size());
  for (const Value& v : operands) types.push_back(v.type);
  std::vector<DimEquality> equalities;
  TypeContext ctx(name, printed_results_, program_.name, &equalities);
  std::vector<TensorType> result_types = infer_result_types(op, types, ctx, registry_);
  if (single && result_types.size() != 1)
    ctx.error(ErrorKind::invalid_argument, "has {} results but emit returns one value; use emit_results (or "
              "extension_results) to receive all of them", result_types.size());
  // Nothing is appended before the type rule has succeeded.
  const auto inst = static_cast<int32_t>(program_.instructions.size());
  std::vector<Value> results;
  results.reserve(result_types.size());
  for (TensorType& t : result_types) {
    defs_.push_back({inst, static_cast<int32_t>(results.size())});
    results.push_back(Value{next_id_++, std::move(t)});
  }
  printed_results_ += results.size();
  for (DimEquality& e : equalities)
    program_.constraints.push_back({std::move(e.lhs), std::move(e.rhs), results[0].id, std::move(e.what)});
  program_.instructions.push_back({std::move(op), std::move(operands), results});
  return results;
}

Value Builder::emit(Op op, std::vector<Value> operands) { return append(std::move(op), std::move(operands), true)[0]; }

std::vector<Value> Builder::emit_results(Op op, std::vector<Value> operands) {
  return append(std::move(op), std::move(operands), false);
}

Value Builder::dot_general(const Value& lhs, const Value& rhs, Axes lhs_contracting, Axes rhs_contracting,
                           Axes lhs_batch, Axes rhs_batch) {
  return emit(DotGeneral{std::move(lhs_batch), std::move(lhs_contracting), std::move(rhs_batch),
                         std::move(rhs_contracting)},
              {lhs, rhs});
}
Value Builder::transpose(const Value& x, Axes perm) { return emit(Transpose{std::move(perm)}, {x}); }
Value Builder::reshape(const Value& x, std::vector<Dim> shape) { return emit(Reshape{std::move(shape)}, {x}); }
Value Builder::broadcast_in_dim(const Value& x, Axes dims, std::vector<Dim> shape) {
  return emit(BroadcastInDim{std::move(dims), std::move(shape)}, {x});
}
Value Builder::reduce_sum(const Value& x, Axes axes) { return emit(ReduceSum{std::move(axes)}, {x}); }
Value Builder::reduce_max(const Value& x, Axes axes) { return emit(ReduceMax{std::move(axes)}, {x}); }
Value Builder::first_max_mask(const Value& x, Axes axes) { return emit(FirstMaxMask{std::move(axes)}, {x}); }
Value Builder::extract_diag(const Value& x, int64_t a, int64_t b) { return emit(ExtractDiag{a, b}, {x}); }
Value Builder::embed_diag(const Value& x, int64_t a, int64_t b) { return emit(EmbedDiag{a, b}, {x}); }
#define EIN_BUILDER_BINARY_(Struct, name) \
  Value Builder::name(const Value& a, const Value& b) { return emit(Struct{}, {a, b}); }
EIN_STD_BINARY_OPS(EIN_BUILDER_BINARY_)
#undef EIN_BUILDER_BINARY_
Value Builder::select(Comparison cmp, const Value& a, const Value& b, const Value& x, const Value& y) {
  return emit(Select{cmp}, {a, b, x, y});
}
#define EIN_BUILDER_UNARY_(Struct, name) \
  Value Builder::name(const Value& x) { return emit(Struct{}, {x}); }
EIN_STD_UNARY_OPS(EIN_BUILDER_UNARY_)
#undef EIN_BUILDER_UNARY_
Value Builder::slice(const Value& x, Axes start, std::vector<Dim> size, Axes stride) {
  return emit(Slice{std::move(size), std::move(start), std::move(stride)}, {x});
}
Value Builder::pad(const Value& x, Axes start, std::vector<Dim> shape, Axes stride) {
  return emit(Pad{std::move(shape), std::move(start), std::move(stride)}, {x});
}
Value Builder::pow(const Value& x, double exponent) { return emit(Pow{exponent}, {x}); }
Value Builder::convert(const Value& x, DType dtype) { return emit(Convert{dtype}, {x}); }
Value Builder::constant(Tensor value) { return emit(Constant{std::move(value)}, {}); }

Value Builder::full(const TensorType& type, double value) {
  Tensor scalar = dispatch_dtype(type.dtype, [&](auto zero) {
    using T = decltype(zero);
    return Tensor::scalar<T>(static_cast<T>(value));
  });
  Value s = constant(std::move(scalar));
  if (type.rank() == 0) return s;
  return broadcast_in_dim(s, {}, type.dims);
}

Value Builder::extension(std::shared_ptr<const ExtensionPayload> payload, std::vector<Value> operands) {
  EIN_ASSERT(payload != nullptr, "extension op without payload");
  return emit(ExtensionOp{std::move(payload)}, std::move(operands));
}

std::vector<Value> Builder::extension_results(std::shared_ptr<const ExtensionPayload> payload,
                                              std::vector<Value> operands) {
  EIN_ASSERT(payload != nullptr, "extension op without payload");
  return emit_results(ExtensionOp{std::move(payload)}, std::move(operands));
}

void Builder::require_equal(const Dim& lhs, const Dim& rhs, std::string what) {
  if (lhs == rhs) return;
  if (lhs.is_constant() && rhs.is_constant())
    fail(ErrorKind::shape, "@{}: {}: extent {} does not match extent {}", program_.name, what, lhs.to_string(),
         rhs.to_string());
  program_.constraints.push_back({lhs, rhs, -1, std::move(what)});
}

Program Builder::finish(std::vector<Value> outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) check_operand(outputs[i], i, "return");
  program_.outputs = std::move(outputs);
  verify(program_, registry_);
  Program done = std::move(program_);
  program_ = Program{};
  program_.name = done.name;
  next_id_ = 0;
  printed_results_ = 0;
  defs_.clear();
  return done;
}

}  // namespace einstage
