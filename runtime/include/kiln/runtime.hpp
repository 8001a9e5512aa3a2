// A C++ face on kiln/runtime.h: RAII for the model, std::string errors, vectors for tensors.
// Header-only and free of absl, like the runtime itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"

namespace kiln::runtime {

struct TensorInfo {
  std::string name;
  DLDataType dtype{};
  std::vector<std::string> dims;  // "784", "batch", "seq+past"
};

// The signature name of a dtype ("f32"), or a description when it has none.
inline std::string DTypeText(DLDataType dtype) {
  if (const char* name = kiln_dtype_name(dtype)) return name;
  return "dtype(code=" + std::to_string(dtype.code) + ", bits=" + std::to_string(dtype.bits) +
         ", lanes=" + std::to_string(dtype.lanes) + ")";
}

// "f32[batch, 784]"
inline std::string Describe(const TensorInfo& info) {
  std::string text = DTypeText(info.dtype) + "[";
  for (size_t d = 0; d < info.dims.size(); ++d) text += (d > 0 ? ", " : "") + info.dims[d];
  return text + "]";
}

class Model {
 public:
  // Loads an artifact; nullptr (and *error set) on failure.
  static std::unique_ptr<Model> Load(const std::string& path, std::string* error) {
    KilnModel* model = nullptr;
    if (kiln_model_load(path.c_str(), &model) != 0) {
      *error = kiln_last_error();
      return nullptr;
    }
    return std::unique_ptr<Model>(new Model(model));
  }

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const KilnModel* c_model() const { return model_.get(); }

  // Threads each Run may use (see kiln_model_set_num_threads); call before running.
  bool SetNumThreads(int32_t num_threads, std::string* error) {
    return Check(kiln_model_set_num_threads(model_.get(), num_threads), error);
  }
  int32_t num_threads() const { return kiln_model_num_threads(model_.get()); }

  // Fills (*shapes)[i] with output i's shape, computed from the inputs' shapes.
  bool OutputShapes(const std::vector<DLTensor>& inputs, std::vector<std::vector<int64_t>>* shapes,
                    std::string* error) const {
    shapes->clear();
    std::vector<int64_t*> pointers;
    for (const TensorInfo& output : outputs_) shapes->emplace_back(output.dims.size(), -1);
    for (auto& shape : *shapes) pointers.push_back(shape.data());
    return Check(kiln_model_output_shapes(model_.get(), inputs.data(), Count(inputs),
                                          pointers.data(), Count(pointers)),
                 error);
  }

  // Runs the model; outputs must carry shapes and data (see kiln_model_run).
  bool Run(const std::vector<DLTensor>& inputs, std::vector<DLTensor>* outputs,
           std::string* error) const {
    return Check(kiln_model_run(model_.get(), inputs.data(), Count(inputs), outputs->data(),
                                Count(*outputs)),
                 error);
  }

 private:
  struct Free {
    void operator()(KilnModel* model) const { kiln_model_free(model); }
  };

  explicit Model(KilnModel* model) : model_(model) {
    inputs_ = ReadInfos(0);
    outputs_ = ReadInfos(1);
  }

  std::vector<TensorInfo> ReadInfos(int32_t is_output) const {
    const KilnModel* m = model_.get();
    int32_t count = is_output ? kiln_model_num_outputs(m) : kiln_model_num_inputs(m);
    std::vector<TensorInfo> infos(count);
    for (int32_t i = 0; i < count; ++i) {
      infos[i].name = kiln_model_tensor_name(m, is_output, i);
      infos[i].dtype = kiln_model_tensor_dtype(m, is_output, i);
      for (int32_t d = 0; d < kiln_model_tensor_ndim(m, is_output, i); ++d) {
        infos[i].dims.push_back(kiln_model_tensor_dim(m, is_output, i, d));
      }
    }
    return infos;
  }

  template <typename T>
  static int32_t Count(const std::vector<T>& v) {
    return static_cast<int32_t>(v.size());
  }

  static bool Check(int rc, std::string* error) {
    if (rc == 0) return true;
    *error = kiln_last_error();
    return false;
  }

  std::unique_ptr<KilnModel, Free> model_;
  std::vector<TensorInfo> inputs_;
  std::vector<TensorInfo> outputs_;
};

}  // namespace kiln::runtime
