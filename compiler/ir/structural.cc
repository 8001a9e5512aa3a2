#include "compiler/ir/structural.h"

#include <cmath>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {
namespace {

using arith::ExprKind;

// Seqs are transparent (see structural.h): both sides compare as flat statement lists.
void Flatten(const Stmt& stmt, std::vector<const StmtNode*>* out) {
  if (!stmt) return;
  if (stmt->kind != StmtKind::kSeq) {
    out->push_back(stmt.get());
    return;
  }
  for (const Stmt& s : stmt->seq) Flatten(s, out);
}

std::vector<const StmtNode*> Flat(const Stmt& stmt) {
  std::vector<const StmtNode*> out;
  Flatten(stmt, &out);
  return out;
}

bool SameDouble(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Hashes a double so that SameDouble values hash equal.
double CanonicalDouble(double v) {
  if (std::isnan(v)) return NAN;
  return v == 0 ? 0.0 : v;
}

bool SameArray(const NDArray& a, const NDArray& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

std::string AttrKindName(size_t index) {
  static const char* const kNames[] = {"int",      "float",      "string",
                                       "int list", "float list", "string list"};
  return kNames[index];
}

class Equal {
 public:
  std::string mismatch;  // the first difference found, with where it is

  bool Module(const IRModule& a, const IRModule& b);
  bool Func(const Function& a, const Function& b);
  bool Value(const Expr& a, const Expr& b);
  bool Prim(const PrimFunc& a, const PrimFunc& b);

 private:
  // Keeps a description of where the comparison is, for `mismatch`.
  struct Where {
    Where(Equal* eq, std::string what) : eq(eq) { eq->where_.push_back(std::move(what)); }
    ~Where() { eq->where_.pop_back(); }
    Equal* eq;
  };
  bool Differ(const std::string& what) {
    if (mismatch.empty()) {
      mismatch = where_.empty() ? what : absl::StrCat(absl::StrJoin(where_, ": "), ": ", what);
    }
    return false;
  }
  template <typename T>
  bool Same(const T& a, const T& b, const char* what) {
    return a == b || Differ(absl::StrCat(what, " ", a, " vs ", b));
  }

  // A definition pairs a with b, replacing earlier pairings (a loop variable may be reused by
  // a later loop); a use must find them paired with each other, or pairs them if neither is.
  void Define(const void* a, const void* b) {
    fwd_[a] = b;
    bwd_[b] = a;
  }
  bool Use(const void* a, const void* b) {
    auto fa = fwd_.find(a);
    auto fb = bwd_.find(b);
    if (fa == fwd_.end() && fb == bwd_.end()) {
      Define(a, b);
      return true;
    }
    return fa != fwd_.end() && fb != bwd_.end() && fa->second == b && fb->second == a;
  }

  void Reset() {
    fwd_.clear();
    bwd_.clear();
  }
  bool Info(const StructInfo& a, const StructInfo& b);
  bool Attrs(const ir::Attrs& a, const ir::Attrs& b);
  bool Call(const ExprNode& a, const ExprNode& b);
  bool Expr(const PrimExpr& a, const PrimExpr& b);
  bool Exprs(const std::vector<PrimExpr>& a, const std::vector<PrimExpr>& b);
  bool BufferDecl(const Buffer& a, const Buffer& b);
  bool Stmts(const Stmt& a, const Stmt& b);
  bool OneStmt(const StmtNode& a, const StmtNode& b);

  std::unordered_map<const void*, const void*> fwd_, bwd_;
  std::vector<std::string> where_;
};

bool Equal::Module(const IRModule& a, const IRModule& b) {
  if (!Same(a.functions.size(), b.functions.size(), "number of functions")) return false;
  if (!Same(a.prim_funcs.size(), b.prim_funcs.size(), "number of prim_funcs")) return false;
  for (auto ia = a.functions.begin(), ib = b.functions.begin(); ia != a.functions.end();
       ++ia, ++ib) {
    Reset();
    Where where(this, "function @" + ia->first);
    if (!Same(ia->first, ib->first, "function") || !Func(ia->second, ib->second)) return false;
  }
  for (auto ia = a.prim_funcs.begin(), ib = b.prim_funcs.begin(); ia != a.prim_funcs.end();
       ++ia, ++ib) {
    Reset();
    Where where(this, "prim_func @" + ia->first);
    if (!Same(ia->first, ib->first, "prim_func") || !Prim(ia->second, ib->second)) return false;
  }
  if (!Same(a.constants.size(), b.constants.size(), "number of module constants")) return false;
  for (size_t k = 0; k < a.constants.size(); ++k) {
    if (!SameArray(*a.constants[k], *b.constants[k])) {
      return Differ(absl::StrCat("module constant ", k, " differs"));
    }
  }
  return true;
}

bool Equal::Func(const Function& a, const Function& b) {
  if (!Same(a.name, b.name, "name")) return false;
  if (a.input_names != b.input_names) return Differ("input_names differ");
  if (a.output_names != b.output_names) return Differ("output_names differ");
  if (!Same(a.params.size(), b.params.size(), "number of params")) return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    Where where(this, absl::StrCat("param ", i, " (%", a.params[i]->name, ")"));
    if (!Info(a.params[i]->struct_info, b.params[i]->struct_info)) return false;
    Define(a.params[i].get(), b.params[i].get());
  }
  if (!Same(a.blocks.size(), b.blocks.size(), "number of blocks")) return false;
  for (size_t k = 0; k < a.blocks.size(); ++k) {
    const BindingBlock &ba = a.blocks[k], &bb = b.blocks[k];
    Where block(this, absl::StrCat("block ", k));
    if (ba.dataflow != bb.dataflow) return Differ("dataflow and non-dataflow block");
    if (!Same(ba.bindings.size(), bb.bindings.size(), "number of bindings")) return false;
    for (size_t i = 0; i < ba.bindings.size(); ++i) {
      const Binding &x = ba.bindings[i], &y = bb.bindings[i];
      Where where(this, absl::StrCat("binding ", i, " (%", x.var->name, ")"));
      if (x.match_cast != y.match_cast) return Differ("match_cast and plain binding");
      if (!Value(x.value, y.value) || !Info(x.var->struct_info, y.var->struct_info)) return false;
      Define(x.var.get(), y.var.get());
    }
  }
  Where where(this, "result");
  return Value(a.result, b.result);
}

bool Equal::Info(const StructInfo& a, const StructInfo& b) {
  if (a.kind != b.kind)
    return Differ(absl::StrCat("struct info ", ToString(a), " vs ", ToString(b)));
  if ((a.kind == StructInfo::Kind::kTensor || a.kind == StructInfo::Kind::kPrim) &&
      a.dtype != b.dtype) {
    return Differ(absl::StrCat("dtype ", a.dtype.ToString(), " vs ", b.dtype.ToString()));
  }
  if (a.kind == StructInfo::Kind::kTuple) {
    if (!Same(a.fields.size(), b.fields.size(), "number of tuple fields")) return false;
    for (size_t i = 0; i < a.fields.size(); ++i) {
      if (!Info(a.fields[i], b.fields[i])) return false;
    }
    return true;
  }
  if (a.kind != StructInfo::Kind::kTensor && a.kind != StructInfo::Kind::kShape) return true;
  if (!Same(a.ndim, b.ndim, "rank")) return false;
  if (a.shape.has_value() != b.shape.has_value()) return Differ("known and unknown shape");
  return !a.shape || Exprs(*a.shape, *b.shape);
}

bool Equal::Attrs(const ir::Attrs& a, const ir::Attrs& b) {
  if (!Same(a.size(), b.size(), "number of attributes")) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (!Same(ia->first, ib->first, "attribute")) return false;
    const AttrValue &x = ia->second, &y = ib->second;
    if (x.index() != y.index()) {
      return Differ(absl::StrCat("attribute ", ia->first, ": ", AttrKindName(x.index()), " vs ",
                                 AttrKindName(y.index())));
    }
    bool same = x == y;
    if (const auto* d = std::get_if<double>(&x)) same = SameDouble(*d, std::get<double>(y));
    if (const auto* v = std::get_if<std::vector<double>>(&x)) {
      const auto& w = std::get<std::vector<double>>(y);
      same = v->size() == w.size() && std::equal(v->begin(), v->end(), w.begin(), SameDouble);
    }
    if (!same) return Differ("attribute " + ia->first + " differs");
  }
  return true;
}

bool Equal::Call(const ExprNode& a, const ExprNode& b) {
  if (!Same(a.name, b.name, "op") || !Same(a.callee, b.callee, "callee")) return false;
  if (!Attrs(a.attrs, b.attrs)) return false;
  if (!Same(a.args.size(), b.args.size(), "number of arguments")) return false;
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (!Value(a.args[i], b.args[i])) return false;
  }
  if (!Same(a.subgraphs.size(), b.subgraphs.size(), "number of subgraphs")) return false;
  for (size_t i = 0; i < a.subgraphs.size(); ++i) {
    Where where(this, absl::StrCat("subgraph ", i));
    if (!Func(*a.subgraphs[i], *b.subgraphs[i])) return false;
  }
  return Info(a.struct_info, b.struct_info);
}

