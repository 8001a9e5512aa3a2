#include "compiler/ir/printer.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/loop.h"

namespace kiln::ir {

namespace text {

DataType DefaultCallType(const std::string& name, const std::vector<PrimExpr>& args) {
  if (name == intrinsic::kInputShape || name == intrinsic::kOutputShape ||
      intrinsic::IsCheckIndex(name)) {
    return DataType::Int();
  }
  if (name == intrinsic::kInputData || name == intrinsic::kOutputData ||
      name == intrinsic::kConstant || name == intrinsic::kAlloc ||
      name == intrinsic::kDeviceAlloc || name == intrinsic::kDeviceConstant) {
    return DataType::Handle();
  }
  if (name.rfind("kiln.", 0) != 0 && !args.empty() && args[0]->dtype.is_float()) {
    return args[0]->dtype;
  }
  return DataType::Int(32);
}

bool IsReservedWord(std::string_view word) {
  static const std::unordered_set<std::string_view> kWords = {
      "for",       "in",         "range",  "let",       "if",       "else",       "alloc",
      "assert",    "select",     "cast",   "floordiv",  "floormod", "min",        "max",
      "inf",       "nan",        "serial", "parallel",  "unrolled", "vectorized", "prim_func",
      "gpu_block", "gpu_thread", "fn",     "host_func", "def",      "const",      "constants"};
  return kWords.count(word) > 0;
}

std::string FloatAttrText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s;
  for (int precision = 15; precision <= 17; ++precision) {
    s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) break;
  }
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string QuoteString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", u));
    }
  }
  return out + "\"";
}

}  // namespace text

namespace {

using arith::ExprKind;

bool IsIdentifier(std::string_view s, bool allow_dots) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && !(allow_dots && c == '.')) {
      return false;
    }
  }
  return true;
}

// Gives every node (variable or buffer) one printable name, unique within the table. Names
// of different nodes never collide, so the parser, which resolves by name, finds the same
// sharing again.
class NameTable {
 public:
  // `identifier`: names must be identifiers and not reserved words (PrimExpr scopes); graph
  // variables are written after '%' and may start with a digit.
  // `canonical`: names ignore the nodes' own names and go by first appearance (v, v_1, ...).
  explicit NameTable(bool identifier, bool canonical = false)
      : identifier_(identifier), canonical_(canonical) {}

  // A use. A node without a name gets one that no other node in the table has.
  const std::string& Get(const void* node, const std::string& hint) {
    auto it = names_.find(node);
    if (it != names_.end()) return it->second;
    std::string base;
    for (char c : canonical_ ? std::string("v") : hint)
      base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (base.empty()) base = "v";
    if (identifier_ && std::isdigit(static_cast<unsigned char>(base[0]))) base = "_" + base;
    std::string name = base;
    for (int i = 1; used_.count(name) || (identifier_ && text::IsReservedWord(name)); ++i) {
      name = absl::StrCat(base, "_", i);
    }
    used_.insert(name);
    return names_[node] = name;
  }

  // A binding site (for, let, alloc), until Release: the node keeps its name if no other
  // binding in scope holds it. One node bound by two loops in turn prints one name twice,
  // as do the two nodes the parser makes of that text, so printing is stable.
  const std::string& Bind(const void* node, const std::string& hint) {
    auto it = names_.find(node);
    if (it != names_.end() && used_.insert(it->second).second) return it->second;
    names_.erase(node);
    return Get(node, hint);
  }
  void Release(const void* node) { used_.erase(names_.at(node)); }

 private:
  bool identifier_;
  bool canonical_;
  std::unordered_map<const void*, std::string> names_;
  std::unordered_set<std::string> used_;
};

std::string AttrText(const AttrValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return text::FloatAttrText(v); }
    std::string operator()(const std::string& v) const { return text::QuoteString(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return v.empty() ? "[]:i64" : absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<double>& v) const {
      if (v.empty()) return "[]:f64";
      return absl::StrCat(
          "[",
          absl::StrJoin(v, ", ",
                        [](std::string* out, double d) { out->append(text::FloatAttrText(d)); }),
          "]");
    }
    std::string operator()(const std::vector<std::string>& v) const {
      if (v.empty()) return "[]:str";
      return absl::StrCat("[",
                          absl::StrJoin(v, ", ",
                                        [](std::string* out, const std::string& s) {
                                          out->append(text::QuoteString(s));
                                        }),
                          "]");
    }
  };
  return std::visit(Visitor{}, value);
}

