// ONNX tensors and element types to Kiln's NDArray and DataType.
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {

// ONNX TensorProto.DataType -> DataType; unsupported types are INVALID_ARGUMENT naming them.
absl::StatusOr<arith::DataType> DataTypeFromOnnx(int32_t elem_type);
// Reads raw_data or the typed repeated fields. External data is INVALID_ARGUMENT: the client
// inlines it (external_data.h), and no file is ever opened here.
absl::StatusOr<ir::NDArray> NDArrayFromTensorProto(const onnx::TensorProto& tensor);
// The value of a Constant node: value, value_float(s), value_int(s).
absl::StatusOr<ir::NDArray> NDArrayFromConstantAttr(const onnx::AttributeProto& attr);

}  // namespace kiln::frontend
