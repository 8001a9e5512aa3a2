// LLVM code generation: the loop-level part of a module (kernels, host functions, constants)
// becomes one artifact for the target, linked by lld (ELF shared object or wasm module).
#pragma once

#include <string>
#include <vector>

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

// Where the kernels of a device artifact (host code lowered for a GPU schedule: launches,
// device memory; kiln/artifact_abi.h) run.
struct DeviceCode {
  enum class Kind {
    kCuda,      // on a CUDA GPU: `ptx` from EmitPtx, launched through the driver
    kEmulated,  // compiled for the host CPU, one block per call, for an emulated device
  };
  Kind kind = Kind::kEmulated;
  std::string ptx;
  // The ops the PTX kernels' index-error records name, by op id.
  std::vector<std::string> error_ops;
};

// Emits every PrimFunc of `module` and its constants, plus the exported
// `kiln_abi_version` and `kiln_signature` (returning `signature`), as an optimized object for
// `target`, and links it: an ELF shared object with ld.lld, or for wasm32 a wasm module with
// wasm-ld (plus kiln_wasm_env, wasm_module.h). Returns the artifact's bytes. A shared object
// whose kernels call a library (LibrariesCalled) needs the library's soname (DT_NEEDED), so
// the dynamic loader loads it with the artifact. With `device`,
// the module's host code launches its kernels on a device: for CUDA only the host functions
// are emitted for `target` (the CPU beside the GPU) and the PTX rides along.
absl::StatusOr<std::string> BuildSharedObject(const ir::IRModule& module,
                                              const std::string& signature,
                                              const ir::Target& target,
                                              const DeviceCode* device = nullptr);

// The PTX of every kernel of `module` (scheduled for the GPU `target`), from LLVM's NVPTX
// backend: one `.entry` per kernel, `void name(ptr env, ptr buffers..., scalars...)` as on
// a CPU (env unused), and the ops its index-error records name. (nvptx.cc)
absl::StatusOr<DeviceCode> EmitPtx(const ir::IRModule& module, const ir::Target& target);

// The libraries (ir::ExternLibraries names, sorted) whose functions the kernels of `module`
// call; BuildSharedObject makes the artifact need them, and the manifest names them.
std::vector<std::string> LibrariesCalled(const ir::IRModule& module);

// The LLVM IR text of the same module (for `kiln inspect` and tests).
absl::StatusOr<std::string> EmitLLVMText(const ir::IRModule& module, const std::string& signature,
                                         const ir::Target& target,
                                         const DeviceCode* device = nullptr);

}  // namespace kiln::codegen
