// Reference kernels: one plain, obviously correct implementation per graph-level operator,
// for every dtype the ONNX suite uses. Each family file registers its kernels; the
// interpreter looks them up by op name. A kernel gets the call (for attrs and struct info)
// and the evaluated arguments, and returns the op's value.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/interp/value.h"
#include "compiler/ir/graph.h"

namespace kiln::interp {

using KernelFn =
    std::function<absl::StatusOr<Value>(const ir::ExprNode& call, const std::vector<Value>& args)>;
using KernelTable = std::map<std::string, KernelFn, std::less<>>;

void RegisterElementwiseKernels(KernelTable& table);  // interp/elementwise.cc
void RegisterTensorKernels(KernelTable& table);       // interp/tensor.cc
void RegisterNNKernels(KernelTable& table);           // interp/nn.cc
void RegisterReduceKernels(KernelTable& table);       // interp/reduce.cc
void RegisterImageKernels(KernelTable& table);        // interp/image.cc
void RegisterControlKernels(KernelTable& table);      // interp/control.cc

// The kernel for `op`, or null.
const KernelFn* FindKernel(std::string_view op);

// "op NAME: message" as INVALID_ARGUMENT, for errors that only show at run time (a shape
// computed from data that does not fit, an index out of range).
absl::Status KernelError(const ir::ExprNode& call, const std::string& message);

}  // namespace kiln::interp
