// Reference kernel for einsum: every combination of label values contributes the product
// of the operands' elements to the output element its output labels select.
#include "compiler/op/nn_einsum.h"

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/nn_kernels.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// The extent of every label; dims sharing a label agree or are 1 (broadcast).
absl::StatusOr<Shape> LabelExtents(const ir::ExprNode& call, const op::EinsumSpec& spec,
                                   const std::vector<const NDArray*>& operands) {
  Shape extent(spec.num_labels, 1);
  for (size_t i = 0; i < operands.size(); ++i) {
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      int64_t& e = extent[spec.inputs[i][d]];
      int64_t dim = operands[i]->shape[d];
      if (e != 1 && dim != 1 && e != dim) {
        return KernelError(call, absl::StrCat("operand ", i, " dim ", d, " is ", dim,
                                              ", but its label has extent ", e));
      }
      if (dim != 1) e = dim;
    }
  }
  return extent;
}

// Offset of an operand's element for the given label values (size-1 dims stay at 0).
int64_t OperandOffset(const std::vector<int>& labels, const Shape& shape, const Shape& strides,
                      const Index& values) {
  int64_t off = 0;
  for (size_t d = 0; d < labels.size(); ++d) {
    if (shape[d] != 1) off += values[labels[d]] * strides[d];
  }
  return off;
}

absl::StatusOr<Value> Einsum(const ir::ExprNode& call, const std::vector<Value>& args) {
  std::vector<const NDArray*> operands;
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const NDArray* t, TensorArg(call, args, i));
    operands.push_back(t);
    ranks.push_back(t->shape.size());
  }
  KILN_ASSIGN_OR_RETURN(
      op::EinsumSpec spec,
      op::ParseEinsum(call, op::GetStringAttr(call.attrs, "equation", ""), ranks));
  KILN_ASSIGN_OR_RETURN(Shape extent, LabelExtents(call, spec, operands));
  Shape out_shape;
  for (int label : spec.output) out_shape.push_back(extent[label]);
  std::vector<Shape> strides;
  for (const NDArray* t : operands) strides.push_back(Strides(t->shape));
  Shape out_strides = Strides(out_shape);
  DataType dtype = operands.empty() ? DataType::Float() : operands[0]->dtype;
  // Integers accumulate exactly in int64; floats in double.
  std::vector<double> acc(ir::ShapeProduct(out_shape), 0);
  std::vector<uint64_t> iacc(acc.size(), 0);  // wraps like the integer type
  ForEachIndex(extent, [&](const Index& values) {
    double product = 1;
    uint64_t iproduct = 1;
    for (size_t i = 0; i < operands.size(); ++i) {
      int64_t off = OperandOffset(spec.inputs[i], operands[i]->shape, strides[i], values);
      product *= operands[i]->GetDouble(off);
      iproduct *= static_cast<uint64_t>(operands[i]->GetInt(off));
    }
    int64_t o = 0;
    for (size_t d = 0; d < spec.output.size(); ++d) o += values[spec.output[d]] * out_strides[d];
    acc[o] += product;
    iacc[o] += iproduct;
  });
  NDArray out = NDArray::Zeros(dtype, out_shape);
  for (size_t i = 0; i < acc.size(); ++i) {
    if (dtype.is_float()) {
      out.SetDouble(i, acc[i]);
    } else {
      DispatchDType(dtype, [&](auto tag) {
        out.data<decltype(tag)>()[i] = static_cast<decltype(tag)>(iacc[i]);
      });
    }
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterNNEinsumKernels(KernelTable& table) { table["einsum"] = Einsum; }

}  // namespace kiln::interp
