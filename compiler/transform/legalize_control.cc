#include "compiler/transform/legalize_control.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/registry.h"

namespace kiln::transform {
namespace {

using arith::PrimExpr;
using ir::Expr;
using ir::StructInfo;

// Why a buffer of M slices: running the loop once to count and again to fill would run every
// body kernel twice (and the body may be costly); M is the bound ONNX gives, and a loop that
// exits early by its condition only leaves the end of its buffers unused. The cost: M slices
// of memory even when the loop exits after few (a loop whose M is huge, a while loop, fails
// to allocate and kiln_run reports it).
class TripCountBinder {
 public:
  absl::Status Run(ir::Function& main) {
    for (ir::BindingBlock& block : main.blocks) {
      std::vector<ir::Binding> out;
      for (const ir::Binding& b : block.bindings) KILN_RETURN_IF_ERROR(Rewrite(b, out));
      block.bindings = std::move(out);
    }
    main.result = Substitute(main.result);
    return absl::OkStatus();
  }

 private:
  Expr Substitute(const Expr& e) {
    auto it = subst_.find(e.get());
    if (it != subst_.end()) return it->second;
    if (e->kind != ir::ExprKind::kTuple) return e;
    ir::ExprNode copy = *e;
    bool changed = false;
    for (Expr& field : copy.args) {
      Expr next = Substitute(field);
      changed |= next != field;
      field = next;
    }
    return changed ? std::make_shared<const ir::ExprNode>(std::move(copy)) : e;
  }

  // A body that uses a value this pass replaced gets the replacement.
  std::shared_ptr<const ir::Function> SubstituteBody(const std::shared_ptr<const ir::Function>& f,
                                                     absl::Status& status) {
    ir::Function copy = *f;
    for (ir::BindingBlock& block : copy.blocks) {
      std::vector<ir::Binding> out;
      for (const ir::Binding& b : block.bindings) {
        absl::Status s = Rewrite(b, out, /*top=*/false);
        if (!s.ok() && status.ok()) status = s;
      }
      block.bindings = std::move(out);
    }
    copy.result = Substitute(copy.result);
    return std::make_shared<const ir::Function>(std::move(copy));
  }

  absl::Status Rewrite(const ir::Binding& b, std::vector<ir::Binding>& out, bool top = true) {
    ir::ExprNode copy = *b.value;
    bool changed = false;
    for (Expr& arg : copy.args) {
      Expr next = Substitute(arg);
      changed |= next != arg;
      arg = next;
    }
    absl::Status status;
    for (auto& sub : copy.subgraphs) sub = SubstituteBody(sub, status);
    KILN_RETURN_IF_ERROR(status);
    changed |= !copy.subgraphs.empty();
    if (changed && !b.match_cast) KILN_RETURN_IF_ERROR(Reinfer(copy, b));
    ir::Binding next = b;
    if (changed) next.value = std::make_shared<const ir::ExprNode>(std::move(copy));
    bool counted = top && IsCountedLoop(*next.value);
    if (top && NeedsKeptShapes(*next.value)) KILN_RETURN_IF_ERROR(KeepCarriedShapes(next));
    bool padded = top && IsCountedLoop(*next.value);
    if (padded) KILN_RETURN_IF_ERROR(PadLoop(next, out));
    if (!b.match_cast && !ir::StructuralEqual(next.value->struct_info, b.var->struct_info)) {
      bool stacked = IsScanField(*next.value) && now_counted_.count(next.value->args[0].get());
      next.var = ir::MakeVar(b.var->name + (stacked ? "_stacked" : ""), next.value->struct_info);
      subst_[b.var.get()] = next.var;
    }
    if (padded) padded_[next.var.get()] = ScanFields(*next.value);
    if (IsScanField(*next.value)) prefix_sources_.insert(next.var.get());
    out.push_back(next);
    if (padded && !counted) CountTrips(next, out);
    if (IsScanField(*next.value) && now_counted_.count(next.value->args[0].get())) {
      TakeRanPrefix(b, next, out);
    }
    return absl::OkStatus();
  }

  // Compiled code keeps a loop-carried value in one buffer, of the loop's state shape (the
  // initial value's). The importer generalized the body's param when the body's result may
  // have another shape (fresh dims, so the interpreter runs any loop); here the body is
  // specialized to the state shape instead, and each carried result is match_cast to it: a
  // run-time check, per iteration, that the carried value kept its shape. The body's
  // kernels then have shapes (the run-time dims it binds itself, per iteration, included),
  // and so do scan outputs that are carried values.
  static bool NeedsKeptShapes(const ir::ExprNode& v) {
    if (v.kind != ir::ExprKind::kCall || v.name != "loop" || v.subgraphs.size() != 1 ||
        ir::IsNone(v.args[0])) {
      return false;
    }
    const ir::Function& body = *v.subgraphs[0];
    if (body.params.size() != v.args.size()) return false;
    for (size_t k = 2; k < v.args.size(); ++k) {
      const StructInfo& state = v.args[k]->struct_info;
      if (!state.is_tensor() || !state.shape) continue;
      if (!ir::StructuralEqual(state, body.params[k]->struct_info)) return true;
    }
    return false;
  }

