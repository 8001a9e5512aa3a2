// The nn family's converter groups and helpers they share; RegisterNNConverters
// (onnx_nn.cc) registers every group.
#pragma once

#include <string>
#include <vector>

#include "compiler/frontend/import_context.h"

namespace kiln::frontend {

void RegisterNNConvConverters(ConverterTable& table);   // onnx_nn_conv.cc
void RegisterNNNormConverters(ConverterTable& table);   // onnx_nn_norm.cc
void RegisterNNQuantConverters(ConverterTable& table);  // onnx_nn_quant.cc

// Emits a matmul-like `op` (rank >= 2 operands with batch broadcast) as the node's output 0,
// with numpy's rules for 1-D operands: args[a] gets a leading 1 and args[b] a trailing 1 by
// reshapes, and the result drops them again.
absl::Status EmitMatmulOutput(ImportContext& ctx, const std::string& op, std::vector<ir::Expr> args,
                              size_t a, size_t b);

}  // namespace kiln::frontend
