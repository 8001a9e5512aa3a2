#include "compiler/transform/lower_host.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"

namespace kiln::transform {

using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;
namespace intrinsic = ir::intrinsic;

namespace {

PrimExpr I32(int64_t v) { return arith::IntImm(v, DataType::Int(32)); }

PrimExpr HostCall(DataType dtype, const char* name, std::vector<PrimExpr> args) {
  return arith::Call(dtype, name, std::move(args));
}

// A straight-line host program under construction. `Let` scopes everything emitted after it,
// so the program is kept flat and nested only when it is finished.
class HostProgram {
 public:
  void Let(PrimExpr var, PrimExpr value) { items_.push_back({var, value, nullptr}); }
  void Emit(Stmt stmt) { items_.push_back({nullptr, nullptr, stmt}); }

  Stmt Finish() const {
    std::vector<Stmt> tail;
    Stmt body = ir::Seq({});
    for (size_t i = items_.size(); i-- > 0;) {
      const Item& item = items_[i];
      if (item.stmt) {
        tail.insert(tail.begin(), item.stmt);
        continue;
      }
      body = ir::Let(item.var, item.value, ir::Seq(tail));
      tail = {body};
    }
    return ir::Seq(tail);
  }

 private:
  struct Item {
    PrimExpr var, value;
    Stmt stmt;
  };
  std::vector<Item> items_;
};

struct TensorShape {
  const std::vector<PrimExpr>* dims;
};

class HostLowering {
 public:
  HostLowering(ir::IRModule& module, const ir::Function& func) : module_(module), func_(func) {
    if (func.result->kind == ir::ExprKind::kTuple) {
      outputs_ = func.result->args;
    } else {
      outputs_ = {func.result};
    }
  }

  absl::Status Run() {
    KILN_RETURN_IF_ERROR(CheckShapesKnown());
    KILN_RETURN_IF_ERROR(CheckAllVarsBindable());
    module_.prim_funcs.emplace("kiln_infer_shapes", HostFunc("kiln_infer_shapes", InferShapes()));
    KILN_ASSIGN_OR_RETURN(Stmt run, RunBody());
    module_.prim_funcs.emplace("kiln_run", HostFunc("kiln_run", run));
    return absl::OkStatus();
  }

 private:
  static ir::PrimFunc HostFunc(const std::string& name, Stmt body) {
    ir::PrimFunc f;
    f.name = name;
    f.body = std::move(body);
    f.is_host = true;
    return f;
  }

  absl::Status CheckShapesKnown() const {
    for (const ir::Expr& e : func_.params) {
      if (!e->struct_info.is_tensor() || !e->struct_info.shape) {
        return absl::InvalidArgumentError(absl::StrCat("input ", e->name, " has no known shape"));
      }
    }
    for (const ir::Expr& e : outputs_) {
      if (!e->struct_info.is_tensor() || !e->struct_info.shape) {
        return absl::UnimplementedError(absl::StrCat(
            "output ", e->name, " has a shape computed at run time; not supported yet"));
      }
    }
    return absl::OkStatus();
  }

