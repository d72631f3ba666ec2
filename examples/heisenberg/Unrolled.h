// The unrolled alternative to the fixed-point adjoint (issue 37): the energy's gradient by reverse mode through every
// CTMRG step of one convergence, run step by step from per-step checkpoints instead of one program of N inlined
// steps. Stage: example code (examples/), a user of compiler/ad and the Runtime.
//
// The forward pass records each step's input environment (a checkpoint, C and T) and its gauge input (Ctmrg::converge
// calls `record` through its observer). The backward pass walks the steps in reverse: each runs the VJP program of one
// step (ad::vjp of the step, wrt C, T and a) at its checkpoint, which recomputes that step's residuals, so one step's
// residuals are live at a time. The checkpoints are kept under the execution context's memory policy,
// Config::ad_keep_bytes (EINSTAGE_AD_KEEP_BYTES; -1, the default, keeps every one): when the kept checkpoints would
// exceed it, every other one is dropped and the interval between checkpoints doubles, and the backward pass
// recomputes the environments inside a segment forward from the segment's checkpoint (the same runs of the forward
// step, Ctmrg::forward_program, so the same bits; the VJP is of the differentiable step). The backward pass's memory therefore grows with the number of steps (one checkpoint per step, or per
// interval), which is what the fixed-point adjoint avoids.
#pragma once

#include "examples/heisenberg/Ipeps.h"

#include <cstdint>
#include <vector>

namespace einstage::heisenberg {

struct UnrolledStats {
  int steps = 0;                   // CTMRG steps differentiated
  int interval = 1;                // steps between checkpoints
  int recomputed_steps = 0;        // forward steps run again inside segments by the backward pass
  int64_t checkpoint_bytes = 0;    // bytes of the checkpoints kept when the backward pass began
  int64_t peak_bytes = 0;          // checkpoints + a segment's environments + one step's inputs and cotangents, at most
};

class UnrolledGradient {
 public:
  /// Prepares the VJP of `ctmrg`'s step on `runtime` (which must outlive this).
  UnrolledGradient(const Runtime& runtime, const Ctmrg& ctmrg);
  /// Starts a new forward pass (drops the previous checkpoints).
  void begin();
  /// Records one forward step: its input environment and gauge (in the order the steps ran).
  void record(const CtmEnvironment& input, const Tensor& gauge);
  /// dE/da through every recorded step: (c_bar, t_bar) = ∂E/∂(C, T) at the last step's output, a the double-layer
  /// state the steps ran with. Returns the steps' contribution (the energy's own ∂E/∂a is the caller's to add).
  Tensor backward(const Tensor& a, const Tensor& c_bar, const Tensor& t_bar, UnrolledStats* stats = nullptr) const;
  int steps() const { return steps_; }

 private:
  const Runtime& runtime_;
  Executable step_, step_vjp_;
  int64_t keep_bytes_ = -1;
  int steps_ = 0, interval_ = 1;
  std::vector<CtmEnvironment> checkpoints_;  // inputs of steps 0, interval, 2 interval, ...
  std::vector<Tensor> gauges_;               // every step's gauge
};

}  // namespace einstage::heisenberg