  absl::Status KeepCarriedShapes(ir::Binding& b) {
    ir::ExprNode loop = *b.value;
    ir::Function body = *loop.subgraphs[0];
    size_t carried = loop.args.size() - 2;
    for (size_t k = 2; k < loop.args.size(); ++k) {
      const StructInfo& state = loop.args[k]->struct_info;
      if (!state.is_tensor() || !state.shape) continue;
      if (ir::StructuralEqual(state, body.params[k]->struct_info)) continue;
      Expr param = ir::MakeVar(body.params[k]->name, state);
      subst_[body.params[k].get()] = param;
      body.params[k] = param;
    }
    absl::Status status;
    auto specialized =
        SubstituteBody(std::make_shared<const ir::Function>(std::move(body)), status);
    if (!status.ok()) {
      return absl::UnimplementedError(
          absl::StrCat("binding %", b.var->name,
                       " (loop): its body does not take its carried values at their initial "
                       "shapes, and only one shape per carried value is compiled: ",
                       status.message()));
    }
    body = *specialized;
    if (body.result->kind != ir::ExprKind::kTuple || body.result->args.size() < carried + 1) {
      return absl::InternalError(absl::StrCat("loop %", b.var->name, " has a malformed body"));
    }
    std::vector<Expr> results = body.result->args;
    for (size_t k = 0; k < carried; ++k) {
      const StructInfo& state = loop.args[2 + k]->struct_info;
      Expr value = results[1 + k];
      if (ir::StructuralEqual(value->struct_info, state)) continue;
      Expr kept = ir::MakeVar(absl::StrCat(value->name, "_kept"), state);
      if (body.blocks.empty()) body.blocks.emplace_back();
      body.blocks.back().bindings.push_back({kept, value, /*match_cast=*/true});
      for (Expr& r : results) {
        if (r == value) r = kept;  // a scan output that is this value has its shape too
      }
    }
    body.result = ir::MakeTuple(results);
    loop.subgraphs[0] = std::make_shared<const ir::Function>(std::move(body));
    if (!IsCountedLoop(loop) && ScanSlicesKnown(*loop.subgraphs[0], carried)) {
      loop.attrs["count_trips"] = int64_t{1};
    }
    KILN_ASSIGN_OR_RETURN(loop.struct_info, op::InferStructInfo(loop, analyzer_));
    b.value = std::make_shared<const ir::ExprNode>(std::move(loop));
    return absl::OkStatus();
  }

  // Whether each scan output's slices have one shape, free of the vars the body binds.
  static bool ScanSlicesKnown(const ir::Function& body, size_t carried) {
    std::set<const arith::ExprNode*> local;
    for (const ir::BindingBlock& block : body.blocks) {
      for (const ir::Binding& b : block.bindings) {
        if (!b.match_cast || !b.var->struct_info.shape) continue;
        for (const PrimExpr& d : *b.var->struct_info.shape) {
          for (const PrimExpr& v : arith::FreeVars(d)) local.insert(v.get());
        }
      }
    }
    const auto& results = body.result->args;
    for (size_t j = carried + 1; j < results.size(); ++j) {
      const StructInfo& slice = results[j]->struct_info;
      if (!slice.is_tensor() || !slice.shape) return false;
      for (const PrimExpr& d : *slice.shape) {
        for (const PrimExpr& v : arith::FreeVars(d)) {
          if (local.count(v.get())) return false;
        }
      }
    }
    return true;
  }

  // A loop that counts its trips only now (KeepCarriedShapes): what the importer makes of a
  // counted loop follows here, its count bound to t, and each scan output the prefix [0, t).
  void CountTrips(const ir::Binding& loop, std::vector<ir::Binding>& out) {
    int trips = static_cast<int>(loop.value->struct_info.fields.size()) - 1;
    Expr get = ir::MakeTupleGetItem(loop.var, trips);
    Expr count = ir::MakeVar(loop.var->name + "_trips", get->struct_info);
    out.push_back({count, get});
    now_counted_[loop.var.get()] = BindValue(out, loop.var->name + "_trips_ran", count);
  }

  void TakeRanPrefix(const ir::Binding& b, const ir::Binding& stacked,
                     std::vector<ir::Binding>& out) {
    PrimExpr t = now_counted_.at(stacked.value->args[0].get());
    std::vector<PrimExpr> dims = *stacked.var->struct_info.shape;
    dims[0] = t;
    ir::ExprNode call = *ir::MakeCall(
        "slice", {stacked.var, ir::MakeShapeExpr({arith::IntImm(0)}), ir::MakeShapeExpr({t}),
                  ir::MakeShapeExpr({arith::IntImm(0)}), ir::MakeShapeExpr({arith::IntImm(1)})});
    call.struct_info = StructInfo::Tensor(dims, stacked.var->struct_info.dtype);
    Expr prefix = ir::MakeVar(b.var->name, call.struct_info);
    out.push_back({prefix, std::make_shared<const ir::ExprNode>(std::move(call))});
    subst_[b.var.get()] = prefix;
  }

