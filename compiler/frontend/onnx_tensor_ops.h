// Helpers the tensor family's converters share (onnx_tensor_ops*.cc).
#pragma once

#include <optional>
#include <vector>

#include "compiler/frontend/import_context.h"
#include "compiler/op/op_def.h"

namespace kiln::frontend {

// A shape-like operand (target shape, slice bounds, pads, repeats) in the form inference
// reads best: a constant i64 vector when every value is known, a ShapeExpr when some are
// symbolic, or `value` itself when it is computed at run time.
ir::Expr ShapeLikeArg(const ImportContext& ctx, const ir::Expr& value);
// True for an integer tensor that is 0-d or 1-D of static length: what BindRuntimeValues takes.
bool IsSmallIntVector(const ir::Expr& value);
// Checks at run time that each of `dims` (computed from run-time values) is >= 0.
void CheckNonNegative(ImportContext& ctx, const std::vector<arith::PrimExpr>& dims,
                      const std::string& name_hint);
// For axes read at run time (symbolic values): checks at run time that each lies in
// [-rank, rank) (reporting the axis) and that they name distinct dims.
void CheckAxesAtRunTime(ImportContext& ctx, const std::vector<arith::PrimExpr>& axes, int64_t rank,
                        const std::string& name_hint);
// The first `out_rank` dims of `in` that are not dropped (conditions, op::NamedPositions),
// as selects: the dims that remain when the axes drop distinct dims.
std::vector<arith::PrimExpr> KeptDims(const std::vector<arith::PrimExpr>& in,
                                      const std::vector<arith::PrimExpr>& dropped, size_t out_rank);
// A dims operand (Expand's shape, Tile's repeats, ConstantOfShape's shape), whose values ONNX
// requires to be >= 0: as ShapeLikeArg, but the values of a small integer vector computed at
// run time become symbolic variables (ImportContext::BindRuntimeValues), checked >= 0 then.
absl::StatusOr<ir::Expr> DimsArg(ImportContext& ctx, const ir::Expr& value,
                                 const std::string& name_hint);
// Known values as an operand: a constant i64 vector when all are constants, else a ShapeExpr.
ir::Expr ValuesArg(const std::vector<arith::PrimExpr>& values);
// A constant 1-D i64 tensor.
ir::Expr IntsConstant(const std::vector<int64_t>& values);
// The i64 values of a constant integer tensor, if `value` is one.
std::optional<std::vector<int64_t>> ConstantInts(const ImportContext& ctx, const ir::Expr& value);

void RegisterTensorSliceConverters(ConverterTable& table);   // onnx_tensor_ops_slice.cc
void RegisterTensorIndexConverters(ConverterTable& table);   // onnx_tensor_ops_index.cc
void RegisterTensorCreateConverters(ConverterTable& table);  // onnx_tensor_ops_create.cc

}  // namespace kiln::frontend