bool Equal::Value(const ir::Expr& a, const ir::Expr& b) {
  if (!a || !b) return (!a && !b) || Differ("missing expression");
  if (a->kind != b->kind) return Differ(absl::StrCat(ToString(a), " vs ", ToString(b)));
  switch (a->kind) {
    case ir::ExprKind::kVar:
      return Use(a.get(), b.get()) || Differ(absl::StrCat("%", a->name, " vs %", b->name));
    case ir::ExprKind::kConstant:
      return SameArray(*a->data, *b->data) || Differ("constants differ");
    case ir::ExprKind::kShapeExpr:
      return Exprs(a->values, b->values);
    case ir::ExprKind::kTupleGetItem:
      if (!Same(a->index, b->index, "tuple index")) return false;
      break;
    case ir::ExprKind::kCall:
    case ir::ExprKind::kIf:
      return Call(*a, *b);
    case ir::ExprKind::kTuple:
      break;
  }
  if (!Same(a->args.size(), b->args.size(), "number of tuple fields")) return false;
  for (size_t i = 0; i < a->args.size(); ++i) {
    if (!Value(a->args[i], b->args[i])) return false;
  }
  return true;
}

bool Equal::Exprs(const std::vector<PrimExpr>& a, const std::vector<PrimExpr>& b) {
  if (!Same(a.size(), b.size(), "number of expressions")) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!Expr(a[i], b[i])) return false;
  }
  return true;
}

