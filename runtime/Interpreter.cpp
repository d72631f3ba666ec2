#include "runtime/Interpreter.h"

#include "ir/ValueMap.h"
#include "runtime/StdKernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <tuple>

namespace einstage {

namespace {

// A set of storage-block addresses (open addressing, a power-of-two table), for the outputs' check against the
// inputs' and the constants' blocks: a gradient program has dozens of inputs and outputs, and sorting and binary
// searching them (one misprediction per probe) was most of the interpreter's own time in the 8x8 grid's
// value-and-gradient call.
class BlockSet {
 public:
  void reset(size_t count) {
    size_t size = 16;
    while (size < 2 * count) size *= 2;
    table_.assign(size, nullptr);
  }
  void insert(const std::byte* block) {
    for (size_t i = index(block);; i = (i + 1) & (table_.size() - 1)) {
      if (table_[i] == block) return;
      if (!table_[i]) {
        table_[i] = block;
        return;
      }
    }
  }
  bool contains(const std::byte* block) const {
    for (size_t i = index(block);; i = (i + 1) & (table_.size() - 1)) {
      if (table_[i] == block) return true;
      if (!table_[i]) return false;
    }
  }

 private:
  size_t index(const std::byte* block) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(block) >> 6) * 0x9e3779b97f4a7c15ull >> 32) &
           (table_.size() - 1);
  }
  std::vector<const std::byte*> table_;
};

// The non-empty outputs so far as (block, first byte, last byte), sorted.
using Range = std::tuple<const std::byte*, uintptr_t, uintptr_t>;

}  // namespace

// What one execute() call works in: kept in the Interpreter's BufferPool between calls, so a call allocates none of
// these (a gradient program's value table alone is a few KiB, and each such allocation also made glibc consolidate
// its small free chunks).
struct Interpreter::CallBuffers {
  std::vector<Tensor> values;
  std::vector<const Tensor*> params;  // per slot: the input a parameter's slot reads (null: not a parameter, or released)
  // A step's operands. Between steps and calls they are undefined but keep their shape and stride vectors, so
  // assigning an input or a value to one copies into those vectors instead of allocating two (an einsum of 64
  // operands made 128 allocations per call).
  std::vector<Tensor> operands;
  BlockSet foreign;
  std::vector<Range> given;
};


Interpreter::BufferPool::BufferPool() = default;
Interpreter::BufferPool::BufferPool(const BufferPool&) {}
Interpreter::BufferPool& Interpreter::BufferPool::operator=(const BufferPool&) { return *this; }
Interpreter::BufferPool::~BufferPool() = default;

std::unique_ptr<Interpreter::CallBuffers> Interpreter::BufferPool::take() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      std::unique_ptr<CallBuffers> buffers = std::move(free_.back());
      free_.pop_back();
      return buffers;
    }
  }
  return std::make_unique<CallBuffers>();
}

void Interpreter::BufferPool::give_back(std::unique_ptr<CallBuffers> buffers) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(buffers));
}

namespace {

const Tensor& undefined_tensor() {
  static const Tensor undefined;
  return undefined;
}

// Drops t's storage and shape but keeps its vectors' capacity (a copy of an empty vector reuses the buffer).
void reset_keeping_capacity(Tensor& t) { t = undefined_tensor(); }

// One call's buffers, taken from the pool and given back cleared (no tensor outlives its call).
class BuffersLease {
 public:
  explicit BuffersLease(Interpreter::BufferPool& pool) : pool_(pool), buffers_(pool.take()) {}
  ~BuffersLease() {
    buffers_->values.clear();
    for (Tensor& t : buffers_->operands) reset_keeping_capacity(t);
    buffers_->given.clear();
    pool_.give_back(std::move(buffers_));
  }
  BuffersLease(const BuffersLease&) = delete;
  BuffersLease& operator=(const BuffersLease&) = delete;
  Interpreter::CallBuffers& operator*() const { return *buffers_; }

 private:
  Interpreter::BufferPool& pool_;
  std::unique_ptr<Interpreter::CallBuffers> buffers_;
};

}  // namespace

