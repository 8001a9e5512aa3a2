// The Winograd rules: a 3x3, stride 1, dilation 1 conv of one group over f32 with constant
// weights and at least 8 input channels (any padding, batch, plane, even symbolic, and constant
// channel counts; its elementwise epilogue kept) as F(2x2, 3x3), rule "winograd", or
// F(4x4, 3x3), rule "winograd4" (Lavin & Gray 2015): 16 products per 2x2 output tile and input
// channel instead of 36, or 36 per 4x4 tile instead of 144. The tuner measures them against
// the conv rule; the default schedule stays the conv rule's.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

// Whether `rule` names one of the Winograd rules.
bool IsWinogradRule(std::string_view rule);

// The kernel built with the rule and knobs `trace` decides (a trace of another rule: F(2x2,
// 3x3) with the default knobs); the transformed weights packed at compile time. nullopt where
// the rule does not take it.
std::optional<ScheduledKernel> ScheduleWinograd(const ir::Stmt& body, const ir::Target& target,
                                                const ConstantOf& constant_of,
                                                const Trace& trace = {});

// Each rule's knobs for the kernel: output tiles per task, and the GEMM's register tile
// (tiles by vectors of output channels). Empty when the rules do not take the kernel.
std::vector<SearchSpace> WinogradSpaces(const ir::Stmt& body, const ir::Target& target,
                                        const ConstantOf& constant_of);

}  // namespace kiln::schedule
