// The nn family's kernel groups and the helpers they share. RegisterNNKernels (nn.cc)
// registers every group.
#pragma once

#include <functional>
#include <vector>

#include "compiler/interp/kernel_util.h"

namespace kiln::interp {

void RegisterNNConvKernels(KernelTable& table);    // nn_conv.cc
void RegisterNNPoolKernels(KernelTable& table);    // nn_pool.cc
void RegisterNNNormKernels(KernelTable& table);    // nn_norm.cc
void RegisterNNQuantKernels(KernelTable& table);   // nn_quant.cc
void RegisterNNEinsumKernels(KernelTable& table);  // nn_einsum.cc

// Every element as a double, minus `zero_point` (a scalar, or one value per slice along
// `axis`; null for none).
std::vector<double> ToDoubles(const NDArray& a, const NDArray* zero_point = nullptr,
                              int64_t axis = 0);
// The value of a scalar-or-1-D parameter that applies at position `i` along its axis.
double ParamAt(const NDArray& p, int64_t i);
// Rounds half to even, then clamps to the range of the integer type `dtype`.
double QuantizeValue(double v, DataType dtype);

// Calls fn(offsets) once per group of x's elements that agree on every axis not in
// `reduced`: the offsets of one group, in row-major order.
void ForEachGroup(const Shape& shape, const std::vector<bool>& reduced,
                  const std::function<void(const std::vector<int64_t>&)>& fn);

// numpy matmul of doubles: a [..., m, k] times b [..., k, n] with batch broadcasting.
absl::StatusOr<std::pair<Shape, std::vector<double>>> MatmulDoubles(const ir::ExprNode& call,
                                                                    const std::vector<double>& a,
                                                                    const Shape& a_shape,
                                                                    const std::vector<double>& b,
                                                                    const Shape& b_shape);

// Convolution (or its transpose) of doubles, with the call's window attrs and group:
// x [N, C, in...], w [M, C / group, k...] (transposed: [C, M / group, k...]).
absl::StatusOr<std::pair<Shape, std::vector<double>>> ConvDoubles(
    const ir::ExprNode& call, const std::vector<double>& x, const Shape& x_shape,
    const std::vector<double>& w, const Shape& w_shape, bool transpose);

}  // namespace kiln::interp
