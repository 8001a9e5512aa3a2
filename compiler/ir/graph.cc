#include "compiler/ir/graph.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

static std::string JoinExprs(const std::vector<PrimExpr>& exprs) {
  return absl::StrJoin(
      exprs, ", ", [](std::string* out, const PrimExpr& e) { out->append(arith::ToString(e)); });
}

std::string ToString(const StructInfo& info) {
  switch (info.kind) {
    case StructInfo::Kind::kObject:
      return "Object";
    case StructInfo::Kind::kPrim:
      return absl::StrCat("Prim(", info.dtype.ToString(), ")");
    case StructInfo::Kind::kShape:
      if (info.shape) return absl::StrCat("Shape([", JoinExprs(*info.shape), "])");
      return absl::StrCat("Shape(ndim=", info.ndim, ")");
    case StructInfo::Kind::kTensor:
      if (info.shape) {
        return absl::StrCat("Tensor([", JoinExprs(*info.shape), "], ", info.dtype.ToString(), ")");
      }
      return absl::StrCat("Tensor(ndim=", info.ndim, ", ", info.dtype.ToString(), ")");
    case StructInfo::Kind::kTuple:
      return absl::StrCat(
          "Tuple(",
          absl::StrJoin(info.fields, ", ",
                        [](std::string* out, const StructInfo& f) { out->append(ToString(f)); }),
          ")");
  }
  return "?";
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

Expr MakeNone() { return MakeTuple({}); }

bool IsNone(const Expr& expr) { return expr->kind == ExprKind::kTuple && expr->args.empty(); }

static std::string AttrText(const AttrValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return absl::StrCat(v); }
    std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<double>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", ", [](std::string* out, const std::string& s) {
                            absl::StrAppend(out, "\"", s, "\"");
                          }), "]");
    }
  };
  return std::visit(Visitor{}, value);
}

std::string ToString(const Expr& expr) {
  switch (expr->kind) {
    case ExprKind::kVar:
      return "%" + expr->name;
    case ExprKind::kConstant: {
      std::vector<std::string> dims;
      for (int64_t d : expr->data->shape) dims.push_back(absl::StrCat(d));
      return absl::StrCat("const<", expr->data->dtype.ToString(), "[", absl::StrJoin(dims, ", "),
                          "]>");
    }
    case ExprKind::kShapeExpr:
      return absl::StrCat("shape(", JoinExprs(expr->values), ")");
    case ExprKind::kTupleGetItem:
      return absl::StrCat(ToString(expr->args[0]), ".", expr->index);
    case ExprKind::kTuple:
    case ExprKind::kCall:
      break;
  }
  std::vector<std::string> parts;
  if (!expr->callee.empty()) parts.push_back("@" + expr->callee);
  for (const Expr& arg : expr->args) parts.push_back(ToString(arg));
  for (const auto& [name, value] : expr->attrs) parts.push_back(name + "=" + AttrText(value));
  std::string head = expr->kind == ExprKind::kTuple ? "" : expr->name;
  return absl::StrCat(head, "(", absl::StrJoin(parts, ", "), ")");
}

std::string ToString(const Function& func) {
  std::ostringstream os;
  os << "def @" << func.name << "(";
  for (size_t i = 0; i < func.params.size(); ++i) {
    os << (i ? ", " : "") << ToString(func.params[i]) << ": "
       << ToString(func.params[i]->struct_info);
  }
  os << ") {\n";
  for (const BindingBlock& block : func.blocks) {
    std::string pad = block.dataflow ? "    " : "  ";
    if (block.dataflow) os << "  dataflow {\n";
    for (const Binding& b : block.bindings) {
      os << pad << ToString(b.var) << ": " << ToString(b.var->struct_info) << " = ";
      if (b.match_cast) {
        os << "match_cast(" << ToString(b.value) << ")\n";
      } else {
        os << ToString(b.value) << "\n";
      }
    }
    if (block.dataflow) os << "  }\n";
  }
  os << "  return " << ToString(func.result) << "\n}\n";
  return os.str();
}

std::string ToString(const IRModule& module) {
  std::ostringstream os;
  for (const auto& [name, func] : module.functions) os << ToString(func) << "\n";
  for (const auto& [name, func] : module.prim_funcs) os << ToString(func) << "\n";
  return os.str();
}

}  // namespace kiln::ir
