// LLVM code generation: the loop-level part of a module (kernels, host functions, constants)
// becomes one shared object for the target, linked in-process with lld.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"

namespace kiln::codegen {

// INVALID_ARGUMENT naming what LLVM does not know about `target`: a triple it has no backend
// for (or would normalize differently), a non-ELF object format (the artifact is linked by
// ld.lld as an ELF shared object), an unknown cpu or feature. LLVM itself only warns on stderr
// about unknown cpus and features, and compiles for the baseline.
// (Defined in target_machine.cc; declared here, away from LLVM's headers, for the driver.)
absl::Status CheckTarget(const ir::Target& target);

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
