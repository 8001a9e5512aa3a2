// A loop's scan outputs have one slice per iteration that ran, a count known only at run
// time: the importer gives such a loop {count_trips} (it also returns that count, bound to a
// fresh var t like any data-dependent size) and reshapes each scan output to [t, slice...].
// Compiled code cannot size a buffer by t before the loop runs, so this pass runs the loop
// into buffers of its maximum trip count M (bound at run time, match_cast of
// tensor_to_shape): scan outputs become [M, slice...] and each reshape the prefix [0, t).
// Compiled code also keeps each carried value of a loop in one buffer of the initial value's
// shape: where the importer gave the body fresh dims for it (the interpreter runs any loop),
// the body is specialized to the initial shape and its carried results match_cast to it, a
// check in each iteration. A loop whose scan outputs thereby get shapes counts its trips.
// Loops in bodies are left alone (host lowering reports them).
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::transform {

absl::StatusOr<ir::IRModule> BindLoopTripCounts(ir::IRModule module);

}  // namespace kiln::transform
