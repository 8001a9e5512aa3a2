// Control flow: if, loop, scan.
#include "compiler/op/op_def.h"

namespace kiln::op {

std::vector<OpDef> ControlOps() { return {}; }

}  // namespace kiln::op