  // Every symbolic var must appear as a whole dim of some input, or nothing can bind it.
  absl::Status CheckAllVarsBindable() {
    for (size_t i = 0; i < func_.params.size(); ++i) {
      const auto& dims = *func_.params[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d]->kind == ExprKind::kVar && !binder_.count(dims[d].get())) {
          binder_[dims[d].get()] = {i, d};
        }
      }
    }
    for (const ir::Expr& e : outputs_) {
      for (const PrimExpr& d : *e->struct_info.shape) {
        for (const PrimExpr& v : arith::FreeVars(d)) {
          if (!binder_.count(v.get())) {
            return absl::InvalidArgumentError(absl::StrCat("symbolic dim ", v->name, " of output ",
                                                           e->name, " is not an input dim"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // Binds each symbolic var from the first input dim that is exactly it, then checks every
  // other input dim against what the model says it must be.
  void BindAndCheckInputs(HostProgram& p) const {
    std::set<std::pair<size_t, size_t>> binding_dims;
    for (const auto& [var, at] : binder_) binding_dims.insert(at);
    for (size_t i = 0; i < func_.params.size(); ++i) {
      const auto& dims = *func_.params[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        PrimExpr actual = HostCall(DataType::Int(), intrinsic::kInputShape, {I32(i), I32(d)});
        if (binding_dims.count({i, d})) {
          p.Let(dims[d], actual);
        }
      }
    }
    for (size_t i = 0; i < func_.params.size(); ++i) {
      const auto& dims = *func_.params[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (binding_dims.count({i, d})) continue;
        PrimExpr actual = HostCall(DataType::Int(), intrinsic::kInputShape, {I32(i), I32(d)});
        p.Emit(CheckDim(0, i, d, dims[d], actual));
      }
    }
  }

  static Stmt CheckDim(int is_output, size_t index, size_t dim, PrimExpr expected,
                       PrimExpr actual) {
    PrimExpr report = HostCall(DataType::Int(32), intrinsic::kShapeError,
                               {I32(is_output), I32(index), I32(dim), expected, actual});
    return ir::Assert(arith::Binary(ExprKind::kEQ, actual, expected), report);
  }

  Stmt InferShapes() const {
    HostProgram p;
    BindAndCheckInputs(p);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const auto& dims = *outputs_[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        p.Emit(ir::Evaluate(
            HostCall(DataType::Int(32), intrinsic::kSetOutputShape, {I32(i), I32(d), dims[d]})));
      }
    }
    return p.Finish();
  }

  absl::StatusOr<Stmt> RunBody() {
    HostProgram p;
    BindAndCheckInputs(p);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const auto& dims = *outputs_[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        PrimExpr actual = HostCall(DataType::Int(), intrinsic::kOutputShape, {I32(i), I32(d)});
        p.Emit(CheckDim(1, i, d, dims[d], actual));
      }
    }
    for (size_t i = 0; i < func_.params.size(); ++i) {
      PrimExpr h = arith::MakeVar(absl::StrCat(func_.params[i]->name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kInputData, {I32(i)}));
      handles_[func_.params[i].get()] = h;
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      PrimExpr h = arith::MakeVar(absl::StrCat(outputs_[i]->name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kOutputData, {I32(i)}));
      handles_[outputs_[i].get()] = h;
    }
    KILN_RETURN_IF_ERROR(EmitBindings(p));
    return p.Finish();
  }

  // Calls each kernel in order; intermediates get workspace right before they are produced
  // and give it back right after their last use.
  absl::Status EmitBindings(HostProgram& p) {
    std::vector<const ir::Binding*> bindings;
    for (const ir::BindingBlock& block : func_.blocks) {
      for (const ir::Binding& b : block.bindings) bindings.push_back(&b);
    }
    std::map<const ir::ExprNode*, size_t> last_use;
    for (size_t i = 0; i < bindings.size(); ++i) {
      last_use[bindings[i]->var.get()] = i;
      for (const ir::Expr& arg : bindings[i]->value->args) last_use[arg.get()] = i;
    }
    arith::Analyzer analyzer;
    for (size_t i = 0; i < bindings.size(); ++i) {
      const ir::Binding& b = *bindings[i];
      const ir::ExprNode& call = *b.value;
      if (call.kind != ir::ExprKind::kCall || call.name != "call_tir") {
        return absl::UnimplementedError(absl::StrCat(
            "binding %", b.var->name, " is not a kernel call; only kernel calls are compiled yet"));
      }
      if (!handles_.count(b.var.get())) {
        PrimExpr h = arith::MakeVar(absl::StrCat(b.var->name, "_data"), DataType::Handle());
        PrimExpr bytes = arith::IntImm(b.var->struct_info.dtype.bytes());
        for (const PrimExpr& d : *b.var->struct_info.shape) bytes = bytes * d;
        bytes = analyzer.Simplify(arith::Max(bytes, arith::IntImm(1)));
        p.Let(h, HostCall(DataType::Handle(), intrinsic::kAlloc, {bytes}));
        handles_[b.var.get()] = h;
        intermediates_.insert(b.var.get());
      }
      KILN_ASSIGN_OR_RETURN(PrimExpr kernel_call, KernelCall(call, b.var));
      p.Emit(ir::Evaluate(kernel_call));
      for (const auto& [value, last] : last_use) {
        if (last == i && intermediates_.count(value)) {
          p.Emit(ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kFree, {handles_[value]})));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<PrimExpr> KernelCall(const ir::ExprNode& call, const ir::Expr& out) {
    auto it = module_.prim_funcs.find(call.callee);
    KILN_CHECK(it != module_.prim_funcs.end()) << "call_tir to missing kernel " << call.callee;
    std::vector<PrimExpr> args;
    for (const ir::Expr& arg : call.args) args.push_back(DataHandle(arg));
    args.push_back(handles_.at(out.get()));
    // The kernel's scalars are the graph's own symbolic vars, bound above by Let.
    for (const PrimExpr& v : it->second.scalars) args.push_back(v);
    return arith::Call(DataType::Int(32), call.callee, std::move(args));
  }

  PrimExpr DataHandle(const ir::Expr& value) {
    if (value->kind == ir::ExprKind::kConstant) {
      auto [it, inserted] =
          constant_index_.try_emplace(value->data.get(), module_.constants.size());
      if (inserted) module_.constants.push_back(value->data);
      return HostCall(DataType::Handle(), intrinsic::kConstant, {I32(it->second)});
    }
    auto it = handles_.find(value.get());
    KILN_CHECK(it != handles_.end()) << "value used before it is defined: " << value->name;
    return it->second;
  }

  ir::IRModule& module_;
  const ir::Function& func_;
  std::vector<ir::Expr> outputs_;
  std::map<const arith::ExprNode*, std::pair<size_t, size_t>> binder_;  // var -> (input, dim)
  std::map<const ir::ExprNode*, PrimExpr> handles_;
  std::set<const ir::ExprNode*> intermediates_;
  std::map<const ir::NDArray*, size_t> constant_index_;
};

}  // namespace

absl::StatusOr<ir::IRModule> LowerHost(ir::IRModule module) {
  auto it = module.functions.find("main");
  if (it == module.functions.end()) return absl::InternalError("module has no main function");
  ir::Function main = it->second;
  module.functions.erase(it);
  HostLowering lowering(module, main);
  KILN_RETURN_IF_ERROR(lowering.Run());
  return module;
}

}  // namespace kiln::transform
