// Reference kernels for reductions, recurrent networks, losses and signal processing.
#include "compiler/interp/kernel_util.h"

namespace kiln::interp {

void RegisterReduceKernels(KernelTable& table) {}

}  // namespace kiln::interp
