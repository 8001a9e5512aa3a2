// Checks a caller's DLTensor against the signature before the artifact sees it, so a wrong
// rank, dtype or static dim is a clear message instead of an out-of-bounds read.
#pragma once

#include <string>

#include "dlpack/dlpack.h"
#include "runtime/src/signature.h"

namespace kiln::runtime {

// "input 'x'" or "output 'y'": how messages name a tensor.
std::string TensorLabel(bool is_output, const std::string& name);

// Checks rank, dtype, shape (present, non-negative, static dims as signed), and layout (dense
// row-major). With need_data, also that data is set for a non-empty tensor. Returns "" or the
// problem, e.g. "input 'x' dimension 1: expected 784, got 100".
std::string CheckTensor(const TensorSpec& spec, bool is_output, const DLTensor& tensor,
                        bool need_data);

// Checks only the shape values (non-negative, static dims as signed); for shapes an artifact
// computed.
std::string CheckShape(const TensorSpec& spec, bool is_output, const int64_t* shape);

}  // namespace kiln::runtime
