#include "runtime/src/call_env.h"

#include <cstdint>
#include <cstdlib>

#include "runtime/src/tensor_check.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kAlignment = 64;

// "input 'y' dimension 0 (batch)", naming the symbolic dim when there is one; an index the
// signature does not have still gets a message.
std::string DimLabel(const Signature& signature, bool is_output, int32_t index, int32_t dim) {
  const auto& specs = is_output ? signature.outputs : signature.inputs;
  if (index < 0 || index >= static_cast<int32_t>(specs.size())) {
    return std::string(is_output ? "output #" : "input #") + std::to_string(index) + " dimension " +
           std::to_string(dim);
  }
  const TensorSpec& spec = specs[index];
  std::string label = TensorLabel(is_output, spec.name) + " dimension " + std::to_string(dim);
  if (dim >= 0 && dim < static_cast<int32_t>(spec.dims.size()) && spec.static_dims[dim] < 0) {
    label += " (" + spec.dims[dim] + ")";
  }
  return label;
}

}  // namespace

CallEnv::CallEnv(const Signature& signature, ThreadPool* pool, WorkspaceCache* cache,
                 Device* device)
    : signature_(signature), pool_(pool), cache_(cache), device_(device) {
  env_ = KilnEnv{};
  env_.self = this;
  env_.alloc = &CallEnv::Alloc;
  env_.free = &CallEnv::Free;
  env_.shape_error = &CallEnv::ShapeError;
  env_.parallel_for = &CallEnv::ParallelFor;
  env_.index_error = &CallEnv::IndexError;
  if (device != nullptr) {
    env_.device_alloc = &CallEnv::DeviceAlloc;
    env_.device_free = &CallEnv::DeviceFree;
    env_.copy = &CallEnv::Copy;
    env_.device_constant = &CallEnv::DeviceConstant;
    env_.launch = &CallEnv::Launch;
  }
}

CallEnv::~CallEnv() {
  for (const auto& [ptr, size] : live_) Release(ptr, size);
  for (void* ptr : device_live_) device_->Free(ptr);
}

void CallEnv::Release(void* ptr, size_t size) {
  if (cache_ != nullptr) {
    cache_->Give({ptr, size});
  } else {
    std::free(ptr);
  }
}

std::string CallEnv::FailureMessage() const {
  return error_.empty() ? "workspace allocation failed" : error_;
}

bool CallEnv::HasReport() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !error_.empty();
}

void CallEnv::Report(std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  // Keep the first report: later ones usually follow from it.
  if (error_.empty()) error_ = std::move(message);
}

