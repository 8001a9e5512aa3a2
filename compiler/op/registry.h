// The operator registry: for each graph-level operator, how to infer the struct info of a
// call from its arguments'. Inference keeps shapes symbolic (broadcasting `n` with `1`,
// matmul over symbolic batch dims) and names the op and the dimension when shapes clash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/arith/analyzer.h"
#include "compiler/ir/graph.h"

namespace kiln::op {

// Operators (Kiln's names, not ONNX's):
//   add subtract multiply divide        elementwise with numpy broadcasting
//   relu sigmoid tanh exp copy          elementwise unary
//   matmul                              numpy matmul, ranks >= 2, broadcast batch dims
//   softmax        attrs: axis          along one axis
//   transpose      attrs: perm
//   reshape        args: data, shape    the shape is a ShapeExpr with every dim resolved
bool IsRegistered(std::string_view op);
std::vector<std::string> RegisteredOps();

// Infers the struct info of a call to a registered operator. User errors (shape clashes,
// bad attributes) are INVALID_ARGUMENT naming the op.
absl::StatusOr<ir::StructInfo> InferStructInfo(const ir::ExprNode& call,
                                               const arith::Analyzer& analyzer);

// Broadcasts two shapes numpy-style. Exposed for legalization, which needs the same rule.
absl::StatusOr<std::vector<arith::PrimExpr>> BroadcastShapes(const std::vector<arith::PrimExpr>& a,
                                                             const std::vector<arith::PrimExpr>& b,
                                                             const arith::Analyzer& analyzer);

// Reads an integer attribute, or `fallback` when absent.
int64_t GetIntAttr(const ir::Attrs& attrs, const std::string& name, int64_t fallback);
std::vector<int64_t> GetIntsAttr(const ir::Attrs& attrs, const std::string& name);

}  // namespace kiln::op
