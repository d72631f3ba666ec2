// OpenBLAS's process-wide thread count, when the LAPACK in use is OpenBLAS's (found at run time in the already loaded
// libopenblas.so.0: nothing here links OpenBLAS itself, and with the reference LAPACK there is nothing to set). A batch
// needs it at 1, and so does a small single matrix; a large one needs OpenBLAS's own count (read when first seen:
// OPENBLAS_NUM_THREADS or every CPU).
// Calls that need the same count run together; the other kind waits until they are done, so no call ever sees a
// count it did not ask for (its bits do not depend on what runs beside it). The last call to leave restores the own
// count. The object's lifetime is its shares' (share_openblas_threads in Lapack.h, defined in OpenBlasThreads.cpp).
// Private to extensions/linalg/ (included by Lapack.cpp and OpenBlasThreads.cpp). Stage: runtime kernels of the
// linalg extension; depends on the C++ library only (dlopen and dlsym are in OpenBlasThreads.cpp).
#pragma once

#include <condition_variable>
#include <mutex>

namespace einstage::linalg {

class OpenBlasThreads {
 public:
  OpenBlasThreads();   // finds OpenBLAS (dlopen) and reads its own count
  ~OpenBlasThreads();
  OpenBlasThreads(const OpenBlasThreads&) = delete;
  OpenBlasThreads& operator=(const OpenBlasThreads&) = delete;
  int own() const { return own_; }

  // Holds OpenBLAS at `threads` (1 or own()) until the returned guard is destroyed.
  class Scope {
   public:
    Scope(OpenBlasThreads& blas, int threads) : blas_(blas) { blas_.enter(threads); }
    ~Scope() { blas_.leave(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpenBlasThreads& blas_;
  };

 private:
  void enter(int threads) {
    if (!set_) return;
    std::unique_lock lock(mutex_);
    turn_.wait(lock, [&] { return active_ == 0 || current_ == threads; });
    if (current_ != threads) set_(current_ = threads);
    ++active_;
  }
  void leave() {
    if (!set_) return;
    std::lock_guard lock(mutex_);
    if (--active_ > 0) return;
    if (current_ != own_) set_(current_ = own_);
    turn_.notify_all();
  }

  void* lib_ = nullptr;
  void (*set_)(int) = nullptr;
  int own_ = 1, current_ = 1;
  std::mutex mutex_;
  std::condition_variable turn_;
  int active_ = 0;
};

}  // namespace einstage::linalg
