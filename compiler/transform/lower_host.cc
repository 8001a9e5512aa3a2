#include "compiler/transform/lower_host.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/plan_memory.h"

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
// so the program is kept flat and nested only when it is finished. A Let's value may be set
// later (workspace offsets are known only once every lifetime is), or the Let dropped.
class HostProgram {
 public:
  size_t Let(PrimExpr var, PrimExpr value) {
    items_.push_back({var, value, nullptr});
    return items_.size() - 1;
  }
  void Emit(Stmt stmt) { items_.push_back({nullptr, nullptr, stmt}); }
  void SetLetValue(size_t item, PrimExpr value) { items_[item].value = std::move(value); }
  void DropLet(size_t item) { items_[item].dropped = true; }

  Stmt Finish() const {
    std::vector<Stmt> tail;
    Stmt body = ir::Seq({});
    for (size_t i = items_.size(); i-- > 0;) {
      const Item& item = items_[i];
      if (item.dropped) continue;
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
    bool dropped = false;
  };
  std::vector<Item> items_;
};

struct TensorShape {
  const std::vector<PrimExpr>* dims;
};

class HostLowering {
 public:
  HostLowering(ir::IRModule& module, const ir::Function& func, ir::PassContext& context)
      : module_(module), func_(func), context_(context) {
    if (func.result->kind == ir::ExprKind::kTuple) {
      outputs_ = func.result->args;
    } else {
      outputs_ = {func.result};
    }
  }