bool Equal::Expr(const PrimExpr& a, const PrimExpr& b) {
  if (!a || !b) return (!a && !b) || Differ("missing expression");
  auto differ = [&] { return Differ(absl::StrCat(ToString(a), " vs ", ToString(b))); };
  if (a->kind != b->kind || a->dtype != b->dtype) return differ();
  switch (a->kind) {
    case ExprKind::kVar:
      return Use(a.get(), b.get()) || differ();
    case ExprKind::kIntImm:
      return a->int_value == b->int_value || differ();
    case ExprKind::kFloatImm:
      return SameDouble(a->float_value, b->float_value) || differ();
    case ExprKind::kLoad:
      if (!Use(a->buffer.get(), b->buffer.get())) return differ();
      break;
    case ExprKind::kCall:
      if (a->name != b->name) return differ();
      break;
    default:
      break;
  }
  if (a->args.size() != b->args.size()) return differ();
  for (size_t i = 0; i < a->args.size(); ++i) {
    if (!Expr(a->args[i], b->args[i])) return false;
  }
  return true;
}

bool Equal::BufferDecl(const Buffer& a, const Buffer& b) {
  Where where(this, "buffer " + a->name);
  if (a->dtype != b->dtype) return Differ("dtype differs");
  if (!Exprs(a->shape, b->shape)) return false;
  Define(a.get(), b.get());
  return true;
}

bool Equal::Prim(const PrimFunc& a, const PrimFunc& b) {
  if (!Same(a.name, b.name, "name")) return false;
  if (a.is_host != b.is_host) return Differ("host and kernel function");
  if (!Same(a.buffers.size(), b.buffers.size(), "number of buffers")) return false;
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    if (!BufferDecl(a.buffers[i], b.buffers[i])) return false;
  }
  // Scalars are used in buffer shapes before they are declared: pair them as uses.
  if (!Exprs(a.scalars, b.scalars)) return false;
  return Stmts(a.body, b.body);
}

bool Equal::Stmts(const Stmt& a, const Stmt& b) {
  std::vector<const StmtNode*> la = Flat(a), lb = Flat(b);
  if (!Same(la.size(), lb.size(), "number of statements")) return false;
  for (size_t i = 0; i < la.size(); ++i) {
    Where where(this, absl::StrCat("statement ", i));
    if (!OneStmt(*la[i], *lb[i])) return false;
  }
  return true;
}

