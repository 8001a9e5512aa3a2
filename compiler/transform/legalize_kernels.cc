#include "compiler/transform/legalize_kernels.h"

#include "absl/strings/str_cat.h"

namespace kiln::transform {

using arith::Buffer;
using arith::DataType;
using arith::PrimExpr;
using ir::Stmt;

Buffer OperandBuffer(const KernelContext& k, size_t arg) {
  if (arg >= k.call.args.size() || ir::IsNone(k.call.args[arg])) return nullptr;
  size_t slot = 0;
  for (size_t i = 0; i < arg; ++i) {
    const ir::Expr& a = k.call.args[i];
    if (a->kind != ir::ExprKind::kShapeExpr && !ir::IsNone(a)) ++slot;
  }
  return k.inputs[slot];
}

PrimExpr Zero(DataType dtype) {
  return dtype.is_float() ? arith::FloatImm(0, dtype) : arith::IntImm(0, dtype);
}

Stmt LoopNest(const std::vector<PrimExpr>& shape, const std::string& prefix,
              const std::function<Stmt(const Indices&)>& body) {
  Indices vars;
  for (size_t d = 0; d < shape.size(); ++d) vars.push_back(arith::MakeVar(absl::StrCat(prefix, d)));
  Stmt stmt = body(vars);
  for (size_t d = shape.size(); d-- > 0;) {
    stmt = ir::For(vars[d], arith::IntImm(0), shape[d], ir::ForKind::kSerial, stmt);
  }
  return stmt;
}

Stmt Compute(const Buffer& out, const std::function<PrimExpr(const Indices&)>& fcompute) {
  return LoopNest(out->shape, "i",
                  [&](const Indices& idx) { return ir::Store(out, idx, fcompute(idx)); });
}

// Loads `buf` at the output position `idx`, numpy broadcasting: dims are aligned from the
PrimExpr LoadBroadcast(const Buffer& buf, const Indices& idx) {
  size_t offset = idx.size() - buf->shape.size();
  Indices at;
  for (size_t d = 0; d < buf->shape.size(); ++d) {
    at.push_back(buf->shape[d]->is_const_int(1) ? arith::IntImm(0) : idx[offset + d]);
  }
  return arith::Load(buf, at);
}

// ONNX integer division truncates toward zero; floordiv rounds down.

}  // namespace kiln::transform