  absl::Status Run() {
    KILN_RETURN_IF_ERROR(CheckShapesKnown());
    KILN_RETURN_IF_ERROR(CollectInputValueVars());
    KILN_RETURN_IF_ERROR(CheckAllVarsBindable());
    KILN_RETURN_IF_ERROR(BindUserBounds());
    KILN_ASSIGN_OR_RETURN(Stmt infer, InferShapes());
    module_.prim_funcs.emplace("kiln_infer_shapes", HostFunc("kiln_infer_shapes", infer));
    ForgetBindings();
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
          if (!binder_.count(v.get()) && !IsValueVar(v)) {
            return absl::InvalidArgumentError(absl::StrCat("symbolic dim ", v->name, " of output ",
                                                           e->name, " is not an input dim"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // Symbolic vars bound to the values of a small integer tensor (match_cast of
  // tensor_to_shape, made by the importer for a reshape target, say). Host code reads the
  // values of a graph input before anything else runs, so that the workspace can be sized
  // from them. The values of a kernel's result (a count that sizes a data-dependent output)
  // are read right after that kernel: they bind run-time vars (BindRunTimeValues).
  absl::Status CollectInputValueVars() {
    for (const ir::BindingBlock& block : func_.blocks) {
      for (const ir::Binding& b : block.bindings) {
        if (!IsTensorToShape(b)) continue;
        const ir::Expr& tensor = b.value->args[0];
        auto param = std::find(func_.params.begin(), func_.params.end(), tensor);
        if (param == func_.params.end()) {
          KILN_RETURN_IF_ERROR(CollectRunTimeVars(b));
          continue;
        }
        const auto& vars = *b.var->struct_info.shape;
        for (size_t k = 0; k < vars.size(); ++k) {
          KILN_CHECK(vars[k]->kind == ExprKind::kVar) << "tensor_to_shape binds " << vars[k];
          PrimExpr scaled = b.value->args.size() == 2 ? b.value->args[1]->values.at(k) : nullptr;
          value_binder_.push_back({vars[k], static_cast<size_t>(param - func_.params.begin()), k,
                                   tensor->struct_info.dtype, scaled});
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status CollectRunTimeVars(const ir::Binding& b) {
    if (b.value->args.size() != 1) {
      return absl::UnimplementedError(
          absl::StrCat("binding %", b.var->name,
                       " scales dims by values computed at run time; only scales "
                       "that are graph inputs are compiled yet"));
    }
    for (const PrimExpr& var : *b.var->struct_info.shape) {
      KILN_CHECK(var->kind == ExprKind::kVar) << "tensor_to_shape binds " << var;
      run_time_vars_.insert(var.get());
    }
    return absl::OkStatus();
  }

  bool IsValueVar(const PrimExpr& var) const {
    return run_time_vars_.count(var.get()) ||
           std::any_of(value_binder_.begin(), value_binder_.end(),
                       [&](const InputValue& v) { return v.var == var; });
  }

  // Whether `e` uses a var that is bound only once a kernel has run.
  bool UsesRunTimeVar(const PrimExpr& e) const {
    for (const PrimExpr& v : arith::FreeVars(e)) {
      if (run_time_vars_.count(v.get())) return true;
    }
    return false;
  }

  // `%c: Shape([expected]) = match_cast(shape([actual]), ...)`: a constraint on run-time
  // values that shape inference assumed (ImportContext::CheckAtRunTime).
  static bool IsValueCheck(const ir::Binding& b) {
    return b.match_cast && b.value->kind == ir::ExprKind::kShapeExpr &&
           b.var->struct_info.kind == ir::StructInfo::Kind::kShape && b.var->struct_info.shape;
  }

  // Checks each constraint right after the values are bound, before any shape built on them
  // is used, and reports it against the input whose values break it.
  void CheckValueConstraints(HostProgram& p) const {
    for (const ir::BindingBlock& block : func_.blocks) {
      for (const ir::Binding& b : block.bindings) {
        if (IsValueCheck(b) && !IsRunTimeCheck(b)) EmitValueCheck(p, b);
      }
    }
  }

  void EmitValueCheck(HostProgram& p, const ir::Binding& b) const {
    const auto& expected = *b.var->struct_info.shape;
    for (size_t k = 0; k < expected.size(); ++k) {
      const PrimExpr& actual = b.value->values[k];
      PrimExpr report = HostCall(DataType::Int(32), intrinsic::kShapeError,
                                 {I32(intrinsic::kShapeErrorValue), I32(InputOfValues(actual)),
                                  I32(-1), expected[k], actual});
      p.Emit(ir::Assert(arith::Binary(ExprKind::kEQ, actual, expected[k]), report));
    }
  }

  // A constraint on run-time vars is checked where it stands, once they are bound.
  bool IsRunTimeCheck(const ir::Binding& b) const {
    const auto& expected = *b.var->struct_info.shape;
    for (size_t k = 0; k < expected.size(); ++k) {
      if (UsesRunTimeVar(expected[k]) || UsesRunTimeVar(b.value->values[k])) return true;
    }
    return false;
  }

  // The input whose values `e` reads, or -1.
  int64_t InputOfValues(const PrimExpr& e) const {
    for (const PrimExpr& var : arith::FreeVars(e)) {
      for (const InputValue& v : value_binder_) {
        if (v.var == var) return static_cast<int64_t>(v.input);
      }
    }
    return -1;
  }

  static bool IsTensorToShape(const ir::Binding& b) {
    return b.match_cast && b.value->kind == ir::ExprKind::kCall &&
           b.value->name == "tensor_to_shape" && b.var->struct_info.shape;
  }

  // Lets each value var be its element of the input's data. kiln_infer_shapes therefore
  // needs the data of such inputs too (kiln/artifact_abi.h): NULL data is reported.
  void BindInputValues(HostProgram& p) const {
    std::set<size_t> inputs;
    for (const InputValue& v : value_binder_) inputs.insert(v.input);
    for (size_t i : inputs) {
      PrimExpr data = HostCall(DataType::Handle(), intrinsic::kInputData, {I32(i)});
      PrimExpr report = HostCall(
          DataType::Int(32), intrinsic::kShapeError,
          {I32(intrinsic::kShapeErrorNoData), I32(i), I32(-1), arith::IntImm(0), arith::IntImm(0)});
      p.Emit(ir::Assert(arith::Cast(DataType::Bool(), data), report));
    }
    for (const InputValue& v : value_binder_) {
      PrimExpr data = HostCall(DataType::Handle(), intrinsic::kInputData, {I32(v.input)});
      PrimExpr element = HostCall(v.dtype, intrinsic::kReadElement,
                                  {data, arith::IntImm(static_cast<int64_t>(v.element))});
      p.Let(v.var, v.scaled_dim ? ScaledExtent(element, v.scaled_dim)
                                : arith::Cast(DataType::Int(), element));
    }
  }

  // The extent a float scale makes of `dim`, as tensor_to_shape(scales, dims) defines it:
  // trunc(dim * scale) in double, -1 (reported by the non-negative check that follows it)
  // where the scale is not positive.
  static PrimExpr ScaledExtent(const PrimExpr& element, const PrimExpr& dim) {
    PrimExpr scale = arith::Cast(DataType::Float(64), element);
    PrimExpr product = scale * arith::Cast(DataType::Float(64), dim);
    PrimExpr positive =
        arith::Binary(ExprKind::kGT, scale, arith::FloatImm(0, DataType::Float(64)));
    return arith::Select(positive, arith::Cast(DataType::Int(), product), arith::IntImm(-1));
  }

  // `kiln compile --dim-bound seq=4096`: the planner may size storage for seq <= 4096, so
  // the host checks that bound before anything runs.
  absl::Status BindUserBounds() {
    for (const auto& [name, bound] : context_.dim_bounds) {
      const arith::ExprNode* var = nullptr;
      std::vector<std::string> known;
      for (const auto& [v, at] : binder_) {
        known.push_back(v->name);
        if (v->name == name) var = v;
      }
      if (var == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("dim bound '", name, "' names no symbolic dimension of the inputs (",
                         known.empty() ? "the model has none" : absl::StrJoin(known, ", "), ")"));
      }
      if (bound < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("dim bound '", name, "' is negative: ", bound));
      }
      bounded_.push_back({var, bound});
    }
    for (const auto& [var, bound] : bounded_) {
      for (const auto& [v, at] : binder_) {
        if (v == var) analyzer_.Bind(BinderVar(at), {0, bound});
      }
    }
    return absl::OkStatus();
  }

  // The var object bound from input dim `at`.
  const PrimExpr& BinderVar(std::pair<size_t, size_t> at) const {
    return (*func_.params[at.first]->struct_info.shape)[at.second];
  }

  // Binds each symbolic var from the first input dim that is exactly it, then checks every
  // other input dim against what the model says it must be, and every var against its bound.
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
        p.Emit(CheckDim(intrinsic::kShapeErrorInput, i, d, dims[d], actual));
      }
    }
    BindInputValues(p);
    CheckValueConstraints(p);
    for (const auto& [var, bound] : bounded_) {
      auto [i, d] = binder_.at(var);
      PrimExpr report = HostCall(
          DataType::Int(32), intrinsic::kShapeError,
          {I32(intrinsic::kShapeErrorBound), I32(i), I32(d), arith::IntImm(bound), InputDim(i, d)});
      p.Emit(
          ir::Assert(arith::Binary(ExprKind::kLE, InputDim(i, d), arith::IntImm(bound)), report));
    }
  }

  PrimExpr InputDim(size_t i, size_t d) const { return (*func_.params[i]->struct_info.shape)[d]; }

  static Stmt CheckDim(int is_output, size_t index, size_t dim, PrimExpr expected,
                       PrimExpr actual) {
    PrimExpr report = HostCall(DataType::Int(32), intrinsic::kShapeError,
                               {I32(is_output), I32(index), I32(dim), expected, actual});
    return ir::Assert(arith::Binary(ExprKind::kEQ, actual, expected), report);
  }

  // An output shape that depends on data is known only once the kernels that count it have
  // run: kiln_infer_shapes runs the program up to the last such count, on the inputs' data,
  // with every result, outputs too, in the workspace.
  absl::StatusOr<Stmt> InferShapes() {
    HostProgram p;
    BindAndCheckInputs(p);
    if (OutputShapesUseRunTimeVars()) {
      RequireInputData(p);
      BindInputData(p);
      shape_only_ = true;
      KILN_RETURN_IF_ERROR(EmitBindings(p));
      shape_only_ = false;
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const auto& dims = *outputs_[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        p.Emit(ir::Evaluate(
            HostCall(DataType::Int(32), intrinsic::kSetOutputShape, {I32(i), I32(d), dims[d]})));
      }
    }
    return p.Finish();
  }

  bool OutputShapesUseRunTimeVars() const {
    for (const ir::Expr& e : outputs_) {
      for (const PrimExpr& d : *e->struct_info.shape) {
        if (UsesRunTimeVar(d)) return true;
      }
    }
    return false;
  }

  // Every input with elements: the kernels that count may read any of them. An empty one
  // may come without data.
  void RequireInputData(HostProgram& p) const {
    for (size_t i = 0; i < func_.params.size(); ++i) {
      PrimExpr data = HostCall(DataType::Handle(), intrinsic::kInputData, {I32(i)});
      PrimExpr elements = arith::IntImm(1);
      for (const PrimExpr& d : *func_.params[i]->struct_info.shape) elements = elements * d;
      PrimExpr empty = arith::Binary(ExprKind::kEQ, elements, arith::IntImm(0));
      PrimExpr report = HostCall(
          DataType::Int(32), intrinsic::kShapeError,
          {I32(intrinsic::kShapeErrorNoData), I32(i), I32(-1), arith::IntImm(0), arith::IntImm(0)});
      p.Emit(ir::Assert(arith::Binary(ExprKind::kOr, arith::Cast(DataType::Bool(), data), empty),
                        report));
    }
  }

  void BindInputData(HostProgram& p) {
    for (size_t i = 0; i < func_.params.size(); ++i) {
      PrimExpr h = arith::MakeVar(absl::StrCat(func_.params[i]->name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kInputData, {I32(i)}));
      storage_of_[func_.params[i].get()] = {AddStorage(h, /*intermediate=*/false)};
    }
  }

  // What lowering the bindings recorded, so that kiln_run lowers them anew.
  void ForgetBindings() {
    storages_.clear();
    storage_of_.clear();
    last_use_.clear();
    output_fields_.clear();
    segments_.clear();
    segment_of_var_.clear();
    checked_output_dims_.clear();
  }

  absl::StatusOr<Stmt> RunBody() {
    HostProgram p;
    BindAndCheckInputs(p);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const auto& dims = *outputs_[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (UsesRunTimeVar(dims[d])) continue;  // checked once it is bound
        PrimExpr actual = HostCall(DataType::Int(), intrinsic::kOutputShape, {I32(i), I32(d)});
        p.Emit(CheckDim(intrinsic::kShapeErrorOutput, i, d, dims[d], actual));
      }
    }
    BindInputData(p);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      PrimExpr h = arith::MakeVar(absl::StrCat(outputs_[i]->name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kOutputData, {I32(i)}));
      output_handles_[outputs_[i].get()] = h;
    }
    KILN_RETURN_IF_ERROR(EmitBindings(p));
    return p.Finish();
  }

  // Calls each kernel in order. This is where memory is managed: each result of a kernel call
  // (every field of a tuple result) that is not a graph output lives in the workspace, from
  // the call that produces it to the last binding that uses it or any TupleGetItem of it.
  // Once every lifetime is known, the planner packs them into one workspace, allocated once;
  // or one per run-time binding, for the results whose size depends on what it binds.
  // Shape only (kiln_infer_shapes), it stops after the last run-time binding or check.
  absl::Status EmitBindings(HostProgram& p) {
    top_ = &p;
    OpenSegment(p);
    std::vector<const ir::Binding*> bindings;
    for (const ir::BindingBlock& block : func_.blocks) {
      for (const ir::Binding& b : block.bindings) bindings.push_back(&b);
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      last_use_[bindings[i]->var.get()] = i;
      for (const ir::Expr& arg : bindings[i]->value->args) last_use_[arg.get()] = i;
      for (const auto& sub : bindings[i]->value->subgraphs) MarkSubgraphUses(*sub, i);
      const ir::ExprNode& value = *bindings[i]->value;
      auto out = output_handles_.find(bindings[i]->var.get());
      if (value.kind == ir::ExprKind::kTupleGetItem && out != output_handles_.end()) {
        output_fields_[{value.args[0].get(), value.index}] = out->second;
      }
    }
    size_t end = bindings.size();
    if (shape_only_) {
      while (end > 0 && !IsRunTimeBinding(*bindings[end - 1]) &&
             !(IsValueCheck(*bindings[end - 1]) && IsRunTimeCheck(*bindings[end - 1]))) {
        --end;
      }
    }
    for (size_t i = 0; i < end; ++i) {
      binding_index_ = i;
      const ir::Binding& b = *bindings[i];
      const ir::ExprNode& value = *b.value;
      if (IsTensorToShape(b)) {
        if (IsRunTimeBinding(b)) BindRunTimeValues(p, b);
        continue;  // else done with the inputs
      }
      if (IsValueCheck(b)) {
        if (IsRunTimeCheck(b)) EmitValueCheck(p, b);
        continue;
      }
      if (value.kind == ir::ExprKind::kTupleGetItem) {
        KILN_RETURN_IF_ERROR(AliasTupleField(b));
      } else if (value.kind == ir::ExprKind::kCall && value.name == "call_tir") {
        KILN_RETURN_IF_ERROR(EmitKernelCall(p, b));
      } else if (IsControlFlow(value)) {
        KILN_RETURN_IF_ERROR(EmitControlFlow(p, b));
      } else {
        return absl::UnimplementedError(absl::StrCat(
            "binding %", b.var->name, " is not a kernel call; only kernel calls are compiled yet"));
      }
    }
    PlaceInWorkspaces(p);
    return absl::OkStatus();
  }

  bool IsRunTimeBinding(const ir::Binding& b) const {
    return IsTensorToShape(b) && std::find(func_.params.begin(), func_.params.end(),
                                           b.value->args[0]) == func_.params.end();
  }

  // `%s: Shape([n]) = match_cast(tensor_to_shape(%count))` where a kernel made %count: reads
  // its values, now that it exists, into n; results sized by n get a workspace of their own
  // from here on. kiln_run checks each output dim made of such vars once they are bound.
  void BindRunTimeValues(HostProgram& p, const ir::Binding& b) {
    const ir::Expr& tensor = b.value->args[0];
    PrimExpr data = DataHandle(tensor);
    const auto& vars = *b.var->struct_info.shape;
    for (size_t k = 0; k < vars.size(); ++k) {
      PrimExpr element = HostCall(tensor->struct_info.dtype, intrinsic::kReadElement,
                                  {data, arith::IntImm(static_cast<int64_t>(k))});
      p.Let(vars[k], arith::Cast(DataType::Int(), element));
      segment_of_var_[vars[k].get()] = segments_.size();
    }
    OpenSegment(p);
    if (!shape_only_) CheckRunTimeOutputDims(p);
  }

  void CheckRunTimeOutputDims(HostProgram& p) {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const auto& dims = *outputs_[i]->struct_info.shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (!UsesRunTimeVar(dims[d]) || !RunTimeVarsBound(dims[d])) continue;
        if (!checked_output_dims_.insert({i, d}).second) continue;
        PrimExpr actual = HostCall(DataType::Int(), intrinsic::kOutputShape, {I32(i), I32(d)});
        p.Emit(CheckDim(intrinsic::kShapeErrorOutput, i, d, dims[d], actual));
      }
    }
  }

