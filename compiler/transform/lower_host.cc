#include "compiler/transform/lower_host.h"

#include "compiler/ir/stmt_functor.h"
#include "compiler/transform/host_lowering.h"

namespace kiln::transform {

namespace host {

absl::Status HostLowering::Run() {
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

ir::PrimFunc HostLowering::HostFunc(const std::string& name, Stmt body) {
  ir::PrimFunc f;
  f.name = name;
  f.body = std::move(body);
  f.is_host = true;
  return f;
}

absl::Status HostLowering::CheckShapesKnown() const {
  for (const ir::Expr& e : func_.params) {
    if (!e->struct_info.is_tensor() || !e->struct_info.shape) {
      return absl::InvalidArgumentError(absl::StrCat("input ", e->name, " has no known shape"));
    }
  }
  for (const ir::Expr& e : outputs_) {
    if (!e->struct_info.is_tensor() || !e->struct_info.shape) {
      return absl::UnimplementedError(
          absl::StrCat("output ", e->name, " has a shape computed at run time; not supported yet"));
    }
  }
  return absl::OkStatus();
}

absl::Status HostLowering::CheckAllVarsBindable() {
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

absl::Status HostLowering::CollectInputValueVars() {
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

absl::Status HostLowering::CollectRunTimeVars(const ir::Binding& b) {
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

bool HostLowering::IsValueVar(const PrimExpr& var) const {
  return run_time_vars_.count(var.get()) ||
         std::any_of(value_binder_.begin(), value_binder_.end(),
                     [&](const InputValue& v) { return v.var == var; });
}

bool HostLowering::UsesRunTimeVar(const PrimExpr& e) const {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (run_time_vars_.count(v.get())) return true;
  }
  return false;
}

bool HostLowering::IsValueCheck(const ir::Binding& b) {
  return b.match_cast && b.value->kind == ir::ExprKind::kShapeExpr &&
         b.var->struct_info.kind == ir::StructInfo::Kind::kShape && b.var->struct_info.shape;
}

void HostLowering::CheckValueConstraints(HostProgram& p) const {
  for (const ir::BindingBlock& block : func_.blocks) {
    for (const ir::Binding& b : block.bindings) {
      if (IsValueCheck(b) && !IsRunTimeCheck(b)) EmitValueCheck(p, b);
    }
  }
}

void HostLowering::EmitValueCheck(HostProgram& p, const ir::Binding& b) const {
  const auto& expected = *b.var->struct_info.shape;
  for (size_t k = 0; k < expected.size(); ++k) {
    const PrimExpr& actual = b.value->values[k];
    PrimExpr report = HostCall(DataType::Int(32), intrinsic::kShapeError,
                               {I32(intrinsic::kShapeErrorValue), I32(InputOfValues(actual)),
                                I32(-1), expected[k], actual});
    p.Emit(ir::Assert(arith::Binary(ExprKind::kEQ, actual, expected[k]), report));
  }
}

bool HostLowering::IsRunTimeCheck(const ir::Binding& b) const {
  const auto& expected = *b.var->struct_info.shape;
  for (size_t k = 0; k < expected.size(); ++k) {
    if (UsesRunTimeVar(expected[k]) || UsesRunTimeVar(b.value->values[k])) return true;
  }
  return false;
}

int64_t HostLowering::InputOfValues(const PrimExpr& e) const {
  for (const PrimExpr& var : arith::FreeVars(e)) {
    for (const InputValue& v : value_binder_) {
      if (v.var == var) return static_cast<int64_t>(v.input);
    }
  }
  return -1;
}

bool HostLowering::IsTensorToShape(const ir::Binding& b) {
  return b.match_cast && b.value->kind == ir::ExprKind::kCall &&
         b.value->name == "tensor_to_shape" && b.var->struct_info.shape;
}

void HostLowering::BindInputValues(HostProgram& p) const {
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

PrimExpr HostLowering::ScaledExtent(const PrimExpr& element, const PrimExpr& dim) {
  PrimExpr scale = arith::Cast(DataType::Float(64), element);
  PrimExpr product = scale * arith::Cast(DataType::Float(64), dim);
  PrimExpr positive = arith::Binary(ExprKind::kGT, scale, arith::FloatImm(0, DataType::Float(64)));
  return arith::Select(positive, arith::Cast(DataType::Int(), product), arith::IntImm(-1));
}

absl::Status HostLowering::BindUserBounds() {
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

const PrimExpr& HostLowering::BinderVar(std::pair<size_t, size_t> at) const {
  return (*func_.params[at.first]->struct_info.shape)[at.second];
}

void HostLowering::BindAndCheckInputs(HostProgram& p) const {
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
    p.Emit(ir::Assert(arith::Binary(ExprKind::kLE, InputDim(i, d), arith::IntImm(bound)), report));
  }
}

Stmt HostLowering::CheckDim(int is_output, size_t index, size_t dim, PrimExpr expected,
                            PrimExpr actual) {
  PrimExpr report = HostCall(DataType::Int(32), intrinsic::kShapeError,
                             {I32(is_output), I32(index), I32(dim), expected, actual});
  return ir::Assert(arith::Binary(ExprKind::kEQ, actual, expected), report);
}

absl::StatusOr<Stmt> HostLowering::InferShapes() {
  HostProgram p;
  BindAndCheckInputs(p);
  if (OutputShapesUseRunTimeVars()) {
    RequireInputData(p);
    if (!device_) BindInputData(p);
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

bool HostLowering::OutputShapesUseRunTimeVars() const {
  for (const ir::Expr& e : outputs_) {
    for (const PrimExpr& d : *e->struct_info.shape) {
      if (UsesRunTimeVar(d)) return true;
    }
  }
  return false;
}

void HostLowering::RequireInputData(HostProgram& p) const {
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

void HostLowering::BindInputData(HostProgram& p) {
  for (size_t i = 0; i < func_.params.size(); ++i) {
    PrimExpr h = arith::MakeVar(absl::StrCat(func_.params[i]->name, "_data"), DataType::Handle());
    p.Let(h, HostCall(DataType::Handle(), intrinsic::kInputData, {I32(i)}));
    storage_of_[func_.params[i].get()] = {AddStorage(h, /*intermediate=*/false)};
  }
}

void HostLowering::ForgetBindings() {
  storages_.clear();
  storage_of_.clear();
  last_use_.clear();
  output_fields_.clear();
  segments_.clear();
  segment_of_var_.clear();
  checked_output_dims_.clear();
}

absl::StatusOr<Stmt> HostLowering::RunBody() {
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
  if (!device_) {
    BindInputData(p);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      PrimExpr h = arith::MakeVar(absl::StrCat(outputs_[i]->name, "_data"), DataType::Handle());
      p.Let(h, HostCall(DataType::Handle(), intrinsic::kOutputData, {I32(i)}));
      output_handles_[outputs_[i].get()] = h;
    }
  }
  KILN_RETURN_IF_ERROR(EmitBindings(p));
  return p.Finish();
}

absl::Status HostLowering::EmitBindings(HostProgram& p) {
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
  binding_index_ = 0;
  if (device_) CopyInputsToDevice(p);
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
  if (device_ && !shape_only_) CopyOutputsToHost(p, bindings.size());
  PlaceInWorkspaces(p);
  return absl::OkStatus();
}

bool HostLowering::IsRunTimeBinding(const ir::Binding& b) const {
  return IsTensorToShape(b) && std::find(func_.params.begin(), func_.params.end(),
                                         b.value->args[0]) == func_.params.end();
}

void HostLowering::BindRunTimeValues(HostProgram& p, const ir::Binding& b) {
  const ir::Expr& tensor = b.value->args[0];
  PrimExpr data = DataHandle(tensor);
  const auto& vars = *b.var->struct_info.shape;
  for (size_t k = 0; k < vars.size(); ++k) {
    PrimExpr element = ReadResultElement(tensor->struct_info.dtype, data, k);
    p.Let(vars[k], arith::Cast(DataType::Int(), element));
    segment_of_var_[vars[k].get()] = segments_.size();
  }
  OpenSegment(p);
  if (!shape_only_) CheckRunTimeOutputDims(p);
}

void HostLowering::CheckRunTimeOutputDims(HostProgram& p) {
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

bool HostLowering::RunTimeVarsBound(const PrimExpr& e) const {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (run_time_vars_.count(v.get()) && !segment_of_var_.count(v.get())) return false;
  }
  return true;
}

void HostLowering::OpenSegment(HostProgram& p) {
  std::string name = segments_.empty() ? "workspace" : absl::StrCat("workspace_", segments_.size());
  PrimExpr workspace = arith::MakeVar(name, DataType::Handle());
  segments_.push_back({workspace, p.Let(workspace, nullptr)});
}

size_t HostLowering::SegmentOf(const PrimExpr& bytes) const {
  size_t segment = 0;
  for (const PrimExpr& v : arith::FreeVars(bytes)) {
    auto it = segment_of_var_.find(v.get());
    if (it != segment_of_var_.end()) segment = std::max(segment, it->second);
  }
  return segment;
}

PrimExpr HostLowering::AtBounds(const PrimExpr& bytes) const {
  arith::IntBounds bounds = analyzer_.ConstBounds(bytes);
  if (bounds.max == std::numeric_limits<int64_t>::max()) return bytes;
  return arith::IntImm(bounds.max);
}

void HostLowering::PlaceInWorkspaces(HostProgram& p) {
  PrimExpr workspace_bytes = arith::IntImm(0), no_reuse_bytes = arith::IntImm(0);
  for (size_t k = 0; k < segments_.size(); ++k) {
    MemoryPlan plan = PlaceInWorkspace(p, k);
    workspace_bytes = workspace_bytes + plan.workspace_bytes;
    no_reuse_bytes = no_reuse_bytes + plan.no_reuse_bytes;
  }
  context_.workspace_bytes = AtBounds(analyzer_.Simplify(workspace_bytes));
  context_.no_reuse_bytes = AtBounds(analyzer_.Simplify(no_reuse_bytes));
}

MemoryPlan HostLowering::PlaceInWorkspace(HostProgram& p, size_t segment) {
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
                HostCall(DataType::Handle(), device_ ? intrinsic::kDeviceAlloc : intrinsic::kAlloc,
                         {plan.workspace_bytes}));
  for (size_t k = 0; k < placed.size(); ++k) {
    PrimExpr offset = plan.token_offset[plan.token_of[k]];
    p.SetLetValue(placed[k]->let_item,
                  HostCall(DataType::Handle(), intrinsic::kOffset, {workspace, offset}));
  }
  p.Emit(ir::Evaluate(HostCall(DataType::Int(32),
                               device_ ? intrinsic::kDeviceFree : intrinsic::kFree, {workspace})));
  return plan;
}

absl::Status HostLowering::EmitKernelCall(HostProgram& p, const ir::Binding& b) {
  KILN_ASSIGN_OR_RETURN(std::vector<size_t> storages, ResultStorages(b));
  AssignStorages(b.var.get(), storages);
  KILN_ASSIGN_OR_RETURN(PrimExpr kernel_call, KernelCall(*b.value, storages));
  p.Emit(RunKernel(kernel_call));
  return absl::OkStatus();
}

void HostLowering::CopyInputsToDevice(HostProgram& p) {
  for (size_t i = 0; i < func_.params.size(); ++i) {
    const ir::Expr& param = func_.params[i];
    PrimExpr bytes = ByteSize(param->struct_info);
    size_t s = AddIntermediate(param->name, bytes);
    AssignStorages(param.get(), {s});
    PrimExpr host = HostCall(DataType::Handle(), intrinsic::kInputData, {I32(i)});
    p.Emit(
        ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kCopy,
                              {storages_[s].handle, host, bytes, I32(intrinsic::kCopyToDevice)})));
  }
}

void HostLowering::CopyOutputsToHost(HostProgram& p, size_t end) {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    // Live until the copy, after the last binding.
    auto it = storage_of_.find(outputs_[i].get());
    if (it != storage_of_.end()) {
      for (size_t s : it->second) storages_[s].last_use = std::max(storages_[s].last_use, end);
    }
    PrimExpr host = HostCall(DataType::Handle(), intrinsic::kOutputData, {I32(i)});
    PrimExpr bytes = ByteSize(outputs_[i]->struct_info);
    p.Emit(ir::Evaluate(
        HostCall(DataType::Int(32), intrinsic::kCopy,
                 {host, DataHandle(outputs_[i]), bytes, I32(intrinsic::kCopyToHost)})));
  }
}

// A kernel scheduled for a GPU is one gpu_block loop with a gpu_thread loop of constant
// extent inside (the verifier's rules); the launch covers exactly their iterations. Its
// extents are in the kernel's scalars, which are the graph's own vars, bound in host code.
Stmt HostLowering::RunKernel(PrimExpr call) const {
  if (!device_) return ir::Evaluate(std::move(call));
  const ir::PrimFunc& kernel = module_.prim_funcs.at(call->name);
  PrimExpr blocks, threads;
  ir::VisitStmts(kernel.body, [&](const ir::StmtNode& s) {
    if (s.kind != ir::StmtKind::kFor) return;
    if (s.for_kind == ir::ForKind::kGpuBlock && !blocks) blocks = s.extent;
    if (s.for_kind == ir::ForKind::kGpuThread && !threads) threads = s.extent;
  });
  KILN_CHECK(blocks && threads && threads->kind == ExprKind::kIntImm)
      << "kernel " << call->name << " is not scheduled for a GPU";
  return ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kLaunch,
                               {blocks, I32(threads->int_value), std::move(call)}));
}

PrimExpr HostLowering::ReadResultElement(DataType dtype, PrimExpr data, int64_t k) const {
  return HostCall(dtype, device_ ? intrinsic::kReadDeviceElement : intrinsic::kReadElement,
                  {std::move(data), arith::IntImm(k)});
}

absl::StatusOr<std::vector<size_t>> HostLowering::ResultStorages(const ir::Binding& b) {
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

size_t HostLowering::AddIntermediate(const std::string& name, PrimExpr bytes) {
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

absl::StatusOr<std::vector<ir::Expr>> HostLowering::BodyResults(const ir::Binding& b,
                                                                const ir::Function& body,
                                                                size_t n) {
  if (body.result->kind != ir::ExprKind::kTuple || body.result->args.size() != n) {
    return ControlFlowError(b, absl::StrCat("its body must return a tuple of ", n, " values"));
  }
  return body.result->args;
}

void HostLowering::UpdateCarried(HostProgram& q, const ir::Binding& b,
                                 const std::vector<ir::Expr>& next,
                                 const std::vector<size_t>& carried,
                                 const std::vector<PrimExpr>& bytes) {
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

PrimExpr HostLowering::OutputHandle(const ir::ExprNode* var, bool is_tuple, size_t k) const {
  if (is_tuple) {
    auto it = output_fields_.find({var, static_cast<int>(k)});
    return it == output_fields_.end() ? nullptr : it->second;
  }
  auto it = output_handles_.find(var);
  return it == output_handles_.end() ? nullptr : it->second;
}

absl::Status HostLowering::AliasTupleField(const ir::Binding& b) {
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

PrimExpr HostLowering::ByteSize(const ir::StructInfo& info) {
  PrimExpr bytes = arith::IntImm(info.dtype.bytes());
  for (const PrimExpr& d : *info.shape) bytes = bytes * d;
  return analyzer_.Simplify(bytes);
}

size_t HostLowering::AddStorage(PrimExpr handle, bool intermediate) {
  storages_.push_back({std::move(handle), intermediate});
  return storages_.size() - 1;
}

void HostLowering::AssignStorages(const ir::ExprNode* value, std::vector<size_t> storages) {
  // A body's values (not in last_use_) live through the whole control-flow binding.
  size_t last = std::max(last_use_[value], binding_index_);
  for (size_t s : storages) storages_[s].last_use = std::max(storages_[s].last_use, last);
  storage_of_[value] = std::move(storages);
}

absl::StatusOr<PrimExpr> HostLowering::KernelCall(const ir::ExprNode& call,
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

PrimExpr HostLowering::DataHandle(const ir::Expr& value) {
  if (value->kind == ir::ExprKind::kConstant) {
    auto [it, inserted] = constant_index_.try_emplace(value->data.get(), module_.constants.size());
    if (inserted) module_.constants.push_back(value->data);
    return HostCall(DataType::Handle(), device_ ? intrinsic::kDeviceConstant : intrinsic::kConstant,
                    {I32(it->second)});
  }
  auto it = storage_of_.find(value.get());
  KILN_CHECK(it != storage_of_.end()) << "value used before it is defined: " << value->name;
  KILN_CHECK_EQ(it->second.size(), 1u) << "a kernel operand is a tuple: " << value->name;
  return storages_[it->second[0]].handle;
}

}  // namespace host

absl::StatusOr<ir::IRModule> LowerHost(ir::IRModule module, ir::PassContext& context) {
  auto it = module.functions.find("main");
  if (it == module.functions.end()) return absl::InternalError("module has no main function");
  ir::Function main = it->second;
  module.functions.erase(it);
  host::HostLowering lowering(module, main, context);
  KILN_RETURN_IF_ERROR(lowering.Run());
  return module;
}

}  // namespace kiln::transform