bool Equal::OneStmt(const StmtNode& a, const StmtNode& b) {
  if (a.kind != b.kind) return Differ("different statements");
  switch (a.kind) {
    case StmtKind::kFor:
      if (a.for_kind != b.for_kind) return Differ("loop kinds differ");
      if (!Expr(a.min, b.min) || !Expr(a.extent, b.extent)) return false;
      if (a.var->dtype != b.var->dtype) return Differ("loop variable dtypes differ");
      Define(a.var.get(), b.var.get());
      return Stmts(a.body, b.body);
    case StmtKind::kLet:
      if (!Expr(a.value, b.value)) return false;
      if (a.var->dtype != b.var->dtype) return Differ("let variable dtypes differ");
      Define(a.var.get(), b.var.get());
      return Stmts(a.body, b.body);
    case StmtKind::kStore:
      if (!Use(a.buffer.get(), b.buffer.get())) return Differ("stores to different buffers");
      return Exprs(a.indices, b.indices) && Expr(a.value, b.value);
    case StmtKind::kIfThenElse:
      return Expr(a.condition, b.condition) && Stmts(a.then_case, b.then_case) &&
             Stmts(a.else_case, b.else_case);
    case StmtKind::kAllocate:
      return BufferDecl(a.buffer, b.buffer) && Stmts(a.body, b.body);
    case StmtKind::kEvaluate:
      return Expr(a.value, b.value);
    case StmtKind::kAssert:
      return Expr(a.condition, b.condition) && Expr(a.on_fail, b.on_fail);
    case StmtKind::kSeq:
      break;  // flattened away
  }
  return true;
}

// Walks one side in the order Equal walks both, numbering variables where Equal pairs them,
// so that equal values hash equal.
class Hasher {
 public:
  size_t h = 0;

  void Module(const IRModule& m);
  void Func(const Function& f);
  void Value(const ir::Expr& e);
  void Prim(const PrimFunc& f);

 private:
  template <typename... T>
  void Mix(const T&... values) {
    h = absl::HashOf(h, values...);
  }
  void Define(const void* node) { index_[node] = next_++; }
  void Use(const void* node) {
    auto [it, inserted] = index_.try_emplace(node, next_);
    if (inserted) ++next_;
    Mix(it->second);
  }
  void Reset() {
    index_.clear();
    next_ = 0;
  }
  void Array(const NDArray& a) {
    Mix(static_cast<int>(a.dtype.code), a.dtype.bits, a.shape,
        std::string_view(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size()));
  }
  void Info(const StructInfo& s);
  void Attr(const AttrValue& v);
  void Expr(const PrimExpr& e);
  void BufferDecl(const Buffer& b);
  void Stmts(const Stmt& s);

  std::unordered_map<const void*, size_t> index_;
  size_t next_ = 0;
};

void Hasher::Module(const IRModule& m) {
  for (const auto& [name, f] : m.functions) {
    Reset();
    Mix(name);
    Func(f);
  }
  for (const auto& [name, f] : m.prim_funcs) {
    Reset();
    Mix(name);
    Prim(f);
  }
  for (const auto& c : m.constants) Array(*c);
}

void Hasher::Func(const Function& f) {
  Mix(f.name, f.input_names, f.output_names, f.params.size(), f.blocks.size());
  for (const ir::Expr& p : f.params) {
    Info(p->struct_info);
    Define(p.get());
  }
  for (const BindingBlock& block : f.blocks) {
    Mix(block.dataflow, block.bindings.size());
    for (const Binding& b : block.bindings) {
      Mix(b.match_cast);
      Value(b.value);
      Info(b.var->struct_info);
      Define(b.var.get());
    }
  }
  Value(f.result);
}

void Hasher::Info(const StructInfo& s) {
  Mix(static_cast<int>(s.kind));
  switch (s.kind) {
    case StructInfo::Kind::kObject:
      return;
    case StructInfo::Kind::kPrim:
      Mix(static_cast<int>(s.dtype.code), s.dtype.bits);
      return;
    case StructInfo::Kind::kTuple:
      Mix(s.fields.size());
      for (const StructInfo& f : s.fields) Info(f);
      return;
    case StructInfo::Kind::kTensor:
      Mix(static_cast<int>(s.dtype.code), s.dtype.bits);
      break;
    case StructInfo::Kind::kShape:
      break;
  }
  Mix(s.ndim, s.shape.has_value());
  if (s.shape) {
    for (const PrimExpr& d : *s.shape) Expr(d);
  }
}

void Hasher::Attr(const AttrValue& v) {
  Mix(v.index());
  if (const auto* d = std::get_if<double>(&v)) return Mix(CanonicalDouble(*d));
  if (const auto* l = std::get_if<std::vector<double>>(&v)) {
    for (double d : *l) Mix(CanonicalDouble(d));
    return;
  }
  std::visit(
      [&](const auto& x) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(x)>, double> &&
                      !std::is_same_v<std::decay_t<decltype(x)>, std::vector<double>>) {
          Mix(x);
        }
      },
      v);
}

