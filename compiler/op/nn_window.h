// Sliding-window geometry shared by convolution and pooling: the attributes of a window
// (kernel, strides, dilations, pads, auto_pad, ceil_mode) and, per spatial dim, the padding
// and output extent as PrimExprs. Struct-info inference simplifies them symbolically; the
// reference kernels evaluate them on concrete sizes, so both always agree.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/arith/analyzer.h"
#include "compiler/ir/graph.h"

namespace kiln::op {

struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;            // begin for every dim, then end for every dim
  std::vector<int64_t> output_padding;  // conv_transpose only
  std::vector<int64_t> output_shape;    // conv_transpose only; empty when not given
  std::string auto_pad = "NOTSET";      // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  bool ceil_mode = false;               // pooling only
  size_t rank() const { return kernel.size(); }
};

// Padding and output extent of one spatial dim.
struct WindowDim {
  arith::PrimExpr pad_begin, pad_end, out;
};

// Reads a window's attrs from a call with `spatial` spatial dims. The kernel extents come from
// `kernel` when given (convolutions: the weight's shape), else from the "kernel_shape" attr.
// Absent strides, dilations and pads default to 1, 1 and 0.
absl::StatusOr<Window> ReadWindow(const ir::ExprNode& call, size_t spatial,
                                  std::vector<int64_t> kernel = {});

// Convolution and pooling: out = floor((in + pads - dilation * (k - 1) - 1) / stride) + 1
// (ceil with ceil_mode), or ceil(in / stride) with SAME_* padding.
WindowDim ConvWindowDim(const Window& w, size_t d, const arith::PrimExpr& in,
                        const arith::Analyzer& analyzer);
// Transposed convolution: out = stride * (in - 1) + output_padding + dilation * (k - 1) + 1
// - pads, with pads derived from output_shape or SAME_* when those are given.
WindowDim ConvTransposeWindowDim(const Window& w, size_t d, const arith::PrimExpr& in,
                                 const arith::Analyzer& analyzer);

// Evaluates a dim expression that has no free variables (kernels call the helpers above on
// IntImm extents).
int64_t EvaluateDim(const arith::PrimExpr& e);

}  // namespace kiln::op
