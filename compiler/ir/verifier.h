// The IR's well-formedness check, run between passes in tests and debug builds: a pass that
// breaks an invariant is caught where it does so, not passes later in codegen.
#pragma once

#include "absl/status/status.h"
#include "compiler/ir/graph.h"

namespace kiln::ir {

// Checks, for graph functions: every variable is defined (parameter or binding) before it is
// used and bound once; binding variables have struct info, equal to their call's; symbolic
// variables are bound (a bare dimension of a parameter's or match_cast's struct info) before
// they are used; call_tir names a kernel of the module with a buffer per argument and output;
// TupleGetItem indexes a tuple in range; If has a scalar bool condition and two branches
// without parameters. For PrimFuncs: loads and stores index every dimension, store the
// buffer's dtype, and use parameter or allocated buffers in scope; variables are scalar
// parameters or used inside their loop or let; kiln.* intrinsics appear in host functions
// only, and calls to kernels pass what the kernel declares. Returns InvalidArgument listing
// each problem as "function @f: binding 2 (%y): what is wrong", one per line.
absl::Status VerifyModule(const IRModule& module);

}  // namespace kiln::ir
