// Elementwise operators: math, activations, comparisons, logic and casts.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::op {
namespace {

using ir::StructInfo;

absl::StatusOr<StructInfo> InferBinary(const ir::ExprNode& call,
                                       const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 2));
  if (args[0]->dtype != args[1]->dtype) {
    return OpError(call, absl::StrCat("operand dtypes differ: ", args[0]->dtype.ToString(),
                                      " and ", args[1]->dtype.ToString()));
  }
  auto shape = BroadcastShapes(*args[0]->shape, *args[1]->shape, analyzer);
  if (!shape.ok()) return OpError(call, std::string(shape.status().message()));
  return StructInfo::Tensor(*std::move(shape), args[0]->dtype);
}

absl::StatusOr<StructInfo> InferUnary(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  return *x;
}

}  // namespace

std::vector<OpDef> ElementwiseOps() {
  return {
      {"add", InferBinary},  {"subtract", InferBinary}, {"multiply", InferBinary},
      {"divide", InferBinary}, {"relu", InferUnary},    {"sigmoid", InferUnary},
      {"tanh", InferUnary},  {"exp", InferUnary},       {"copy", InferUnary},
  };
}

}  // namespace kiln::op
