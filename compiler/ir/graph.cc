#include "compiler/ir/graph.h"

#include "compiler/arith/check.h"

namespace kiln::ir {

StructInfo StructInfo::Tensor(std::vector<PrimExpr> shape, DataType dtype) {
  StructInfo s;
  s.kind = Kind::kTensor;
  s.dtype = dtype;
  s.ndim = static_cast<int>(shape.size());
  s.shape = std::move(shape);
  return s;
}

StructInfo StructInfo::TensorRank(int ndim, DataType dtype) {
  StructInfo s;
  s.kind = Kind::kTensor;
  s.dtype = dtype;
  s.ndim = ndim;
  return s;
}

StructInfo StructInfo::Shape(std::vector<PrimExpr> values) {
  StructInfo s;
  s.kind = Kind::kShape;
  s.ndim = static_cast<int>(values.size());
  s.shape = std::move(values);
  return s;
}

StructInfo StructInfo::Tuple(std::vector<StructInfo> fields) {
  StructInfo s;
  s.kind = Kind::kTuple;
  s.fields = std::move(fields);
  return s;
}

StructInfo StructInfo::Prim(DataType dtype) {
  StructInfo s;
  s.kind = Kind::kPrim;
  s.dtype = dtype;
  return s;
}

static bool ShapesEqual(const std::optional<std::vector<PrimExpr>>& a,
                        const std::optional<std::vector<PrimExpr>>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  if (a->size() != b->size()) return false;
  for (size_t i = 0; i < a->size(); ++i) {
    if (!arith::StructuralEqual((*a)[i], (*b)[i])) return false;
  }
  return true;
}

bool StructuralEqual(const StructInfo& a, const StructInfo& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.ndim != b.ndim) return false;
  if (!ShapesEqual(a.shape, b.shape) || a.fields.size() != b.fields.size()) return false;
  for (size_t i = 0; i < a.fields.size(); ++i) {
    if (!StructuralEqual(a.fields[i], b.fields[i])) return false;
  }
  return true;
}

static Expr Make(ExprNode node) { return std::make_shared<const ExprNode>(std::move(node)); }

Expr MakeVar(std::string name, StructInfo info) {
  return Make({.kind = ExprKind::kVar, .struct_info = std::move(info), .name = std::move(name)});
}

Expr MakeConstant(NDArray data) {
  std::vector<PrimExpr> shape;
  for (int64_t d : data.shape) shape.push_back(arith::IntImm(d));
  StructInfo info = StructInfo::Tensor(std::move(shape), data.dtype);
  return Make({.kind = ExprKind::kConstant,
               .struct_info = std::move(info),
               .data = std::make_shared<const NDArray>(std::move(data))});
}

Expr MakeTuple(std::vector<Expr> fields) {
  std::vector<StructInfo> infos;
  for (const Expr& f : fields) infos.push_back(f->struct_info);
  return Make({.kind = ExprKind::kTuple,
               .struct_info = StructInfo::Tuple(std::move(infos)),
               .args = std::move(fields)});
}

Expr MakeTupleGetItem(Expr tuple, int index) {
  const StructInfo& t = tuple->struct_info;
  KILN_CHECK(t.kind == StructInfo::Kind::kTuple && index >= 0 &&
             index < static_cast<int>(t.fields.size()))
      << "tuple index " << index << " out of range";
  StructInfo info = t.fields[index];
  return Make({.kind = ExprKind::kTupleGetItem,
               .struct_info = std::move(info),
               .args = {std::move(tuple)},
               .index = index});
}

Expr MakeCall(std::string op, std::vector<Expr> args, Attrs attrs) {
  return Make({.kind = ExprKind::kCall,
               .name = std::move(op),
               .args = std::move(args),
               .attrs = std::move(attrs)});
}

Expr MakeCallTIR(std::string kernel, std::vector<Expr> args, StructInfo out) {
  return Make({.kind = ExprKind::kCall,
               .struct_info = std::move(out),
               .name = "call_tir",
               .args = std::move(args),
               .callee = std::move(kernel)});
}

Expr MakeShapeExpr(std::vector<PrimExpr> values) {
  StructInfo info = StructInfo::Shape(values);
  return Make(
      {.kind = ExprKind::kShapeExpr, .struct_info = std::move(info), .values = std::move(values)});
}

Expr MakeIf(Expr cond, std::shared_ptr<const Function> then_branch,
            std::shared_ptr<const Function> else_branch, StructInfo out) {
  return Make({.kind = ExprKind::kIf, .struct_info = std::move(out), .args = {std::move(cond)},
               .subgraphs = {std::move(then_branch), std::move(else_branch)}});
}

Expr MakeNone() { return MakeTuple({}); }

bool IsNone(const Expr& expr) { return expr->kind == ExprKind::kTuple && expr->args.empty(); }

}  // namespace kiln::ir
