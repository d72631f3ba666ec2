#include "examples/heisenberg/Unrolled.h"

#include "compiler/ad/Ad.h"
#include "ir/Config.h"
#include "ir/Error.h"
#include "runtime/Context.h"

#include <algorithm>

namespace einstage::heisenberg {
namespace {

int64_t bytes_of(const CtmEnvironment& e) { return int64_t(e.c.nbytes() + e.t.nbytes()); }

}  // namespace

UnrolledGradient::UnrolledGradient(const Runtime& runtime, const Ctmrg& ctmrg)
    : runtime_(runtime), step_(runtime.prepare(ctmrg.forward_program())),
      step_vjp_(runtime.prepare(ad::vjp(ctmrg.step_program(), ad::Outputs{0, 1}, {0, 1, 2}, &runtime.registry()))),
      keep_bytes_(runtime.context().config().ad_keep_bytes) {}

void UnrolledGradient::begin() {
  steps_ = 0;
  interval_ = 1;
  checkpoints_.clear();
  gauges_.clear();
}

void UnrolledGradient::record(const CtmEnvironment& input, const Tensor& gauge) {
  if (steps_ % interval_ == 0) {
    checkpoints_.push_back(input);
    // Thinning: over the limit, keep checkpoints 0, 2, 4, ... of the current interval and double it (the first is
    // always kept, so a limit below one checkpoint still keeps one and recomputes everything from it).
    while (keep_bytes_ >= 0 && checkpoints_.size() > 1 &&
           int64_t(checkpoints_.size()) * bytes_of(input) > keep_bytes_) {
      std::vector<CtmEnvironment> kept;
      for (size_t i = 0; i < checkpoints_.size(); i += 2) kept.push_back(std::move(checkpoints_[i]));
      checkpoints_ = std::move(kept);
      interval_ *= 2;
    }
  }
  gauges_.push_back(gauge);
  ++steps_;
}

Tensor UnrolledGradient::backward(const Tensor& a, const Tensor& c_bar, const Tensor& t_bar,
                                  UnrolledStats* stats) const {
  if (steps_ == 0)
    fail(ErrorKind::invalid_argument, "heisenberg-ipeps: the unrolled gradient has no recorded CTMRG step; run "
         "Ctmrg::converge with this object's record as its observer first");
  UnrolledStats s;
  s.steps = steps_;
  s.interval = interval_;
  const int64_t env_bytes = bytes_of(checkpoints_.front());
  s.checkpoint_bytes = int64_t(checkpoints_.size()) * env_bytes;
  Tensor cb = c_bar, tb = t_bar, ab;
  for (int seg = int((steps_ - 1) / interval_); seg >= 0; --seg) {
    const int first = seg * interval_, end = std::min(steps_, first + interval_);
    // The segment's inputs: its checkpoint, then the steps run again from it.
    std::vector<CtmEnvironment> inputs{checkpoints_[size_t(seg)]};
    for (int k = first; k + 1 < end; ++k) {
      std::vector<Tensor> out = step_.run({inputs.back().c, inputs.back().t, a, gauges_[size_t(k)]});
      inputs.push_back({out[0], out[1]});
      ++s.recomputed_steps;
    }
    s.peak_bytes = std::max(s.peak_bytes, s.checkpoint_bytes + int64_t(inputs.size() - 1) * env_bytes +
                                              3 * env_bytes + int64_t(a.nbytes()));
    for (int k = end - 1; k >= first; --k) {
      const CtmEnvironment& in = inputs[size_t(k - first)];
      std::vector<Tensor> r = step_vjp_.run({in.c, in.t, a, gauges_[size_t(k)], cb, tb});
      cb = r[2];
      tb = r[3];
      ab = ab.defined() ? add_f64(ab, r[4]) : r[4];
    }
  }
  if (stats) *stats = s;
  return ab;
}

}  // namespace einstage::heisenberg
