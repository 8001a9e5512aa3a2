// The default rules Schedule applies, one per kernel class, and what they share.
#pragma once

#include <optional>

#include "compiler/ir/loop.h"
#include "compiler/ir/target.h"

namespace kiln::schedule {

// The generic rule: outer data-parallel loops become parallel, contiguous innermost loops
// vectorized. Loops that carry a dependence (a reduction into one element) stay serial.
ir::Stmt ScheduleLoopNests(const ir::Stmt& body);

// The matmul rule, for a kernel that is exactly legalize's matmul (C = A @ B over f32, any
// batch dims): a tiled, packed form. nullopt for any other kernel.
std::optional<ir::Stmt> ScheduleMatmul(const ir::Stmt& body, const ir::Target& target);

// Whether iterations of a loop over `var` with body `body` touch disjoint elements of every
// buffer the body writes, so they may run in any order or at once.
bool IterationsAreIndependent(const arith::PrimExpr& var, const ir::Stmt& body);

}  // namespace kiln::schedule
