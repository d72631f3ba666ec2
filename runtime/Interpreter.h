// The reference interpreter: runs a Program on concrete Tensors. Stage: runtime. Depends on ir/ and the kernels in
// runtime/kernels and runtime/jit/Dispatch.h; never on compiler/ or extensions/.
//
// Standard ops run through one kernel binding per OpKind (runtime/StdKernels.h), found by the op's variant index.
// Extension ops are handed to EvalOptions::extension (the Runtime passes its modules' executors there); without a
// handler an extension op is an error that names its family and says how to run it. Running a program first binds
// its symbolic dims from the inputs' shapes and checks its recorded shape constraints (errors name the parameter, or
// the instruction, the symbol and both values); then every instruction runs in order and each value is released
// after its last use, so peak memory follows the live set, not the program length. The compiler's tests, the AD
// tests and Executable::run all evaluate programs through this one loop.
#pragma once

#include "ir/Program.h"
#include "ir/Tensor.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace einstage {

class ThreadPool;

/// Runs one extension instruction: `where` names it for messages ("%3 in @f"); operands are concrete; the returned
/// tensors, one per result, must have the instruction's result types under `bindings` (the interpreter checks).
using ExtensionHandler = std::function<std::vector<Tensor>(const Instruction& inst, const std::string& where,
                                                           std::span<const Tensor> operands,
                                                           const DimBindings& bindings)>;

struct EvalOptions {
  ThreadPool* pool = nullptr;  // kernels' threads; nullptr = the calling thread
  ExtensionHandler extension;  // empty: extension ops fail with an error naming the family
};

/// What one evaluation did (for tests and tools).
struct EvalStats {
  int64_t instructions = 0;
  /// Most values (parameters and results) held at once; with release after last use a chain of n unary ops keeps 2.
  int64_t peak_live_values = 0;
};

/// A program prepared for repeated evaluation: value slots, per-instruction operand slots and which values die after
/// each instruction are computed once. `run` is const and keeps nothing between calls but idle working buffers (a
/// value table and operand vectors per concurrent call, taken and returned under a mutex), so one Interpreter may
/// run from several threads at once (if the extension handler is thread-safe). The program must outlive it.
class Interpreter {
 public:
  explicit Interpreter(const Program& program);

  /// Checks the input count, definedness and dtypes (errors name the parameter), binds the symbolic dims from the
  /// shapes with ir's bind_parameters (ranks, constant extents, one value per symbol, products; errors name the
  /// input, parameter and axis) and checks the program's shape constraints with ir's check_constraints.
  DimBindings bind(std::span<const Tensor> inputs) const;

  /// bind() + execute(). Outputs are owned column-major tensors (never views of an input or a constant).
  std::vector<Tensor> run(std::span<const Tensor> inputs, const EvalOptions& options = {},
                          EvalStats* stats = nullptr) const;

  /// Runs the instructions under bindings that bind() produced for these inputs.
  std::vector<Tensor> execute(std::span<const Tensor> inputs, const DimBindings& bindings,
                              const EvalOptions& options = {}, EvalStats* stats = nullptr) const;

  const Program& program() const { return *program_; }

 private:
  struct Step {
    std::vector<int> operands;  // slots
    std::vector<int> results;   // slots, one per result
    std::vector<int> release;   // slots whose last use is this step
    std::vector<uint8_t> take;  // per operand: moved into the call, not copied (read once here, last use, no output)
    bool constant_shapes = false;          // every result's dims are constants: `shapes` holds them
    std::vector<Shape> shapes;
  };
  const Program* program_;
  std::vector<std::string> names_;  // printed name per slot ("%x", "%3")
  std::vector<std::string> where_;  // per instruction, for messages: "%3 in @f"
  std::vector<int> param_slots_;
  std::vector<Step> steps_;
  std::vector<int> output_slots_;
  std::vector<uint8_t> output_once_;  // per output: its slot is no other output (moved out, not copied)
  std::vector<int> release_unused_params_;  // parameters no instruction or output reads
  std::vector<const std::byte*> constant_blocks_;  // the constants' storage blocks, sorted (outputs copy from them)
  // Every parameter's dims are constants: bind() compares the inputs' shapes with these (the rules' own checks run,
  // for their messages, only on a mismatch).
  bool constant_params_ = false;
  std::vector<Shape> param_shapes_;
  int slot_count_ = 0;

 public:
  struct CallBuffers;  // what one call works in (Interpreter.cpp)
  // Idle CallBuffers, so a repeated call allocates none: one set per call running at once (a call nested in another,
  // from an extension handler, takes a set of its own). Owned here, not per thread or process; a copy starts empty.
  struct BufferPool {
    BufferPool();
    BufferPool(const BufferPool&);
    BufferPool& operator=(const BufferPool&);
    ~BufferPool();
    std::unique_ptr<CallBuffers> take();
    void give_back(std::unique_ptr<CallBuffers> buffers);

   private:
    std::mutex mutex_;
    std::vector<std::unique_ptr<CallBuffers>> free_;
  };

 private:
  mutable BufferPool buffers_;
};

/// One-shot evaluation: Interpreter(program).run(inputs, options).
std::vector<Tensor> evaluate(const Program& program, std::span<const Tensor> inputs, const EvalOptions& options = {});

}  // namespace einstage
