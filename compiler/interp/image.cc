// Reference kernels for image and index operators.
#include "compiler/interp/kernel_util.h"

namespace kiln::interp {

void RegisterImageKernels(KernelTable& table) {}

}  // namespace kiln::interp
