#include "compiler/ir/verifier.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {
namespace {

using arith::ExprKind;

constexpr size_t kMaxErrors = 20;

class Verifier {
 public:
  explicit Verifier(const IRModule& module) : module_(module) {}

  absl::Status Run() {
    for (const auto& [name, func] : module_.functions) {
      Where where(this, "function @" + name);
      if (func.name != name) Error("is named @" + func.name);
      graph_vars_.clear();
      bound_.clear();
      syms_.clear();
      Function(func);
    }
    for (const auto& [name, func] : module_.prim_funcs) {
      Where where(this, (func.is_host ? "host_func @" : "prim_func @") + name);
      if (func.name != name) Error("is named @" + func.name);
      PrimFunc(func);
    }
    if (errors_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  }

 private:
  struct Where {
    Where(Verifier* v, std::string what) : v(v) { v->where_.push_back(std::move(what)); }
    ~Where() { v->where_.pop_back(); }
    Verifier* v;
  };
  void Error(const std::string& what) {
    if (errors_.size() < kMaxErrors) {
      errors_.push_back(absl::StrCat(absl::StrJoin(where_, ": "), ": ", what));
    }
  }

  // Graph level.
  void Function(const ir::Function& func);
  void Binding(const ir::Binding& b);
  void Value(const Expr& e);
  void Call(const ExprNode& call);
  void CallTIR(const ExprNode& call);
  void DefineSyms(const StructInfo& info);
  void CheckSyms(const StructInfo& info);
  void CheckSyms(const std::vector<PrimExpr>& exprs);

  // Loop level.
  void PrimFunc(const ir::PrimFunc& func);
  void Stmt(const ir::Stmt& s);
  void Bound(const ir::Stmt& body, const arith::ExprNode* var);
  void GpuLoop(const ir::StmtNode& loop);
  void WarpFold(const arith::ExprNode& call);
  void Prefetch(const arith::ExprNode& call);
  void Transpose(const arith::ExprNode& call);
  void Prim(const PrimExpr& e);
  void Access(const Buffer& buffer, const std::vector<PrimExpr>& indices, const char* what);
  void PrimCall(const arith::ExprNode& call);

  const IRModule& module_;
  std::vector<std::string> errors_;
  std::vector<std::string> where_;
  // Graph level: variables in scope, every variable bound so far, symbolic variables bound.
  std::unordered_set<const ExprNode*> graph_vars_, bound_;
  std::unordered_set<const arith::ExprNode*> syms_;
  // Loop level: variables and buffers in scope, and every loop or let variable seen.
  const ir::PrimFunc* prim_func_ = nullptr;
  int gpu_blocks_ = 0, gpu_threads_ = 0;  // enclosing gpu_block and gpu_thread loops
  int64_t block_threads_ = 0;             // the enclosing block's thread count, once seen
  std::unordered_set<const arith::ExprNode*> vars_, scoped_vars_;
  std::unordered_set<const arith::BufferNode*> buffers_;
};

// ---- Graph level ----------------------------------------------------------------------------

void Verifier::DefineSyms(const StructInfo& info) {
  if (info.shape) {
    for (const PrimExpr& d : *info.shape) {
      if (d && d->kind == ExprKind::kVar) syms_.insert(d.get());
    }
  }
  for (const StructInfo& f : info.fields) DefineSyms(f);
}

void Verifier::CheckSyms(const std::vector<PrimExpr>& exprs) {
  for (const PrimExpr& e : exprs) {
    if (!e) {
      Error("missing dimension");
      continue;
    }
    for (const PrimExpr& v : arith::FreeVars(e)) {
      // Reported once: later uses of the variable would only repeat the error.
      if (syms_.insert(v.get()).second) {
        Error(absl::StrCat("symbolic variable ", v->name,
                           " is used before a parameter or match_cast binds it"));
      }
    }
  }
}

void Verifier::CheckSyms(const StructInfo& info) {
  if (info.shape) {
    CheckSyms(*info.shape);
    if (static_cast<int>(info.shape->size()) != info.ndim) {
      Error(absl::StrCat("struct info ", ToString(info), " has ndim ", info.ndim));
    }
  }
  for (const StructInfo& f : info.fields) CheckSyms(f);
}

void Verifier::Function(const ir::Function& func) {
  // Parameters are bound together: any of them may bind a symbolic variable the others use.
  for (const Expr& p : func.params) DefineSyms(p->struct_info);
  for (const Expr& p : func.params) {
    Where where(this, "param %" + p->name);
    if (p->kind != ir::ExprKind::kVar) Error("is not a variable");
    if (!bound_.insert(p.get()).second) Error("is bound twice");
    graph_vars_.insert(p.get());
    CheckSyms(p->struct_info);
  }
  for (size_t k = 0; k < func.blocks.size(); ++k) {
    const auto& bindings = func.blocks[k].bindings;
    for (size_t i = 0; i < bindings.size(); ++i) {
      Where where(this, absl::StrCat("block ", k, " binding ", i, " (%",
                                     bindings[i].var ? bindings[i].var->name : "", ")"));
      Binding(bindings[i]);
    }
  }
  Where where(this, "result");
  Value(func.result);
}

void Verifier::Binding(const ir::Binding& b) {
  if (!b.var || b.var->kind != ir::ExprKind::kVar) return Error("binds no variable");
  Value(b.value);
  if (!bound_.insert(b.var.get()).second) Error("%" + b.var->name + " is bound twice");
  graph_vars_.insert(b.var.get());
  const StructInfo& info = b.var->struct_info;
  if (b.match_cast) DefineSyms(info);
  CheckSyms(info);
  if (!b.value || b.match_cast) return;
  bool produced = b.value->kind == ir::ExprKind::kCall || b.value->kind == ir::ExprKind::kIf;
  if (produced && info.kind == StructInfo::Kind::kObject) {
    Error("has no struct info (Object)");
  } else if (produced && !StructuralEqual(info, b.value->struct_info)) {
    Error(absl::StrCat("struct info ", ToString(info), " differs from its value's ",
                       ToString(b.value->struct_info)));
  }
}

void Verifier::Value(const Expr& e) {
  if (!e) return Error("missing expression");
  switch (e->kind) {
    case ir::ExprKind::kVar:
      if (graph_vars_.count(e.get())) return;
      if (bound_.count(e.get())) return Error("%" + e->name + " is used outside its scope");
      return Error("%" + e->name + " is used before it is defined");
    case ir::ExprKind::kConstant:
      if (!e->data) return Error("constant without data");
      if (static_cast<int64_t>(e->data->bytes.size()) !=
          e->data->num_elements() * e->data->dtype.bytes()) {
        Error("constant's data does not match its shape");
      }
      return;
    case ir::ExprKind::kShapeExpr:
      return CheckSyms(e->values);
    case ir::ExprKind::kTupleGetItem: {
      if (e->args.size() != 1) return Error("tuple item without a tuple");
      Value(e->args[0]);
      const StructInfo& t = e->args[0]->struct_info;
      if (t.kind != StructInfo::Kind::kTuple) {
        return Error(absl::StrCat("item ", e->index, " of a non-tuple ", ToString(t)));
      }
      if (e->index < 0 || e->index >= static_cast<int>(t.fields.size())) {
        Error(absl::StrCat("tuple index ", e->index, " out of range for ", ToString(t)));
      }
      return;
    }
    case ir::ExprKind::kTuple:
      for (const Expr& f : e->args) Value(f);
      return;
    case ir::ExprKind::kCall:
    case ir::ExprKind::kIf:
      return Call(*e);
  }
}

void Verifier::Call(const ExprNode& call) {
  for (const Expr& arg : call.args) Value(arg);
  if (call.kind == ir::ExprKind::kIf) {
    const StructInfo* cond = call.args.size() == 1 ? &call.args[0]->struct_info : nullptr;
    bool scalar_bool = cond && cond->dtype == DataType::Bool() &&
                       ((cond->kind == StructInfo::Kind::kTensor && cond->ndim == 0) ||
                        cond->kind == StructInfo::Kind::kPrim);
    if (!scalar_bool) Error("if needs one condition, a scalar bool");
    if (call.subgraphs.size() != 2) Error("if needs two branches");
  } else if (call.name.empty()) {
    Error("call without an op");
  } else if (call.name == "call_tir") {
    CallTIR(call);
  } else if (call.name == "call_extern" && call.callee.empty()) {
    Error("call_extern names no function");
  }
  for (size_t i = 0; i < call.subgraphs.size(); ++i) {
    const auto& sub = call.subgraphs[i];
    Where where(this, absl::StrCat("subgraph ", i));
    if (!sub) {
      Error("missing");
      continue;
    }
    if (call.kind == ir::ExprKind::kIf && !sub->params.empty()) Error("if branch with params");
    // A subgraph sees the enclosing scope; its own variables end with it.
    auto outer = graph_vars_;
    Function(*sub);
    graph_vars_ = std::move(outer);
  }
}

void Verifier::CallTIR(const ExprNode& call) {
  auto it = module_.prim_funcs.find(call.callee);
  if (it == module_.prim_funcs.end()) return Error("call_tir to unknown kernel @" + call.callee);
  if (it->second.is_host) return Error("call_tir to host function @" + call.callee);
  const StructInfo& out = call.struct_info;
  size_t outputs = out.kind == StructInfo::Kind::kTuple ? out.fields.size() : 1;
  if (it->second.buffers.size() != call.args.size() + outputs) {
    Error(absl::StrCat("call_tir passes ", call.args.size(), " arguments and ", outputs,
                       " outputs to @", call.callee, ", which has ", it->second.buffers.size(),
                       " buffers"));
  }
}

// ---- Loop level -----------------------------------------------------------------------------

void Verifier::PrimFunc(const ir::PrimFunc& func) {
  prim_func_ = &func;
  vars_.clear();
  scoped_vars_.clear();
  buffers_.clear();
  if (func.is_host && (!func.buffers.empty() || !func.scalars.empty())) {
    Error("a host function takes no buffers or scalars");
  }
  for (const PrimExpr& v : func.scalars) {
    if (!v || v->kind != ExprKind::kVar) {
      Error("scalar parameter is not a variable");
    } else {
      vars_.insert(v.get());
    }
  }
  for (const Buffer& b : func.buffers) {
    Where where(this, "buffer " + (b ? b->name : ""));
    if (!b) {
      Error("missing");
      continue;
    }
    for (const PrimExpr& d : b->shape) {
      for (const PrimExpr& v : arith::FreeVars(d)) {
        if (!vars_.count(v.get())) Error("shape uses " + v->name + ", not a scalar parameter");
      }
    }
    buffers_.insert(b.get());
  }
  Stmt(func.body);
}

// `body` with `var` in scope.
void Verifier::Bound(const ir::Stmt& body, const arith::ExprNode* var) {
  if (vars_.count(var))
    Error(absl::StrCat("variable ", var->name, " is bound again inside its scope"));
  scoped_vars_.insert(var);
  vars_.insert(var);
  Stmt(body);
  vars_.erase(var);
}

// A launch is a gpu_block loop holding gpu_thread loops, from 0, in a kernel; a block's
// thread count is a constant, the same for all its gpu_thread loops (phases, which run one
// after another), and launches do not nest. Inside a block, stores belong to its phases.
void Verifier::GpuLoop(const ir::StmtNode& loop) {
  const bool block = loop.for_kind == ForKind::kGpuBlock;
  const std::string what = absl::StrCat(ForKindName(loop.for_kind), " loop ", loop.var->name);
  if (prim_func_->is_host) Error(what + " in a host function");
  if (!loop.min || !loop.min->is_const_int(0)) Error(what + " does not start at 0");
  if (gpu_threads_ > 0) Error(what + " inside a gpu_thread loop");
  if (block && gpu_blocks_ > 0) Error(what + " inside another gpu_block loop");
  if (!block && gpu_blocks_ == 0) Error(what + " outside a gpu_block loop");
  if (!block &&
      (!loop.extent || loop.extent->kind != ExprKind::kIntImm || loop.extent->int_value <= 0)) {
    Error(what + " needs a positive constant extent (the block size)");
  }
  if (!block && loop.extent && loop.extent->kind == ExprKind::kIntImm) {
    // Threads of all phases are the same threads: one block size.
    if (block_threads_ > 0 && loop.extent->int_value != block_threads_) {
      Error(absl::StrCat(what, " has ", loop.extent->int_value, " threads; another gpu_thread ",
                         "loop of its block has ", block_threads_));
    }
    block_threads_ = loop.extent->int_value;
  }
  if (block) block_threads_ = 0;
  int& depth = block ? gpu_blocks_ : gpu_threads_;
  ++depth;
  Bound(loop.body, loop.var.get());
  --depth;
}

void Verifier::Stmt(const ir::Stmt& s) {
  if (!s) return Error("missing statement");
  switch (s->kind) {
    case StmtKind::kFor:
      Prim(s->min);
      Prim(s->extent);
      if (!s->var || s->var->kind != ExprKind::kVar) return Error("loop without a variable");
      if (s->for_kind == ForKind::kGpuBlock || s->for_kind == ForKind::kGpuThread) {
        return GpuLoop(*s);
      }
      return Bound(s->body, s->var.get());
    case StmtKind::kLet:
      Prim(s->value);
      if (!s->var || s->var->kind != ExprKind::kVar) return Error("let without a variable");
      if (s->value && s->value->dtype != s->var->dtype) {
        Error(absl::StrCat("let ", s->var->name, ": ", s->var->dtype.ToString(), " bound to a ",
                           s->value->dtype.ToString()));
      }
      return Bound(s->body, s->var.get());
    case StmtKind::kStore:
      // Between a block's phases every thread would run it.
      if (gpu_blocks_ > 0 && gpu_threads_ == 0 && s->buffer) {
        Error("store to " + s->buffer->name + " in a gpu_block loop outside its gpu_thread loops");
      }
      Access(s->buffer, s->indices, "store to");
      Prim(s->value);
      if (s->buffer && s->value && s->value->dtype != s->buffer->dtype) {
        Error(absl::StrCat("store of ", s->value->dtype.ToString(), " to ",
                           s->buffer->dtype.ToString(), " buffer ", s->buffer->name));
      }
      return;
    case StmtKind::kIfThenElse:
    case StmtKind::kAssert:
      Prim(s->condition);
      if (s->condition && s->condition->dtype != DataType::Bool()) {
        Error("condition " + ToString(s->condition) + " is not a bool");
      }
      if (s->kind == StmtKind::kAssert) return Prim(s->on_fail);
      Stmt(s->then_case);
      if (s->else_case) Stmt(s->else_case);
      return;
    case StmtKind::kAllocate: {
      if (!s->buffer) return Error("alloc without a buffer");
      for (const PrimExpr& d : s->buffer->shape) {
        if (!d || d->kind != ExprKind::kIntImm) {
          Error("alloc " + s->buffer->name + " needs a constant shape");
        }
      }
      bool inserted = buffers_.insert(s->buffer.get()).second;
      if (!inserted) Error("buffer " + s->buffer->name + " is allocated inside its own scope");
      Stmt(s->body);
      if (inserted) buffers_.erase(s->buffer.get());
      return;
    }
    case StmtKind::kEvaluate:
      return Prim(s->value);
    case StmtKind::kSeq:
      for (const ir::Stmt& item : s->seq) Stmt(item);
      return;
  }
}

void Verifier::Access(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                      const char* what) {
  if (!buffer) return Error(absl::StrCat(what, " no buffer"));
  if (!buffers_.count(buffer.get())) {
    Error(absl::StrCat(what, " buffer ", buffer->name,
                       ", which is neither a parameter nor allocated here"));
  }
  if (indices.size() != buffer->shape.size()) {
    Error(absl::StrCat(what, " ", buffer->name, " with ", indices.size(), " indices; it has ",
                       buffer->shape.size(), " dimensions"));
  }
  for (const PrimExpr& i : indices) Prim(i);
}

void Verifier::Prim(const PrimExpr& e) {
  if (!e) return Error("missing expression");
  switch (e->kind) {
    case ExprKind::kVar:
      if (vars_.count(e.get())) return;
      if (scoped_vars_.count(e.get())) {
        return Error("variable " + e->name + " is used outside its loop or let");
      }
      return Error("variable " + e->name + " is not a scalar parameter, loop or let variable");
    case ExprKind::kLoad:
      return Access(e->buffer, e->args, "load of");
    case ExprKind::kCall:
      PrimCall(*e);
      break;
    default:
      break;
  }
  for (const PrimExpr& arg : e->args) Prim(arg);
}

void Verifier::WarpFold(const arith::ExprNode& call) {
  const std::string op = call.name.substr(std::string(intrinsic::kWarpFold).size() + 1);
  if (op != "add" && op != "max" && op != "min") Error(call.name + ": no such fold");
  if (gpu_threads_ == 0) Error(call.name + " outside a gpu_thread loop");
  const bool load = call.args.size() == 1 && call.args[0] &&
                    call.args[0]->kind == ExprKind::kLoad && call.args[0]->args.size() == 1 &&
                    call.args[0]->args[0]->kind == ExprKind::kVar;
  if (!load) Error(call.name + " takes one load of a buffer at the thread variable");
  if (call.dtype != DataType::Float(32)) Error(call.name + " folds f32 only");
}

void Verifier::Prefetch(const arith::ExprNode& call) {
  if (prim_func_->is_host) return Error(call.name + " outside a kernel");
  if (call.args.size() != 1 || !call.args[0] || call.args[0]->kind != ExprKind::kLoad) {
    Error(call.name + " takes one load of the element to prefetch");
  }
}

void Verifier::Transpose(const arith::ExprNode& call) {
  if (prim_func_->is_host) return Error(call.name + " outside a kernel");
  const auto& args = call.args;
  auto f32_load = [](const PrimExpr& a) {
    return a && a->kind == ExprKind::kLoad && a->buffer->dtype == DataType::Float(32);
  };
  auto constant = [](const PrimExpr& a) { return a && a->kind == ExprKind::kIntImm; };
  auto integer = [](const PrimExpr& a) { return a && a->dtype.is_int(); };
  if (args.size() != 5 || !f32_load(args[0]) || !f32_load(args[1]) || !constant(args[2]) ||
      !integer(args[3]) || !integer(args[4])) {
    return Error(call.name +
                 " takes (dst f32 load, src f32 load, constant n, integer dst_row and src_row)");
  }
  const int64_t n = args[2]->int_value;
  if (n < 2 || n > intrinsic::kMaxTransposeLanes || (n & (n - 1)) != 0) {
    Error(absl::StrCat(call.name, ": n = ", n, " is not a power of two from 2 to ",
                       intrinsic::kMaxTransposeLanes));
  }
  // A row distance known only at run time is the schedule's to keep at n or more.
  auto overlaps = [&](const PrimExpr& row) { return constant(row) && row->int_value < n; };
  if (overlaps(args[3]) || overlaps(args[4])) {
    Error(absl::StrCat(call.name, ": rows ", arith::ToString(args[3]), " and ",
                       arith::ToString(args[4]), " apart overlap rows of ", n));
  }
  if (args[0]->buffer == args[1]->buffer) Error(call.name + " within one buffer");
}

void Verifier::PrimCall(const arith::ExprNode& call) {
  bool intrinsic = call.name.rfind("kiln.", 0) == 0;
  bool check_index = intrinsic::IsCheckIndex(call.name);
  if (intrinsic::IsWarpFold(call.name)) return WarpFold(call);
  if (call.name == intrinsic::kPrefetch) return Prefetch(call);
  if (call.name == intrinsic::kTranspose) return Transpose(call);
  if (intrinsic && !check_index && !prim_func_->is_host) {
    Error(call.name + " outside a host function");
  }
  if (check_index && prim_func_->is_host) Error(call.name + " outside a kernel");
  if (check_index && call.args.size() != 5) Error(call.name + " takes 5 arguments");
  if (call.name == intrinsic::kLaunch &&
      (call.args.size() != 3 || !call.args[2] || call.args[2]->kind != ExprKind::kCall ||
       !module_.prim_funcs.count(call.args[2]->name) ||
       module_.prim_funcs.at(call.args[2]->name).is_host)) {
    Error(call.name + " takes (blocks, threads, a call to a kernel)");
  }
  if (call.name == intrinsic::kConstant || call.name == intrinsic::kDeviceConstant) {
    const PrimExpr* k = call.args.size() == 1 ? &call.args[0] : nullptr;
    if (!k || !*k || (*k)->kind != ExprKind::kIntImm || (*k)->int_value < 0 ||
        (*k)->int_value >= static_cast<int64_t>(module_.constants.size())) {
      Error(absl::StrCat(call.name, " needs a constant index below ", module_.constants.size(),
                         ", the number of module constants"));
    }
  }
  auto kernel = module_.prim_funcs.find(call.name);
  if (intrinsic || kernel == module_.prim_funcs.end()) return;
  size_t expected = kernel->second.buffers.size() + kernel->second.scalars.size();
  if (call.args.size() != expected) {
    Error(absl::StrCat("call to @", call.name, " passes ", call.args.size(),
                       " arguments; it takes ", expected));
  }
}

}  // namespace

absl::Status VerifyModule(const IRModule& module) { return Verifier(module).Run(); }

}  // namespace kiln::ir
