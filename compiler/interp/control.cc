// Reference kernels for control flow.
#include "compiler/interp/kernel_util.h"

namespace kiln::interp {

void RegisterControlKernels(KernelTable& table) {}

}  // namespace kiln::interp
