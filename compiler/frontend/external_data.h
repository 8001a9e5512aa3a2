// ONNX external data, inlined on the client: a tensor whose bytes live in a file beside the
// model gets them copied into raw_data, so that kilnd receives one self-contained blob and never
// opens a file a model names. The importer refuses any tensor that still refers to a file.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {

// Every TensorProto of the model (initializers, Constant and other attribute tensors, sparse
// tensors, subgraphs, functions, training graphs) with data_location EXTERNAL is read from the
// file its `location` names inside `model_dir`, at `offset` for `length` bytes. A location that
// is absolute, contains "..", or resolves (through links) outside `model_dir`, an unknown key,
// a bad offset or length, or a byte count that does not fit the tensor's type and dims is
// INVALID_ARGUMENT naming the tensor and the location. A model that would pass protobuf's 2 GiB
// limit is RESOURCE_EXHAUSTED.
absl::Status InlineExternalData(onnx::ModelProto& model, const std::filesystem::path& model_dir);

// The serialized model with its external data inlined (as above), read from beside the model
// file at `model_path`. Bytes that do not parse as a model, or a model without external data,
// come back unchanged: the importer reports the former, and the latter keeps its digest.
absl::StatusOr<std::string> InlineExternalDataOfModelFile(std::string model_bytes,
                                                          const std::filesystem::path& model_path);

// The importer's answer to a tensor with external data, for kilnd never reads files: an
// INVALID_ARGUMENT naming the location and saying that the client must inline it.
absl::Status ExternalDataNotInlined(const onnx::TensorProto& tensor);

}  // namespace kiln::frontend
