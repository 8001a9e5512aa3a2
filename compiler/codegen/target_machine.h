// The LLVM side of code generation that does not depend on Kiln's IR: target lookup, the
// optimization pipeline and object emission.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/target.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

// Routes LLVM's diagnostics for `ctx` into `errors` (errors only; warnings such as "loop not
// vectorized" and remarks are dropped) instead of stderr, and instead of exiting on an error.
void CollectDiagnostics(llvm::LLVMContext& ctx, std::string* errors);

// A target machine for `target` (triple, cpu, features), position-independent code at -O3.
// Initializes LLVM's targets on first use; safe to call from several threads.
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const ir::Target& target);

// Runs the new pass manager's O3 pipeline. No library function is assumed to exist (the
// artifact links against nothing), so no pass turns loops into memset/memcpy calls.
void OptimizeModule(llvm::Module& module, llvm::TargetMachine& machine);

// The relocatable object file for `module`, in memory.
absl::StatusOr<std::string> EmitObjectFile(llvm::Module& module, llvm::TargetMachine& machine);
// The same as assembly text (PTX for NVPTX).
absl::StatusOr<std::string> EmitAssembly(llvm::Module& module, llvm::TargetMachine& machine);

}  // namespace kiln::codegen
