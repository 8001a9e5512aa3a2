// What a wasm32 artifact defines beyond the model: its own KilnEnv. KilnEnv holds function
// pointers, which in wasm are indices into the module's table, and JavaScript cannot portably put
// its functions into a table; so the module defines thunks that forward to imports and hands out a
// static KilnEnv of them.
#pragma once

#include "llvm/IR/Module.h"

namespace kiln::codegen {

// Adds the host imports (module "kiln"; KilnEnv's members without `self`):
//   alloc(i64 bytes) -> ptr, free(ptr), shape_error(i32 kind, i32 index, i32 dim,
//   i64 expected, i64 actual), index_error(i32 input, i32 dim, i64 index, i64 size, ptr op),
// thunks with KilnEnv's signatures that call them, a serial parallel_for
// (task(closure, 0, num_tasks)), and the exported `ptr kiln_wasm_env()` returning a constant
// KilnEnv of those thunks (self is NULL). runtime/js/kiln.mjs provides the imports.
void EmitWasmEnv(llvm::Module& module);

}  // namespace kiln::codegen
