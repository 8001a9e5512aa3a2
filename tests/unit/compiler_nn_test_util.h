// The nn family's tests: the shared test helpers, and initializers of any element type
// (the quantized ops' uint8, int8 and int32 weights and zero points).
#pragma once

#include <string>

#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln::nn_test {

using namespace testing;  // NOLINT: test helpers

// An initializer of ONNX element type `elem_type` (uint8, int8, int32, float...), raw data.
inline void Initializer(OnnxBuilder& b, const std::string& name, int elem_type,
                        const ir::NDArray& value) {
  onnx::TensorProto* t = b.model().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem_type);
  for (int64_t d : value.shape) t->add_dims(d);
  t->set_raw_data(std::string(value.bytes.begin(), value.bytes.end()));
}

}  // namespace kiln::nn_test
