// Helpers the tensor family's struct-info inference shares. Many tensor ops take
// "shape-like" operands (a target shape, slice bounds, pads, repeats): small integer vectors
// that are known at compile time (a constant, or a ShapeExpr when they are symbolic) or
// computed at run time (a 1-D tensor). Inference reads them through KnownValues; when they
// are not known, the result keeps its rank only.
#pragma once

#include <optional>
#include <vector>

#include "compiler/op/op_def.h"

namespace kiln::op {

// The values of a shape-like operand known at compile time: a constant integer tensor of
// rank <= 1 (as IntImms) or a ShapeExpr. nullopt when they are computed at run time.
std::optional<std::vector<arith::PrimExpr>> KnownValues(const ir::Expr& arg);
// KnownValues when every value is a constant integer.
std::optional<std::vector<int64_t>> KnownInts(const ir::Expr& arg);
// How many values the shape-like operand `i` holds (its length), or -1 when that is not
// static. INVALID_ARGUMENT when the operand is not a 0-d or 1-D tensor or a ShapeExpr.
absl::StatusOr<int64_t> ValueCount(const ir::ExprNode& call, size_t i);

// min / max that resolve to one side when the analyzer can prove the order.
arith::PrimExpr ProvedMin(const arith::PrimExpr& a, const arith::PrimExpr& b,
                          const arith::Analyzer& analyzer);
arith::PrimExpr ProvedMax(const arith::PrimExpr& a, const arith::PrimExpr& b,
                          const arith::Analyzer& analyzer);

// The product of dims, simplified.
arith::PrimExpr DimProduct(const std::vector<arith::PrimExpr>& dims,
                           const arith::Analyzer& analyzer);

std::vector<OpDef> TensorSliceOps();   // op/tensor_slice.cc: slice, pad, split, concat
std::vector<OpDef> TensorCreateOps();  // op/tensor_create.cc: shape, size, range, ...
std::vector<OpDef> TensorIndexOps();   // op/tensor_index.cc: gather, scatter, compress, ...

}  // namespace kiln::op
