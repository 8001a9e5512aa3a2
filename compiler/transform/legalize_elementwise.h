// Scalar definitions shared by the elementwise kernel builders (legalize_elementwise*.cc).
#pragma once

#include <string>

#include "compiler/arith/expr.h"
#include "compiler/ir/graph.h"

namespace kiln::transform {

// The float activation `op` (leaky_relu, elu, softplus, ...) of one element `x`, with the
// call's attributes; nullptr for ops it does not define. Like the reference kernels, the
// value is computed in double and rounded once to x's type.
arith::PrimExpr FloatActivation(const std::string& op, const arith::PrimExpr& x,
                                const ir::Attrs& attrs);

// The ops FloatActivation defines.
const char* const* FloatActivationNames();

}  // namespace kiln::transform
