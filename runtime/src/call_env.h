// The KilnEnv handed to one call into an artifact: 64-byte aligned workspace memory, shape
// and index errors turned into messages that name the tensor and dim from the signature,
// parallel loops run on the model's thread pool, and for a device artifact the device
// services on its Device.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "kiln/artifact_abi.h"
#include "runtime/src/device.h"
#include "runtime/src/signature.h"
#include "runtime/src/thread_pool.h"
#include "runtime/src/workspace_cache.h"

namespace kiln::runtime {

// "input 'indices' holds index 7, out of range for dimension 0 of size 5 (gather axis 0)": the
// message of KilnEnv.index_error, also for the index-error record of a GPU run.
std::string IndexErrorMessage(const Signature& signature, int32_t input, int32_t dim, int64_t index,
                              int64_t size, const std::string& op);

class CallEnv {
 public:
  // Parallel loops run on `pool`; with none they run on the calling thread. Workspace comes
  // from and goes back to `cache` when there is one. With a `device` the KilnEnv has the
  // device services (ABI version 4), else they are NULL.
  CallEnv(const Signature& signature, ThreadPool* pool = nullptr, WorkspaceCache* cache = nullptr,
          Device* device = nullptr);
  // Frees workspace and device memory the artifact did not free (it may stop early on an
  // error).
  ~CallEnv();
  CallEnv(const CallEnv&) = delete;
  CallEnv& operator=(const CallEnv&) = delete;

  KilnEnv* env() { return &env_; }
  // Why the call failed: the first reported problem, else the ABI's meaning of a bare
  // nonzero return.
  std::string FailureMessage() const;
  // Whether the artifact reported a problem; an index error does not stop the host code, so a
  // call can report one and still return 0.
  bool HasReport() const;

  // Around the call into the artifact, for a device (no-ops without one): BeginDeviceRun clears
  // the index-error record and returns false after reporting a failure; EndDeviceRun waits for
  // the kernels and reports their failure or a claimed record.
  bool BeginDeviceRun();
  void EndDeviceRun();

 private:
  static void* Alloc(void* self, int64_t bytes);
  static void Free(void* self, void* ptr);
  static void ShapeError(void* self, int32_t kind, int32_t index, int32_t dim, int64_t expected,
                         int64_t actual);
  static void IndexError(void* self, int32_t input, int32_t dim, int64_t index, int64_t size,
                         const char* op);
  static int32_t ParallelFor(void* self, int64_t num_tasks, TaskFn task, void* closure);
  static void* DeviceAlloc(void* self, int64_t bytes);
  static void DeviceFree(void* self, void* ptr);
  static int32_t Copy(void* self, void* dst, const void* src, int64_t bytes, int32_t kind);
  static void* DeviceConstant(void* self, int32_t index, const void* data, int64_t bytes);
  static int32_t Launch(void* self, int32_t kernel, int64_t blocks, int32_t threads, void** args);
  void Report(std::string message);
  void Release(void* ptr, size_t size);

  KilnEnv env_;
  const Signature& signature_;
  ThreadPool* pool_;
  WorkspaceCache* cache_;
  Device* device_;
  // Generated code may allocate from worker threads.
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> live_;  // pointer -> bytes allocated
  std::unordered_set<void*> device_live_;
  std::string error_;
};

}  // namespace kiln::runtime
