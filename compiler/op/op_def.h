// How operator families declare their operators. Each family file (elementwise.cc,
// tensor.cc, nn.cc, reduce.cc, image.cc, control.cc) returns its OpDefs; registry.cc
// gathers them.
// The helpers below are shared by the families' struct-info inference.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/arith/analyzer.h"
#include "compiler/ir/graph.h"

namespace kiln::op {

using InferFn = std::function<absl::StatusOr<ir::StructInfo>(const ir::ExprNode& call,
                                                             const arith::Analyzer& analyzer)>;

struct OpDef {
  std::string name;
  InferFn infer;
};

std::vector<OpDef> ElementwiseOps();  // op/elementwise.cc: math, activations, logic, cast
std::vector<OpDef> TensorOps();       // op/tensor.cc: shape and data movement
std::vector<OpDef> NNOps();           // op/nn.cc: matmul, conv, pooling, norms, softmax
std::vector<OpDef> ReduceOps();       // op/reduce.cc: reductions, RNNs, losses, signal
std::vector<OpDef> ImageOps();        // op/image.cc: resize, grid sampling, sorting, boxes
std::vector<OpDef> ControlOps();      // op/control.cc: if, loop, scan

// "op NAME: message" as INVALID_ARGUMENT.
absl::Status OpError(const ir::ExprNode& call, const std::string& message);
// The struct info of argument i, which must be a tensor (its shape may be unknown).
absl::StatusOr<const ir::StructInfo*> TensorArg(const ir::ExprNode& call, size_t i);
// All arguments, each a tensor with a known shape; `count` of them.
absl::StatusOr<std::vector<const ir::StructInfo*>> TensorArgs(const ir::ExprNode& call,
                                                              size_t count);
// Resolves a possibly negative axis against `rank`; INVALID_ARGUMENT when out of range.
absl::StatusOr<int64_t> NormalizeAxis(const ir::ExprNode& call, int64_t axis, int64_t rank);
// For axes read at run time (symbolic values; negative ones count from `rank`): for each
// position in [0, rank), the condition that one of them names it. Built from comparisons and
// selects only, so nothing is assumed of the values (ImportContext::BindRuntimeValues).
std::vector<arith::PrimExpr> NamedPositions(const std::vector<arith::PrimExpr>& axes, int64_t rank);

int64_t GetIntAttr(const ir::Attrs& attrs, const std::string& name, int64_t fallback);
double GetFloatAttr(const ir::Attrs& attrs, const std::string& name, double fallback);
std::string GetStringAttr(const ir::Attrs& attrs, const std::string& name,
                          const std::string& fallback);
std::vector<int64_t> GetIntsAttr(const ir::Attrs& attrs, const std::string& name);
std::vector<double> GetFloatsAttr(const ir::Attrs& attrs, const std::string& name);
std::vector<std::string> GetStringsAttr(const ir::Attrs& attrs, const std::string& name);
bool HasAttr(const ir::Attrs& attrs, const std::string& name);

// What is known of a value that is either `a` or `b` (the two branches of an If): `a` when
// they agree, else as much as both share (dtype and rank).
ir::StructInfo JoinStructInfo(const ir::StructInfo& a, const ir::StructInfo& b);

// True when some dim is computed from tensor values read at run time (the importer writes
// those with selects; see ImportContext::BindRuntimeValues): what shape inference cannot
// prove about them is checked at run time instead.
bool DependsOnRuntimeValues(const std::vector<arith::PrimExpr>& dims);

// Broadcasts two shapes numpy-style: dims aligned from the right, 1 stretches. Symbolic dims
// must be provably equal (or one of them 1), or one must be the other clamped to a constant
// (min(seq, 64) against seq), which every valid input makes equal; the result is the unclamped.
absl::StatusOr<std::vector<arith::PrimExpr>> BroadcastShapes(const std::vector<arith::PrimExpr>& a,
                                                             const std::vector<arith::PrimExpr>& b,
                                                             const arith::Analyzer& analyzer);

}  // namespace kiln::op
