// ONNX control flow: If, Loop, Scan. Their subgraphs become Functions that use the
// enclosing graph's values directly; the ops carry them as `subgraphs`.
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"
#include "compiler/op/op_def.h"

namespace kiln::frontend {
namespace {

using ir::StructInfo;

absl::StatusOr<const onnx::GraphProto*> GraphAttr(const ImportContext& ctx,
                                                  const std::string& name) {
  const onnx::AttributeProto* attr = ctx.Attr(name);
  if (!attr || !attr->has_g()) {
    return absl::InvalidArgumentError(absl::StrCat("missing graph attribute '", name, "'"));
  }
  return &attr->g();
}

// Binds field i of a tuple-valued result to each requested output.
absl::Status SetTupleOutputs(ImportContext& ctx, const ir::Expr& tuple) {
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.HasOutput(i)) continue;
    KILN_ASSIGN_OR_RETURN(ir::Expr field,
                          ctx.Bind(ir::MakeTupleGetItem(tuple, i), ctx.node().output(i)));
    ctx.SetOutput(i, field);
  }
  return absl::OkStatus();
}

absl::Status ConvertIf(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr cond, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* then_graph, GraphAttr(ctx, "then_branch"));
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* else_graph, GraphAttr(ctx, "else_branch"));
  KILN_ASSIGN_OR_RETURN(auto then_branch, ctx.ImportSubgraph(*then_graph, {}));
  KILN_ASSIGN_OR_RETURN(auto else_branch, ctx.ImportSubgraph(*else_graph, {}));
  const StructInfo& a = then_branch->result->struct_info;
  const StructInfo& b = else_branch->result->struct_info;
  if (a.fields.size() != b.fields.size()) {
    return absl::InvalidArgumentError(absl::StrCat("then_branch has ", a.fields.size(),
                                                   " outputs, else_branch ", b.fields.size()));
  }
  std::vector<StructInfo> fields;
  for (size_t i = 0; i < a.fields.size(); ++i) {
    fields.push_back(op::JoinStructInfo(a.fields[i], b.fields[i]));
  }
  ir::Expr if_expr = ir::MakeIf(cond, then_branch, else_branch, StructInfo::Tuple(fields));
  KILN_ASSIGN_OR_RETURN(ir::Expr result, ctx.Bind(if_expr, ctx.node().output(0) + "_if"));
  return SetTupleOutputs(ctx, result);
}

// The struct info a loop-carried value has in every iteration: its initial one when the
// body keeps it, else the same rank with fresh symbolic dims (the body binds them anew on
// each iteration).
StructInfo Generalize(const StructInfo& info, const std::string& name) {
  if (!info.is_tensor() || info.ndim < 0) return info;
  std::vector<arith::PrimExpr> dims;
  for (int d = 0; d < info.ndim; ++d) dims.push_back(arith::MakeVar(absl::StrCat(name, "_d", d)));
  return StructInfo::Tensor(dims, info.dtype);
}

// Imports a body whose params [first, first + count) are carried from one iteration to the
// next, output k + result_offset feeding param k + first. Tries the initial struct info
// first and generalizes the slots whose shape changes.
absl::StatusOr<std::shared_ptr<const ir::Function>> ImportCarriedBody(
    ImportContext& ctx, const onnx::GraphProto& graph, std::vector<StructInfo> params, size_t first,
    size_t count, size_t result_offset) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    KILN_ASSIGN_OR_RETURN(auto body, ctx.ImportSubgraph(graph, params));
    const StructInfo& result = body->result->struct_info;
    if (result.fields.size() < result_offset + count) {
      return absl::InvalidArgumentError(
          absl::StrCat("body '", graph.name(), "' returns ", result.fields.size(),
                       " values, expected at least ", result_offset + count));
    }
    bool invariant = true;
    for (size_t k = 0; k < count; ++k) {
      if (ir::StructuralEqual(result.fields[result_offset + k], params[first + k])) continue;
      invariant = false;
      params[first + k] = Generalize(params[first + k], graph.input(first + k).name());
    }
    if (invariant || attempt == 1) return body;
  }
  return absl::InternalError("unreachable");
}