Interpreter::Interpreter(const Program& program) : program_(&program) {
  ValueMap<int> slot(program);
  // Slots are numbered in definition order, parameters first, so a slot's printed name is its parameter's or the
  // dense result number value_names gives (without building that map of every value).
  size_t printed = 0;
  auto define = [&](ValueId id, const std::string* param) {
    EIN_ASSERT(!slot.contains(id), "value %{} defined twice", id);
    int s = slot_count_++;
    slot.insert_or_assign(id, s);
    names_.push_back(param ? "%" + *param : fmt::format("%{}", printed++));
    return s;
  };
  auto lookup = [&](ValueId id) {
    const int* s = slot.find(id);
    EIN_ASSERT(s != nullptr, "value %{} used before its definition", id);
    return *s;
  };
  for (const Parameter& p : program.params) param_slots_.push_back(define(p.value.id, &p.name));
  for (const Instruction& inst : program.instructions) {
    Step step;
    for (const Value& v : inst.operands) step.operands.push_back(lookup(v.id));
    for (const Value& r : inst.results) step.results.push_back(define(r.id, nullptr));
    steps_.push_back(std::move(step));
  }
  for (const Value& v : program.outputs) output_slots_.push_back(lookup(v.id));
  for (const Step& step : steps_) where_.push_back(fmt::format("{} in @{}", names_[static_cast<size_t>(step.results[0])], program.name));

  // Last use of each slot: the last step reading it; outputs live to the end; a result nobody reads dies at once.
  std::vector<int> last(static_cast<size_t>(slot_count_), -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].operands) last[static_cast<size_t>(s)] = static_cast<int>(i);
    for (int s : steps_[i].results) last[static_cast<size_t>(s)] = std::max(last[static_cast<size_t>(s)], static_cast<int>(i));
  }
  std::vector<bool> is_output(static_cast<size_t>(slot_count_), false);
  for (int s : output_slots_) is_output[static_cast<size_t>(s)] = true;
  for (int s = 0; s < slot_count_; ++s) {
    if (is_output[static_cast<size_t>(s)]) continue;
    if (last[static_cast<size_t>(s)] >= 0) steps_[static_cast<size_t>(last[static_cast<size_t>(s)])].release.push_back(s);
    else release_unused_params_.push_back(s);
  }
  // Per call, a Tensor copy costs two vector allocations: an operand read once by the step that releases it is moved
  // into the call, an output named once is moved out, and results of constant shape are not re-evaluated (an einsum
  // vjp has one operand and one result per operand).
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& step = steps_[i];
    for (int s : step.operands) {
      const bool released = std::find(step.release.begin(), step.release.end(), s) != step.release.end();
      step.take.push_back(released && std::count(step.operands.begin(), step.operands.end(), s) == 1);
    }
    step.constant_shapes = true;
    for (const Value& r : program.instructions[i].results) {
      step.constant_shapes = step.constant_shapes && r.type.constant_shape();
      if (!step.constant_shapes) break;
      Shape& shape = step.shapes.emplace_back();
      for (const Dim& d : r.type.dims) shape.push_back(d.constant());
    }
    if (!step.constant_shapes) step.shapes.clear();
  }
  for (int s : output_slots_)
    output_once_.push_back(std::count(output_slots_.begin(), output_slots_.end(), s) == 1);
  for (const Instruction& inst : program.instructions)
    if (const auto* c = std::get_if<Constant>(&inst.op); c && c->value.defined())
      constant_blocks_.push_back(c->value.storage_block());
  std::sort(constant_blocks_.begin(), constant_blocks_.end());
  constant_params_ = true;
  for (const Parameter& param : program.params) {
    constant_params_ = constant_params_ && param.value.type.constant_shape();
    if (!constant_params_) break;
    Shape& shape = param_shapes_.emplace_back();
    for (const Dim& d : param.value.type.dims) shape.push_back(d.constant());
  }
  if (!constant_params_) param_shapes_.clear();
}

DimBindings Interpreter::bind(std::span<const Tensor> inputs) const {
  const Program& p = *program_;
  if (constant_params_ && inputs.size() == p.params.size()) {  // no symbol to bind: the shapes only compare
    bool match = true;
    for (size_t i = 0; match && i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      match = t.defined() && t.dtype() == p.params[i].value.type.dtype && t.shape() == param_shapes_[i];
    }
    if (match) {
      DimBindings none;
      check_constraints(p, none);
      return none;
    }
  }
  if (inputs.size() != p.params.size()) {
    std::vector<std::string> list;
    for (const Parameter& param : p.params) list.push_back(fmt::format("%{}: {}", param.name, param.value.type.to_string()));
    fail(ErrorKind::invalid_argument, "@{} takes {} input{} ({}) but {} {} given", p.name, p.params.size(),
         p.params.size() == 1 ? "" : "s", fmt::join(list, ", "), inputs.size(), inputs.size() == 1 ? "was" : "were");
  }
  // Programs with symbolic dims (or inputs that do not match) only: constant shapes were compared above.
  std::vector<Shape> shapes(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const TensorType& type = p.params[i].value.type;
    if (!t.defined())
      fail(ErrorKind::invalid_argument, "@{}: input {} (%{}) is an undefined tensor; expected {}", p.name, i,
           p.params[i].name, type.to_string());
    if (t.dtype() != type.dtype)
      fail(ErrorKind::dtype, "@{}: input {} (%{}) has dtype {} but the parameter is {}; convert it "
           "(Tensor::astype({}))", p.name, i, p.params[i].name, name(t.dtype()), type.to_string(), name(type.dtype));
    shapes[i] = t.shape();
  }
  // The shape rules (ranks, constant extents, one value per symbol, products) are ir's, shared with every caller.
  DimBindings bindings = bind_parameters(p, shapes);
  check_constraints(p, bindings);
  return bindings;
}

