// The C API of kiln/runtime.h: loading an artifact, signature queries, checked calls.
#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/artifact_abi.h"
#include "kiln/runtime.h"
#include "runtime/src/call_env.h"
#include "runtime/src/cuda_device.h"
#include "runtime/src/device.h"
#include "runtime/src/signature.h"
#include "runtime/src/tensor_check.h"
#include "runtime/src/thread_pool.h"
#include "runtime/src/workspace_cache.h"

struct KilnModel {
  std::string path;
  void* handle = nullptr;
  KilnInferShapesFn infer_shapes = nullptr;
  KilnRunFn run = nullptr;
  kiln::runtime::Signature signature;
  int32_t num_threads = 1;
  // Started by kiln_model_set_num_threads for more than one thread; null runs serially.
  std::unique_ptr<kiln::runtime::ThreadPool> pool;
  // Workspace kept between runs (kiln_model_run may be called from several threads).
  mutable kiln::runtime::WorkspaceCache workspace;
  // Where a device artifact's kernels run; null for a CPU artifact.
  std::unique_ptr<kiln::runtime::Device> device;
  // Calls of a device artifact run one at a time: its index-error record is one per module.
  mutable std::mutex device_mu;

  ~KilnModel() {
    // An emulated device holds the artifact's kernels, so it goes first.
    device.reset();
    if (handle != nullptr) dlclose(handle);
  }
};

namespace {

using kiln::runtime::CallEnv;
using kiln::runtime::CheckShape;
using kiln::runtime::CheckTensor;
using kiln::runtime::TensorSpec;

thread_local std::string last_error;

int Fail(std::string message) {
  last_error = std::move(message);
  return 1;
}

// Looks a symbol up in the artifact alone; returns "" or a message naming file and symbol.
template <typename Fn>
std::string Resolve(const KilnModel& model, const char* symbol, Fn* out) {
  dlerror();
  void* address = dlsym(model.handle, symbol);
  if (address == nullptr) {
    return "artifact '" + model.path + "' does not export '" + symbol + "'";
  }
  *out = reinterpret_cast<Fn>(address);
  return "";
}

// The arch an ELF file was built for, by its e_machine field; "" for another file or machine.
std::string ElfArch(const std::string& path) {
  unsigned char header[20] = {};
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return "";
  size_t read = std::fread(header, 1, sizeof header, file);
  std::fclose(file);
  if (read != sizeof header || std::memcmp(header, ELFMAG, SELFMAG) != 0) return "";
  switch (header[18] | header[19] << 8) {  // little-endian, as every arch Kiln targets
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_RISCV:
      return "riscv64";
  }
  return "";
}

#if defined(__x86_64__)
constexpr char kThisArch[] = "x86_64";
#elif defined(__aarch64__)
constexpr char kThisArch[] = "aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
constexpr char kThisArch[] = "riscv64";
#else
constexpr char kThisArch[] = "";
#endif

std::string OpenArtifact(KilnModel* model) {
  // Clear messages for the common mistakes, before dlopen's.
  struct stat info;
  if (stat(model->path.c_str(), &info) != 0) {
    return "cannot open artifact '" + model->path + "': " + std::strerror(errno);
  }
  std::string arch = ElfArch(model->path);
  if (!arch.empty() && *kThisArch && arch != kThisArch) {
    return "artifact '" + model->path + "' is built for " + arch + "; this machine is " +
           kThisArch + " (compile for this machine's target, or run it where it belongs)";
  }
  // dlopen searches the library path for a name without a slash; an artifact is a file.
  std::string dl_path =
      model->path.find('/') == std::string::npos ? "./" + model->path : model->path;
  model->handle = dlopen(dl_path.c_str(), RTLD_LOCAL | RTLD_NOW);
  if (model->handle == nullptr) {
    return "cannot load artifact '" + model->path + "': " + dlerror();
  }
  return "";
}

// The lines of `text`, without a last empty one.
std::vector<std::string> SplitLines(const char* text) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    lines.push_back(rest.substr(0, end));
    rest = end == std::string::npos ? "" : rest.substr(end + 1);
  }
  return lines;
}

// The kernels of kiln_gpu_emulated_kernels, one per name; the array may end in a NULL entry, so
// at most `count` entries are read and a NULL among them means the array is short.
std::string EmulatedKernels(const KilnModel& model, KilnGpuEmulatedKernelsFn emulated, size_t count,
                            std::vector<KilnEmulatedKernelFn>* out) {
  const KilnEmulatedKernelFn* kernels = emulated();
  while (out->size() < count && kernels != nullptr && kernels[out->size()] != nullptr) {
    out->push_back(kernels[out->size()]);
  }
  if (out->size() == count) return "";
  return "artifact '" + model.path + "': " + KILN_SYMBOL_GPU_KERNELS + " names " +
         std::to_string(count) + " kernels, but " + KILN_SYMBOL_GPU_EMULATED_KERNELS + " has " +
         std::to_string(out->size());
}

