// OpenBLAS's thread count found at run time, and the process's one shared object of it (see OpenBlasThreads.h and
// share_openblas_threads() in Lapack.h).
#include "extensions/linalg/OpenBlasThreads.h"
#include "extensions/linalg/Lapack.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>

namespace einstage::linalg {

OpenBlasThreads::OpenBlasThreads() {
  lib_ = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);  // loaded as liblapack.so.3's dependency
  if (!lib_) return;
  set_ = reinterpret_cast<void (*)(int)>(::dlsym(lib_, "openblas_set_num_threads"));
  auto get = reinterpret_cast<int (*)()>(::dlsym(lib_, "openblas_get_num_threads"));
  if (!set_ || !get) {
    set_ = nullptr;
    return;
  }
  own_ = current_ = std::max(1, get());
}
OpenBlasThreads::~OpenBlasThreads() {
  if (lib_) ::dlclose(lib_);  // drops only this reference: OpenBLAS stays loaded as a dependency
}

namespace {

// The process's one OpenBlasThreads and the number of its shares, under a mutex. All three are plain data (a POSIX
// mutex, not std::mutex, whose destructor is not trivial everywhere), so exit() destroys none of them: a thread still
// decomposing while the process exits finds them intact, and the object itself lives as long as its shares.
pthread_mutex_t g_blas_mutex = PTHREAD_MUTEX_INITIALIZER;
OpenBlasThreads* g_blas = nullptr;
int64_t g_blas_shares = 0;

struct BlasLock {
  BlasLock() { pthread_mutex_lock(&g_blas_mutex); }
  ~BlasLock() { pthread_mutex_unlock(&g_blas_mutex); }
  BlasLock(const BlasLock&) = delete;
  BlasLock& operator=(const BlasLock&) = delete;
};

}  // namespace

std::shared_ptr<OpenBlasThreads> share_openblas_threads() {
  BlasLock lock;
  if (!g_blas) g_blas = new OpenBlasThreads();
  ++g_blas_shares;
  return std::shared_ptr<OpenBlasThreads>(g_blas, [](OpenBlasThreads* blas) {
    BlasLock lock;
    if (--g_blas_shares > 0) return;
    delete blas;
    g_blas = nullptr;
  });
}

}  // namespace einstage::linalg
