// Control flow in host code (Relax's If; ONNX Loop and Scan): the bodies are graph functions
// whose kernels were legalized like main's. An `if` reads its condition and branches; a loop
// or scan is a serial host loop over its body. Every value a body makes lives in the
// workspace for the whole control-flow binding (one binding of the enclosing function), so
// nothing a later iteration writes can be a buffer an earlier one still reads. A body may
// bind dims from values it computes (match_cast of tensor_to_shape, Let in each iteration),
// as long as the buffers they size have a constant bound (BodyBytes); a carried value keeps
// one shape, checked each iteration (CheckKeptShape).
#include "compiler/transform/host_lowering.h"

namespace kiln::transform::host {

bool HostLowering::IsControlFlow(const ir::ExprNode& value) {
  return value.kind == ir::ExprKind::kIf ||
         (value.kind == ir::ExprKind::kCall && (value.name == "loop" || value.name == "scan"));
}

void HostLowering::MarkSubgraphUses(const ir::Function& f, size_t i) {
  for (const ir::BindingBlock& block : f.blocks) {
    for (const ir::Binding& b : block.bindings) {
      for (const ir::Expr& arg : b.value->args) MarkUse(arg, i);
      for (const auto& sub : b.value->subgraphs) MarkSubgraphUses(*sub, i);
    }
  }
  MarkUse(f.result, i);
}

void HostLowering::MarkUse(const ir::Expr& e, size_t i) {
  if (e->kind == ir::ExprKind::kTuple) {
    for (const ir::Expr& field : e->args) MarkUse(field, i);
    return;
  }
  last_use_[e.get()] = std::max(last_use_[e.get()], i);
}

absl::Status HostLowering::ControlFlowError(const ir::Binding& b, const std::string& what) {
  const ir::ExprNode& v = *b.value;
  return absl::UnimplementedError(absl::StrCat(
      "binding %", b.var->name, " (", v.kind == ir::ExprKind::kIf ? "if" : v.name, "): ", what));
}

absl::Status HostLowering::EmitControlFlow(HostProgram& p, const ir::Binding& b) {
  if (b.match_cast) return ControlFlowError(b, "a match_cast of control flow is not compiled");
  if (b.value->kind == ir::ExprKind::kIf) return EmitIf(p, b);
  if (b.value->name == "scan") return EmitScan(p, b);
  return EmitLoop(p, b);
}

absl::Status HostLowering::EmitBody(HostProgram& q, const ir::Binding& b,
                                    const ir::Function& body) {
  body_of_.push_back(&b);
  absl::Status status = EmitBodyBindings(q, body);
  body_of_.pop_back();
  return status;
}

absl::Status HostLowering::EmitBodyBindings(HostProgram& q, const ir::Function& body) {
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

void HostLowering::BindBodyValues(HostProgram& q, const ir::Binding& b) {
  const ir::Expr& tensor = b.value->args[0];
  PrimExpr data = DataHandle(tensor);
  const auto& vars = *b.var->struct_info.shape;
  for (size_t k = 0; k < vars.size(); ++k) {
    KILN_CHECK(vars[k]->kind == ExprKind::kVar) << "tensor_to_shape binds " << vars[k];
    PrimExpr element = ReadResultElement(tensor->struct_info.dtype, data, k);
    q.Let(vars[k], arith::Cast(DataType::Int(), element));
    body_vars_.insert(vars[k].get());
  }
}

absl::Status HostLowering::CheckKeptShape(HostProgram& q, const ir::Binding& b) {
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
    return ControlFlowError(
        *body_of_.front(), absl::StrCat("its body casts %", value->name, ", not a tensor it made"));
  }
  storage_of_[b.var.get()] = it->second;
  return absl::OkStatus();
}

absl::StatusOr<PrimExpr> HostLowering::BodyBytes(const std::string& name,
                                                 const ir::StructInfo& info) {
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

absl::Status HostLowering::CheckShapeBound(const std::string& name, const ir::StructInfo& info) {
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

absl::Status HostLowering::CheckCarried(const ir::Binding& b, const ir::Expr& param,
                                        const ir::Expr& initial) {
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

Stmt HostLowering::Copy(PrimExpr dst, PrimExpr src, PrimExpr bytes) {
  if (device_) {
    return ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kCopy,
                                 {dst, src, bytes, I32(intrinsic::kCopyOnDevice)}));
  }
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

Stmt HostLowering::StoreScalar(PrimExpr dst, DataType dtype, PrimExpr value) {
  if (device_) {
    return ir::Evaluate(HostCall(DataType::Int(32), intrinsic::kWriteDeviceElement,
                                 {dst, arith::Cast(dtype, value)}));
  }
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

PrimExpr HostLowering::IsTrue(PrimExpr data) const {
  PrimExpr byte = ReadResultElement(DataType::UInt(8), data, 0);
  return arith::Binary(ExprKind::kNE, byte, arith::IntImm(0, DataType::UInt(8)));
}

PrimExpr HostLowering::Offset(PrimExpr data, PrimExpr bytes) {
  return HostCall(DataType::Handle(), intrinsic::kOffset, {data, bytes});
}

absl::Status HostLowering::EmitIf(HostProgram& p, const ir::Binding& b) {
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

absl::Status HostLowering::EmitScan(HostProgram& p, const ir::Binding& b) {
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

absl::Status HostLowering::EmitLoop(HostProgram& p, const ir::Binding& b) {
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
  PrimExpr trips = ReadResultElement(DataType::Int(64), DataHandle(node.args[0]), 0);
  Stmt step = ir::IfThenElse(IsTrue(storages_[cond].handle), q.Finish());
  p.Emit(ir::For(i, arith::IntImm(0), trips, ir::ForKind::kSerial, step));
  return absl::OkStatus();
}

}  // namespace kiln::transform::host
