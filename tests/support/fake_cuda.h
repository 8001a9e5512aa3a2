// The fake CUDA driver of runtime/testing/fake_libcuda.c, from a test: KILN_CUDA_LIBRARY
// points the runtime at it, and the test opens the same file (so the same instance) to drive
// it through its controls (fake_libcuda.h).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "runtime/testing/fake_libcuda.h"

namespace kiln::testing {

// `name` in the shared object `handle`; records a test failure when it is missing.
template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  void* address = dlsym(handle, name);
  EXPECT_NE(address, nullptr) << name;
  return reinterpret_cast<Fn>(address);
}

class FakeCuda {
 public:
  // Points the runtime at the fake at `path` and resets it; ok() says whether it opened.
  explicit FakeCuda(const char* path) {
    setenv("KILN_CUDA_LIBRARY", path, 1);
    handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle_, nullptr) << dlerror();
    if (handle_ != nullptr) Control<FakeCudaResetFn>("fake_cuda_reset")();
  }
  ~FakeCuda() {
    if (handle_ != nullptr) dlclose(handle_);
    unsetenv("KILN_CUDA_LIBRARY");
  }
  FakeCuda(const FakeCuda&) = delete;
  FakeCuda& operator=(const FakeCuda&) = delete;

  bool ok() const { return handle_ != nullptr; }

  // A control function of fake_libcuda.h, e.g. Control<FakeCudaFailLaunchesFn>("...").
  template <typename Fn>
  Fn Control(const char* name) const {
    return Symbol<Fn>(handle_, name);
  }

  // The launches since the last reset.
  std::vector<FakeCudaLaunch> Launches() const {
    int count = 0;
    const FakeCudaLaunch* launches = Control<FakeCudaLaunchesFn>("fake_cuda_launches")(&count);
    return std::vector<FakeCudaLaunch>(launches, launches + count);
  }

 private:
  void* handle_ = nullptr;
};

}  // namespace kiln::testing
