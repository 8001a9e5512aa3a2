// Index operators (gather, gather_elements; their indices are checked at run time) and tensor
// makers (trilu, eye_like, one_hot,
// range, constant_of_shape, shape and size as data, the cosine windows), following the
// reference kernels in interp/tensor_index.cc, interp/tensor_create.cc and
// interp/reduce_signal.cc.
#include <algorithm>
#include <cmath>

#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

int64_t AxisAttr(const KernelContext& k, int64_t rank, int64_t fallback) {
  int64_t axis = op::GetIntAttr(k.call.attrs, "axis", fallback);
  return axis < 0 ? axis + rank : axis;
}

PrimExpr One(DataType dtype) {
  return dtype.is_float() ? arith::FloatImm(1, dtype) : arith::IntImm(1, dtype);
}

// out[o..., j..., i...] = data[o..., indices[j...], i...]
Stmt GatherBody(const KernelContext& k) {
  const Buffer &data = k.inputs[0], &indices = k.inputs[1];
  int64_t axis = AxisAttr(k, data->shape.size(), 0);
  size_t q = indices->shape.size();
  return Compute(k.out, [&](const Indices& idx) {
    Indices j(idx.begin() + axis, idx.begin() + axis + q);
    Indices at(idx.begin(), idx.begin() + axis);
    at.push_back(CheckedIndex(k, 1, arith::Load(indices, j), data->shape[axis], axis, true));
    at.insert(at.end(), idx.begin() + axis + q, idx.end());
    return arith::Load(data, at);
  });
}

// out[idx] = data[idx with the axis coordinate replaced by indices[idx]]
Stmt GatherElementsBody(const KernelContext& k) {
  const Buffer &data = k.inputs[0], &indices = k.inputs[1];
  int64_t axis = AxisAttr(k, data->shape.size(), 0);
  return Compute(k.out, [&](const Indices& idx) {
    Indices at = idx;
    at[axis] = CheckedIndex(k, 1, arith::Load(indices, idx), data->shape[axis], axis, true);
    return arith::Load(data, at);
  });
}

// Keeps the upper (c - r >= k) or lower (c - r <= k) triangle of each trailing matrix;
// k may be computed at run time.
Stmt TriluBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  bool upper = op::GetIntAttr(k.call.attrs, "upper", 1) != 0;
  PrimExpr diag = arith::Cast(DataType::Int(), ScalarOperand(k, 1));
  return Compute(k.out, [&](const Indices& idx) {
    size_t n = idx.size();
    PrimExpr offset = idx[n - 1] - idx[n - 2];
    PrimExpr keep = arith::Binary(upper ? ExprKind::kGE : ExprKind::kLE, offset, diag);
    return arith::Select(keep, arith::Load(x, idx), Zero(x->dtype));
  });
}

Stmt EyeLikeBody(const KernelContext& k) {
  int64_t diag = op::GetIntAttr(k.call.attrs, "k", 0);
  DataType t = k.out->dtype;
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr on = arith::Binary(ExprKind::kEQ, idx[1] - idx[0], arith::IntImm(diag));
    return arith::Select(on, One(t), Zero(t));
  });
}

// values = [off, on]; float indices truncate, negative ones count from depth. No index is
// out of range: one that names no position leaves its row off, as ONNX defines.
Stmt OneHotBody(const KernelContext& k) {
  const Buffer &indices = k.inputs[0], &values = k.inputs.back();
  int64_t axis = AxisAttr(k, k.out->shape.size(), -1);
  PrimExpr depth = k.out->shape[axis];
  return Compute(k.out, [&](const Indices& idx) {
    Indices src = idx;
    src.erase(src.begin() + axis);
    PrimExpr v = WrapIndex(arith::Load(indices, src), depth);
    PrimExpr hot = arith::Binary(ExprKind::kEQ, v, idx[axis]);
    return arith::Select(hot, arith::Load(values, {arith::IntImm(1)}),
                         arith::Load(values, {arith::IntImm(0)}));
  });
}

// start + i * delta: integers exact in i64, floats in double and rounded once, as the
// reference computes them.
Stmt RangeBody(const KernelContext& k) {
  DataType t = k.out->dtype;
  DataType wide = t.is_float() ? DataType::Float(64) : DataType::Int();
  PrimExpr start = arith::Cast(wide, ScalarOperand(k, 0));
  PrimExpr delta = arith::Cast(wide, ScalarOperand(k, 2));
  return Compute(k.out, [&](const Indices& idx) {
    return arith::Cast(t, start + arith::Cast(wide, idx[0]) * delta);
  });
}

