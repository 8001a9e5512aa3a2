// Reductions, recurrent networks, losses and signal processing.
#include "compiler/op/op_def.h"

namespace kiln::op {

std::vector<OpDef> ReduceOps() { return {}; }

}  // namespace kiln::op