// A device artifact (ABI version 4) runs its kernels on a CUDA GPU when it carries PTX, else on
// an emulated device in this process.
std::string BindDevice(KilnModel* model) {
  KilnGpuTextFn kernels = nullptr;
  KilnGpuTextFn error_ops = nullptr;
  std::string error = Resolve(*model, KILN_SYMBOL_GPU_KERNELS, &kernels);
  if (error.empty()) error = Resolve(*model, KILN_SYMBOL_GPU_ERROR_OPS, &error_ops);
  if (!error.empty()) return error;
  KilnGpuTextFn ptx = nullptr;
  KilnGpuEmulatedKernelsFn emulated = nullptr;
  bool has_ptx = Resolve(*model, KILN_SYMBOL_GPU_PTX, &ptx).empty();
  bool has_emulated = Resolve(*model, KILN_SYMBOL_GPU_EMULATED_KERNELS, &emulated).empty();
  if (has_ptx == has_emulated) {
    return "artifact '" + model->path + "' is a device artifact (ABI version 4) but exports " +
           (has_ptx ? "both " : "neither ") + KILN_SYMBOL_GPU_PTX + (has_ptx ? " and " : " nor ") +
           KILN_SYMBOL_GPU_EMULATED_KERNELS + "; it must export one";
  }
  const char* kernel_text = kernels();
  const char* error_op_text = error_ops();
  if (kernel_text == nullptr || error_op_text == nullptr) {
    return "artifact '" + model->path +
           "': " + (kernel_text == nullptr ? KILN_SYMBOL_GPU_KERNELS : KILN_SYMBOL_GPU_ERROR_OPS) +
           " returned NULL";
  }
  std::vector<std::string> kernel_names = SplitLines(kernel_text);
  if (has_ptx) {
    model->device = kiln::runtime::LoadCudaDevice(model->path, ptx(), std::move(kernel_names),
                                                  SplitLines(error_op_text), &error);
    return error;
  }
  std::vector<KilnEmulatedKernelFn> functions;
  error = EmulatedKernels(*model, emulated, kernel_names.size(), &functions);
  if (error.empty()) {
    model->device = std::make_unique<kiln::runtime::EmulatedDevice>(std::move(functions));
  }
  return error;
}

std::string BindArtifact(KilnModel* model) {
  KilnAbiVersionFn abi_version = nullptr;
  KilnSignatureFn signature = nullptr;
  std::string error = Resolve(*model, KILN_SYMBOL_ABI_VERSION, &abi_version);
  if (error.empty()) error = Resolve(*model, KILN_SYMBOL_SIGNATURE, &signature);
  if (error.empty()) error = Resolve(*model, KILN_SYMBOL_INFER_SHAPES, &model->infer_shapes);
  if (error.empty()) error = Resolve(*model, KILN_SYMBOL_RUN, &model->run);
  if (!error.empty()) return error;
  // Checked before the signature is read: another ABI version may mean another format.
  int32_t version = abi_version();
  if (version != KILN_ABI_VERSION_CPU && version != KILN_ABI_VERSION) {
    return "artifact '" + model->path + "' has ABI version " + std::to_string(version) +
           "; this runtime supports versions " + std::to_string(KILN_ABI_VERSION_CPU) +
           " (CPU) and " + std::to_string(KILN_ABI_VERSION) + " (device)";
  }
  const char* text = signature();
  if (text == nullptr) return "artifact '" + model->path + "': kiln_signature returned NULL";
  error = kiln::runtime::ParseSignature(text, &model->signature);
  if (!error.empty()) return "artifact '" + model->path + "': bad signature: " + error;
  return version == KILN_ABI_VERSION ? BindDevice(model) : "";
}

// Calls kiln_run or kiln_infer_shapes (both may launch kernels) with the device's index-error
// record cleared before and read after; returns the call's result.
int32_t CallArtifact(KilnRunFn function, CallEnv* call, DLTensor* inputs, DLTensor* outputs) {
  if (!call->BeginDeviceRun()) return 1;
  int32_t result = function(call->env(), inputs, outputs);
  call->EndDeviceRun();
  return result;
}

