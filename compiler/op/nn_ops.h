// The nn family's op groups; NNOps() in nn.cc gathers them.
#pragma once

#include <vector>

#include "compiler/op/op_def.h"

namespace kiln::op {

std::vector<OpDef> NNConvOps();    // nn_conv.cc: convolutions and pooling
std::vector<OpDef> NNNormOps();    // nn_norm.cc: batch, layer, instance norms, LRN, MVN
std::vector<OpDef> NNQuantOps();   // nn_quant.cc: quantize, dequantize, integer matmul
std::vector<OpDef> NNEinsumOps();  // nn_einsum.cc: einsum

// The argument i when it is given; null for an omitted optional operand (ir::MakeNone()).
const ir::StructInfo* OptionalTensorArg(const ir::ExprNode& call, size_t i);

// numpy matmul of shapes of rank >= 2: batch dims broadcast, inner dims must agree.
absl::StatusOr<std::vector<arith::PrimExpr>> MatmulShape(const ir::ExprNode& call,
                                                         const std::vector<arith::PrimExpr>& a,
                                                         const std::vector<arith::PrimExpr>& b,
                                                         const arith::Analyzer& analyzer);

}  // namespace kiln::op