// The symbolic vars a loop body defines for itself: the dims of carried values whose shape
// changes (Generalize) and values it reads at run time (match_cast).
std::set<const arith::ExprNode*> BodyVars(const ir::Function& body,
                                          const std::vector<ir::Expr>& args) {
  std::set<const arith::ExprNode*> vars;
  auto add = [&](const StructInfo& info) {
    if (!info.shape) return;
    for (const arith::PrimExpr& d : *info.shape) {
      for (const arith::PrimExpr& v : arith::FreeVars(d)) vars.insert(v.get());
    }
  };
  for (size_t i = 0; i < body.params.size() && i < args.size(); ++i) {
    if (!ir::StructuralEqual(body.params[i]->struct_info, args[i]->struct_info)) {
      add(body.params[i]->struct_info);
    }
  }
  for (const ir::BindingBlock& block : body.blocks) {
    for (const ir::Binding& b : block.bindings) {
      if (b.match_cast) add(b.var->struct_info);
    }
  }
  return vars;
}

// Whether every slice of a scan output has one shape that the enclosing graph can name.
bool ScanSlicesKnown(const ir::Function& body, const std::vector<ir::Expr>& args) {
  std::set<const arith::ExprNode*> local = BodyVars(body, args);
  const auto& results = body.result->struct_info.fields;
  for (size_t j = args.size() - 1; j < results.size(); ++j) {
    const StructInfo& slice = results[j];
    if (!slice.is_tensor() || !slice.shape) return false;
    for (const arith::PrimExpr& d : *slice.shape) {
      for (const arith::PrimExpr& v : arith::FreeVars(d)) {
        if (local.count(v.get())) return false;
      }
    }
  }
  return true;
}

// A loop with {count_trips} also returns how many iterations ran: that count, read at run
// time, is the length t of each scan output, which gets the shape [t, slice...] (a reshape
// that changes nothing but the struct info). Everything after the loop then has shapes, and
// compiled code sizes its buffers by them (bind_loop_trip_counts, legalize_control.h).
absl::Status SetCountedLoopOutputs(ImportContext& ctx, const ir::Expr& loop,
                                   const ir::Function& body, size_t carried, size_t num_scan) {
  for (size_t k = 0; k < carried; ++k) {
    if (!ctx.HasOutput(static_cast<int>(k))) continue;
    KILN_ASSIGN_OR_RETURN(ir::Expr field,
                          ctx.Bind(ir::MakeTupleGetItem(loop, k), ctx.node().output(k)));
    ctx.SetOutput(static_cast<int>(k), field);
  }
  const std::string& name = ctx.node().output(0);
  KILN_ASSIGN_OR_RETURN(ir::Expr trips,
                        ctx.Bind(ir::MakeTupleGetItem(loop, carried + num_scan), name + "_trips"));
  KILN_ASSIGN_OR_RETURN(std::vector<arith::PrimExpr> ran,
                        ctx.BindRuntimeValues(trips, name + "_trips_ran"));
  for (size_t j = 0; j < num_scan; ++j) {
    int out = static_cast<int>(carried + j);
    if (!ctx.HasOutput(out)) continue;
    KILN_ASSIGN_OR_RETURN(ir::Expr stacked, ctx.Bind(ir::MakeTupleGetItem(loop, out),
                                                     ctx.node().output(out) + "_stacked"));
    std::vector<arith::PrimExpr> dims = *body.result->struct_info.fields[1 + carried + j].shape;
    dims.insert(dims.begin(), ran.at(0));
    KILN_ASSIGN_OR_RETURN(ir::Expr value, ctx.Emit("reshape", {stacked, ir::MakeShapeExpr(dims)},
                                                   {}, ctx.node().output(out)));
    ctx.SetOutput(out, value);
  }
  return absl::OkStatus();
}