// Held for a call of a device artifact; empty for a CPU artifact, whose calls may overlap.
std::unique_lock<std::mutex> LockDevice(const KilnModel& model) {
  if (model.device == nullptr) return {};
  return std::unique_lock<std::mutex>(model.device_mu);
}

// The thread count the artifact's target asked for, 0 when it asked for none.
int32_t DefaultThreads(const KilnModel& model) {
  KilnDefaultThreadsFn default_threads = nullptr;
  if (!Resolve(model, KILN_SYMBOL_DEFAULT_THREADS, &default_threads).empty()) return 0;
  return default_threads();
}

const TensorSpec* FindSpec(const KilnModel* model, int32_t is_output, int32_t index) {
  if (model == nullptr) return nullptr;
  const auto& specs = is_output ? model->signature.outputs : model->signature.inputs;
  if (index < 0 || index >= static_cast<int32_t>(specs.size())) return nullptr;
  return &specs[index];
}

std::string CheckCount(const char* what, size_t expected, int32_t actual) {
  if (actual == static_cast<int32_t>(expected)) return "";
  return std::string("expected ") + std::to_string(expected) + " " + what + ", got " +
         std::to_string(actual);
}

// Checks the tensors and copies them for the artifact, which takes non-const pointers and
// ignores byte_offset (so the offset is folded into data here).
std::string PrepareTensors(const std::vector<TensorSpec>& specs, bool is_output,
                           const DLTensor* tensors, int32_t count, bool need_data,
                           std::vector<DLTensor>* out) {
  std::string error = CheckCount(is_output ? "outputs" : "inputs", specs.size(), count);
  if (error.empty() && count > 0 && tensors == nullptr) error = "tensor array is NULL";
  for (int32_t i = 0; error.empty() && i < count; ++i) {
    error = CheckTensor(specs[i], is_output, tensors[i], need_data);
    DLTensor copy = tensors[i];
    if (copy.data != nullptr) copy.data = static_cast<char*>(copy.data) + copy.byte_offset;
    copy.byte_offset = 0;
    out->push_back(copy);
  }
  return error;
}

// Outputs for kiln_infer_shapes: the caller's shape arrays, dtype and rank from the signature.
std::vector<DLTensor> ShapeOnlyOutputs(const KilnModel& model, int64_t* const* shapes,
                                       DLDevice device) {
  std::vector<DLTensor> outputs;
  for (const TensorSpec& spec : model.signature.outputs) {
    DLTensor tensor{};
    tensor.device = device;
    tensor.ndim = static_cast<int>(spec.dims.size());
    tensor.dtype = spec.dtype;
    tensor.shape = shapes[outputs.size()];
    outputs.push_back(tensor);
  }
  return outputs;
}

std::string CheckShapeArrays(const KilnModel& model, int64_t* const* shapes) {
  for (size_t i = 0; i < model.signature.outputs.size(); ++i) {
    if (!model.signature.outputs[i].dims.empty() && shapes[i] == nullptr) {
      return "output_shapes[" + std::to_string(i) + "] is NULL";
    }
  }
  return "";
}

}  // namespace

