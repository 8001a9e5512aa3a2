// The Winograd rule, rule "winograd": a 3x3, stride 1, dilation 1 conv of one group over f32
// with constant weights and at least 8 input channels (any padding, batch, plane, even
// symbolic, and constant channel counts; its elementwise epilogue kept) as F(2x2, 3x3) (Lavin &
// Gray 2015): 16 products per 2x2 output tile and input channel instead of 36. The tuner measures
// it against the conv rule; the default schedule stays the conv rule's.
#pragma once

#include <optional>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

// The kernel built with the knobs `trace` decides (a trace of another rule decides none);
// the transformed weights packed at compile time. nullopt where the rule does not take it.
std::optional<ScheduledKernel> ScheduleWinograd(const ir::Stmt& body, const ir::Target& target,
                                                const ConstantOf& constant_of,
                                                const Trace& trace = {});

// The rule's knobs for the kernel: output tiles per task, and the GEMM's register tile
// (tiles by vectors of output channels). nullopt when the rule does not take the kernel.
std::optional<SearchSpace> WinogradSpace(const ir::Stmt& body, const ir::Target& target,
                                         const ConstantOf& constant_of);

}  // namespace kiln::schedule
