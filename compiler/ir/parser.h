// Reads the IR text format (printer.h) back into a module: ParseModule(ToString(m)) is
// structurally equal to m (structural.h). Pass tests write their before and after modules in
// this format.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::ir {

// Variables resolve to shared nodes: a graph variable used in several places is one node, as
// is a symbolic variable within a def (and its subgraphs) or a PrimFunc, and a buffer within
// a PrimFunc. Errors are InvalidArgument "line:column: expected ..., found ...". The parser
// checks syntax and names only; VerifyModule (verifier.h) checks the rest.
absl::StatusOr<IRModule> ParseModule(std::string_view text);

}  // namespace kiln::ir