  bool RunTimeVarsBound(const PrimExpr& e) const {
    for (const PrimExpr& v : arith::FreeVars(e)) {
      if (run_time_vars_.count(v.get()) && !segment_of_var_.count(v.get())) return false;
    }
    return true;
  }

  // A workspace whose size the planner may state in every var bound so far.
  void OpenSegment(HostProgram& p) {
    std::string name =
        segments_.empty() ? "workspace" : absl::StrCat("workspace_", segments_.size());
    PrimExpr workspace = arith::MakeVar(name, DataType::Handle());
    segments_.push_back({workspace, p.Let(workspace, nullptr)});
  }

  // The workspace a result of `bytes` lives in: the latest one whose vars its size uses.
  size_t SegmentOf(const PrimExpr& bytes) const {
    size_t segment = 0;
    for (const PrimExpr& v : arith::FreeVars(bytes)) {
      auto it = segment_of_var_.find(v.get());
      if (it != segment_of_var_.end()) segment = std::max(segment, it->second);
    }
    return segment;
  }

  // A size at the user's bounds when they bound it, else its formula.
  PrimExpr AtBounds(const PrimExpr& bytes) const {
    arith::IntBounds bounds = analyzer_.ConstBounds(bytes);
    if (bounds.max == std::numeric_limits<int64_t>::max()) return bytes;
    return arith::IntImm(bounds.max);
  }

