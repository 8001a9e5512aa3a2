#include "runtime/src/tensor_check.h"

#include "kiln/runtime.hpp"

namespace kiln::runtime {
namespace {

bool SameDType(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// DLPack allows explicit strides; the artifacts index dense row-major memory, so explicit
// strides must be exactly those (a size-1 dim's stride never matters).
bool IsRowMajor(const DLTensor& tensor) {
  if (tensor.strides == nullptr) return true;
  int64_t expected = 1;
  for (int d = tensor.ndim - 1; d >= 0; --d) {
    if (tensor.shape[d] != 1 && tensor.strides[d] != expected) return false;
    expected *= tensor.shape[d];
  }
  return true;
}

int64_t NumElements(const DLTensor& tensor) {
  int64_t n = 1;
  for (int d = 0; d < tensor.ndim; ++d) n *= tensor.shape[d];
  return n;
}

}  // namespace

std::string TensorLabel(bool is_output, const std::string& name) {
  return std::string(is_output ? "output '" : "input '") + name + "'";
}

std::string CheckShape(const TensorSpec& spec, bool is_output, const int64_t* shape) {
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    std::string where = TensorLabel(is_output, spec.name) + " dimension " + std::to_string(d);
    if (shape[d] < 0) return where + ": negative size " + std::to_string(shape[d]);
    if (spec.static_dims[d] >= 0 && shape[d] != spec.static_dims[d]) {
      return where + ": expected " + spec.dims[d] + ", got " + std::to_string(shape[d]);
    }
  }
  return "";
}

std::string CheckTensor(const TensorSpec& spec, bool is_output, const DLTensor& tensor,
                        bool need_data) {
  std::string label = TensorLabel(is_output, spec.name);
  if (tensor.ndim != static_cast<int>(spec.dims.size())) {
    return label + ": expected rank " + std::to_string(spec.dims.size()) + ", got " +
           std::to_string(tensor.ndim);
  }
  if (!SameDType(tensor.dtype, spec.dtype)) {
    return label + ": expected dtype " + DTypeText(spec.dtype) + ", got " + DTypeText(tensor.dtype);
  }
  if (tensor.ndim > 0 && tensor.shape == nullptr) return label + ": shape is NULL";
  std::string error = CheckShape(spec, is_output, tensor.shape);
  if (!error.empty()) return error;
  if (!IsRowMajor(tensor)) return label + ": strides must be NULL or dense row-major";
  if (need_data && tensor.data == nullptr && NumElements(tensor) > 0) {
    return label + ": data is NULL";
  }
  return "";
}

}  // namespace kiln::runtime
