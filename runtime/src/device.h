// Where the kernels of a device artifact (ABI version 4) run: device memory, copies, constants
// and launches behind KilnEnv's device services. The model owns one Device and runs one call
// at a time on it (the index-error record of a module is one per module), so a Device need not
// be thread-safe. Every method returns "" or a message naming what failed.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/artifact_abi.h"

namespace kiln::runtime {

// The record a GPU kernel writes when it reads an index out of range (kiln_gpu_index_error),
// with its op id turned into the op's name.
struct DeviceIndexError {
  bool claimed = false;
  int32_t input = -1;
  int32_t dim = -1;
  int64_t index = 0;
  int64_t size = 0;
  std::string op;
};

class Device {
 public:
  virtual ~Device() = default;
  // 256-byte aligned memory, distinct even for 0 bytes.
  virtual std::string Alloc(int64_t bytes, void** out) = 0;
  virtual void Free(void* ptr) = 0;
  // `kind` is a KILN_COPY_* kind (the caller checks it), bytes >= 0.
  virtual std::string Copy(void* dst, const void* src, int64_t bytes, int32_t kind) = 0;
  // The device copy of constant `index`, made on first use and kept until the Device goes.
  virtual std::string Constant(int32_t index, const void* data, int64_t bytes, void** out) = 0;
  // Kernel `kernel` of the artifact's kiln_gpu_kernels on `blocks` blocks of `threads` threads.
  virtual std::string Launch(int32_t kernel, int64_t blocks, int32_t threads, void** args) = 0;
  // Before a call into the artifact: clears the index-error record.
  virtual std::string BeginRun() = 0;
  // After it: waits for every launch, then reads the record into *record.
  virtual std::string EndRun(DeviceIndexError* record) = 0;
};

// Runs the kernels of kiln_gpu_emulated_kernels on the CPU, block after block, over host
// memory. They report index errors through KilnEnv.index_error themselves, so the record
// EndRun reads is always unclaimed.
class EmulatedDevice : public Device {
 public:
  explicit EmulatedDevice(std::vector<KilnEmulatedKernelFn> kernels);
  ~EmulatedDevice() override;

  std::string Alloc(int64_t bytes, void** out) override;
  void Free(void* ptr) override;
  std::string Copy(void* dst, const void* src, int64_t bytes, int32_t kind) override;
  std::string Constant(int32_t index, const void* data, int64_t bytes, void** out) override;
  std::string Launch(int32_t kernel, int64_t blocks, int32_t threads, void** args) override;
  std::string BeginRun() override { return ""; }
  std::string EndRun(DeviceIndexError* record) override;

 private:
  std::vector<KilnEmulatedKernelFn> kernels_;
  std::unordered_map<int32_t, void*> constants_;
};

// "kernel #3", or "kernel 'fused_add_3'" when `names` has it: how messages name a kernel.
std::string KernelLabel(const std::vector<std::string>& names, int32_t kernel);

}  // namespace kiln::runtime