  void PlaceInWorkspaces(HostProgram& p) {
    PrimExpr workspace_bytes = arith::IntImm(0), no_reuse_bytes = arith::IntImm(0);
    for (size_t k = 0; k < segments_.size(); ++k) {
      MemoryPlan plan = PlaceInWorkspace(p, k);
      workspace_bytes = workspace_bytes + plan.workspace_bytes;
      no_reuse_bytes = no_reuse_bytes + plan.no_reuse_bytes;
    }
    context_.workspace_bytes = AtBounds(analyzer_.Simplify(workspace_bytes));
    context_.no_reuse_bytes = AtBounds(analyzer_.Simplify(no_reuse_bytes));
  }

  MemoryPlan PlaceInWorkspace(HostProgram& p, size_t segment) {
    const auto& [workspace, workspace_let] = segments_[segment];
    std::vector<Lifetime> lifetimes;
    std::vector<const Storage*> placed;
    for (const Storage& s : storages_) {
      if (!s.intermediate || s.segment != segment) continue;
      lifetimes.push_back({s.bytes, s.first_use, s.last_use});
      placed.push_back(&s);
    }
    MemoryPlan plan = PlanMemory(lifetimes, analyzer_);
    if (placed.empty()) {
      p.DropLet(workspace_let);
      return plan;
    }
    p.SetLetValue(workspace_let,
                  HostCall(DataType::Handle(), intrinsic::kAlloc, {plan.workspace_bytes}));
    for (size_t k = 0; k < placed.size(); ++k) {
      PrimExpr offset = plan.token_offset[plan.token_of[k]];
      p.SetLetValue(placed[k]->let_item,
                    HostCall(DataType::Handle(), intrinsic::kOffset, {workspace, offset}));
    }
    p.Emit(ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kFree, {workspace})));
    return plan;
  }

  absl::Status EmitKernelCall(HostProgram& p, const ir::Binding& b) {
    KILN_ASSIGN_OR_RETURN(std::vector<size_t> storages, ResultStorages(b));
    AssignStorages(b.var.get(), storages);
    KILN_ASSIGN_OR_RETURN(PrimExpr kernel_call, KernelCall(*b.value, storages));
    p.Emit(ir::Evaluate(kernel_call));
    return absl::OkStatus();
  }

  // Where each result of binding `b` (each field of a tuple) goes: straight into a graph
  // output, or a new intermediate in the workspace, its handle Let in the top-level program
  // (a body's intermediates too, so that the planner places them all).
  absl::StatusOr<std::vector<size_t>> ResultStorages(const ir::Binding& b) {
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
      if (PrimExpr out = shape_only_ ? nullptr : OutputHandle(b.var.get(), is_tuple, k)) {
        storages.push_back(AddStorage(out, /*intermediate=*/false));
        continue;
      }
      PrimExpr bytes;
      if (body_of_.empty()) {
        bytes = ByteSize(r);
      } else {
        KILN_ASSIGN_OR_RETURN(bytes, BodyBytes(b.var->name, r));
      }
      std::string name = is_tuple ? absl::StrCat(b.var->name, "_", k) : b.var->name;
      storages.push_back(AddIntermediate(name, bytes));
    }
    return storages;
  }

  size_t AddIntermediate(const std::string& name, PrimExpr bytes) {
    PrimExpr h = arith::MakeVar(absl::StrCat(name, "_data"), DataType::Handle());
    size_t let = top_->Let(h, nullptr);  // an offset into the workspace, once it is planned
    size_t s = AddStorage(h, /*intermediate=*/true);
    storages_[s].bytes = std::move(bytes);
    storages_[s].let_item = let;
    storages_[s].first_use = binding_index_;
    storages_[s].last_use = binding_index_;
    storages_[s].segment = SegmentOf(storages_[s].bytes);
    return s;
  }

  // Control flow (Relax's If; ONNX Loop and Scan): the bodies are graph functions whose
  // kernels were legalized like main's. An `if` reads its condition and branches; a loop or
  // scan is a serial host loop over its body. Every value a body makes lives in the
  // workspace for the whole control-flow binding (one binding of the enclosing function), so
  // nothing a later iteration writes can be a buffer an earlier one still reads. A body may
  // bind dims from values it computes (match_cast of tensor_to_shape, Let in each iteration),
  // as long as the buffers they size have a constant bound (BodyBytes); a carried value keeps
  // one shape, checked each iteration (CheckKeptShape).
  static bool IsControlFlow(const ir::ExprNode& value) {
    return value.kind == ir::ExprKind::kIf ||
           (value.kind == ir::ExprKind::kCall && (value.name == "loop" || value.name == "scan"));
  }

  // A value of an enclosing scope that a body reads lives until the binding that runs it.
  void MarkSubgraphUses(const ir::Function& f, size_t i) {
    for (const ir::BindingBlock& block : f.blocks) {
      for (const ir::Binding& b : block.bindings) {
        for (const ir::Expr& arg : b.value->args) MarkUse(arg, i);
        for (const auto& sub : b.value->subgraphs) MarkSubgraphUses(*sub, i);
      }
    }
    MarkUse(f.result, i);
  }

  void MarkUse(const ir::Expr& e, size_t i) {
    if (e->kind == ir::ExprKind::kTuple) {
      for (const ir::Expr& field : e->args) MarkUse(field, i);
      return;
    }
    last_use_[e.get()] = std::max(last_use_[e.get()], i);
  }

  static absl::Status ControlFlowError(const ir::Binding& b, const std::string& what) {
    const ir::ExprNode& v = *b.value;
    return absl::UnimplementedError(absl::StrCat(
        "binding %", b.var->name, " (", v.kind == ir::ExprKind::kIf ? "if" : v.name, "): ", what));
  }

  absl::Status EmitControlFlow(HostProgram& p, const ir::Binding& b) {
    if (b.match_cast) return ControlFlowError(b, "a match_cast of control flow is not compiled");
    if (b.value->kind == ir::ExprKind::kIf) return EmitIf(p, b);
    if (b.value->name == "scan") return EmitScan(p, b);
    return EmitLoop(p, b);
  }

  // Lowers the bindings of `body`, a body of control-flow binding `b`, into `q`.
  absl::Status EmitBody(HostProgram& q, const ir::Binding& b, const ir::Function& body) {
    body_of_.push_back(&b);
    absl::Status status = EmitBodyBindings(q, body);
    body_of_.pop_back();
    return status;
  }

  absl::Status EmitBodyBindings(HostProgram& q, const ir::Function& body) {
    for (const ir::BindingBlock& block : body.blocks) {
      for (const ir::Binding& inner : block.bindings) {
        const ir::ExprNode& value = *inner.value;
        if (IsTensorToShape(inner)) {
          BindBodyValues(q, inner);
        } else if (IsValueCheck(inner)) {
          EmitValueCheck(q, inner);
        } else if (inner.match_cast && inner.var->struct_info.is_tensor()) {
          KILN_RETURN_IF_ERROR(CheckKeptShape(q, inner));
        } else if (!inner.match_cast && value.kind == ir::ExprKind::kTupleGetItem) {
          KILN_RETURN_IF_ERROR(AliasTupleField(inner));
        } else if (!inner.match_cast && value.kind == ir::ExprKind::kCall &&
                   value.name == "call_tir") {
          KILN_RETURN_IF_ERROR(EmitKernelCall(q, inner));
        } else if (!inner.match_cast && IsControlFlow(value)) {
          KILN_RETURN_IF_ERROR(EmitControlFlow(q, inner));
        } else {
          return ControlFlowError(
              *body_of_.front(),
              absl::StrCat("its body computes %", inner.var->name,
                           " for the host (shapes or values); only kernel calls, tuple fields "
                           "and control flow are compiled in a body yet"));
        }
      }
    }
    return absl::OkStatus();
  }

  // `%s: Shape([n]) = match_cast(tensor_to_shape(%t))` in a body: n is Let from %t's values
  // in each iteration (the Let is in the iteration's program), before the kernels that use it.
  void BindBodyValues(HostProgram& q, const ir::Binding& b) {
    const ir::Expr& tensor = b.value->args[0];
    PrimExpr data = DataHandle(tensor);
    const auto& vars = *b.var->struct_info.shape;
    for (size_t k = 0; k < vars.size(); ++k) {
      KILN_CHECK(vars[k]->kind == ExprKind::kVar) << "tensor_to_shape binds " << vars[k];
      PrimExpr element = HostCall(tensor->struct_info.dtype, intrinsic::kReadElement,
                                  {data, arith::IntImm(static_cast<int64_t>(k))});
      q.Let(vars[k], arith::Cast(DataType::Int(), element));
      body_vars_.insert(vars[k].get());
    }
  }

  // `%kept: Tensor(state) = match_cast(%v, Tensor(state))`, which bind_loop_trip_counts puts
  // on a loop's carried results: %v, whose shape the iteration computed, must have the loop
  // state's shape (its buffer). Checked each iteration; %kept is %v's buffer.
  absl::Status CheckKeptShape(HostProgram& q, const ir::Binding& b) {
    const ir::Expr& value = b.value;
    const ir::StructInfo& want = b.var->struct_info;
    const ir::StructInfo& have = value->struct_info;
    if (!want.shape || !have.shape || want.ndim != have.ndim || want.dtype != have.dtype) {
      return ControlFlowError(
          *body_of_.front(),
          absl::StrCat("its body casts %", value->name, " to ", ir::ToString(want),
                       "; only a cast to the shape of a loop's state is compiled"));
    }
    for (size_t d = 0; d < want.shape->size(); ++d) {
      PrimExpr report = HostCall(
          DataType::Int(32), intrinsic::kShapeError,
          {I32(intrinsic::kShapeErrorValue), I32(-1), I32(-1), (*want.shape)[d], (*have.shape)[d]});
      q.Emit(ir::Assert(arith::Binary(ExprKind::kEQ, (*have.shape)[d], (*want.shape)[d]), report));
    }
    auto it = storage_of_.find(value.get());
    if (it == storage_of_.end()) {
      return ControlFlowError(*body_of_.front(), absl::StrCat("its body casts %", value->name,
                                                              ", not a tensor it made"));
    }
    storage_of_[b.var.get()] = it->second;
    return absl::OkStatus();
  }

  // The bytes a body's result of shape `info` gets in the workspace, which is planned before
  // the loop runs: its size, or the constant bound of its size where that uses vars the body
  // binds itself (each iteration then uses a prefix of the buffer).
  absl::StatusOr<PrimExpr> BodyBytes(const std::string& name, const ir::StructInfo& info) {
    bool local = false;
    if (info.is_tensor() && info.shape) {
      for (const PrimExpr& d : *info.shape) {
        for (const PrimExpr& v : arith::FreeVars(d)) local |= body_vars_.count(v.get()) > 0;
      }
    }
    if (!local) {
      KILN_RETURN_IF_ERROR(CheckShapeBound(name, info));
      return ByteSize(info);
    }
    PrimExpr bytes = ByteSize(info);
    for (const PrimExpr& v : arith::FreeVars(bytes)) {
      if (body_vars_.count(v.get()) || binder_.count(v.get()) || IsValueVar(v)) continue;
      return ControlFlowError(*body_of_.front(),
                              absl::StrCat("the shape of %", name, " in its body uses ", v->name,
                                           ", which is bound nowhere"));
    }
    arith::IntBounds bounds = analyzer_.ConstBounds(bytes);
    if (bounds.max == std::numeric_limits<int64_t>::max()) {
      return ControlFlowError(
          *body_of_.front(),
          absl::StrCat("the size of %", name, " in its body, ", arith::ToString(bytes),
                       " bytes, depends on values the body computes and has no bound known "
                       "before the loop runs; not compiled yet"));
    }
    return arith::IntImm(std::max<int64_t>(bounds.max, 0));
  }

  // A shape in a body may use only vars the host bound before the body runs: a shape that
  // the body computes could change from one iteration to the next.
  absl::Status CheckShapeBound(const std::string& name, const ir::StructInfo& info) {
    if (!info.is_tensor() || !info.shape) {
      return ControlFlowError(*body_of_.front(), absl::StrCat("%", name,
                                                              " in its body has a shape unknown at "
                                                              "compile time; not compiled yet"));
    }
    for (const PrimExpr& d : *info.shape) {
      for (const PrimExpr& v : arith::FreeVars(d)) {
        if (binder_.count(v.get()) || IsValueVar(v)) continue;
        return ControlFlowError(
            *body_of_.front(),
            absl::StrCat("the shape of %", name, " in its body uses ", v->name,
                         ", which the body computes (it may change across iterations); "
                         "not compiled yet"));
      }
    }
    return absl::OkStatus();
  }

  // The fields of the tuple a body returns.
  static absl::StatusOr<std::vector<ir::Expr>> BodyResults(const ir::Binding& b,
                                                           const ir::Function& body, size_t n) {
    if (body.result->kind != ir::ExprKind::kTuple || body.result->args.size() != n) {
      return ControlFlowError(b, absl::StrCat("its body must return a tuple of ", n, " values"));
    }
    return body.result->args;
  }

  // A loop-carried value keeps one buffer for all iterations: its shape must not change.
  absl::Status CheckCarried(const ir::Binding& b, const ir::Expr& param, const ir::Expr& initial) {
    if (!ir::StructuralEqual(param->struct_info, initial->struct_info)) {
      return ControlFlowError(
          b,
          absl::StrCat("carried value %", param->name, " changes from ",
                       ir::ToString(initial->struct_info), " to ", ir::ToString(param->struct_info),
                       " across iterations; only carried values of one shape are compiled"));
    }
    body_of_.push_back(&b);
    absl::Status status = CheckShapeBound(param->name, param->struct_info);
    body_of_.pop_back();
    return status;
  }

  // dst[0, bytes) = src[0, bytes), by a byte-copy kernel made here.
  Stmt Copy(PrimExpr dst, PrimExpr src, PrimExpr bytes) {
    static const char kName[] = "host_copy_bytes";
    if (!module_.prim_funcs.count(kName)) {
      PrimExpr n = arith::MakeVar("n"), i = arith::MakeVar("i");
      ir::PrimFunc f;
      f.name = kName;
      arith::Buffer from = arith::MakeBuffer("src", DataType::UInt(8), {n});
      arith::Buffer to = arith::MakeBuffer("dst", DataType::UInt(8), {n});
      f.buffers = {from, to};
      f.scalars = {n};
      f.body = ir::For(i, arith::IntImm(0), n, ir::ForKind::kSerial,
                       ir::Store(to, {i}, arith::Load(from, {i})));
      module_.prim_funcs.emplace(kName, f);
    }
    return ir::Evaluate(arith::Call(DataType::Int(32), kName, {src, dst, bytes}));
  }

  // dst[0] = value, an element of `dtype` (i64 or u8), by a kernel made here.
  Stmt StoreScalar(PrimExpr dst, DataType dtype, PrimExpr value) {
    std::string name = dtype == DataType::Int(64) ? "host_store_i64" : "host_store_u8";
    if (!module_.prim_funcs.count(name)) {
      PrimExpr v = arith::MakeVar("v");
      ir::PrimFunc f;
      f.name = name;
      arith::Buffer out = arith::MakeBuffer("dst", dtype, {arith::IntImm(1)});
      f.buffers = {out};
      f.scalars = {v};
      f.body = ir::Store(out, {arith::IntImm(0)}, arith::Cast(dtype, v));
      module_.prim_funcs.emplace(name, f);
    }
    return ir::Evaluate(arith::Call(DataType::Int(32), name, {dst, std::move(value)}));
  }

  // Whether the bool scalar at `data` is true.
  static PrimExpr IsTrue(PrimExpr data) {
    PrimExpr byte = HostCall(DataType::UInt(8), intrinsic::kReadElement, {data, arith::IntImm(0)});
    return arith::Binary(ExprKind::kNE, byte, arith::IntImm(0, DataType::UInt(8)));
  }

  static PrimExpr Offset(PrimExpr data, PrimExpr bytes) {
    return HostCall(DataType::Handle(), intrinsic::kOffset, {data, bytes});
  }

  // if (cond) then_branch else else_branch: each branch runs its kernels, then copies its
  // results into the if's.
  absl::Status EmitIf(HostProgram& p, const ir::Binding& b) {
    const ir::ExprNode& node = *b.value;
    KILN_ASSIGN_OR_RETURN(std::vector<size_t> out, ResultStorages(b));
    AssignStorages(b.var.get(), out);
    const auto& fields = b.var->struct_info.fields;
    Stmt branches[2];
    for (int k = 0; k < 2; ++k) {
      const ir::Function& body = *node.subgraphs[k];
      HostProgram q;
      KILN_RETURN_IF_ERROR(EmitBody(q, b, body));
      KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> results, BodyResults(b, body, out.size()));
      for (size_t j = 0; j < results.size(); ++j) {
        q.Emit(Copy(storages_[out[j]].handle, DataHandle(results[j]), ByteSize(fields[j])));
      }
      branches[k] = q.Finish();
    }
    p.Emit(ir::IfThenElse(IsTrue(DataHandle(node.args[0])), branches[0], branches[1]));
    return absl::OkStatus();
  }

  // Writes a body's new carried values over the old ones. A new value that is another
  // carried value's buffer (a swap) is staged in a buffer of its own first, so that no copy
  // reads what an earlier one overwrote.
  void UpdateCarried(HostProgram& q, const ir::Binding& b, const std::vector<ir::Expr>& next,
                     const std::vector<size_t>& carried, const std::vector<PrimExpr>& bytes) {
    std::set<const arith::ExprNode*> buffers;
    for (size_t s : carried) buffers.insert(storages_[s].handle.get());
    std::vector<PrimExpr> from;
    for (size_t k = 0; k < next.size(); ++k) {
      PrimExpr src = DataHandle(next[k]);
      if (buffers.count(src.get()) && src.get() != storages_[carried[k]].handle.get()) {
        size_t staged = AddIntermediate(absl::StrCat(b.var->name, "_next", k), bytes[k]);
        q.Emit(Copy(storages_[staged].handle, src, bytes[k]));
        src = storages_[staged].handle;
      }
      from.push_back(src);
    }
    for (size_t k = 0; k < next.size(); ++k) {
      q.Emit(Copy(storages_[carried[k]].handle, from[k], bytes[k]));
    }
  }

  // scan(state..., inputs...): for t in [0, length): the body reads the state and slice t of
  // each input, and its results are the next state and slice t of each output. The state
  // lives in the scan's own results; slices along axis 0 are offsets, no copies.
  absl::Status EmitScan(HostProgram& p, const ir::Binding& b) {
    const ir::ExprNode& node = *b.value;
    const ir::Function& body = *node.subgraphs[0];
    size_t num_scan = static_cast<size_t>(op::GetIntAttr(node.attrs, "num_scan_inputs", 0));
    if (num_scan == 0 || num_scan > node.args.size()) {
      return ControlFlowError(b, "a scan needs at least one scan input");
    }
    size_t num_state = node.args.size() - num_scan;
    KILN_ASSIGN_OR_RETURN(std::vector<size_t> out, ResultStorages(b));
    AssignStorages(b.var.get(), out);
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> results, BodyResults(b, body, out.size()));
    std::vector<int64_t> in_axes = op::GetIntsAttr(node.attrs, "scan_input_axes");
    std::vector<int64_t> in_dirs = op::GetIntsAttr(node.attrs, "scan_input_directions");
    std::vector<int64_t> out_axes = op::GetIntsAttr(node.attrs, "scan_output_axes");
    std::vector<int64_t> out_dirs = op::GetIntsAttr(node.attrs, "scan_output_directions");
    in_axes.resize(num_scan, 0);
    in_dirs.resize(num_scan, 0);
    out_axes.resize(out.size() - num_state, 0);
    out_dirs.resize(out.size() - num_state, 0);
    const ir::StructInfo& first = node.args[num_state]->struct_info;
    if (!first.is_tensor() || !first.shape || first.ndim < 1) {
      return ControlFlowError(b, "its first scan input has no known shape");
    }
    PrimExpr length = (*first.shape)[0];
    for (size_t j = 0; j < num_scan; ++j) {
      const ir::StructInfo& x = node.args[num_state + j]->struct_info;
      bool axis0 = in_axes[j] == 0 || (x.ndim > 0 && in_axes[j] == -x.ndim);
      if (!axis0 || !x.shape || x.ndim < 1 || !analyzer_.ProveEqual((*x.shape)[0], length)) {
        return ControlFlowError(b, absl::StrCat("scan input ", j,
                                                " is not scanned along axis 0 with the first "
                                                "one's length; not compiled yet"));
      }
    }
    for (size_t j = 0; j < out_axes.size(); ++j) {
      int ndim = b.var->struct_info.fields[num_state + j].ndim;
      if (out_axes[j] != 0 && out_axes[j] != -ndim) {
        return ControlFlowError(b, absl::StrCat("scan output ", j, " is stacked along axis ",
                                                out_axes[j], "; only axis 0 is compiled yet"));
      }
    }
    std::vector<size_t> state(out.begin(), out.begin() + num_state);
    std::vector<PrimExpr> state_bytes;
    for (size_t k = 0; k < num_state; ++k) {
      KILN_RETURN_IF_ERROR(CheckCarried(b, body.params[k], node.args[k]));
      state_bytes.push_back(ByteSize(node.args[k]->struct_info));
      p.Emit(Copy(storages_[out[k]].handle, DataHandle(node.args[k]), state_bytes[k]));
      storage_of_[body.params[k].get()] = {out[k]};
    }
    PrimExpr t = arith::MakeVar(absl::StrCat(b.var->name, "_t"));
    PrimExpr last = length - arith::IntImm(1);
    HostProgram q;
    for (size_t j = 0; j < num_scan; ++j) {
      const ir::Expr& param = body.params[num_state + j];
      body_of_.push_back(&b);
      absl::Status known = CheckShapeBound(param->name, param->struct_info);
      body_of_.pop_back();
      KILN_RETURN_IF_ERROR(known);
      PrimExpr at = in_dirs[j] ? last - t : t;
      PrimExpr h = arith::MakeVar(absl::StrCat(param->name, "_data"), DataType::Handle());
      q.Let(h, Offset(DataHandle(node.args[num_state + j]), at * ByteSize(param->struct_info)));
      storage_of_[param.get()] = {AddStorage(h, /*intermediate=*/false)};
    }
    KILN_RETURN_IF_ERROR(EmitBody(q, b, body));
    for (size_t j = num_state; j < out.size(); ++j) {
      const ir::StructInfo& slice = results[j]->struct_info;
      body_of_.push_back(&b);
      absl::Status known = CheckShapeBound(results[j]->name, slice);
      body_of_.pop_back();
      KILN_RETURN_IF_ERROR(known);
      PrimExpr bytes = ByteSize(slice);
      PrimExpr at = out_dirs[j - num_state] ? last - t : t;
      q.Emit(Copy(Offset(storages_[out[j]].handle, at * bytes), DataHandle(results[j]), bytes));
    }
    std::vector<ir::Expr> next(results.begin(), results.begin() + num_state);
    UpdateCarried(q, b, next, state, state_bytes);
    p.Emit(ir::For(t, arith::IntImm(0), length, ir::ForKind::kSerial, q.Finish()));
    return absl::OkStatus();
  }

  // loop(M, cond, v...): for i in [0, M) while cond, the body reads (i, cond, v...) and
  // returns (cond, v..., scan...). Host code cannot leave a loop early, so iterations past a
  // false condition do nothing. Carried values live in the loop's own results, the iteration
  // number and the condition in buffers of their own. Scan outputs have as many slices as
  // iterations ran: bind_loop_trip_counts (legalize_control.h) made their buffers M slices
  // long and added a last result, the count of iterations that ran.
  absl::Status EmitLoop(HostProgram& p, const ir::Binding& b) {
    const ir::ExprNode& node = *b.value;
    const ir::Function& body = *node.subgraphs[0];
    size_t carried = node.args.size() - 2;
    if (ir::IsNone(node.args[0])) {
      return ControlFlowError(b, "a loop without a maximum trip count is not compiled yet");
    }
    if (body.params.size() != carried + 2) {
      return ControlFlowError(b, "its body does not take (iteration, condition, carried...)");
    }
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> results,
                          BodyResults(b, body, body.result->args.size()));
    bool counts = op::GetIntAttr(node.attrs, "count_trips", 0) != 0;
    if (results.size() < carried + 1 || (results.size() > carried + 1 && !counts)) {
      return ControlFlowError(b,
                              "scan outputs of a loop (as long as the iterations that run, known "
                              "only at run time) are compiled only for a loop in main with a "
                              "maximum trip count and slices of known shape");
    }
    KILN_ASSIGN_OR_RETURN(std::vector<size_t> out, ResultStorages(b));
    AssignStorages(b.var.get(), out);
    size_t num_scan = results.size() - carried - 1;
    size_t iter = AddIntermediate(absl::StrCat(b.var->name, "_iter"), arith::IntImm(8));
    size_t cond = AddIntermediate(absl::StrCat(b.var->name, "_cond"), arith::IntImm(1));
    storage_of_[body.params[0].get()] = {iter};
    storage_of_[body.params[1].get()] = {cond};
    std::vector<size_t> state = {cond};
    std::vector<PrimExpr> state_bytes = {arith::IntImm(1)};
    for (size_t k = 0; k < carried; ++k) {
      KILN_RETURN_IF_ERROR(CheckCarried(b, body.params[2 + k], node.args[2 + k]));
      state_bytes.push_back(ByteSize(node.args[2 + k]->struct_info));
      p.Emit(Copy(storages_[out[k]].handle, DataHandle(node.args[2 + k]), state_bytes.back()));
      storage_of_[body.params[2 + k].get()] = {out[k]};
      state.push_back(out[k]);
    }
    p.Emit(ir::IsNone(node.args[1])
               ? StoreScalar(storages_[cond].handle, DataType::UInt(8), arith::IntImm(1))
               : Copy(storages_[cond].handle, DataHandle(node.args[1]), arith::IntImm(1)));
    PrimExpr i = arith::MakeVar(absl::StrCat(b.var->name, "_i"));
    if (counts)
      p.Emit(StoreScalar(storages_[out.back()].handle, DataType::Int(64), arith::IntImm(0)));
    HostProgram q;
    q.Emit(StoreScalar(storages_[iter].handle, DataType::Int(64), i));
    KILN_RETURN_IF_ERROR(EmitBody(q, b, body));
    for (size_t j = 0; j < num_scan; ++j) {
      const ir::Expr& slice = results[1 + carried + j];
      body_of_.push_back(&b);
      absl::Status known = CheckShapeBound(slice->name, slice->struct_info);
      body_of_.pop_back();
      KILN_RETURN_IF_ERROR(known);
      PrimExpr bytes = ByteSize(slice->struct_info);
      q.Emit(Copy(Offset(storages_[out[carried + j]].handle, i * bytes), DataHandle(slice), bytes));
    }
    std::vector<ir::Expr> next(results.begin(), results.begin() + carried + 1);
    UpdateCarried(q, b, next, state, state_bytes);
    if (counts)
      q.Emit(StoreScalar(storages_[out.back()].handle, DataType::Int(64), i + arith::IntImm(1)));
    PrimExpr trips = HostCall(DataType::Int(64), intrinsic::kReadElement,
                              {DataHandle(node.args[0]), arith::IntImm(0)});
    Stmt step = ir::IfThenElse(IsTrue(storages_[cond].handle), q.Finish());
    p.Emit(ir::For(i, arith::IntImm(0), trips, ir::ForKind::kSerial, step));
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
    return analyzer_.Simplify(bytes);
  }

  size_t AddStorage(PrimExpr handle, bool intermediate) {
    storages_.push_back({std::move(handle), intermediate});
    return storages_.size() - 1;
  }

  // A storage lives until the last use of any value that holds it.
  void AssignStorages(const ir::ExprNode* value, std::vector<size_t> storages) {
    // A body's values (not in last_use_) live through the whole control-flow binding.
    size_t last = std::max(last_use_[value], binding_index_);
    for (size_t s : storages) storages_[s].last_use = std::max(storages_[s].last_use, last);
    storage_of_[value] = std::move(storages);
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
    bool intermediate;                   // in the workspace (not an input, output or constant)
    size_t first_use = 0, last_use = 0;  // the bindings that produce it and last read it
    PrimExpr bytes;                      // intermediates: size and the Let of their handle
    size_t let_item = 0;
    size_t segment = 0;  // the workspace it lives in
  };

  ir::IRModule& module_;
  const ir::Function& func_;
  std::vector<ir::Expr> outputs_;
  std::map<const arith::ExprNode*, std::pair<size_t, size_t>> binder_;  // var -> (input, dim)
  struct InputValue {
    PrimExpr var;
    size_t input, element;
    DataType dtype;       // the input's element type
    PrimExpr scaled_dim;  // tensor_to_shape(scales, dims): the dim this scale applies to
  };
  std::vector<InputValue> value_binder_;
  std::map<const ir::ExprNode*, PrimExpr> output_handles_;  // output var -> kiln.output_data
  // (tuple var, field index) -> the output that field is, when a TupleGetItem makes it one.
  std::map<std::pair<const ir::ExprNode*, int>, PrimExpr> output_fields_;
  std::vector<Storage> storages_;
  // The storages of each value: one for a tensor, one per field for a tuple.
  std::map<const ir::ExprNode*, std::vector<size_t>> storage_of_;
  std::map<const ir::ExprNode*, size_t> last_use_;
  arith::Analyzer analyzer_;  // knows the user's dim bounds
  std::map<const ir::NDArray*, size_t> constant_index_;
  ir::PassContext& context_;
  std::vector<std::pair<const arith::ExprNode*, int64_t>> bounded_;  // var, user bound
  size_t binding_index_ = 0;                                         // the binding being lowered
  // Vars bound from values that kernels compute, and the workspace opened after each binds.
  std::set<const arith::ExprNode*> run_time_vars_;
  std::map<const arith::ExprNode*, size_t> segment_of_var_;
  struct Segment {
    PrimExpr workspace;
    size_t let_item;
  };
  std::vector<Segment> segments_;
  std::set<std::pair<size_t, size_t>> checked_output_dims_;  // (output, dim)
  HostProgram* top_ = nullptr;  // the function's program; nested ones are control-flow bodies
  // The control-flow bindings whose bodies are being lowered, innermost last.
  std::vector<const ir::Binding*> body_of_;
  bool shape_only_ = false;  // kiln_infer_shapes: no output data, stop at the last count
  // Vars that bodies bind from values they compute, per iteration (BindBodyValues).
  std::set<const arith::ExprNode*> body_vars_;
};

}  // namespace

absl::StatusOr<ir::IRModule> LowerHost(ir::IRModule module, ir::PassContext& context) {
  auto it = module.functions.find("main");
  if (it == module.functions.end()) return absl::InternalError("module has no main function");
  ir::Function main = it->second;
  module.functions.erase(it);
  HostLowering lowering(module, main, context);
  KILN_RETURN_IF_ERROR(lowering.Run());
  return module;
}

}  // namespace kiln::transform
