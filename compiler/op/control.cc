// Control flow: loop and scan (if is an expression of its own, ir::MakeIf). Both carry their
// body as call.subgraphs[0].
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::op {
namespace {

using ir::StructInfo;

absl::StatusOr<const ir::Function*> Body(const ir::ExprNode& call) {
  if (call.subgraphs.size() != 1 || !call.subgraphs[0]) return OpError(call, "needs one body");
  const ir::Function* body = call.subgraphs[0].get();
  if (body->result->struct_info.kind != StructInfo::Kind::kTuple) {
    return OpError(call, "the body must return a tuple");
  }
  return body;
}

// A carried value keeps its initial struct info when the body was imported with it (the
// loop does not change its shape); otherwise only its rank is known outside the loop.
StructInfo CarriedOut(const StructInfo& initial, const StructInfo& param) {
  if (ir::StructuralEqual(initial, param)) return initial;
  if (param.is_tensor()) return StructInfo::TensorRank(param.ndim, param.dtype);
  return StructInfo{};
}

// Values a body returns once per iteration come out stacked along a new axis whose length is
// the trip count, known only at run time.
StructInfo Stacked(const StructInfo& slice) {
  if (!slice.is_tensor()) return StructInfo{};
  return StructInfo::TensorRank(slice.ndim < 0 ? -1 : slice.ndim + 1, slice.dtype);
}

// A scan runs once per slice of its scan inputs: the length of the first one's scan axis,
// when its shape is known (the scan inputs must agree at run time).
std::optional<arith::PrimExpr> ScanLength(const ir::ExprNode& call, size_t state) {
  if (state >= call.args.size()) return std::nullopt;
  const StructInfo& x = call.args[state]->struct_info;
  if (!x.is_tensor() || !x.shape || x.ndim < 1) return std::nullopt;
  std::vector<int64_t> in_axes = GetIntsAttr(call.attrs, "scan_input_axes");
  int64_t axis = in_axes.empty() ? 0 : in_axes[0];
  if (axis < 0) axis += x.ndim;
  if (axis < 0 || axis >= x.ndim) return std::nullopt;
  return (*x.shape)[axis];
}

// Slices of known shape stacked along `axis` into `length` of them.
StructInfo StackedAlong(const StructInfo& slice, const arith::PrimExpr& length, int64_t axis) {
  if (!slice.is_tensor() || !slice.shape) return Stacked(slice);
  if (axis < 0) axis += slice.ndim + 1;
  if (axis < 0 || axis > slice.ndim) return Stacked(slice);
  std::vector<arith::PrimExpr> dims = *slice.shape;
  dims.insert(dims.begin() + axis, length);
  return StructInfo::Tensor(std::move(dims), slice.dtype);
}

// loop(max_trips, cond, v_initial...) {count_trips} with body(i, cond, v...) ->
// (cond, v..., scan...); results (v..., scan..., [trips]).
absl::StatusOr<StructInfo> InferLoop(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(const ir::Function* body, Body(call));
  size_t carried = call.args.size() - 2;
  const auto& results = body->result->struct_info.fields;
  if (body->params.size() != carried + 2 || results.size() < carried + 1) {
    return OpError(call,
                   absl::StrCat("body takes ", body->params.size(), " and returns ", results.size(),
                                " values for ", carried, " loop-carried values"));
  }
  std::vector<StructInfo> out;
  for (size_t k = 0; k < carried; ++k) {
    out.push_back(CarriedOut(call.args[2 + k]->struct_info, body->params[2 + k]->struct_info));
  }
  for (size_t j = carried + 1; j < results.size(); ++j) out.push_back(Stacked(results[j]));
  // {count_trips}: a last result, how many iterations ran (the scan outputs' length).
  if (GetIntAttr(call.attrs, "count_trips", 0) != 0) {
    out.push_back(StructInfo::Tensor({}, arith::DataType::Int(64)));
  }
  return StructInfo::Tuple(std::move(out));
}

// scan(state..., scan_inputs...) with body(state..., slices...) -> (state..., slices...).
absl::StatusOr<StructInfo> InferScan(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(const ir::Function* body, Body(call));
  int64_t num_scan_inputs = GetIntAttr(call.attrs, "num_scan_inputs", 0);
  size_t state = call.args.size() - num_scan_inputs;
  const auto& results = body->result->struct_info.fields;
  if (body->params.size() != call.args.size() || results.size() < state) {
    return OpError(call, "body signature does not match the scan's inputs");
  }
  std::vector<StructInfo> out;
  for (size_t k = 0; k < state; ++k) {
    out.push_back(CarriedOut(call.args[k]->struct_info, body->params[k]->struct_info));
  }
  std::vector<int64_t> out_axes = GetIntsAttr(call.attrs, "scan_output_axes");
  out_axes.resize(results.size() - state, 0);
  std::optional<arith::PrimExpr> length = ScanLength(call, state);
  for (size_t j = state; j < results.size(); ++j) {
    out.push_back(length ? StackedAlong(results[j], *length, out_axes[j - state])
                         : Stacked(results[j]));
  }
  return StructInfo::Tuple(std::move(out));
}

}  // namespace

std::vector<OpDef> ControlOps() {
  return {
      {"loop", InferLoop},
      {"scan", InferScan},
  };
}

}  // namespace kiln::op
