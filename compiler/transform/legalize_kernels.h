// What legalization's kernel builders share: the context a builder gets for one call, the
// registration of builders per operator family, and small compute-definition helpers
// (a loop nest per output element, numpy-broadcast loads).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/arith/analyzer.h"
#include "compiler/ir/graph.h"

namespace kiln::transform {

using Indices = std::vector<arith::PrimExpr>;

// One operator call to define as a kernel: its input buffers (one per tensor argument, in
// order; ShapeExpr arguments and omitted (none) operands are left out, and a constant
// argument's values can be read from call.args), its output buffers, and an analyzer that
// knows the shape variables. A call whose result is a tuple has one output buffer per field,
// in order (`outs`); `out` is the first, the only one of a tensor result.
struct KernelContext {
  const ir::ExprNode& call;
  std::vector<arith::Buffer> inputs;
  arith::Buffer out;
  const arith::Analyzer& analyzer;
  std::vector<arith::Buffer> outs;
  // Per call argument: the artifact input it is (its position among main's parameters), or
  // -1; kernels that check run-time indices name that input when one is out of range.
  std::vector<int> arg_inputs = {};
};

using KernelBuilder = std::function<absl::StatusOr<ir::Stmt>(const KernelContext&)>;
using KernelBuilderTable = std::map<std::string, KernelBuilder>;

void RegisterElementwiseKernelBuilders(KernelBuilderTable& table);    // legalize_elementwise.cc
void RegisterTensorKernelBuilders(KernelBuilderTable& table);         // legalize_tensor.cc
void RegisterNNKernelBuilders(KernelBuilderTable& table);             // legalize_nn.cc
void RegisterReduceKernelBuilders(KernelBuilderTable& table);         // legalize_reduce.cc
void RegisterImageKernelBuilders(KernelBuilderTable& table);          // legalize_image.cc
void RegisterMultiOutputKernelBuilders(KernelBuilderTable& table);    // legalize_multi_output.cc
void RegisterRecurrentKernelBuilders(KernelBuilderTable& table);      // legalize_rnn.cc
void RegisterSignalKernelBuilders(KernelBuilderTable& table);         // legalize_signal.cc
void RegisterTextKernelBuilders(KernelBuilderTable& table);           // legalize_text.cc
void RegisterDataDependentKernelBuilders(KernelBuilderTable& table);  // legalize_data_dependent.cc

// The input buffer of call argument `arg`, or null where that argument is omitted (none) or
// absent: k.inputs leaves out ShapeExpr and none arguments.
arith::Buffer OperandBuffer(const KernelContext& k, size_t arg);

arith::PrimExpr Zero(arith::DataType dtype);
// for i0, i1, ... over `shape` (loop vars named prefix0, prefix1...): body(indices)
ir::Stmt LoopNest(const std::vector<arith::PrimExpr>& shape, const std::string& prefix,
                  const std::function<ir::Stmt(const Indices&)>& body);
// out[idx] = fcompute(idx) for every element of `out`.
ir::Stmt Compute(const arith::Buffer& out,
                 const std::function<arith::PrimExpr(const Indices&)>& fcompute);
// Loads `buf` at the output position `idx`, numpy broadcasting: dims are aligned from the
// right, and a dim of extent 1 is read at 0.
arith::PrimExpr LoadBroadcast(const arith::Buffer& buf, const Indices& idx);

}  // namespace kiln::transform