absl::Status ConvertLoop(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* graph, GraphAttr(ctx, "body"));
  KILN_ASSIGN_OR_RETURN(ir::Expr max_trips, ctx.OptionalInput(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr cond, ctx.OptionalInput(1));
  std::vector<ir::Expr> args = {max_trips, cond};
  std::vector<StructInfo> params = {StructInfo::Tensor({}, arith::DataType::Int(64)),
                                    StructInfo::Tensor({}, arith::DataType::Bool())};
  for (int i = 2; i < ctx.node().input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr v, ctx.Input(i));
    args.push_back(v);
    params.push_back(v->struct_info);
  }
  size_t carried = args.size() - 2;
  KILN_ASSIGN_OR_RETURN(auto body, ImportCarriedBody(ctx, *graph, params, 2, carried, 1));
  size_t num_scan = body->result->struct_info.fields.size() - 1 - carried;
  bool count_trips = !ir::IsNone(max_trips) && num_scan > 0 && ScanSlicesKnown(*body, args);
  ir::Attrs attrs;
  if (count_trips) attrs["count_trips"] = int64_t{1};
  ir::ExprNode call = *ir::MakeCall("loop", args, attrs);
  call.subgraphs = {body};
  KILN_ASSIGN_OR_RETURN(ir::Expr result,
                        ctx.EmitCall(std::make_shared<const ir::ExprNode>(std::move(call)),
                                     ctx.node().output(0) + "_loop"));
  if (!count_trips) return SetTupleOutputs(ctx, result);
  return SetCountedLoopOutputs(ctx, result, *body, carried, num_scan);
}

absl::Status ConvertScan(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* graph, GraphAttr(ctx, "body"));
  if (ctx.opset() < 9) return absl::InvalidArgumentError("Scan before opset 9 is not supported");
  int64_t num_scan_inputs = ctx.IntAttr("num_scan_inputs", -1);
  int64_t num_inputs = ctx.node().input_size();
  if (num_scan_inputs < 0 || num_scan_inputs > num_inputs) {
    return absl::InvalidArgumentError("num_scan_inputs is missing or out of range");
  }
  int64_t num_state = num_inputs - num_scan_inputs;
  std::vector<int64_t> in_axes = ctx.IntsAttr("scan_input_axes");
  in_axes.resize(num_scan_inputs, 0);
  std::vector<ir::Expr> args;
  std::vector<StructInfo> params;
  for (int i = 0; i < num_inputs; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr v, ctx.Input(i));
    args.push_back(v);
    const StructInfo& info = v->struct_info;
    if (i < num_state || !info.is_tensor() || info.ndim < 1) {
      params.push_back(info);
      continue;
    }
    // A scan input's slice drops the scanned axis.
    int64_t axis = in_axes[i - num_state];
    if (axis < 0) axis += info.ndim;
    if (!info.shape) {
      params.push_back(StructInfo::TensorRank(info.ndim - 1, info.dtype));
      continue;
    }
    std::vector<arith::PrimExpr> dims = *info.shape;
    dims.erase(dims.begin() + axis);
    params.push_back(StructInfo::Tensor(dims, info.dtype));
  }
  KILN_ASSIGN_OR_RETURN(auto body, ImportCarriedBody(ctx, *graph, params, 0, num_state, 0));
  ir::Attrs attrs = {{"num_scan_inputs", num_scan_inputs}, {"scan_input_axes", in_axes}};
  for (const char* name : {"scan_input_directions", "scan_output_axes", "scan_output_directions"}) {
    attrs[name] = ctx.IntsAttr(name);
  }
  ir::ExprNode call = *ir::MakeCall("scan", args, attrs);
  call.subgraphs = {body};
  KILN_ASSIGN_OR_RETURN(ir::Expr result,
                        ctx.EmitCall(std::make_shared<const ir::ExprNode>(std::move(call)),
                                     ctx.node().output(0) + "_scan"));
  return SetTupleOutputs(ctx, result);
}

}  // namespace

void RegisterControlConverters(ConverterTable& table) {
  table["If"] = ConvertIf;
  table["Loop"] = ConvertLoop;
  table["Scan"] = ConvertScan;
}

}  // namespace kiln::frontend
