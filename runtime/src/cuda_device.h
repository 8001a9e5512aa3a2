// A Device on the first CUDA GPU, through the driver API of libcuda.so.1 opened with dlopen:
// the runtime neither links CUDA nor needs it until an artifact with PTX is loaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/src/device.h"

namespace kiln::runtime {

// Opens the driver ($KILN_CUDA_LIBRARY, else libcuda.so.1), makes device 0's primary context
// and loads `ptx`, getting every kernel of `kernels` by name; `error_ops` names the op ids of
// the index-error record. On failure returns null and sets *error to a message that starts
// with "artifact '<artifact>' runs on a CUDA GPU, but".
std::unique_ptr<Device> LoadCudaDevice(const std::string& artifact, const char* ptx,
                                       std::vector<std::string> kernels,
                                       std::vector<std::string> error_ops, std::string* error);

}  // namespace kiln::runtime
