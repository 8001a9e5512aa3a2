// What one compilation asks of the passes beyond the module itself, and what they leave
// behind for the manifest. Passes that need none of it ignore it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "compiler/arith/expr.h"
#include "compiler/ir/target.h"

namespace kiln::ir {

struct PassContext {
  Target target;
  // The target whose schedules the kernels get, when not `target`'s: a GPU target's
  // schedules compiled for a CPU run their blocks and threads as serial loops, which checks
  // them where there is no GPU.
  std::optional<Target> schedule_target;
  // User upper bounds of symbolic dims ("seq" -> 4096), for memory planning.
  std::map<std::string, int64_t> dim_bounds;

  // Memory planning's result, in terms of the inputs' symbolic dims: the workspace the
  // artifact allocates per run (storage shared across non-overlapping lifetimes) and what it
  // would need if every intermediate had its own storage. Null until host lowering ran.
  arith::PrimExpr workspace_bytes;
  arith::PrimExpr no_reuse_bytes;
};

}  // namespace kiln::ir
