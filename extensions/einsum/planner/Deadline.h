// Deadline: the wall-clock limit every long planner loop checks (greedy runs, DPs, reconfiguration, annealing).
//
// Planning stage utility, header-only; depends only on <chrono>. A default-constructed deadline never expires.
#pragma once

#include <chrono>

namespace einstage::einsum {

class Deadline {
 public:
  Deadline() = default;
  explicit Deadline(double seconds) {
    if (seconds > 0) {
      unlimited_ = false;
      end_ = std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    }
  }
  bool expired() const { return !unlimited_ && std::chrono::steady_clock::now() >= end_; }
  bool unlimited() const { return unlimited_; }
  /// Seconds left (0 when expired; a large number when unlimited).
  double remaining() const {
    if (unlimited_) return 1e30;
    const double left = std::chrono::duration<double>(end_ - std::chrono::steady_clock::now()).count();
    return left > 0 ? left : 0;
  }
  /// The same limit moved `seconds` earlier (unlimited stays unlimited): room kept for work after the loop ends.
  Deadline earlier_by(double seconds) const {
    Deadline d = *this;
    if (!unlimited_)
      d.end_ -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }

 private:
  bool unlimited_ = true;
  std::chrono::steady_clock::time_point end_{};
};

}  // namespace einstage::einsum
