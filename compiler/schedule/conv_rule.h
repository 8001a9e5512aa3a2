// The conv rule, for a kernel that is legalize's direct 2-D convolution over f32 (any
// padding, strides, dilations; groups that hold whole channel blocks; any elementwise
// epilogue fused after it): an implicit GEMM with output channels in the vector lanes and a
// register tile over output columns. A pointwise conv is a matmul over the flattened plane
// and takes the matmul rule, or the tiler where its trace says so. nullopt for any other
// kernel.
#pragma once

#include <optional>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

// A conv of one group as a matmul over its output plane, for the GPU tiler: a pointwise one
// as the conv rule hands the matmul rule, any other as an implicit GEMM whose B gathers the
// input at each tap (zero in the padding). nullopt for any other kernel.
std::optional<Matmul> MatchConvAsMatmul(const ir::Stmt& body);

// `trace` decides the knobs of ConvSpaces (those it leaves out take their defaults); a
// pointwise conv takes the matmul rule for a trace of the matmul rule or of none, and the
// tiler for a trace of the conv rule; any trace of another rule is ignored.
std::optional<ScheduledKernel> ScheduleConv(const ir::Stmt& body, const ir::Target& target,
                                            const ConstantOf& constant_of = nullptr,
                                            const Trace& trace = {});

// The conv rule's spaces for the kernel, rule "conv": for the tiler, the register tile's
// columns, rows and output-channel vectors, the input-channel block and the parallel split,
// and for a conv of few taps the column-lanes form's tile of output channels and columns;
// for the row form (depthwise), whether few taps are unrolled, the register tile's width,
// the parallel split, with constant finite weights and a column stride of 1 the plane form,
// and for a depthwise conv of whole blocks of channels, channels in the vector lanes. The space is
// that of the form ScheduleConv builds with the same `constant_of` (the tiler takes deeper convs
// when their weights are constant). A pointwise conv has two: the matmul rule's (MatmulSpace), the
// default, and the tiler's. On a small plane deep in a network (49 positions, 960 input channels)
// the matmul's vectors of positions leave a quarter of their lanes empty, and the tiler, whose
// lanes are output channels, ran in 0.6-0.9 of its time; with few input channels the tiler's
// stores, a lane at a time across the planes, cost more than they save. The tuner measures both.
// Empty when the rule does not take the kernel.
std::vector<SearchSpace> ConvSpaces(const ir::Stmt& body, const ir::Target& target,
                                    const ConstantOf& constant_of = nullptr);

}  // namespace kiln::schedule
