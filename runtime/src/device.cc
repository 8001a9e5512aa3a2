#include "runtime/src/device.h"

#include <cstdlib>
#include <cstring>

namespace kiln::runtime {
namespace {

constexpr int64_t kDeviceAlignment = 256;

}  // namespace

std::string KernelLabel(const std::vector<std::string>& names, int32_t kernel) {
  if (kernel >= 0 && kernel < static_cast<int32_t>(names.size())) {
    return "kernel '" + names[kernel] + "'";
  }
  return "kernel #" + std::to_string(kernel);
}

EmulatedDevice::EmulatedDevice(std::vector<KilnEmulatedKernelFn> kernels)
    : kernels_(std::move(kernels)) {}

EmulatedDevice::~EmulatedDevice() {
  for (const auto& [index, ptr] : constants_) Free(ptr);
}

std::string EmulatedDevice::Alloc(int64_t bytes, void** out) {
  *out = nullptr;
  bool valid = bytes >= 0 && bytes <= INT64_MAX - kDeviceAlignment;
  // Round up past the next boundary, so a zero-byte request still gets a distinct pointer.
  size_t size = valid ? static_cast<size_t>((bytes / kDeviceAlignment + 1) * kDeviceAlignment) : 0;
  if (!valid || posix_memalign(out, kDeviceAlignment, size) != 0) {
    *out = nullptr;
    return "device allocation of " + std::to_string(bytes) + " bytes failed";
  }
  return "";
}

void EmulatedDevice::Free(void* ptr) { std::free(ptr); }

std::string EmulatedDevice::Copy(void* dst, const void* src, int64_t bytes, int32_t /*kind*/) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  return "";
}

std::string EmulatedDevice::Constant(int32_t index, const void* data, int64_t bytes, void** out) {
  if (auto it = constants_.find(index); it != constants_.end()) {
    *out = it->second;
    return "";
  }
  std::string error = Alloc(bytes, out);
  if (!error.empty()) return "constant #" + std::to_string(index) + ": " + error;
  Copy(*out, data, bytes, KILN_COPY_HOST_TO_DEVICE);
  constants_.emplace(index, *out);
  return "";
}

std::string EmulatedDevice::Launch(int32_t kernel, int64_t blocks, int32_t /*threads*/,
                                   void** args) {
  if (kernel < 0 || kernel >= static_cast<int32_t>(kernels_.size())) {
    return "launch of kernel #" + std::to_string(kernel) + " failed: the artifact has " +
           std::to_string(kernels_.size()) + " kernels";
  }
  // A block runs its threads one after another; the blocks of a GPU have no order either.
  for (int64_t block = 0; block < blocks; ++block) kernels_[kernel](args, block);
  return "";
}

std::string EmulatedDevice::EndRun(DeviceIndexError* record) {
  *record = DeviceIndexError{};
  return "";
}

}  // namespace kiln::runtime