std::string KeyText(const std::string& key) {
  return IsIdentifier(key, false) ? key : text::QuoteString(key);
}

std::string GlobalText(const std::string& name) {
  return "@" + (IsIdentifier(name, true) ? name : text::QuoteString(name));
}

// Op names that the graph-level syntax reserves print quoted: `"if"(...)` is a call to an
// op named "if", `if(...)` is an If.
std::string OpText(const std::string& name) {
  static const std::unordered_set<std::string_view> kReserved = {"fn", "const", "if", "match_cast"};
  if (IsIdentifier(name, true) && !kReserved.count(name)) return name;
  return text::QuoteString(name);
}

std::string Pad(int indent) { return std::string(indent, ' '); }

class Printer {
 public:
  // With a module, constants print as references into its constants section; without one
  // (a lone expression or function) they print as `const<f32[4, 3]>`.
  explicit Printer(const IRModule* module, bool canonical_names = false)
      : module_(module), vars_(true, canonical_names) {
    if (!module) return;
    for (const auto& c : module->constants) ConstIndex(c.get());
  }

  std::string Module();
  std::string Def(const char* keyword, const Function& func, int indent);
  std::string Info(const StructInfo& info);
  std::string ExprText(const Expr& expr, int indent, const StructInfo* bound_info);
  std::string PrimFuncText(const PrimFunc& func);
  void Stmts(const Stmt& stmt, int indent, std::string* out);

  void ResetGraphScope() {
    graph_vars_ = NameTable(false);
    vars_ = NameTable(true);
  }
  void ResetPrimScope() { vars_ = NameTable(true); }

 private:
  std::string Prim(const PrimExpr& e, int parent_precedence = 0);
  std::string Prims(const std::vector<PrimExpr>& exprs);
  std::string PrimCall(const PrimExpr& e);
  std::string BufferDecl(const Buffer& b);
  std::string BindingText(const Binding& b, int indent);
  std::string CallText(const Expr& call, int indent, const StructInfo* bound_info);
  std::string ConstantText(const NDArray* data);
  size_t ConstIndex(const NDArray* data);
  void OneStmt(const StmtNode& s, bool last, int indent, std::string* out);

  const IRModule* module_;
  NameTable graph_vars_{false};
  NameTable vars_;  // symbolic and loop variables, and buffers
  std::unordered_map<const NDArray*, size_t> const_index_;
  std::vector<const NDArray*> const_list_;
};

size_t Printer::ConstIndex(const NDArray* data) {
  auto [it, inserted] = const_index_.try_emplace(data, const_list_.size());
  if (inserted) const_list_.push_back(data);
  return it->second;
}

std::string ArrayType(const NDArray& a) {
  return absl::StrCat(a.dtype.ToString(), "[", absl::StrJoin(a.shape, ", "), "]");
}

std::string Printer::ConstantText(const NDArray* data) {
  if (!module_) return absl::StrCat("const<", ArrayType(*data), ">");
  return absl::StrCat("const[", ConstIndex(data), "]");
}

std::string Printer::Prims(const std::vector<PrimExpr>& exprs) {
  return absl::StrJoin(exprs, ", ",
                       [&](std::string* out, const PrimExpr& e) { out->append(Prim(e)); });
}

std::string Printer::PrimCall(const PrimExpr& e) {
  std::string head = e->name;
  if (e->dtype != text::DefaultCallType(e->name, e->args)) {
    absl::StrAppend(&head, ":", e->dtype.ToString());
  }
  return absl::StrCat(head, "(", Prims(e->args), ")");
}

