#include "compiler/frontend/onnx_tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/external_data.h"

namespace kiln::frontend {

using arith::DataType;

absl::StatusOr<DataType> DataTypeFromOnnx(int32_t elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
      return DataType::Float(32);
    case onnx::TensorProto::DOUBLE:
      return DataType::Float(64);
    case onnx::TensorProto::FLOAT16:
      return DataType::Float(16);
    case onnx::TensorProto::INT8:
      return DataType::Int(8);
    case onnx::TensorProto::INT16:
      return DataType::Int(16);
    case onnx::TensorProto::INT32:
      return DataType::Int(32);
    case onnx::TensorProto::INT64:
      return DataType::Int(64);
    case onnx::TensorProto::UINT8:
      return DataType::UInt(8);
    case onnx::TensorProto::UINT16:
      return DataType::UInt(16);
    case onnx::TensorProto::UINT32:
      return DataType::UInt(32);
    case onnx::TensorProto::UINT64:
      return DataType::UInt(64);
    case onnx::TensorProto::BOOL:
      return DataType::Bool();
    default:
      break;
  }
  const char* name =
      onnx::TensorProto::DataType_IsValid(elem_type)
          ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type))
                .c_str()
          : "unknown";
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported element type ", elem_type, " (", name, ")"));
}

// Copies a typed repeated field into `out`, converting each element to the tensor's dtype.
template <typename Field>
static absl::Status CopyField(const Field& field, ir::NDArray& out) {
  if (field.size() != out.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", field.size(), " values for ", out.num_elements(), " elements"));
  }
  for (int i = 0; i < field.size(); ++i) {
    // Integers go straight in: int64 values beyond 2^53 must not pass through a double.
    if constexpr (std::is_integral_v<std::decay_t<decltype(field.Get(i))>>) {
      out.SetInt(i, static_cast<int64_t>(field.Get(i)));
    } else {
      out.SetDouble(i, field.Get(i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::NDArray> NDArrayFromTensorProto(const onnx::TensorProto& tensor) {
  // Never opened here: the client inlines external data (external_data.h).
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) return ExternalDataNotInlined(tensor);
  KILN_ASSIGN_OR_RETURN(DataType dtype, DataTypeFromOnnx(tensor.data_type()));
  std::vector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension ", d));
  }
  ir::NDArray out = ir::NDArray::Zeros(dtype, shape);
  if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != out.bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("raw_data has ", tensor.raw_data().size(),
                                                     " bytes, expected ", out.bytes.size()));
    }
    std::memcpy(out.bytes.data(), tensor.raw_data().data(), out.bytes.size());
    return out;
  }
  if (out.num_elements() == 0) return out;
  if (dtype.code == DataType::kFloat && dtype.bits == 16) {
    return absl::InvalidArgumentError("float16 values outside raw_data are not supported yet");
  }
  switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      KILN_RETURN_IF_ERROR(CopyField(tensor.float_data(), out));
      break;
    case onnx::TensorProto::DOUBLE:
      KILN_RETURN_IF_ERROR(CopyField(tensor.double_data(), out));
      break;
    case onnx::TensorProto::INT64:
      KILN_RETURN_IF_ERROR(CopyField(tensor.int64_data(), out));
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      KILN_RETURN_IF_ERROR(CopyField(tensor.uint64_data(), out));
      break;
    default:
      KILN_RETURN_IF_ERROR(CopyField(tensor.int32_data(), out));
      break;
  }
  return out;
}

absl::StatusOr<ir::NDArray> NDArrayFromConstantAttr(const onnx::AttributeProto& attr) {
  const std::string& name = attr.name();
  if (name == "value") return NDArrayFromTensorProto(attr.t());
  if (name == "value_float" || name == "value_int") {
    ir::NDArray out =
        ir::NDArray::Zeros(name == "value_float" ? DataType::Float(32) : DataType::Int(64), {});
    if (name == "value_float") {
      out.SetDouble(0, attr.f());
    } else {
      out.SetInt(0, attr.i());
    }
    return out;
  }
  if (name == "value_floats" || name == "value_ints") {
    bool floats = name == "value_floats";
    int64_t n = floats ? attr.floats_size() : attr.ints_size();
    ir::NDArray out = ir::NDArray::Zeros(floats ? DataType::Float(32) : DataType::Int(64), {n});
    for (int64_t i = 0; i < n; ++i) {
      if (floats) {
        out.SetDouble(i, attr.floats(i));
      } else {
        out.SetInt(i, attr.ints(i));
      }
    }
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported Constant attribute '", name, "'"));
}

}  // namespace kiln::frontend
