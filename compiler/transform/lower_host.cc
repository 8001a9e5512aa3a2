#include "compiler/transform/lower_host.h"

#include <algorithm>
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
      storage_of_[func_.params[i].get()] = {AddStorage(h, /*intermediate=*/false)};
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      PrimExpr h = arith::MakeVar(absl::StrCat(outputs_[i]->name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kOutputData, {I32(i)}));
      output_handles_[outputs_[i].get()] = h;
    }
    KILN_RETURN_IF_ERROR(EmitBindings(p));
    return p.Finish();
  }

  // Calls each kernel in order. This is where memory is managed: each result of a kernel call
  // (every field of a tuple result) that is not a graph output gets workspace (kiln.alloc)
  // right before the call that produces it, and gives it back (kiln.free) right after the
  // last binding that uses it or any TupleGetItem of it.
  absl::Status EmitBindings(HostProgram& p) {
    std::vector<const ir::Binding*> bindings;
    for (const ir::BindingBlock& block : func_.blocks) {
      for (const ir::Binding& b : block.bindings) bindings.push_back(&b);
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      last_use_[bindings[i]->var.get()] = i;
      for (const ir::Expr& arg : bindings[i]->value->args) last_use_[arg.get()] = i;
      const ir::ExprNode& value = *bindings[i]->value;
      auto out = output_handles_.find(bindings[i]->var.get());
      if (value.kind == ir::ExprKind::kTupleGetItem && out != output_handles_.end()) {
        output_fields_[{value.args[0].get(), value.index}] = out->second;
      }
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      const ir::Binding& b = *bindings[i];
      const ir::ExprNode& value = *b.value;
      if (value.kind == ir::ExprKind::kTupleGetItem) {
        KILN_RETURN_IF_ERROR(AliasTupleField(b));
      } else if (value.kind == ir::ExprKind::kCall && value.name == "call_tir") {
        KILN_RETURN_IF_ERROR(EmitKernelCall(p, b));
      } else {
        return absl::UnimplementedError(absl::StrCat(
            "binding %", b.var->name, " is not a kernel call; only kernel calls are compiled yet"));
      }
      FreeStoragesLastUsedAt(p, i);
    }
    return absl::OkStatus();
  }

  absl::Status EmitKernelCall(HostProgram& p, const ir::Binding& b) {
    const ir::StructInfo& info = b.var->struct_info;
    bool is_tuple = info.kind == ir::StructInfo::Kind::kTuple;
    std::vector<const ir::StructInfo*> results;
    if (is_tuple) {
      for (const ir::StructInfo& f : info.fields) results.push_back(&f);
    } else {
      results.push_back(&info);
    }
    std::vector<size_t> storages;
    for (size_t k = 0; k < results.size(); ++k) {
      const ir::StructInfo& r = *results[k];
      if (!r.is_tensor() || !r.shape) {
        return absl::UnimplementedError(
            absl::StrCat("binding %", b.var->name, " has a result whose shape is unknown"));
      }
      if (PrimExpr out = OutputHandle(b.var.get(), is_tuple, k)) {
        storages.push_back(AddStorage(out, /*intermediate=*/false));
        continue;
      }
      std::string name = is_tuple ? absl::StrCat(b.var->name, "_", k) : b.var->name;
      PrimExpr h = arith::MakeVar(absl::StrCat(name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kAlloc, {ByteSize(r)}));
      storages.push_back(AddStorage(h, /*intermediate=*/true));
    }
    AssignStorages(b.var.get(), storages);
    KILN_ASSIGN_OR_RETURN(PrimExpr kernel_call, KernelCall(*b.value, storages));
    p.Emit(ir::Evaluate(kernel_call));
    return absl::OkStatus();
  }

  // The graph output that a kernel's result `k` is written to directly, or null.
  PrimExpr OutputHandle(const ir::ExprNode* var, bool is_tuple, size_t k) const {
    if (is_tuple) {
      auto it = output_fields_.find({var, static_cast<int>(k)});
      return it == output_fields_.end() ? nullptr : it->second;
    }
    auto it = output_handles_.find(var);
    return it == output_handles_.end() ? nullptr : it->second;
  }

  // `%v = %t.k` reads field k where the kernel that made %t wrote it: no copy.
  absl::Status AliasTupleField(const ir::Binding& b) {
    const ir::ExprNode& get = *b.value;
    auto it = storage_of_.find(get.args[0].get());
    if (it == storage_of_.end() || get.index < 0 ||
        static_cast<size_t>(get.index) >= it->second.size()) {
      return absl::UnimplementedError(absl::StrCat(
          "binding %", b.var->name, " reads a field of a tuple that no kernel produced"));
    }
    size_t field = it->second[get.index];
    if (output_handles_.count(b.var.get()) &&
        storages_[field].handle.get() != output_handles_[b.var.get()].get()) {
      return absl::UnimplementedError(
          absl::StrCat("output ", b.var->name, " is a tuple field that is also another output"));
    }
    AssignStorages(b.var.get(), {field});
    return absl::OkStatus();
  }

  PrimExpr ByteSize(const ir::StructInfo& info) {
    PrimExpr bytes = arith::IntImm(info.dtype.bytes());
    for (const PrimExpr& d : *info.shape) bytes = bytes * d;
    return analyzer_.Simplify(arith::Max(bytes, arith::IntImm(1)));
  }

  size_t AddStorage(PrimExpr handle, bool intermediate) {
    storages_.push_back({std::move(handle), intermediate, false, 0});
    return storages_.size() - 1;
  }

  // A storage lives until the last use of any value that holds it.
  void AssignStorages(const ir::ExprNode* value, std::vector<size_t> storages) {
    for (size_t s : storages) {
      storages_[s].last_use = std::max(storages_[s].last_use, last_use_[value]);
    }
    storage_of_[value] = std::move(storages);
  }

  void FreeStoragesLastUsedAt(HostProgram& p, size_t binding) {
    for (Storage& s : storages_) {
      if (!s.intermediate || s.freed || s.last_use != binding) continue;
      p.Emit(ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kFree, {s.handle})));
      s.freed = true;
    }
  }

  absl::StatusOr<PrimExpr> KernelCall(const ir::ExprNode& call,
                                      const std::vector<size_t>& outputs) {
    auto it = module_.prim_funcs.find(call.callee);
    KILN_CHECK(it != module_.prim_funcs.end()) << "call_tir to missing kernel " << call.callee;
    std::vector<PrimExpr> args;
    for (const ir::Expr& arg : call.args) args.push_back(DataHandle(arg));
    for (size_t s : outputs) args.push_back(storages_[s].handle);
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
    auto it = storage_of_.find(value.get());
    KILN_CHECK(it != storage_of_.end()) << "value used before it is defined: " << value->name;
    KILN_CHECK_EQ(it->second.size(), 1u) << "a kernel operand is a tuple: " << value->name;
    return storages_[it->second[0]].handle;
  }

  // Where a tensor's data lives: an input, an output or workspace.
  struct Storage {
    PrimExpr handle;
    bool intermediate;  // workspace of kiln.alloc, to give back with kiln.free
    bool freed;
    size_t last_use;  // index of the last binding that uses it
  };

  ir::IRModule& module_;
  const ir::Function& func_;
  std::vector<ir::Expr> outputs_;
  std::map<const arith::ExprNode*, std::pair<size_t, size_t>> binder_;  // var -> (input, dim)
  std::map<const ir::ExprNode*, PrimExpr> output_handles_;  // output var -> kiln.output_data
  // (tuple var, field index) -> the output that field is, when a TupleGetItem makes it one.
  std::map<std::pair<const ir::ExprNode*, int>, PrimExpr> output_fields_;
  std::vector<Storage> storages_;
  // The storages of each value: one for a tensor, one per field for a tuple.
  std::map<const ir::ExprNode*, std::vector<size_t>> storage_of_;
  std::map<const ir::ExprNode*, size_t> last_use_;
  arith::Analyzer analyzer_;
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
