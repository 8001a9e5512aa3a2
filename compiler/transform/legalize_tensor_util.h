// What the tensor family's kernel builders share: reading an operand's values at compile
// time, and one element of a scalar operand in a kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {

// The integer values of call.args[i] when they are known at compile time: a constant
// tensor, or a ShapeExpr (whose values may be symbolic); nullopt otherwise.
std::optional<std::vector<arith::PrimExpr>> IntsOperand(const ir::ExprNode& call, size_t i);
// The error for an operand that must be known at compile time and is not.
absl::Status NotConstant(const ir::ExprNode& call, size_t i, const std::string& what);
// The first element of call.args[i] inside a kernel: a ShapeExpr's value, else a load from
// its input buffer.
arith::PrimExpr ScalarOperand(const KernelContext& k, size_t i);
// The position in k.inputs of call.args[i] (ShapeExpr arguments and omitted operands have
// none).
size_t InputIndex(const ir::ExprNode& call, size_t i);
// The input buffer of call.args[i], or nullptr when that operand is omitted or a ShapeExpr.
const arith::Buffer* OptionalInput(const KernelContext& k, size_t i);
// An index read at run time, as i64; a negative one counts from the end of an axis of
// extent `dim`.
arith::PrimExpr WrapIndex(arith::PrimExpr index, arith::PrimExpr dim);
// An index read at run time from call.args[arg] (`index`), checked against `size`, the
// extent of dimension `dim` of the tensor it indexes (-1: a flat index): the kernel reports
// an out-of-range index and stops (ir::intrinsic::kCheckIndex). With `wrap`, a negative
// index counts from the end once, as ONNX's gathers and scatters allow. Gives the index as
// i64, for use in a load or store.
arith::PrimExpr CheckedIndex(const KernelContext& k, size_t arg, arith::PrimExpr index,
                             arith::PrimExpr size, int dim, bool wrap);
// A sequence length read at run time from call.args[arg], checked to lie in [0, steps]: the
// kernel reports one out of range, naming the input, and stops. Gives the length as i64.
arith::PrimExpr CheckedSequenceLength(const KernelContext& k, size_t arg, arith::PrimExpr length,
                                      arith::PrimExpr steps);
// A per-tensor or per-slice quantization parameter at slice `pos`, as the reference's
// ParamAt: a parameter of one element is read at 0 whatever its rank.
arith::PrimExpr ParamAt(const arith::Buffer& p, arith::PrimExpr pos);
// A double constant, for kernels that compute in double as the reference does.
arith::PrimExpr DoubleImm(double v);
// v converted to type t, without a cast when it has that type already.
arith::PrimExpr CastIfNeeded(arith::DataType t, arith::PrimExpr v);
// v (a double) rounded half to even, then clamped to the range of integer type t.
arith::PrimExpr Saturate(arith::PrimExpr v, arith::DataType t);

void RegisterTensorIndexKernelBuilders(KernelBuilderTable& table);  // legalize_tensor_index.cc
void RegisterScatterKernelBuilders(KernelBuilderTable& table);      // legalize_scatter.cc
void RegisterEinsumKernelBuilders(KernelBuilderTable& table);       // legalize_einsum.cc

}  // namespace kiln::transform
