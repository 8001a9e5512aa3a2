// One kernel of a module compiled in memory for this machine with LLVM's ORC JIT, to be run
// and timed (the tuner's measurements, compiler/tune). The kernel is emitted and optimized
// exactly as BuildSharedObject emits it into an artifact.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"
#include "kiln/artifact_abi.h"

namespace llvm::orc {
class LLJIT;
}  // namespace llvm::orc

namespace kiln::codegen {

class JitKernel {
 public:
  using Entry = void (*)(KilnEnv* env, void** buffers, const int64_t* scalars);
  JitKernel(std::unique_ptr<llvm::orc::LLJIT> jit, Entry entry);
  ~JitKernel();

  // Calls the kernel with the data of its buffers and the values of its scalars, in the
  // order the PrimFunc declares them. `env` runs its parallel loops and hears index errors.
  void Run(KilnEnv* env, void** buffers, const int64_t* scalars) const {
    entry_(env, buffers, scalars);
  }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;  // owns the code entry_ points into
  Entry entry_;
};

// Compiles the kernel `kernel_name` of `module` for `target`, which must be this machine's
// arch (the x86_64 preset or "host" here): INVALID_ARGUMENT naming it otherwise, or naming a
// kernel the module does not have. The code also gets an exported entry point,
// `void kiln_jit_entry(KilnEnv*, void** buffers, int64_t* scalars)`, so a caller needs not
// know the kernel's signature when it is compiled.
absl::StatusOr<std::unique_ptr<JitKernel>> JitCompileKernel(const ir::IRModule& module,
                                                            const std::string& kernel_name,
                                                            const ir::Target& target);

}  // namespace kiln::codegen
