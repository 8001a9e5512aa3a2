// The operator registry: for each graph-level operator, how to infer the struct info of a
// call from its arguments'. Inference keeps shapes symbolic (broadcasting `n` with `1`,
// matmul over symbolic batch dims) and names the op and the dimension when shapes clash.
// Where a shape depends on data, the result keeps its rank only.
//
// Operator names are ONNX's in snake_case ("gather_elements", "reduce_sum"), with the same
// semantics and attributes normalized by the importer (defaults filled in), except the
// first ones Kiln had: add subtract multiply divide (Add Sub Mul Div) and copy (a fresh
// buffer with the same contents).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/op/op_def.h"

namespace kiln::op {

bool IsRegistered(std::string_view op);
std::vector<std::string> RegisteredOps();

// Infers the struct info of a call to a registered operator. User errors (shape clashes,
// bad attributes) are INVALID_ARGUMENT naming the op.
absl::StatusOr<ir::StructInfo> InferStructInfo(const ir::ExprNode& call,
                                               const arith::Analyzer& analyzer);

}  // namespace kiln::op