std::string Printer::Prim(const PrimExpr& e, int parent_precedence) {
  int prec = arith::InfixPrecedence(e->kind);
  bool infix = arith::IsBinary(e->kind) && prec < 10;
  std::string s;
  switch (e->kind) {
    case ExprKind::kIntImm:
      s = absl::StrCat(e->int_value);
      if (e->dtype != DataType::Int()) absl::StrAppend(&s, ":", e->dtype.ToString());
      return s;
    case ExprKind::kFloatImm:
      s = arith::FloatLiteral(e->float_value);
      if (e->dtype != DataType::Float()) absl::StrAppend(&s, ":", e->dtype.ToString());
      return s;
    case ExprKind::kVar:
      return vars_.Get(e.get(), e->name);
    case ExprKind::kNot:
      return "!" + Prim(e->args[0], 10);
    case ExprKind::kCast:
      return absl::StrCat("cast<", e->dtype.ToString(), ">(", Prims(e->args), ")");
    case ExprKind::kCall:
      return PrimCall(e);
    case ExprKind::kLoad:
      return absl::StrCat(vars_.Get(e->buffer.get(), e->buffer->name), "[", Prims(e->args), "]");
    case ExprKind::kSelect:
      return absl::StrCat("select(", Prims(e->args), ")");
    default:
      break;
  }
  if (!infix) return absl::StrCat(arith::ExprKindName(e->kind), "(", Prims(e->args), ")");
  // Left-associative: the right operand needs parentheses at equal precedence.
  s = absl::StrCat(Prim(e->args[0], prec - 1), " ", arith::ExprKindName(e->kind), " ",
                   Prim(e->args[1], prec));
  return prec <= parent_precedence ? absl::StrCat("(", s, ")") : s;
}

std::string Printer::Info(const StructInfo& info) {
  switch (info.kind) {
    case StructInfo::Kind::kObject:
      return "Object";
    case StructInfo::Kind::kPrim:
      return absl::StrCat("Prim(", info.dtype.ToString(), ")");
    case StructInfo::Kind::kShape:
      if (info.shape) return absl::StrCat("Shape([", Prims(*info.shape), "])");
      if (info.ndim >= 0) return absl::StrCat("Shape(ndim=", info.ndim, ")");
      return "Shape()";
    case StructInfo::Kind::kTensor:
      if (info.shape) {
        return absl::StrCat("Tensor([", Prims(*info.shape), "], ", info.dtype.ToString(), ")");
      }
      if (info.ndim >= 0) {
        return absl::StrCat("Tensor(ndim=", info.ndim, ", ", info.dtype.ToString(), ")");
      }
      return absl::StrCat("Tensor(", info.dtype.ToString(), ")");
    case StructInfo::Kind::kTuple:
      return absl::StrCat(
          "Tuple(",
          absl::StrJoin(info.fields, ", ",
                        [&](std::string* out, const StructInfo& f) { out->append(Info(f)); }),
          ")");
  }
  return "?";
}

std::string Printer::CallText(const Expr& call, int indent, const StructInfo* bound_info) {
  std::vector<std::string> parts;
  if (!call->callee.empty()) parts.push_back(GlobalText(call->callee));
  for (const Expr& arg : call->args) parts.push_back(ExprText(arg, indent, nullptr));
  for (const auto& sub : call->subgraphs) parts.push_back(Def("fn", *sub, indent));
  for (const auto& [key, value] : call->attrs) {
    parts.push_back(absl::StrCat(KeyText(key), "=", AttrText(value)));
  }
  std::string head = call->kind == ir::ExprKind::kIf ? "if" : OpText(call->name);
  std::string s = absl::StrCat(head, "(", absl::StrJoin(parts, ", "), ")");
  StructInfo object;
  if (!StructuralEqual(call->struct_info, bound_info ? *bound_info : object)) {
    absl::StrAppend(&s, " -> ", Info(call->struct_info));
  }
  return s;
}

std::string Printer::ExprText(const Expr& expr, int indent, const StructInfo* bound_info) {
  switch (expr->kind) {
    case ir::ExprKind::kVar: {
      const std::string& name = graph_vars_.Get(expr.get(), expr->name);
      return "%" + name;
    }
    case ir::ExprKind::kConstant:
      return ConstantText(expr->data.get());
    case ir::ExprKind::kTuple: {
      std::vector<std::string> fields;
      for (const Expr& f : expr->args) fields.push_back(ExprText(f, indent, nullptr));
      return absl::StrCat("(", absl::StrJoin(fields, ", "), fields.size() == 1 ? ",)" : ")");
    }
    case ir::ExprKind::kTupleGetItem:
      return absl::StrCat(ExprText(expr->args[0], indent, nullptr), "[", expr->index, "]");
    case ir::ExprKind::kShapeExpr:
      return absl::StrCat("shape([", Prims(expr->values), "])");
    case ir::ExprKind::kCall:
    case ir::ExprKind::kIf:
      return CallText(expr, indent, bound_info);
  }
  return "?";
}