void* CallEnv::Alloc(void* self, int64_t bytes) {
  auto* call = static_cast<CallEnv*>(self);
  void* ptr = nullptr;
  bool valid = bytes >= 0 && bytes <= INT64_MAX - kAlignment;
  // Round up past the next 64-byte boundary, so a zero-byte request still gets a distinct,
  // freeable pointer.
  size_t size = valid ? static_cast<size_t>((bytes / kAlignment + 1) * kAlignment) : 0;
  if (valid && call->cache_ != nullptr) {
    WorkspaceCache::Block cached = call->cache_->Take(size);
    ptr = cached.ptr;
    size = cached.ptr != nullptr ? cached.size : size;
  }
  if (ptr == nullptr && (!valid || posix_memalign(&ptr, kAlignment, size) != 0)) {
    call->Report("workspace allocation of " + std::to_string(bytes) + " bytes failed");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(call->mu_);
  call->live_.emplace(ptr, size);
  return ptr;
}

void CallEnv::Free(void* self, void* ptr) {
  auto* call = static_cast<CallEnv*>(self);
  std::lock_guard<std::mutex> lock(call->mu_);
  // A pointer this env never handed out is ignored rather than passed to free().
  auto it = call->live_.find(ptr);
  if (it == call->live_.end()) return;
  size_t size = it->second;
  call->live_.erase(it);
  call->Release(ptr, size);
}

void CallEnv::ShapeError(void* self, int32_t kind, int32_t index, int32_t dim, int64_t expected,
                         int64_t actual) {
  auto* call = static_cast<CallEnv*>(self);
  std::string label = DimLabel(call->signature_, kind == KILN_SHAPE_ERROR_OUTPUT, index, dim);
  if (kind == KILN_SHAPE_ERROR_VALUE && index < 0) {
    // A constraint between the inputs' shapes or on values the model computed: no one input
    // to name.
    call->Report(
        "the inputs do not meet the model's shape constraints: a size computed from "
        "them is " +
        std::to_string(actual) + ", expected " + std::to_string(expected));
    return;
  }
  if (kind == KILN_SHAPE_ERROR_VALUE || kind == KILN_SHAPE_ERROR_NO_DATA) {
    std::string input = DimLabel(call->signature_, false, index, -1);
    input = input.substr(0, input.rfind(" dimension"));
    if (kind == KILN_SHAPE_ERROR_NO_DATA) {
      call->Report(input + ": its values decide shapes, so its data must be given");
    } else {
      call->Report(input + " holds values that do not fit: a size computed from them is " +
                   std::to_string(actual) + ", expected " + std::to_string(expected));
    }
    return;
  }
  if (kind == KILN_SHAPE_ERROR_BOUND) {
    call->Report(label + ": " + std::to_string(actual) + " exceeds the bound " +
                 std::to_string(expected) + " the artifact was compiled with (--dim-bound)");
    return;
  }
  call->Report(label + ": expected " + std::to_string(expected) + ", got " +
               std::to_string(actual));
}

std::string IndexErrorMessage(const Signature& signature, int32_t input, int32_t dim, int64_t index,
                              int64_t size, const std::string& op) {
  std::string range = dim >= 0 ? "dimension " + std::to_string(dim) + " of size " : "size ";
  range += std::to_string(size);
  std::string where = op + (dim >= 0 ? " axis " + std::to_string(dim) : "");
  const auto& inputs = signature.inputs;
  bool named = input >= 0 && input < static_cast<int32_t>(inputs.size());
  if (dim == KILN_INDEX_SEQUENCE_LENGTH) {
    // A length, valid in [0, size - 1]: "input 'sequence_lens' holds 9, more than the
    // sequence length 5 (reverse_sequence)".
    std::string what = index < 0 ? ", a negative length"
                                 : ", more than the sequence length " + std::to_string(size - 1);
    return (named ? TensorLabel(false, inputs[input].name) + " holds "
                  : "op " + op + ": the model computed length ") +
           std::to_string(index) + what + (named ? " (" + op + ")" : "");
  }
  // An index the model computed is named by its op instead.
  if (!named) {
    return "op " + op + ": index " + std::to_string(index) +
           " (computed by the model) out of range for " + range;
  }
  return TensorLabel(false, inputs[input].name) + " holds index " + std::to_string(index) +
         ", out of range for " + range + " (" + where + ")";
}

void CallEnv::IndexError(void* self, int32_t input, int32_t dim, int64_t index, int64_t size,
                         const char* op) {
  auto* call = static_cast<CallEnv*>(self);
  call->Report(
      IndexErrorMessage(call->signature_, input, dim, index, size, op != nullptr ? op : "?"));
}

int32_t CallEnv::ParallelFor(void* self, int64_t num_tasks, TaskFn task, void* closure) {
  auto* call = static_cast<CallEnv*>(self);
  if (call->pool_ != nullptr) return call->pool_->ParallelFor(num_tasks, task, closure);
  return num_tasks > 0 ? task(closure, 0, num_tasks) : 0;
}

void* CallEnv::DeviceAlloc(void* self, int64_t bytes) {
  auto* call = static_cast<CallEnv*>(self);
  void* ptr = nullptr;
  std::string error = call->device_->Alloc(bytes, &ptr);
  if (!error.empty()) {
    call->Report(std::move(error));
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(call->mu_);
  call->device_live_.insert(ptr);
  return ptr;
}

void CallEnv::DeviceFree(void* self, void* ptr) {
  auto* call = static_cast<CallEnv*>(self);
  std::lock_guard<std::mutex> lock(call->mu_);
  // As for workspace: a pointer this env never handed out is ignored.
  if (call->device_live_.erase(ptr) == 0) return;
  call->device_->Free(ptr);
}

int32_t CallEnv::Copy(void* self, void* dst, const void* src, int64_t bytes, int32_t kind) {
  auto* call = static_cast<CallEnv*>(self);
  std::string error;
  if (kind != KILN_COPY_HOST_TO_DEVICE && kind != KILN_COPY_DEVICE_TO_HOST &&
      kind != KILN_COPY_DEVICE_TO_DEVICE) {
    error = "copy of kind " + std::to_string(kind) + ": not a KILN_COPY_* kind";
  } else if (bytes < 0) {
    error = "copy of " + std::to_string(bytes) + " bytes: negative size";
  } else {
    error = call->device_->Copy(dst, src, bytes, kind);
  }
  if (error.empty()) return 0;
  call->Report(std::move(error));
  return 1;
}

void* CallEnv::DeviceConstant(void* self, int32_t index, const void* data, int64_t bytes) {
  auto* call = static_cast<CallEnv*>(self);
  void* ptr = nullptr;
  std::string error = call->device_->Constant(index, data, bytes, &ptr);
  if (error.empty()) return ptr;
  call->Report(std::move(error));
  return nullptr;
}

int32_t CallEnv::Launch(void* self, int32_t kernel, int64_t blocks, int32_t threads, void** args) {
  auto* call = static_cast<CallEnv*>(self);
  std::string error = call->device_->Launch(kernel, blocks, threads, args);
  if (error.empty()) return 0;
  call->Report(std::move(error));
  return 1;
}

bool CallEnv::BeginDeviceRun() {
  if (device_ == nullptr) return true;
  std::string error = device_->BeginRun();
  if (error.empty()) return true;
  Report(std::move(error));
  return false;
}

void CallEnv::EndDeviceRun() {
  if (device_ == nullptr) return;
  DeviceIndexError record;
  std::string error = device_->EndRun(&record);
  if (!error.empty()) {
    Report(std::move(error));
  } else if (record.claimed) {
    Report(IndexErrorMessage(signature_, record.input, record.dim, record.index, record.size,
                             record.op));
  }
}

}  // namespace kiln::runtime
