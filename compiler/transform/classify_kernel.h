// Kernel classification by analysis feedback: what kind of loop nest a kernel is, read from
// its loops and the indices of its loads and stores (never from the op it came from), so a
// hand-written kernel classifies like a legalized one. Fusion (fuse_ops.h) decides from it.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/loop.h"

namespace kiln::transform {

enum class KernelClass : uint8_t {
  kElementwise,    // out[i] = f(inputs read at exactly i)
  kBroadcast,      // out[i] = f(inputs read at a projection of i: some dims dropped or 0)
  kInjective,      // each element written once from loads at index expressions of the loops
  kReduction,      // per output element: an init, then an accumulate loop into that element
  kOutputFusable,  // a reduction with data reuse (matmul, conv): inputs read across elements
  kOpaque,         // anything else: data-dependent indexing, several writes, calls
};
const char* KernelClassName(KernelClass kind);

// The output buffer is the kernel's last buffer, as call_tir passes it.
KernelClass ClassifyKernel(const ir::PrimFunc& func);

// The per-element form that fusion rewrites: a perfect nest of loops from 0 over the output's
// shape, one loop per dim in order, whose body reads and writes the output only at the loop
// variables, so the body finishes exactly its own element. A read at 0 in a dim of extent 1
// is at the variable too: `body` has it so.
struct ElementNest {
  std::vector<ir::Stmt> loops;        // the For statements, outermost first
  std::vector<arith::PrimExpr> vars;  // their variables: the output element's index
  ir::Stmt body;                      // inside the innermost loop
  arith::PrimExpr value;              // when body is one store out[vars] = value, else null
};
std::optional<ElementNest> MatchElementNest(const ir::PrimFunc& func);

// Rebuilds the loops of `nest` around a new innermost body.
ir::Stmt RebuildNest(const ElementNest& nest, ir::Stmt body);

}  // namespace kiln::transform