std::string Printer::BindingText(const Binding& b, int indent) {
  // The value first: its variables are defined before the bound one, which may reuse a name.
  std::string value = ExprText(b.value, indent, b.match_cast ? nullptr : &b.var->struct_info);
  if (b.match_cast) value = absl::StrCat("match_cast(", value, ")");
  return absl::StrCat(Pad(indent), ExprText(b.var, indent, nullptr), ": ", Info(b.var->struct_info),
                      " = ", value, "\n");
}

std::string Printer::Def(const char* keyword, const Function& func, int indent) {
  std::string s = keyword;
  if (!func.name.empty() || std::string_view(keyword) == "def") {
    absl::StrAppend(&s, " ", GlobalText(func.name));
  }
  std::vector<std::string> params;
  for (const Expr& p : func.params) {
    params.push_back(absl::StrCat(ExprText(p, indent, nullptr), ": ", Info(p->struct_info)));
  }
  absl::StrAppend(&s, "(", absl::StrJoin(params, ", "), ")");
  std::vector<std::string> names;
  if (!func.input_names.empty()) names.push_back("input_names=" + AttrText(func.input_names));
  if (!func.output_names.empty()) names.push_back("output_names=" + AttrText(func.output_names));
  if (!names.empty()) absl::StrAppend(&s, " attrs(", absl::StrJoin(names, ", "), ")");
  absl::StrAppend(&s, " {\n");
  for (const BindingBlock& block : func.blocks) {
    absl::StrAppend(&s, Pad(indent + 2), block.dataflow ? "dataflow {\n" : "block {\n");
    for (const Binding& b : block.bindings) absl::StrAppend(&s, BindingText(b, indent + 4));
    absl::StrAppend(&s, Pad(indent + 2), "}\n");
  }
  std::string result = func.result ? ExprText(func.result, indent + 2, nullptr) : "()";
  absl::StrAppend(&s, Pad(indent + 2), "return ", result, "\n", Pad(indent), "}");
  return s;
}

std::string Printer::BufferDecl(const Buffer& b) {
  return absl::StrCat(vars_.Get(b.get(), b->name), ": ", b->dtype.ToString(), "[", Prims(b->shape),
                      "]");
}

// Seqs are transparent: a nested Seq prints as its statements, in place.
void Flatten(const Stmt& stmt, std::vector<const StmtNode*>* out) {
  if (!stmt) return;
  if (stmt->kind != StmtKind::kSeq) {
    out->push_back(stmt.get());
    return;
  }
  for (const Stmt& s : stmt->seq) Flatten(s, out);
}

void Printer::Stmts(const Stmt& stmt, int indent, std::string* out) {
  std::vector<const StmtNode*> list;
  Flatten(stmt, &list);
  for (size_t i = 0; i < list.size(); ++i) OneStmt(*list[i], i + 1 == list.size(), indent, out);
}

