// The conv rule, for a kernel that is legalize's direct 2-D convolution over f32 (any
// padding, strides, dilations; groups that hold whole channel blocks; any elementwise
// epilogue fused after it): an implicit GEMM with output channels in the vector lanes and a
// register tile over output columns; a pointwise conv is a matmul over the flattened plane
// and takes the matmul rule. nullopt for any other kernel.
#pragma once

#include <optional>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

// A conv of one group as a matmul over its output plane, for the GPU tiler: a pointwise one
// as the conv rule hands the matmul rule, any other as an implicit GEMM whose B gathers the
// input at each tap (zero in the padding). nullopt for any other kernel.
std::optional<Matmul> MatchConvAsMatmul(const ir::Stmt& body);

// `trace` decides the knobs of ConvSpace (those it leaves out take their defaults); a
// pointwise conv takes a trace of the matmul rule, and any trace of another rule is ignored.
std::optional<ScheduledKernel> ScheduleConv(const ir::Stmt& body, const ir::Target& target,
                                            const ConstantOf& constant_of = nullptr,
                                            const Trace& trace = {});

// The conv rule's knobs for the kernel, rule "conv": for the tiler, the register tile's
// columns, rows and output-channel vectors, the input-channel block and the parallel split;
// for the row form (depthwise), whether few taps are unrolled, the register tile's width,
// the parallel split and, with constant finite weights and a column stride of 1, the plane
// form. The space is that of the form ScheduleConv builds with the same
// `constant_of` (the tiler takes deeper convs when their weights are constant).
// A pointwise conv has the matmul rule's (MatmulSpace). nullopt when the rule does not take
// the kernel.
std::optional<SearchSpace> ConvSpace(const ir::Stmt& body, const ir::Target& target,
                                     const ConstantOf& constant_of = nullptr);

}  // namespace kiln::schedule