Stmt ConstantOfShapeBody(const KernelContext& k) {
  PrimExpr value = ScalarOperand(k, 1);
  return Compute(k.out, [&](const Indices&) { return value; });
}

// shape(x) used as data: each element is one of x's (symbolic) extents, which are the
// kernel's scalar parameters. The output's length is static, so one store per element.
Stmt ShapeBody(const KernelContext& k) {
  const Buffer& in = k.inputs[0];
  int64_t rank = in->shape.size();
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(op::GetIntAttr(k.call.attrs, "start", 0));
  int64_t end = std::max(start, clamp(op::GetIntAttr(k.call.attrs, "end", rank)));
  std::vector<Stmt> stores;
  for (int64_t d = start; d < end; ++d) {
    stores.push_back(
        ir::Store(k.out, {arith::IntImm(d - start)}, arith::Cast(k.out->dtype, in->shape[d])));
  }
  return ir::Seq(stores);
}

// size(x): the product of x's extents, a 0-d i64.
Stmt SizeBody(const KernelContext& k) {
  PrimExpr n = arith::IntImm(1);
  for (const PrimExpr& d : k.inputs[0]->shape) n = n * d;
  return ir::Store(k.out, {}, arith::Cast(k.out->dtype, k.analyzer.Simplify(n)));
}

// Generalized cosine windows, as the reference's Window: sum_k a_k cos(2 pi k n / N) in
// double, N the size when periodic, size - 1 when symmetric (a window of one is 1).
Stmt CosineWindowBody(const std::vector<double>& coeffs, const KernelContext& k) {
  DataType f64 = DataType::Float(64);
  PrimExpr size = k.out->shape[0];
  bool periodic = op::GetIntAttr(k.call.attrs, "periodic", 1) != 0;
  PrimExpr period = arith::Cast(f64, periodic ? size : size - arith::IntImm(1));
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr v = arith::FloatImm(0, f64);
    for (size_t c = 0; c < coeffs.size(); ++c) {
      PrimExpr kn = arith::Cast(f64, arith::IntImm(c) * idx[0]);
      PrimExpr angle = arith::Binary(ExprKind::kDiv, arith::FloatImm(2 * M_PI, f64) * kn, period);
      v = v + arith::FloatImm(coeffs[c], f64) * arith::Call(f64, "cos", {angle});
    }
    PrimExpr single = arith::Binary(ExprKind::kEQ, period, arith::FloatImm(0, f64));
    return arith::Cast(k.out->dtype, arith::Select(single, arith::FloatImm(1, f64), v));
  });
}

}  // namespace

void RegisterTensorIndexKernelBuilders(KernelBuilderTable& table) {
  auto always = [](Stmt (*body)(const KernelContext&)) {
    return [body](const KernelContext& k) -> absl::StatusOr<Stmt> { return body(k); };
  };
  // Indices known as a ShapeExpr have no buffer to load from.
  auto with_indices = [](Stmt (*body)(const KernelContext&)) {
    return [body](const KernelContext& k) -> absl::StatusOr<Stmt> {
      if (k.inputs.size() < 2) return NotConstant(k.call, 1, "indices as a tensor");
      return body(k);
    };
  };
  table["gather"] = with_indices(GatherBody);
  table["gather_elements"] = with_indices(GatherElementsBody);
  table["trilu"] = always(TriluBody);
  table["eye_like"] = always(EyeLikeBody);
  table["one_hot"] = always(OneHotBody);
  table["range"] = always(RangeBody);
  table["constant_of_shape"] = always(ConstantOfShapeBody);
  table["shape"] = always(ShapeBody);
  table["size"] = always(SizeBody);
  auto window = [](std::vector<double> coeffs) {
    return [coeffs](const KernelContext& k) -> absl::StatusOr<Stmt> {
      return CosineWindowBody(coeffs, k);
    };
  };
  table["hann_window"] = window({0.5, -0.5});
  table["hamming_window"] = window({25.0 / 46.0, -21.0 / 46.0});
  table["blackman_window"] = window({0.42, -0.5, 0.08});
}

}  // namespace kiln::transform