  // The struct info of `call`, whose args changed: a scan output of a padded loop is reshaped
  // to its run-time length by the importer, which is the prefix of the padded buffer.
  absl::Status Reinfer(ir::ExprNode& call, const ir::Binding& b) {
    if (call.kind == ir::ExprKind::kTupleGetItem) {
      call.struct_info = call.args[0]->struct_info.fields.at(call.index);
      return absl::OkStatus();
    }
    if (call.kind != ir::ExprKind::kCall || !op::IsRegistered(call.name)) return absl::OkStatus();
    if (call.name == "reshape" && !call.args.empty() && prefix_sources_.count(call.args[0].get()) &&
        b.var->struct_info.shape) {
      ir::Expr buffer = call.args[0];
      const auto& dims = *b.var->struct_info.shape;
      call = *ir::MakeCall(
          "slice", {buffer, ir::MakeShapeExpr({arith::IntImm(0)}), ir::MakeShapeExpr({dims[0]}),
                    ir::MakeShapeExpr({arith::IntImm(0)}), ir::MakeShapeExpr({arith::IntImm(1)})});
      call.struct_info = b.var->struct_info;
      return absl::OkStatus();
    }
    KILN_ASSIGN_OR_RETURN(call.struct_info, op::InferStructInfo(call, analyzer_));
    return absl::OkStatus();
  }

  // The fields of a padded loop that are scan outputs: [carried, carried + scans).
  static std::pair<int, int> ScanFields(const ir::ExprNode& loop) {
    int carried = static_cast<int>(loop.args.size()) - 2;
    return {carried, static_cast<int>(loop.struct_info.fields.size()) - 1};
  }

  bool IsScanField(const ir::ExprNode& v) const {
    if (v.kind != ir::ExprKind::kTupleGetItem) return false;
    auto it = padded_.find(v.args[0].get());
    return it != padded_.end() && v.index >= it->second.first && v.index < it->second.second;
  }

  static bool IsCountedLoop(const ir::ExprNode& v) {
    return v.kind == ir::ExprKind::kCall && v.name == "loop" && v.subgraphs.size() == 1 &&
           !ir::IsNone(v.args[0]) && op::GetIntAttr(v.attrs, "count_trips", 0) != 0;
  }

  // `%L = loop(M, ...) {count_trips}`: binds m to M's value first, and the scan outputs
  // become [m, slice...] buffers.
  absl::Status PadLoop(ir::Binding& b, std::vector<ir::Binding>& out) {
    const ir::ExprNode& loop = *b.value;
    size_t carried = loop.args.size() - 2;
    const auto& results = loop.subgraphs[0]->result->args;
    std::vector<StructInfo> fields = loop.struct_info.fields;
    if (fields.size() != results.size()) {
      return absl::InternalError(absl::StrCat("loop %", b.var->name, " has ", fields.size(),
                                              " results for ", results.size(), " body results"));
    }
    PrimExpr m = BindValue(out, b.var->name + "_max_trips", loop.args[0]);
    for (size_t j = carried + 1; j < results.size(); ++j) {
      const StructInfo& slice = results[j]->struct_info;
      KILN_CHECK(slice.shape) << "count_trips on a loop whose scan slices have no shape";
      std::vector<PrimExpr> dims = *slice.shape;
      dims.insert(dims.begin(), m);
      fields[j - 1] = StructInfo::Tensor(dims, slice.dtype);
    }
    ir::ExprNode padded = loop;
    padded.struct_info = StructInfo::Tuple(fields);
    b.value = std::make_shared<const ir::ExprNode>(std::move(padded));
    return absl::OkStatus();
  }

  // Binds `tensor`'s single value to a fresh var.
  PrimExpr BindValue(std::vector<ir::Binding>& out, const std::string& name, const Expr& tensor) {
    ir::ExprNode call = *ir::MakeCall("tensor_to_shape", {tensor});
    call.struct_info.kind = StructInfo::Kind::kShape;
    call.struct_info.ndim = 1;
    PrimExpr var = arith::MakeVar(absl::StrCat(name, "_0"));
    out.push_back({ir::MakeVar(name, StructInfo::Shape({var})),
                   std::make_shared<const ir::ExprNode>(std::move(call)), /*match_cast=*/true});
    return var;
  }

  arith::Analyzer analyzer_;
  std::map<const ir::ExprNode*, Expr> subst_;
  // Padded loops -> the range of their fields that are scan outputs; those fields' vars.
  std::map<const ir::ExprNode*, std::pair<int, int>> padded_;
  std::set<const ir::ExprNode*> prefix_sources_;
  // Loops that count their trips since KeepCarriedShapes -> the var bound to that count.
  std::map<const ir::ExprNode*, PrimExpr> now_counted_;
};

}  // namespace

absl::StatusOr<ir::IRModule> BindLoopTripCounts(ir::IRModule module) {
  auto it = module.functions.find("main");
  if (it == module.functions.end()) return module;
  TripCountBinder binder;
  KILN_RETURN_IF_ERROR(binder.Run(it->second));
  return module;
}

}  // namespace kiln::transform
