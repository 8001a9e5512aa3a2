// The rows rule, for a CPU kernel whose outer data-parallel loops hold a row that reduces
// along a contiguous axis (softmax, layer norm, reduce_sum/mean/max over the last axis): the
// outer loops fused into one row index split into parallel tasks, each f32 reduction along
// the row run in vector lanes (partials in a local buffer, a scalar tail, a horizontal
// combine) and the row's elementwise loops vectorized. nullopt for any other kernel.
#pragma once

#include <optional>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

// `trace` decides the knobs of RowsSpace (those it leaves out, or sets to a value the space
// does not hold, take their defaults); a trace of another rule is ignored.
std::optional<ScheduledKernel> ScheduleRows(const ir::Stmt& body, const ir::Target& target,
                                            const Trace& trace = {});

// The rows rule's knobs, rule "rows": rows per parallel task and independent vector
// accumulators per reduction. nullopt when the rule does not take the kernel.
std::optional<SearchSpace> RowsSpace(const ir::Stmt& body, const ir::Target& target);

}  // namespace kiln::schedule
