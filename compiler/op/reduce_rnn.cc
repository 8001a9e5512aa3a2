// Recurrent networks, as in ONNX: rnn(X, W, R, B, sequence_lens, initial_h),
// gru(same args), lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P); omitted operands
// are none. They return (Y, Y_h) and lstm (Y, Y_h, Y_c).
// Attrs: hidden_size, direction, layout, activations, activation_alpha, activation_beta (one
// per activation), clip (absent: no clipping); gru linear_before_reset, lstm input_forget.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/reduce_internal.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

// Checks that operand `i`, when given with a known shape, has shape `expected`.
absl::Status CheckOperand(const ir::ExprNode& call, size_t i, const char* what,
                          const std::vector<PrimExpr>& expected, const arith::Analyzer& an) {
  if (i >= call.args.size() || ir::IsNone(call.args[i])) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(const StructInfo* info, TensorArg(call, i));
  if (info->ndim >= 0 && info->ndim != static_cast<int>(expected.size())) {
    return OpError(call,
                   absl::StrCat(what, " has rank ", info->ndim, ", expected ", expected.size()));
  }
  if (!info->shape) return absl::OkStatus();
  for (size_t d = 0; d < expected.size(); ++d) {
    if (!an.ProveEqual((*info->shape)[d], expected[d])) {
      return OpError(
          call, absl::StrCat(what, " dimension ", d, " is ", arith::ToString((*info->shape)[d]),
                             ", expected ", arith::ToString(an.Simplify(expected[d]))));
    }
  }
  return absl::OkStatus();
}

// `gates` is how many weight blocks W stacks per direction: 1 (rnn), 3 (gru), 4 (lstm).
absl::StatusOr<StructInfo> InferRecurrent(const ir::ExprNode& call, const arith::Analyzer& an,
                                          int64_t gates, size_t num_args, int num_states) {
  if (call.args.size() != num_args) {
    return OpError(call, absl::StrCat("expects ", num_args, " arguments (none where omitted)"));
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (!x->dtype.is_float()) return OpError(call, "X must be a float tensor");
  if (x->ndim != 3 && x->ndim != -1) {
    return OpError(call, absl::StrCat("X has rank ", x->ndim, ", expected 3"));
  }
  std::string direction = GetStringAttr(call.attrs, "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return OpError(call, absl::StrCat("unknown direction '", direction, "'"));
  }
  int64_t hidden_size = GetIntAttr(call.attrs, "hidden_size", -1);
  if (hidden_size <= 0) return OpError(call, "hidden_size must be positive");
  bool batch_first = GetIntAttr(call.attrs, "layout", 0) != 0;
  if (!x->shape) {  // the kernel checks the operands against X at run time
    std::vector<StructInfo> fields = {StructInfo::TensorRank(4, x->dtype)};
    for (int s = 0; s < num_states; ++s) fields.push_back(StructInfo::TensorRank(3, x->dtype));
    return StructInfo::Tuple(std::move(fields));
  }
  PrimExpr dirs = arith::IntImm(direction == "bidirectional" ? 2 : 1);
  PrimExpr hidden = arith::IntImm(hidden_size);
  PrimExpr seq = (*x->shape)[batch_first ? 1 : 0], batch = (*x->shape)[batch_first ? 0 : 1];
  PrimExpr rows = arith::IntImm(gates * hidden_size);
  KILN_RETURN_IF_ERROR(CheckOperand(call, 1, "W", {dirs, rows, (*x->shape)[2]}, an));
  KILN_RETURN_IF_ERROR(CheckOperand(call, 2, "R", {dirs, rows, hidden}, an));
  KILN_RETURN_IF_ERROR(
      CheckOperand(call, 3, "B", {dirs, arith::IntImm(2 * gates * hidden_size)}, an));
  KILN_RETURN_IF_ERROR(CheckOperand(call, 4, "sequence_lens", {batch}, an));
  std::vector<PrimExpr> state = batch_first ? std::vector<PrimExpr>{batch, dirs, hidden}
                                            : std::vector<PrimExpr>{dirs, batch, hidden};
  for (int s = 0; s < num_states; ++s) {
    KILN_RETURN_IF_ERROR(CheckOperand(call, 5 + s, s == 0 ? "initial_h" : "initial_c", state, an));
  }
  if (num_args == 8) {
    KILN_RETURN_IF_ERROR(CheckOperand(call, 7, "P", {dirs, arith::IntImm(3 * hidden_size)}, an));
  }
  std::vector<PrimExpr> y = batch_first ? std::vector<PrimExpr>{batch, seq, dirs, hidden}
                                        : std::vector<PrimExpr>{seq, dirs, batch, hidden};
  std::vector<StructInfo> fields = {StructInfo::Tensor(y, x->dtype)};
  for (int s = 0; s < num_states; ++s) fields.push_back(StructInfo::Tensor(state, x->dtype));
  return StructInfo::Tuple(std::move(fields));
}

}  // namespace

std::vector<OpDef> RecurrentOps() {
  return {
      {"rnn", [](const ir::ExprNode& c,
                 const arith::Analyzer& an) { return InferRecurrent(c, an, 1, 6, 1); }},
      {"gru", [](const ir::ExprNode& c,
                 const arith::Analyzer& an) { return InferRecurrent(c, an, 3, 6, 1); }},
      {"lstm", [](const ir::ExprNode& c,
                  const arith::Analyzer& an) { return InferRecurrent(c, an, 4, 8, 2); }},
  };
}

}  // namespace kiln::op
