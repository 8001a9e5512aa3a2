// Kernels that fill outputs whose size depends on the data: non_zero and compress. Each
// comes after a count kernel whose result host code read and bound to a fresh symbolic
// variable (match_cast of tensor_to_shape, frontend/onnx_tensor_ops_index.cc), so its output
// buffer has a symbolic extent n like any other. The fill walks its input in order with a
// running position in kernel-local scratch; that position carries a dependence from one
// iteration to the next, so the walk stays serial. Semantics as interp/tensor_index.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

PrimExpr Int(int64_t v) { return arith::IntImm(v); }

// Truth as the count kernel computes it (a cast to bool), so that count and fill agree on
// every value, -0.0 and NaN included.
PrimExpr IsTrue(const PrimExpr& v) { return CastIfNeeded(DataType::Bool(), v); }

// A running position `at` in a one-element scratch buffer: body(at) may write element `at`
// and must end by advancing it (Advance).
struct Cursor {
  Buffer buffer = arith::MakeBuffer("position", DataType::Int(64), {Int(1)});
  PrimExpr at = arith::Load(buffer, {Int(0)});

  Stmt Advance() const { return ir::Store(buffer, {Int(0)}, at + Int(1)); }
  // `when` selects the elements that take a position; positions past n (the count the host
  // bound) write nothing, so a fill never writes out of its buffer.
  Stmt Step(PrimExpr when, const PrimExpr& n, Stmt write) const {
    PrimExpr fits = arith::Binary(ExprKind::kLT, at, n);
    return ir::IfThenElse(arith::Binary(ExprKind::kAnd, std::move(when), fits),
                          ir::Seq({std::move(write), Advance()}));
  }
  Stmt Around(Stmt walk) const {
    return ir::Allocate(buffer, ir::Seq({ir::Store(buffer, {Int(0)}, Int(0)), std::move(walk)}));
  }
};

// non_zero(x, Shape([n])) -> out[rank, n]: column j holds the index of the j-th element of x
// (row-major) that is not zero.
absl::StatusOr<Stmt> NonZeroBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  PrimExpr n = k.out->shape[1];
  Cursor cursor;
  Stmt walk = LoopNest(x->shape, "i", [&](const Indices& idx) {
    std::vector<Stmt> write;
    for (size_t d = 0; d < idx.size(); ++d) {
      write.push_back(ir::Store(k.out, {Int(static_cast<int64_t>(d)), cursor.at},
                                CastIfNeeded(DataType::Int(64), idx[d])));
    }
    return cursor.Step(IsTrue(arith::Load(x, idx)), n, ir::Seq(std::move(write)));
  });
  return cursor.Around(walk);
}

// compress(data, condition, Shape([n])) {axis}: slice j along the axis is slice i of data for
// the j-th true condition[i]. A condition shorter than the axis drops the slices past it.
absl::StatusOr<Stmt> CompressBody(const KernelContext& k) {
  const Buffer& data = k.inputs[0];
  const Buffer& cond = k.inputs[1];
  if (cond->shape.size() != 1) {
    return absl::UnimplementedError("op compress: the condition must be 1-D");
  }
  KILN_ASSIGN_OR_RETURN(
      int64_t axis,
      op::NormalizeAxis(k.call, op::GetIntAttr(k.call.attrs, "axis", 0), data->shape.size()));
  PrimExpr n = k.out->shape[axis];
  std::vector<PrimExpr> slice = data->shape;
  slice[axis] = Int(1);
  Cursor cursor;
  PrimExpr i = arith::MakeVar("c");
  Stmt copy = LoopNest(slice, "s", [&](const Indices& idx) {
    Indices from = idx, to = idx;
    from[axis] = i;
    to[axis] = cursor.at;
    return ir::Store(k.out, to, arith::Load(data, from));
  });
  PrimExpr extent = k.analyzer.Simplify(arith::Min(cond->shape[0], data->shape[axis]));
  Stmt walk = ir::For(i, Int(0), extent, ir::ForKind::kSerial,
                      cursor.Step(IsTrue(arith::Load(cond, {i})), n, copy));
  return cursor.Around(walk);
}

// The fill needs the count: without it (an input of unknown shape) the op is not compiled.
KernelBuilder WithCount(size_t count_arg, KernelBuilder body) {
  return [count_arg, body](const KernelContext& k) -> absl::StatusOr<Stmt> {
    if (k.call.args.size() <= count_arg) {
      return absl::UnimplementedError(absl::StrCat(
          "op ", k.call.name, ": the output size was not bound to a symbolic count at import"));
    }
    return body(k);
  };
}

}  // namespace

// unique_select and non_max_suppression_select: legalize_unique_nms.cc.
void RegisterUniqueNmsKernelBuilders(KernelBuilderTable& table);

void RegisterDataDependentKernelBuilders(KernelBuilderTable& table) {
  table["non_zero"] = WithCount(1, NonZeroBody);
  table["compress"] = WithCount(2, CompressBody);
  RegisterUniqueNmsKernelBuilders(table);
}

}  // namespace kiln::transform
