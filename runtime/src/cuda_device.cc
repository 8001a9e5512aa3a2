#include "runtime/src/cuda_device.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kiln::runtime {
namespace {

// The few types of the CUDA driver API (cuda.h) this file uses, declared here so that the
// runtime builds without CUDA's headers, for any arch.
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUdeviceptr = unsigned long long;
using CUjit_option = int;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr int64_t kMaxGridBlocks = 2147483647;  // of grid dimension x
constexpr size_t kIndexErrorBytes = 6 * sizeof(int64_t);

struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options,
                                 CUjit_option* options, void** values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuModuleGetGlobal)(CUdeviceptr* ptr, size_t* bytes, CUmodule module, const char* name);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t bytes);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z,
                             unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuGetErrorName)(CUresult result, const char** name);
  CUresult (*cuGetErrorString)(CUresult result, const char** text);
};

// Binds every entry of `driver` to the symbol the driver exports for it (the _v2 names are
// the current ABI of the calls that have them); returns "" or the missing symbol.
std::string BindDriver(void* handle, Driver* driver) {
  struct Entry {
    const char* symbol;
    void** slot;
  };
#define KILN_CUDA_ENTRY(member, symbol) \
  { symbol, reinterpret_cast<void**>(&driver->member) }
  const Entry entries[] = {
      KILN_CUDA_ENTRY(cuInit, "cuInit"),
      KILN_CUDA_ENTRY(cuDeviceGetCount, "cuDeviceGetCount"),
      KILN_CUDA_ENTRY(cuDeviceGet, "cuDeviceGet"),
      KILN_CUDA_ENTRY(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
      KILN_CUDA_ENTRY(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
      KILN_CUDA_ENTRY(cuCtxSetCurrent, "cuCtxSetCurrent"),
      KILN_CUDA_ENTRY(cuModuleLoadDataEx, "cuModuleLoadDataEx"),
      KILN_CUDA_ENTRY(cuModuleUnload, "cuModuleUnload"),
      KILN_CUDA_ENTRY(cuModuleGetFunction, "cuModuleGetFunction"),
      KILN_CUDA_ENTRY(cuModuleGetGlobal, "cuModuleGetGlobal_v2"),
      KILN_CUDA_ENTRY(cuMemAlloc, "cuMemAlloc_v2"),
      KILN_CUDA_ENTRY(cuMemFree, "cuMemFree_v2"),
      KILN_CUDA_ENTRY(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
      KILN_CUDA_ENTRY(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
      KILN_CUDA_ENTRY(cuMemcpyDtoD, "cuMemcpyDtoD_v2"),
      KILN_CUDA_ENTRY(cuMemsetD8, "cuMemsetD8_v2"),
      KILN_CUDA_ENTRY(cuLaunchKernel, "cuLaunchKernel"),
      KILN_CUDA_ENTRY(cuCtxSynchronize, "cuCtxSynchronize"),
      KILN_CUDA_ENTRY(cuGetErrorName, "cuGetErrorName"),
      KILN_CUDA_ENTRY(cuGetErrorString, "cuGetErrorString"),
  };
#undef KILN_CUDA_ENTRY
  for (const Entry& entry : entries) {
    *entry.slot = dlsym(handle, entry.symbol);
    if (*entry.slot == nullptr) return entry.symbol;
  }
  return "";
}

// The driver at `path`, opened once per process and never closed: the CUDA driver starts
// threads of its own and does not support being unloaded. A failure is not remembered, so a
// later load can try again.
const Driver* OpenDriver(const std::string& path, std::string* error) {
  static std::mutex mu;
  static std::map<std::string, Driver> drivers;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = drivers.find(path); it != drivers.end()) return &it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *error = path + " cannot be loaded (is the NVIDIA driver installed?): " + dlerror();
    return nullptr;
  }
  Driver driver{};
  if (std::string missing = BindDriver(handle, &driver); !missing.empty()) {
    dlclose(handle);
    *error = "the CUDA driver " + path + " lacks " + missing + " (too old a driver?)";
    return nullptr;
  }
  return &drivers.emplace(path, driver).first->second;
}

// Names of the results a driver that cannot name them (the toolkit's stub library, a driver
// failing to start) returns most, from cuda.h.
const char* FallbackResultName(CUresult result) {
  switch (result) {
    case 2:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case 34:
      return "CUDA_ERROR_STUB_LIBRARY";
    case 35:
      return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100:
      return "CUDA_ERROR_NO_DEVICE";
    case 803:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 999:
      return "CUDA_ERROR_UNKNOWN";
  }
  return nullptr;
}

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string ResultText(const Driver& driver, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (driver.cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  if (name == nullptr) name = FallbackResultName(result);
  std::string message = name != nullptr ? name : "CUDA error " + std::to_string(result);
  if (text != nullptr) {
    message += std::string(" (") + text + ")";
  } else if (name != nullptr) {
    message += " (CUDA error " + std::to_string(result) + ")";
  }
  return message;
}

class CudaDevice : public Device {
 public:
  CudaDevice(const Driver& driver, std::vector<std::string> kernels,
             std::vector<std::string> error_ops)
      : driver_(driver), kernel_names_(std::move(kernels)), error_ops_(std::move(error_ops)) {}
  ~CudaDevice() override;

  // Starts the driver, takes the primary context and loads the module; "" or why not.
  std::string Start(const char* ptx);

  std::string Alloc(int64_t bytes, void** out) override;
  void Free(void* ptr) override;
  std::string Copy(void* dst, const void* src, int64_t bytes, int32_t kind) override;
  std::string Constant(int32_t index, const void* data, int64_t bytes, void** out) override;
  std::string Launch(int32_t kernel, int64_t blocks, int32_t threads, void** args) override;
  std::string BeginRun() override;
  std::string EndRun(DeviceIndexError* record) override;

 private:
  // "" or "<call> failed: <result>".
  std::string Check(CUresult result, const std::string& call) const {
    return result == CUDA_SUCCESS ? "" : call + " failed: " + ResultText(driver_, result);
  }
  // Runs may come from any thread, and a context is current per thread.
  std::string MakeCurrent() const {
    return Check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }
  std::string LoadModule(const char* ptx);

  const Driver& driver_;
  std::vector<std::string> kernel_names_;
  std::vector<std::string> error_ops_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
  CUdeviceptr index_error_ = 0;  // 0: the module has no record, so nothing to check
  std::unordered_map<int32_t, CUdeviceptr> constants_;
};

CudaDevice::~CudaDevice() {
  if (context_ == nullptr) return;
  // Nothing to report to here; a failure leaves memory to the context's end.
  driver_.cuCtxSetCurrent(context_);
  for (const auto& [index, ptr] : constants_) driver_.cuMemFree(ptr);
  if (module_ != nullptr) driver_.cuModuleUnload(module_);
  driver_.cuDevicePrimaryCtxRelease(device_);
}

std::string CudaDevice::Start(const char* ptx) {
  std::string error = Check(driver_.cuInit(0), "cuInit");
  if (!error.empty()) return "the CUDA driver cannot start: " + error;
  int count = 0;
  error = Check(driver_.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (error.empty() && count == 0) error = "there is no CUDA device";
  if (error.empty()) error = Check(driver_.cuDeviceGet(&device_, 0), "cuDeviceGet");
  if (!error.empty()) return error;
  CUcontext context = nullptr;
  error = Check(driver_.cuDevicePrimaryCtxRetain(&context, device_), "cuDevicePrimaryCtxRetain");
  if (!error.empty()) return error;
  context_ = context;  // from here on the destructor releases it
  error = MakeCurrent();
  return error.empty() ? LoadModule(ptx) : error;
}

std::string CudaDevice::LoadModule(const char* ptx) {
  // The JIT's log says which line of the PTX it rejects and why.
  char log[4096] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
  CUmodule module = nullptr;
  CUresult result = driver_.cuModuleLoadDataEx(&module, ptx, 2, options, values);
  if (result != CUDA_SUCCESS) {
    std::string message = "the CUDA driver rejects its PTX: " + Check(result, "cuModuleLoadDataEx");
    if (log[0] != '\0') message += ": " + std::string(log);
    return message;
  }
  module_ = module;
  for (const std::string& name : kernel_names_) {
    CUfunction function = nullptr;
    std::string error =
        Check(driver_.cuModuleGetFunction(&function, module_, name.c_str()), "cuModuleGetFunction");
    if (!error.empty()) return "its PTX lacks kernel '" + name + "': " + error;
    functions_.push_back(function);
  }
  // A module whose kernels check no index has no record.
  size_t bytes = 0;
  CUdeviceptr record = 0;
  if (driver_.cuModuleGetGlobal(&record, &bytes, module_, KILN_GPU_INDEX_ERROR) == CUDA_SUCCESS) {
    if (bytes < kIndexErrorBytes) {
      return "its " + std::string(KILN_GPU_INDEX_ERROR) + " has " + std::to_string(bytes) +
             " bytes, expected " + std::to_string(kIndexErrorBytes);
    }
    index_error_ = record;
  }
  return "";
}

std::string CudaDevice::Alloc(int64_t bytes, void** out) {
  *out = nullptr;
  std::string call = "cuMemAlloc of " + std::to_string(bytes) + " bytes";
  if (bytes < 0) return call + " failed: negative size";
  std::string error = MakeCurrent();
  if (!error.empty()) return error;
  // The driver refuses 0 bytes; one byte still gives a distinct, 256-byte aligned pointer.
  CUdeviceptr ptr = 0;
  error = Check(driver_.cuMemAlloc(&ptr, bytes > 0 ? static_cast<size_t>(bytes) : 1), call);
  if (error.empty()) *out = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  return error;
}

void CudaDevice::Free(void* ptr) {
  if (!MakeCurrent().empty()) return;
  driver_.cuMemFree(reinterpret_cast<uintptr_t>(ptr));
}

std::string CudaDevice::Copy(void* dst, const void* src, int64_t bytes, int32_t kind) {
  if (bytes == 0) return "";
  std::string error = MakeCurrent();
  if (!error.empty()) return error;
  auto size = static_cast<size_t>(bytes);
  auto device_dst = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst));
  auto device_src = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src));
  std::string what = " of " + std::to_string(bytes) + " bytes";
  switch (kind) {
    case KILN_COPY_HOST_TO_DEVICE:
      return Check(driver_.cuMemcpyHtoD(device_dst, src, size), "cuMemcpyHtoD" + what);
    case KILN_COPY_DEVICE_TO_HOST:
      // Synchronous on the default stream: it waits for the launches before it.
      return Check(driver_.cuMemcpyDtoH(dst, device_src, size), "cuMemcpyDtoH" + what);
    default:
      return Check(driver_.cuMemcpyDtoD(device_dst, device_src, size), "cuMemcpyDtoD" + what);
  }
}

