// Image and index operators: resize, grid sampling, boxes, sorting and searching.
#include "compiler/op/op_def.h"

namespace kiln::op {

std::vector<OpDef> ImageOps() { return {}; }

}  // namespace kiln::op
