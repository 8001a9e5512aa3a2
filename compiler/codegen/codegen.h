// LLVM code generation: the loop-level part of a module (kernels, host functions, constants)
// becomes one shared object for the target, linked in-process with lld.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"

namespace kiln::codegen {

// Emits every PrimFunc of `module` and its constants, plus the exported
// `kiln_abi_version` and `kiln_signature` (returning `signature`), as an optimized object for
// `target`, and links it into a shared object. Returns the shared object's bytes.
absl::StatusOr<std::string> BuildSharedObject(const ir::IRModule& module,
                                              const std::string& signature,
                                              const ir::Target& target);

// The LLVM IR text of the same module (for `kiln inspect` and tests).
absl::StatusOr<std::string> EmitLLVMText(const ir::IRModule& module, const std::string& signature,
                                         const ir::Target& target);

}  // namespace kiln::codegen
