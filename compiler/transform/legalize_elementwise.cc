// Elementwise operators: one scalar expression of the broadcast operands per output element.
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

PrimExpr TruncDiv(PrimExpr a, PrimExpr b) {
  PrimExpr q = arith::FloorDiv(a, b);
  PrimExpr zero = arith::IntImm(0, a->dtype);
  PrimExpr signs_differ = arith::Binary(ExprKind::kNE, arith::Binary(ExprKind::kLT, a, zero),
                                        arith::Binary(ExprKind::kLT, b, zero));
  PrimExpr inexact = arith::Binary(ExprKind::kNE, arith::FloorMod(a, b), zero);
  return arith::Select(arith::Binary(ExprKind::kAnd, signs_differ, inexact),
                       q + arith::IntImm(1, a->dtype), q);
}

PrimExpr Fold(ExprKind kind, const std::vector<PrimExpr>& x) {
  PrimExpr acc = x[0];
  for (size_t i = 1; i < x.size(); ++i) acc = arith::Binary(kind, acc, x[i]);
  return acc;
}

// Elementwise ops whose body is one scalar expression of the broadcast operands; nullptr
// for ops this table does not define. `out` is the result dtype.
PrimExpr ScalarOp(const std::string& op, const std::vector<PrimExpr>& x, DataType out) {
  static const std::map<std::string, ExprKind> kBinary = {{"equal", ExprKind::kEQ},
                                                          {"less", ExprKind::kLT},
                                                          {"greater", ExprKind::kGT},
                                                          {"less_or_equal", ExprKind::kLE},
                                                          {"greater_or_equal", ExprKind::kGE},
                                                          {"and", ExprKind::kAnd},
                                                          {"or", ExprKind::kOr},
                                                          {"xor", ExprKind::kNE}};
  static const std::set<std::string> kFloatMath = {"sqrt", "log", "floor", "ceil",
                                                   "erf",  "exp", "tanh",  "sigmoid"};
  DataType t = x[0]->dtype;
  if (auto it = kBinary.find(op); it != kBinary.end() && x.size() == 2) {
    return arith::Binary(it->second, x[0], x[1]);
  }
  if (op == "add") return x[0] + x[1];
  if (op == "subtract") return x[0] - x[1];
  if (op == "multiply") return x[0] * x[1];
  if (op == "divide") {
    return t.is_float() ? arith::Binary(ExprKind::kDiv, x[0], x[1]) : TruncDiv(x[0], x[1]);
  }
  if (op == "copy") return x[0];
  if (op == "relu") {
    // Written as a select so that NaN stays NaN, as in numpy's maximum.
    return arith::Select(arith::Binary(ExprKind::kLT, x[0], Zero(t)), Zero(t), x[0]);
  }
  if (op == "not") return arith::Not(x[0]);
  if (op == "where") return arith::Select(x[0], x[1], x[2]);
  if (op == "max") return Fold(ExprKind::kMax, x);
  if (op == "min") return Fold(ExprKind::kMin, x);
  if (op == "sum") return Fold(ExprKind::kAdd, x);
  if (op == "neg") return Zero(t) - x[0];
  if (!t.is_float()) return nullptr;
  if (kFloatMath.count(op)) return arith::Call(t, op, {x[0]});
  if (op == "abs") return arith::Call(t, "fabs", {x[0]});
  if (op == "reciprocal") return arith::Binary(ExprKind::kDiv, arith::FloatImm(1, t), x[0]);
  if (op == "pow" && x[1]->dtype == t) return arith::Call(t, "pow", {x[0], x[1]});
  if (op == "mean") {
    return arith::Binary(ExprKind::kDiv, Fold(ExprKind::kAdd, x),
                         arith::FloatImm(static_cast<double>(x.size()), t));
  }
  (void)out;
  return nullptr;
}

// What one kernel sees: its input buffers, its output buffer, and the analyzer that knows the
// shape variables.

KernelBuilder Elementwise(const std::string& op) {
  return [op](const KernelContext& k) -> absl::StatusOr<Stmt> {
    std::vector<PrimExpr> probe;
    for (const Buffer& in : k.inputs) probe.push_back(arith::MakeVar("probe", in->dtype));
    if (probe.empty() || !ScalarOp(op, probe, k.out->dtype)) {
      return absl::UnimplementedError(
          absl::StrCat("no loop-level definition for op ", op, " on ", k.out->dtype.ToString()));
    }
    return Compute(k.out, [&](const Indices& idx) {
      std::vector<PrimExpr> operands;
      for (const Buffer& in : k.inputs) operands.push_back(LoadBroadcast(in, idx));
      return ScalarOp(op, operands, k.out->dtype);
    });
  };
}

}  // namespace

void RegisterElementwiseKernelBuilders(KernelBuilderTable& table) {
  for (const char* op : {"add",
                         "subtract",
                         "multiply",
                         "divide",
                         "copy",
                         "relu",
                         "not",
                         "where",
                         "max",
                         "min",
                         "sum",
                         "mean",
                         "neg",
                         "abs",
                         "reciprocal",
                         "pow",
                         "equal",
                         "less",
                         "greater",
                         "less_or_equal",
                         "greater_or_equal",
                         "and",
                         "or",
                         "xor",
                         "sqrt",
                         "log",
                         "floor",
                         "ceil",
                         "erf",
                         "exp",
                         "tanh",
                         "sigmoid"}) {
    table[op] = Elementwise(op);
  }
}

}  // namespace kiln::transform