std::string CudaDevice::Constant(int32_t index, const void* data, int64_t bytes, void** out) {
  if (auto it = constants_.find(index); it != constants_.end()) {
    *out = reinterpret_cast<void*>(static_cast<uintptr_t>(it->second));
    return "";
  }
  std::string error = Alloc(bytes, out);
  if (error.empty()) error = Copy(*out, data, bytes, KILN_COPY_HOST_TO_DEVICE);
  if (!error.empty()) {
    if (*out != nullptr) Free(*out);
    *out = nullptr;
    return "constant #" + std::to_string(index) + ": " + error;
  }
  constants_.emplace(index, reinterpret_cast<uintptr_t>(*out));
  return "";
}

std::string CudaDevice::Launch(int32_t kernel, int64_t blocks, int32_t threads, void** args) {
  std::string call = "launch of " + KernelLabel(kernel_names_, kernel) + " (" +
                     std::to_string(blocks) + " blocks of " + std::to_string(threads) + " threads)";
  if (kernel < 0 || kernel >= static_cast<int32_t>(functions_.size())) {
    return call + " failed: the artifact has " + std::to_string(functions_.size()) + " kernels";
  }
  if (blocks < 1 || blocks > kMaxGridBlocks || threads < 1) {
    return call + " failed: a grid has 1 to " + std::to_string(kMaxGridBlocks) +
           " blocks of at least 1 thread";
  }
  std::string error = MakeCurrent();
  if (!error.empty()) return error;
  CUresult result =
      driver_.cuLaunchKernel(functions_[kernel], static_cast<unsigned>(blocks), 1, 1,
                             static_cast<unsigned>(threads), 1, 1, 0, nullptr, args, nullptr);
  return result == CUDA_SUCCESS ? "" : call + " failed: " + ResultText(driver_, result);
}

