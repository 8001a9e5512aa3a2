// Neural-network operators: matmul and softmax; convolution and pooling are in
// legalize_nn_conv.cc.
#include <cmath>

#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {

void RegisterNNConvKernelBuilders(KernelBuilderTable& table);  // legalize_nn_conv.cc

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

Stmt MatmulBody(const KernelContext& k) {
  const Buffer &a = k.inputs[0], &b = k.inputs[1], &c = k.out;
  PrimExpr kdim = a->shape.back();
  return LoopNest(c->shape, "i", [&](const Indices& idx) {
    size_t n = idx.size();
    Indices batch(idx.begin(), idx.end() - 2);
    PrimExpr kv = arith::MakeVar("k");
    auto operand = [&](const Buffer& buf, PrimExpr row, PrimExpr col) {
      Indices at = batch;
      at.push_back(row);
      at.push_back(col);
      // Batch dims broadcast like elementwise operands.
      size_t offset = at.size() - buf->shape.size();
      Indices own;
      for (size_t d = 0; d < buf->shape.size(); ++d) {
        bool bcast = d + 2 < buf->shape.size() && buf->shape[d]->is_const_int(1);
        own.push_back(bcast ? arith::IntImm(0) : at[offset + d]);
      }
      return arith::Load(buf, own);
    };
    Stmt init = ir::Store(c, idx, Zero(c->dtype));
    Stmt update = ir::Store(
        c, idx, arith::Load(c, idx) + operand(a, idx[n - 2], kv) * operand(b, kv, idx[n - 1]));
    return ir::Seq({init, ir::For(kv, arith::IntImm(0), kdim, ir::ForKind::kSerial, update)});
  });
}

// Numerically stable softmax along one axis: subtract the max before exponentiating.
Stmt SoftmaxBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  int64_t axis = op::GetIntAttr(k.call.attrs, "axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(x->shape.size());
  std::vector<PrimExpr> outer_shape = x->shape;
  outer_shape[axis] = arith::IntImm(1);
  DataType t = x->dtype;
  Buffer max_buf = arith::MakeBuffer("max", t, {arith::IntImm(1)});
  Buffer sum_buf = arith::MakeBuffer("sum", t, {arith::IntImm(1)});
  Indices zero = {arith::IntImm(0)};
  return LoopNest(outer_shape, "o", [&](const Indices& outer) {
    PrimExpr kv = arith::MakeVar("k");
    Indices at = outer;
    at[axis] = kv;
    auto over_axis = [&](Stmt body) {
      return ir::For(kv, arith::IntImm(0), x->shape[axis], ir::ForKind::kSerial, body);
    };
    PrimExpr shifted = arith::Load(x, at) - arith::Load(max_buf, zero);
    Stmt body = ir::Seq({
        ir::Store(max_buf, zero, arith::FloatImm(-INFINITY, t)),
        over_axis(
            ir::Store(max_buf, zero, arith::Max(arith::Load(max_buf, zero), arith::Load(x, at)))),
        ir::Store(sum_buf, zero, Zero(t)),
        over_axis(
            ir::Seq({ir::Store(y, at, arith::Call(t, "exp", {shifted})),
                     ir::Store(sum_buf, zero, arith::Load(sum_buf, zero) + arith::Load(y, at))})),
        // One division per row, then a product per element (BERT's softmax rows of 128: 4%).
        ir::Store(
            sum_buf, zero,
            arith::Binary(ExprKind::kDiv, arith::FloatImm(1.0, t), arith::Load(sum_buf, zero))),
        over_axis(ir::Store(y, at, arith::Load(y, at) * arith::Load(sum_buf, zero))),
    });
    return ir::Allocate(max_buf, ir::Allocate(sum_buf, body));
  });
}

}  // namespace

void RegisterNNKernelBuilders(KernelBuilderTable& table) {
  table["matmul"] = [](const KernelContext& k) -> absl::StatusOr<Stmt> { return MatmulBody(k); };
  table["softmax"] = [](const KernelContext& k) -> absl::StatusOr<Stmt> { return SoftmaxBody(k); };
  RegisterNNConvKernelBuilders(table);
}

}  // namespace kiln::transform