void Hasher::Value(const ir::Expr& e) {
  if (!e) return Mix(-1);
  Mix(static_cast<int>(e->kind));
  switch (e->kind) {
    case ir::ExprKind::kVar:
      return Use(e.get());
    case ir::ExprKind::kConstant:
      return Array(*e->data);
    case ir::ExprKind::kShapeExpr:
      for (const PrimExpr& v : e->values) Expr(v);
      return;
    case ir::ExprKind::kTupleGetItem:
      Mix(e->index);
      break;
    case ir::ExprKind::kCall:
    case ir::ExprKind::kIf:
      Mix(e->name, e->callee, e->attrs.size());
      for (const auto& [key, value] : e->attrs) {
        Mix(key);
        Attr(value);
      }
      break;
    case ir::ExprKind::kTuple:
      break;
  }
  Mix(e->args.size());
  for (const ir::Expr& arg : e->args) Value(arg);
  for (const auto& sub : e->subgraphs) Func(*sub);
  if (e->kind == ir::ExprKind::kCall || e->kind == ir::ExprKind::kIf) Info(e->struct_info);
}

void Hasher::Expr(const PrimExpr& e) {
  if (!e) return Mix(-1);
  Mix(static_cast<int>(e->kind), static_cast<int>(e->dtype.code), e->dtype.bits);
  switch (e->kind) {
    case ExprKind::kVar:
      return Use(e.get());
    case ExprKind::kIntImm:
      return Mix(e->int_value);
    case ExprKind::kFloatImm:
      return Mix(CanonicalDouble(e->float_value));
    case ExprKind::kLoad:
      Use(e->buffer.get());
      break;
    case ExprKind::kCall:
      Mix(e->name);
      break;
    default:
      break;
  }
  Mix(e->args.size());
  for (const PrimExpr& arg : e->args) Expr(arg);
}

void Hasher::BufferDecl(const Buffer& b) {
  Mix(static_cast<int>(b->dtype.code), b->dtype.bits, b->shape.size());
  for (const PrimExpr& d : b->shape) Expr(d);
  Define(b.get());
}

void Hasher::Prim(const PrimFunc& f) {
  Mix(f.name, f.is_host, f.buffers.size(), f.scalars.size());
  for (const Buffer& b : f.buffers) BufferDecl(b);
  for (const PrimExpr& v : f.scalars) Expr(v);
  Stmts(f.body);
}

void Hasher::Stmts(const Stmt& stmt) {
  std::vector<const StmtNode*> list = Flat(stmt);
  Mix(list.size());
  for (const StmtNode* s : list) {
    Mix(static_cast<int>(s->kind));
    switch (s->kind) {
      case StmtKind::kFor:
        Mix(static_cast<int>(s->for_kind));
        Expr(s->min);
        Expr(s->extent);
        Mix(static_cast<int>(s->var->dtype.code), s->var->dtype.bits);
        Define(s->var.get());
        Stmts(s->body);
        break;
      case StmtKind::kLet:
        Expr(s->value);
        Mix(static_cast<int>(s->var->dtype.code), s->var->dtype.bits);
        Define(s->var.get());
        Stmts(s->body);
        break;
      case StmtKind::kStore:
        Use(s->buffer.get());
        for (const PrimExpr& i : s->indices) Expr(i);
        Expr(s->value);
        break;
      case StmtKind::kIfThenElse:
        Expr(s->condition);
        Stmts(s->then_case);
        Stmts(s->else_case);
        break;
      case StmtKind::kAllocate:
        BufferDecl(s->buffer);
        Stmts(s->body);
        break;
      case StmtKind::kEvaluate:
        Expr(s->value);
        break;
      case StmtKind::kAssert:
        Expr(s->condition);
        Expr(s->on_fail);
        break;
      case StmtKind::kSeq:
        break;
    }
  }
}

}  // namespace

bool StructuralEqual(const IRModule& a, const IRModule& b) { return Equal().Module(a, b); }
bool StructuralEqual(const Function& a, const Function& b) { return Equal().Func(a, b); }
bool StructuralEqual(const Expr& a, const Expr& b) { return Equal().Value(a, b); }
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b) { return Equal().Prim(a, b); }

std::string StructuralMismatch(const IRModule& a, const IRModule& b) {
  Equal eq;
  if (eq.Module(a, b)) return "";
  return eq.mismatch.empty() ? "modules differ" : eq.mismatch;
}

size_t StructuralHash(const IRModule& module) {
  Hasher h;
  h.Module(module);
  return h.h;
}

size_t StructuralHash(const Function& func) {
  Hasher h;
  h.Func(func);
  return h.h;
}

size_t StructuralHash(const Expr& expr) {
  Hasher h;
  h.Value(expr);
  return h.h;
}

size_t StructuralHash(const PrimFunc& func) {
  Hasher h;
  h.Prim(func);
  return h.h;
}

}  // namespace kiln::ir