std::string CudaDevice::BeginRun() {
  if (index_error_ == 0) return "";
  std::string error = MakeCurrent();
  if (!error.empty()) return error;
  return Check(driver_.cuMemsetD8(index_error_, 0, kIndexErrorBytes),
               "clearing " + std::string(KILN_GPU_INDEX_ERROR) + ": cuMemsetD8");
}

std::string CudaDevice::EndRun(DeviceIndexError* record) {
  *record = DeviceIndexError{};
  std::string error = MakeCurrent();
  if (error.empty()) {
    error = Check(driver_.cuCtxSynchronize(), "waiting for the kernels: cuCtxSynchronize");
  }
  if (!error.empty() || index_error_ == 0) return error;
  int64_t values[6] = {};
  error = Check(driver_.cuMemcpyDtoH(values, index_error_, kIndexErrorBytes),
                "reading " + std::string(KILN_GPU_INDEX_ERROR) + ": cuMemcpyDtoH");
  if (!error.empty() || values[0] == 0) return error;
  // {claimed, input, dim, op id, index, size}
  record->claimed = true;
  record->input = static_cast<int32_t>(values[1]);
  record->dim = static_cast<int32_t>(values[2]);
  int64_t op = values[3];
  record->op = op >= 0 && op < static_cast<int64_t>(error_ops_.size()) ? error_ops_[op]
                                                                       : "#" + std::to_string(op);
  record->index = values[4];
  record->size = values[5];
  return "";
}

}  // namespace

std::unique_ptr<Device> LoadCudaDevice(const std::string& artifact, const char* ptx,
                                       std::vector<std::string> kernels,
                                       std::vector<std::string> error_ops, std::string* error) {
  std::string prefix = "artifact '" + artifact + "' runs on a CUDA GPU, but ";
  if (ptx == nullptr) {
    *error = prefix + "its kiln_gpu_ptx returned NULL";
    return nullptr;
  }
  const char* override_path = std::getenv("KILN_CUDA_LIBRARY");
  std::string path = override_path != nullptr && *override_path ? override_path : "libcuda.so.1";
  const Driver* driver = OpenDriver(path, error);
  if (driver == nullptr) {
    *error = prefix + *error;
    return nullptr;
  }
  auto device = std::make_unique<CudaDevice>(*driver, std::move(kernels), std::move(error_ops));
  if (std::string start = device->Start(ptx); !start.empty()) {
    *error = prefix + start;
    return nullptr;
  }
  return device;
}

}  // namespace kiln::runtime
