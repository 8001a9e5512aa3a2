// LLVM code generation: the loop-level part of a module (kernels, host functions, constants)
// becomes one artifact for the target, linked by lld (ELF shared object or wasm module).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"

namespace kiln::codegen {

// INVALID_ARGUMENT naming what LLVM does not know about `target`: a triple it has no backend
// for (or would normalize differently), an object format other than ELF (linked by ld.lld
// into a shared object) or wasm (linked by wasm-ld), an unknown cpu or feature. LLVM itself only
// warns on stderr about unknown cpus and features, and compiles for the baseline. (Defined in
// target_machine.cc; declared here, away from LLVM's headers, for the driver.)
absl::Status CheckTarget(const ir::Target& target);

// This machine as LLVM sees it (triple, cpu name, every feature enabled or disabled), named
// "host"; INVALID_ARGUMENT when its arch is not one Kiln compiles for.
absl::StatusOr<ir::Target> HostTarget();

// Emits every PrimFunc of `module` and its constants, plus the exported
// `kiln_abi_version` and `kiln_signature` (returning `signature`), as an optimized object for
// `target`, and links it: an ELF shared object with ld.lld, or for wasm32 a wasm module with
// wasm-ld (plus kiln_wasm_env, wasm_module.h). Returns the artifact's bytes.
absl::StatusOr<std::string> BuildSharedObject(const ir::IRModule& module,
                                              const std::string& signature,
                                              const ir::Target& target);

// The PTX of every kernel of `module` (scheduled for the GPU `target`), from LLVM's NVPTX
// backend: one `.entry` per kernel, `void name(ptr env, ptr buffers..., i64 scalars...)` as on
// a CPU (env unused). (nvptx.cc; the host code that launches them is still to come.)
absl::StatusOr<std::string> EmitPtx(const ir::IRModule& module, const ir::Target& target);

// The LLVM IR text of the same module (for `kiln inspect` and tests).
absl::StatusOr<std::string> EmitLLVMText(const ir::IRModule& module, const std::string& signature,
                                         const ir::Target& target);

}  // namespace kiln::codegen
