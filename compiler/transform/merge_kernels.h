// The kernel half of fusion: merges a producer kernel call into the call that consumes its
// result, as one new kernel over the graph values both read. fuse_ops.cc decides which calls
// to merge; this decides whether their loops allow it and writes the merged loops.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/graph.h"

namespace kiln::transform {

// `result = call_tir(kernel, args)`, as a binding of the graph function.
struct KernelCall {
  const ir::PrimFunc* kernel;
  std::vector<ir::Expr> args;
  ir::Expr result;
};

// A kernel computing the consumer's result from `args` (the producer's and the consumer's
// arguments but the intermediate, each once). Its buffers are A0, A1, ... for `args` and
// `out`, shaped by the graph values' struct info; its scalars are the graph's symbolic vars
// that it uses. Unnamed.
struct MergedKernel {
  ir::PrimFunc kernel;
  std::vector<ir::Expr> args;
};

// Inlines an elementwise, broadcast or injective producer into an elementwise, broadcast or
// injective consumer; appends an elementwise or broadcast consumer to a reduction or
// output-fusable producer as an epilogue. nullopt for any other pair, or when the kernels'
// buffers do not match the graph values' shapes.
std::optional<MergedKernel> MergeKernels(const KernelCall& producer, const KernelCall& consumer);

}  // namespace kiln::transform