extern "C" {

const char* kiln_last_error(void) { return last_error.c_str(); }

int kiln_model_load(const char* artifact_path, KilnModel** out) {
  if (out == nullptr) return Fail("kiln_model_load: out is NULL");
  *out = nullptr;
  if (artifact_path == nullptr) return Fail("kiln_model_load: artifact path is NULL");
  auto model = std::make_unique<KilnModel>();
  model->path = artifact_path;
  std::string error = OpenArtifact(model.get());
  if (error.empty()) error = BindArtifact(model.get());
  if (!error.empty()) return Fail(error);
  if (int32_t threads = DefaultThreads(*model); threads > 1) {
    if (kiln_model_set_num_threads(model.get(), threads) != 0) return -1;
  }
  *out = model.release();
  return 0;
}

void kiln_model_free(KilnModel* model) { delete model; }

int kiln_model_set_num_threads(KilnModel* model, int32_t num_threads) {
  if (model == nullptr) return Fail("kiln_model_set_num_threads: model is NULL");
  if (num_threads < 0) {
    return Fail("kiln_model_set_num_threads: thread count " + std::to_string(num_threads) +
                " is negative");
  }
  if (num_threads == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    num_threads = cpus > 0 ? static_cast<int32_t>(cpus) : 1;
  }
  if (num_threads == model->num_threads) return 0;
  model->pool.reset();
  if (num_threads > 1) model->pool = std::make_unique<kiln::runtime::ThreadPool>(num_threads);
  model->num_threads = num_threads;
  return 0;
}

int32_t kiln_model_num_threads(const KilnModel* model) {
  return model == nullptr ? -1 : model->num_threads;
}

int32_t kiln_model_num_inputs(const KilnModel* model) {
  return model == nullptr ? -1 : static_cast<int32_t>(model->signature.inputs.size());
}

int32_t kiln_model_num_outputs(const KilnModel* model) {
  return model == nullptr ? -1 : static_cast<int32_t>(model->signature.outputs.size());
}

const char* kiln_model_tensor_name(const KilnModel* model, int32_t is_output, int32_t index) {
  const TensorSpec* spec = FindSpec(model, is_output, index);
  return spec == nullptr ? nullptr : spec->name.c_str();
}

DLDataType kiln_model_tensor_dtype(const KilnModel* model, int32_t is_output, int32_t index) {
  const TensorSpec* spec = FindSpec(model, is_output, index);
  return spec == nullptr ? DLDataType{0, 0, 0} : spec->dtype;
}

int32_t kiln_model_tensor_ndim(const KilnModel* model, int32_t is_output, int32_t index) {
  const TensorSpec* spec = FindSpec(model, is_output, index);
  return spec == nullptr ? -1 : static_cast<int32_t>(spec->dims.size());
}

const char* kiln_model_tensor_dim(const KilnModel* model, int32_t is_output, int32_t index,
                                  int32_t dim) {
  const TensorSpec* spec = FindSpec(model, is_output, index);
  if (spec == nullptr || dim < 0 || dim >= static_cast<int32_t>(spec->dims.size())) {
    return nullptr;
  }
  return spec->dims[dim].c_str();
}

int kiln_model_output_shapes(const KilnModel* model, const DLTensor* inputs, int32_t num_inputs,
                             int64_t* const* output_shapes, int32_t num_outputs) {
  if (model == nullptr) return Fail("kiln_model_output_shapes: model is NULL");
  const auto& signature = model->signature;
  std::vector<DLTensor> in;
  std::string error = PrepareTensors(signature.inputs, false, inputs, num_inputs, false, &in);
  if (error.empty()) error = CheckCount("outputs", signature.outputs.size(), num_outputs);
  if (error.empty() && num_outputs > 0 && output_shapes == nullptr) error = "output_shapes is NULL";
  if (error.empty()) error = CheckShapeArrays(*model, output_shapes);
  if (!error.empty()) return Fail(error);

  DLDevice device = in.empty() ? DLDevice{kDLCPU, 0} : in[0].device;
  std::vector<DLTensor> out = ShapeOnlyOutputs(*model, output_shapes, device);
  std::unique_lock<std::mutex> device_lock = LockDevice(*model);
  CallEnv call(signature, nullptr, nullptr, model->device.get());
  int32_t result = CallArtifact(model->infer_shapes, &call, in.data(), out.data());
  if (result != 0 || call.HasReport()) return Fail(call.FailureMessage());
  // A shape the caller will allocate from must not be negative or contradict the signature.
  for (size_t i = 0; i < out.size(); ++i) {
    error = CheckShape(signature.outputs[i], true, out[i].shape);
    if (!error.empty())
      return Fail("artifact '" + model->path + "' computed a bad shape: " + error);
  }
  return 0;
}

int kiln_model_run(const KilnModel* model, const DLTensor* inputs, int32_t num_inputs,
                   DLTensor* outputs, int32_t num_outputs) {
  if (model == nullptr) return Fail("kiln_model_run: model is NULL");
  const auto& signature = model->signature;
  std::vector<DLTensor> in, out;
  std::string error = PrepareTensors(signature.inputs, false, inputs, num_inputs, true, &in);
  if (error.empty()) {
    error = PrepareTensors(signature.outputs, true, outputs, num_outputs, true, &out);
  }
  if (!error.empty()) return Fail(error);
  std::unique_lock<std::mutex> device_lock = LockDevice(*model);
  CallEnv call(signature, model->pool.get(), &model->workspace, model->device.get());
  // An index error lets the host code run on (kernels cannot stop it), so it fails the call
  // even after a 0 return.
  int32_t result = CallArtifact(model->run, &call, in.data(), out.data());
  if (result != 0 || call.HasReport()) return Fail(call.FailureMessage());
  return 0;
}

const char* kiln_dtype_name(DLDataType dtype) { return kiln::runtime::DTypeName(dtype); }

int kiln_dtype_parse(const char* name, DLDataType* out) {
  if (name == nullptr || out == nullptr) return 1;
  return kiln::runtime::ParseDType(name, out) ? 0 : 1;
}

}  // extern "C"