void Printer::OneStmt(const StmtNode& s, bool last, int indent, std::string* out) {
  std::string pad = Pad(indent);
  // A let or alloc that ends its block owns the rest of it; elsewhere its body needs braces.
  auto scoped_body = [&](const std::string& head, const void* bound) {
    if (last) {
      absl::StrAppend(out, pad, head, "\n");
      Stmts(s.body, indent, out);
    } else {
      absl::StrAppend(out, pad, head, " {\n");
      Stmts(s.body, indent + 2, out);
      absl::StrAppend(out, pad, "}\n");
    }
    vars_.Release(bound);
  };
  switch (s.kind) {
    case StmtKind::kFor: {
      std::string var = vars_.Bind(s.var.get(), s.var->name);
      if (s.var->dtype != DataType::Int()) absl::StrAppend(&var, ": ", s.var->dtype.ToString());
      absl::StrAppend(out, pad, "for ", var, " in range(", Prim(s.min), ", ", Prim(s.extent), ") ",
                      ForKindName(s.for_kind), " {\n");
      Stmts(s.body, indent + 2, out);
      absl::StrAppend(out, pad, "}\n");
      vars_.Release(s.var.get());
      return;
    }
    case StmtKind::kStore:
      absl::StrAppend(out, pad, vars_.Get(s.buffer.get(), s.buffer->name), "[", Prims(s.indices),
                      "] = ", Prim(s.value), "\n");
      return;
    case StmtKind::kLet: {
      std::string value = Prim(s.value);
      const std::string& var = vars_.Bind(s.var.get(), s.var->name);
      scoped_body(absl::StrCat("let ", var, ": ", s.var->dtype.ToString(), " = ", value),
                  s.var.get());
      return;
    }
    case StmtKind::kIfThenElse:
      absl::StrAppend(out, pad, "if ", Prim(s.condition), " {\n");
      Stmts(s.then_case, indent + 2, out);
      if (s.else_case) {
        absl::StrAppend(out, pad, "} else {\n");
        Stmts(s.else_case, indent + 2, out);
      }
      absl::StrAppend(out, pad, "}\n");
      return;
    case StmtKind::kAllocate:
      vars_.Bind(s.buffer.get(), s.buffer->name);
      scoped_body("alloc " + BufferDecl(s.buffer), s.buffer.get());
      return;
    case StmtKind::kEvaluate:
      absl::StrAppend(out, pad, Prim(s.value), "\n");
      return;
    case StmtKind::kAssert:
      absl::StrAppend(out, pad, "assert ", Prim(s.condition), " else ", Prim(s.on_fail), "\n");
      return;
    case StmtKind::kSeq:
      return;  // flattened by Stmts
  }
}

std::string Printer::PrimFuncText(const PrimFunc& func) {
  std::vector<std::string> params;
  for (const Buffer& b : func.buffers) params.push_back(BufferDecl(b));
  for (const PrimExpr& v : func.scalars) {
    params.push_back(absl::StrCat(Prim(v), ": ", v->dtype.ToString()));
  }
  std::string s = absl::StrCat(func.is_host ? "host_func " : "prim_func ", GlobalText(func.name),
                               "(", absl::StrJoin(params, ", "), ") {\n");
  Stmts(func.body, 2, &s);
  return s + "}";
}

std::string HexBytes(const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  s.reserve(2 + 2 * bytes.size());
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::string Printer::Module() {
  std::string s;
  for (const auto& [name, func] : module_->functions) {
    ResetGraphScope();
    absl::StrAppend(&s, Def("def", func, 0), "\n");
  }
  for (const auto& [name, func] : module_->prim_funcs) {
    ResetPrimScope();
    absl::StrAppend(&s, PrimFuncText(func), "\n");
  }
  if (const_list_.empty()) return s;
  absl::StrAppend(&s, "constants {\n");
  for (size_t k = 0; k < const_list_.size(); ++k) {
    const NDArray& a = *const_list_[k];
    absl::StrAppend(&s, "  ", k < module_->constants.size() ? "host " : "", "const[", k,
                    "]: ", ArrayType(a), " = ", HexBytes(a.bytes), "\n");
  }
  return s + "}\n";
}

}  // namespace

std::string ToString(const StructInfo& info) { return Printer(nullptr).Info(info); }

std::string ToString(const Expr& expr) { return Printer(nullptr).ExprText(expr, 0, nullptr); }

std::string ToString(const Function& func) { return Printer(nullptr).Def("def", func, 0) + "\n"; }

std::string ToString(const IRModule& module) { return Printer(&module).Module(); }

std::string ToString(const Stmt& stmt, int indent) {
  std::string out;
  Printer(nullptr).Stmts(stmt, indent, &out);
  return out;
}

std::string ToString(const PrimFunc& func) { return Printer(nullptr).PrimFuncText(func) + "\n"; }

std::string CanonicalText(const PrimFunc& func) {
  PrimFunc renamed = func;
  renamed.name = "kernel";
  return Printer(nullptr, /*canonical_names=*/true).PrimFuncText(renamed) + "\n";
}

}  // namespace kiln::ir
