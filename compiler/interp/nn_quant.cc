// Reference kernels for quantization: quantize_linear, dequantize_linear,
// dynamic_quantize_linear, matmul_integer and qlinear_matmul. Rounding is half to even and
// results saturate to the integer type.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/nn_kernels.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// The position along `axis` of element i of a tensor of `shape` (0 for scalars).
int64_t AxisPosition(int64_t i, const Shape& shape, const Shape& strides, int64_t axis) {
  return shape.empty() ? 0 : (i / strides[axis]) % shape[axis];
}

absl::StatusOr<int64_t> QuantAxis(const ir::ExprNode& call, const NDArray& x) {
  if (x.shape.empty()) return 0;
  return op::NormalizeAxis(call, op::GetIntAttr(call.attrs, "axis", 1), x.shape.size());
}

// x / scale in x's precision: ONNX (and its test data) divide float32 by float32, and a
// quotient near .5 rounds differently when computed in double.
double Divide(double x, double scale, DataType dtype) {
  if (dtype == DataType::Float(32)) return static_cast<float>(x) / static_cast<float>(scale);
  return x / scale;
}

// y = saturate(round(x / scale) + zero_point), per tensor or per slice along axis.
absl::StatusOr<Value> Quantize(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* scale, TensorArg(call, args, 1));
  const NDArray* zp = args[2].is_none() ? nullptr : &args[2].tensor();
  KILN_ASSIGN_OR_RETURN(int64_t axis, QuantAxis(call, *x));
  DataType dtype = zp ? zp->dtype : DataType::UInt(8);
  NDArray out = NDArray::Zeros(dtype, x->shape);
  Shape strides = Strides(x->shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t pos = AxisPosition(i, x->shape, strides, axis);
    double v = std::nearbyint(Divide(x->GetDouble(i), ParamAt(*scale, pos), x->dtype));
    out.SetDouble(i, QuantizeValue(v + (zp ? ParamAt(*zp, pos) : 0), dtype));
  }
  return Value(std::move(out));
}

// y = (x - zero_point) * scale, in the scale's type.
absl::StatusOr<Value> Dequantize(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* scale, TensorArg(call, args, 1));
  const NDArray* zp = args[2].is_none() ? nullptr : &args[2].tensor();
  KILN_ASSIGN_OR_RETURN(int64_t axis, QuantAxis(call, *x));
  NDArray out = NDArray::Zeros(scale->dtype, x->shape);
  Shape strides = Strides(x->shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t pos = AxisPosition(i, x->shape, strides, axis);
    double centered = x->GetDouble(i) - (zp ? ParamAt(*zp, pos) : 0);
    out.SetDouble(i, centered * ParamAt(*scale, pos));
  }
  return Value(std::move(out));
}

// Computed in float32, as ONNX defines it: scale = (max(0, max x) - min(0, min x)) / 255,
// zero_point = saturate(round(-min / scale)), y = saturate(round(x / scale) + zero_point).
absl::StatusOr<Value> DynamicQuantize(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    float v = static_cast<float>(x->GetDouble(i));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  float scale = (hi - lo) / 255.0f;
  DataType u8 = DataType::UInt(8);
  double zero_point = scale == 0 ? 0 : QuantizeValue(0.0f - lo / scale, u8);
  NDArray y = NDArray::Zeros(u8, x->shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    float q = scale == 0 ? 0.0f : std::nearbyint(static_cast<float>(x->GetDouble(i)) / scale);
    y.SetDouble(i, QuantizeValue(q + zero_point, u8));
  }
  NDArray scale_out = NDArray::Zeros(DataType::Float(32), {});
  scale_out.SetDouble(0, scale);
  NDArray zp_out = NDArray::Zeros(u8, {});
  zp_out.SetDouble(0, zero_point);
  return Value::Tuple({Value(std::move(y)), Value(std::move(scale_out)), Value(std::move(zp_out))});
}

const NDArray* Optional(const std::vector<Value>& args, size_t i) {
  return i < args.size() && !args[i].is_none() ? &args[i].tensor() : nullptr;
}

// (a - a_zero_point) @ (b - b_zero_point) in int32; a's zero point may be per row, b's per
// column.
absl::StatusOr<Value> MatmulInteger(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* b, TensorArg(call, args, 1));
  if (a->shape.size() < 2 || b->shape.size() < 2) {
    return KernelError(call, "operands must have rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(
      auto y, MatmulDoubles(call, ToDoubles(*a, Optional(args, 2), a->shape.size() - 2), a->shape,
                            ToDoubles(*b, Optional(args, 3), b->shape.size() - 1), b->shape));
  NDArray out = NDArray::Zeros(DataType::Int(32), y.first);
  for (size_t i = 0; i < y.second.size(); ++i) out.SetDouble(i, y.second[i]);
  return Value(std::move(out));
}

// qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the integer product
// rescaled by a_scale * b_scale / y_scale, then quantized to y_zp's type.
absl::StatusOr<Value> QLinearMatmul(const ir::ExprNode& call, const std::vector<Value>& args) {
  std::vector<const NDArray*> t;
  for (size_t i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(const NDArray* arg, TensorArg(call, args, i));
    t.push_back(arg);
  }
  const NDArray &a = *t[0], &b = *t[3];
  if (a.shape.size() < 2 || b.shape.size() < 2) {
    return KernelError(call, "operands must have rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(auto y, MatmulDoubles(call, ToDoubles(a, t[2], a.shape.size() - 2), a.shape,
                                              ToDoubles(b, t[5], b.shape.size() - 1), b.shape));
  const Shape& shape = y.first;
  int64_t m = shape[shape.size() - 2], n = shape.back();
  NDArray out = NDArray::Zeros(t[7]->dtype, shape);
  for (size_t i = 0; i < y.second.size(); ++i) {
    double scale = ParamAt(*t[1], (i / n) % m) * ParamAt(*t[4], i % n) / t[6]->GetDouble(0);
    out.SetDouble(i, QuantizeValue(y.second[i] * scale + t[7]->GetDouble(0), t[7]->dtype));
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterNNQuantKernels(KernelTable& table) {
  table["quantize_linear"] = Quantize;
  table["dequantize_linear"] = Dequantize;
  table["dynamic_quantize_linear"] = DynamicQuantize;
  table["matmul_integer"] = MatmulInteger;
  table["qlinear_matmul"] = QLinearMatmul;
}

}  // namespace kiln::interp
