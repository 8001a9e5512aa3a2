// Reductions and normalizations.
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {

void RegisterReduceKernelBuilders(KernelBuilderTable& table) {}

}  // namespace kiln::transform