std::vector<Tensor> Interpreter::run(std::span<const Tensor> inputs, const EvalOptions& options, EvalStats* stats) const {
  DimBindings bindings = bind(inputs);
  return execute(inputs, bindings, options, stats);
}

std::vector<Tensor> Interpreter::execute(std::span<const Tensor> inputs, const DimBindings& bindings,
                                         const EvalOptions& options, EvalStats* stats) const {
  const Program& p = *program_;
  EIN_ASSERT(inputs.size() == param_slots_.size(), "execute: bind() was not called with these inputs");
  BuffersLease lease(buffers_);
  CallBuffers& buffers = *lease;
  std::vector<Tensor>& values = buffers.values;
  values.resize(static_cast<size_t>(slot_count_));
  // Parameters are read where the caller holds them (`params`), never copied into the table.
  std::vector<const Tensor*>& params = buffers.params;
  params.assign(static_cast<size_t>(slot_count_), nullptr);
  int64_t live = 0, peak = 0;
  auto set = [&](int s, Tensor t) {
    values[static_cast<size_t>(s)] = std::move(t);
    peak = std::max(peak, ++live);
  };
  auto release = [&](int s) {
    if (params[static_cast<size_t>(s)]) params[static_cast<size_t>(s)] = nullptr;
    else values[static_cast<size_t>(s)] = Tensor();
    --live;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    params[static_cast<size_t>(param_slots_[i])] = &inputs[i];
    peak = std::max(peak, ++live);
  }
  for (int s : release_unused_params_) release(s);

  std::vector<Tensor>& operands = buffers.operands;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Instruction& inst = p.instructions[i];
    const Step& step = steps_[i];
    const size_t count = step.operands.size();
    if (operands.size() < count) operands.resize(count);
    for (size_t o = 0; o < count; ++o) {
      const size_t s = static_cast<size_t>(step.operands[o]);
      if (const Tensor* param = params[s]) operands[o] = *param;
      else if (step.take[o]) operands[o] = std::move(values[s]);  // released after this step anyway
      else operands[o] = values[s];
    }
    const std::span<const Tensor> args(operands.data(), count);
    const std::string& where = where_[i];
    std::vector<Shape> evaluated;  // per result, under the bindings (when not constant)
    const std::vector<Shape>& shapes = step.constant_shapes ? step.shapes : evaluated;
    for (const Value& r : step.constant_shapes ? std::span<const Value>() : std::span<const Value>(inst.results)) {
      Shape& shape = evaluated.emplace_back();
      shape.reserve(r.type.dims.size());
      for (const Dim& d : r.type.dims) {
        auto e = d.is_constant() ? std::optional<int64_t>(d.constant()) : d.evaluate(bindings);
        if (!e) {
          try {
            evaluate_shape(r.type, bindings);  // throws, naming the unbound symbol
          } catch (const Error& err) {
            fail(err.kind(), "'{}' at {}: {}", op_name(inst.op), where, err.what());
          }
        }
        shape.push_back(*e);
      }
    }
    std::vector<Tensor> results;
    if (kind(inst.op) == OpKind::extension) {
      if (!options.extension)
        fail(ErrorKind::not_found, "'{}' at {}: no executor for extension family \"{}\"; run the program with a "
             "Runtime that has loaded the module providing it, or lower it first (lower_to_standard_ops)",
             op_name(inst.op), where, op_name(inst.op));
      results = options.extension(inst, where, args, bindings);
      if (results.size() != inst.results.size())
        fail(ErrorKind::runtime, "'{}' at {}: the module's executor returned {} tensor{} but the instruction has {} "
             "result{}", op_name(inst.op), where, results.size(), results.size() == 1 ? "" : "s",
             inst.results.size(), inst.results.size() == 1 ? "" : "s");
      for (size_t r = 0; r < results.size(); ++r) {
        const Tensor& result = results[r];
        const TensorType& type = inst.results[r].type;
        if (!result.defined() || result.dtype() != type.dtype || result.shape() != shapes[r])
          fail(ErrorKind::runtime, "'{}' at {}: the module's executor returned {}{}{} but the type rule says {}{}",
               op_name(inst.op), where, result.defined() ? std::string(name(result.dtype())) : "an undefined tensor",
               result.defined() ? shape_to_string(result.shape()) : "",
               results.size() == 1 ? "" : fmt::format(" for result {} ({})", r, names_[static_cast<size_t>(step.results[r])]),
               type.to_string(), type.constant_shape() ? "" : " = " + shape_to_string(shapes[r]));
      }
    } else {
      Tensor result = run_std_op(inst.op, args, shapes[0], options.pool);
      EIN_ASSERT(result.dtype() == inst.result().type.dtype && result.shape() == shapes[0],
                 "'{}' at {}: kernel result {}{} differs from the type rule's {}", op_name(inst.op), where,
                 name(result.dtype()), shape_to_string(result.shape()), shape_to_string(shapes[0]));
      results.push_back(std::move(result));
    }
    for (size_t o = 0; o < count; ++o) reset_keeping_capacity(operands[o]);  // the moved operands die here
    for (size_t r = 0; r < results.size(); ++r) set(step.results[r], std::move(results[r]));
    for (int s : step.release) release(s);
  }
  if (stats) {
    stats->instructions = static_cast<int64_t>(steps_.size());
    stats->peak_live_values = peak;
  }

  // Outputs are owned and distinct: a value that is (a view of) an input or a constant, or that overlaps an earlier
  // output, is copied, so callers may write into any output (disjoint slices of one block, say the cotangents a
  // packed vjp result holds, are handed out as they are).
  // Storage blocks and byte ranges are looked up in sorted lists, not compared pair by pair: a gradient program has
  // dozens of inputs and outputs (its cotangents may be disjoint tensors in one block), and the pairwise checks were
  // ~7% of the 8x8 grid's value-and-gradient call.
  BlockSet& foreign = buffers.foreign;  // the inputs' and the constants' blocks
  foreign.reset(inputs.size() + constant_blocks_.size());
  for (const std::byte* block : constant_blocks_) foreign.insert(block);
  for (const Tensor& in : inputs)
    if (in.defined()) foreign.insert(in.storage_block());
  // The non-empty outputs so far, sorted; those in one block never overlap (an output that would is a copy in a
  // block of its own), so only the one starting last before v ends can meet v. Outputs carved from one block come
  // in address order as a rule: one past the last inserted is tried before a binary search.
  std::vector<Range>& given = buffers.given;
  size_t last_given = 0;  // where the previous insertion went
  std::vector<Tensor> outputs;
  outputs.reserve(output_slots_.size());
  for (size_t o = 0; o < output_slots_.size(); ++o) {
    const Tensor* param = params[static_cast<size_t>(output_slots_[o])];
    Tensor& v = values[static_cast<size_t>(output_slots_[o])];
    const Tensor& value = param ? *param : v;  // an input returned as it is: copied (its block is foreign)
    const std::byte* block = value.storage_block();
    bool borrowed = param || (block && foreign.contains(block));
    std::pair<uintptr_t, uintptr_t> range{0, 0};
    const bool ranged = block && !borrowed && v.numel() > 0;
    size_t at = 0;  // where v's range goes in `given` when it is kept
    if (ranged) {
      range = v.byte_range();
      const Range key{block, range.second, 0};
      const bool after_last = !given.empty() && given[last_given] < key &&
                              (last_given + 1 == given.size() || !(given[last_given + 1] < key));
      const auto after = after_last ? given.begin() + static_cast<std::ptrdiff_t>(last_given + 1)
                                    : std::lower_bound(given.begin(), given.end(), key);
      borrowed = after != given.begin() && std::get<0>(after[-1]) == block && std::get<2>(after[-1]) > range.first;
      at = static_cast<size_t>(after - given.begin());
    }
    if (borrowed) outputs.push_back(value.clone());
    else if (output_once_[o] && v.is_col_major()) outputs.push_back(std::move(v));
    else outputs.push_back(v.contiguous());
    const Tensor& out = outputs.back();
    if (ranged && !borrowed && out.storage_block() == block) {  // v itself: its range goes where the search found
      given.insert(given.begin() + static_cast<std::ptrdiff_t>(at), Range{block, range.first, range.second});
      last_given = at;
    } else if (out.defined() && out.numel() > 0) {  // a copy, in a block of its own
      const auto [first, last] = out.byte_range();
      const Range entry{out.storage_block(), first, last};
      at = static_cast<size_t>(std::upper_bound(given.begin(), given.end(), entry) - given.begin());
      given.insert(given.begin() + static_cast<std::ptrdiff_t>(at), entry);
      last_given = at;
    }
  }
  return outputs;
}

std::vector<Tensor> evaluate(const Program& program, std::span<const Tensor> inputs, const EvalOptions& options) {
  return Interpreter(program).run(inputs, options);
}

}  // namespace einstage
