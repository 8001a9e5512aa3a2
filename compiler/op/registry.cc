#include "compiler/op/registry.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"

namespace kiln::op {

using arith::PrimExpr;
using ir::StructInfo;

namespace {

using InferFn =
    std::function<absl::StatusOr<StructInfo>(const ir::ExprNode&, const arith::Analyzer&)>;

absl::Status OpError(const ir::ExprNode& call, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("op ", call.name, ": ", message));
}

// The arguments' tensor struct info, each with a known shape.
absl::StatusOr<std::vector<const StructInfo*>> TensorArgs(const ir::ExprNode& call, size_t count) {
  if (call.args.size() != count) {
    return OpError(call, absl::StrCat("expects ", count, " arguments, got ", call.args.size()));
  }
  std::vector<const StructInfo*> out;
  for (size_t i = 0; i < count; ++i) {
    const StructInfo& info = call.args[i]->struct_info;
    if (!info.is_tensor()) return OpError(call, absl::StrCat("argument ", i, " is not a tensor"));
    if (!info.shape) return OpError(call, absl::StrCat("argument ", i, " has an unknown shape"));
    out.push_back(&info);
  }
  return out;
}

absl::StatusOr<StructInfo> InferElementwiseBinary(const ir::ExprNode& call,
                                                  const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 2));
  if (args[0]->dtype != args[1]->dtype) {
    return OpError(call, absl::StrCat("operand dtypes differ: ", args[0]->dtype.ToString(), " and ",
                                      args[1]->dtype.ToString()));
  }
  auto shape = BroadcastShapes(*args[0]->shape, *args[1]->shape, analyzer);
  if (!shape.ok()) return OpError(call, std::string(shape.status().message()));
  return StructInfo::Tensor(*std::move(shape), args[0]->dtype);
}

absl::StatusOr<StructInfo> InferUnary(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  return *args[0];
}

absl::StatusOr<StructInfo> InferMatmul(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 2));
  const auto& a = *args[0]->shape;
  const auto& b = *args[1]->shape;
  if (a.size() < 2 || b.size() < 2) {
    return OpError(call,
                   absl::StrCat("operands must have rank >= 2, got ", a.size(), " and ", b.size()));
  }
  if (args[0]->dtype != args[1]->dtype) return OpError(call, "operand dtypes differ");
  const PrimExpr& k_a = a[a.size() - 1];
  const PrimExpr& k_b = b[b.size() - 2];
  if (!analyzer.ProveEqual(k_a, k_b)) {
    return OpError(call, absl::StrCat("inner dimensions differ: ", arith::ToString(k_a), " and ",
                                      arith::ToString(k_b)));
  }
  std::vector<PrimExpr> batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes(batch_a, batch_b, analyzer);
  if (!batch.ok()) return OpError(call, std::string(batch.status().message()));
  std::vector<PrimExpr> out = *std::move(batch);
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  return StructInfo::Tensor(std::move(out), args[0]->dtype);
}

absl::StatusOr<StructInfo> InferSoftmax(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  int64_t rank = args[0]->ndim;
  int64_t axis = GetIntAttr(call.attrs, "axis", -1);
  if (axis < -rank || axis >= rank) {
    return OpError(call, absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  return *args[0];
}

absl::StatusOr<StructInfo> InferTranspose(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  const auto& in = *args[0]->shape;
  std::vector<int64_t> perm = GetIntsAttr(call.attrs, "perm");
  std::vector<bool> seen(in.size(), false);
  if (perm.size() != in.size()) {
    return OpError(call, absl::StrCat("perm has ", perm.size(), " entries for rank ", in.size()));
  }
  std::vector<PrimExpr> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p]) {
      return OpError(call, absl::StrCat("perm entry ", p, " is not a permutation"));
    }
    seen[p] = true;
    out.push_back(in[p]);
  }
  return StructInfo::Tensor(std::move(out), args[0]->dtype);
}

absl::StatusOr<StructInfo> InferReshape(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 2 || call.args[1]->kind != ir::ExprKind::kShapeExpr) {
    return OpError(call, "expects a tensor and a shape expression");
  }
  KILN_ASSIGN_OR_RETURN(
      auto args, TensorArgs({.kind = call.kind, .name = call.name, .args = {call.args[0]}}, 1));
  const std::vector<PrimExpr>& target = call.args[1]->values;
  PrimExpr in_size = arith::IntImm(1), out_size = arith::IntImm(1);
  for (const PrimExpr& d : *args[0]->shape) in_size = in_size * d;
  for (const PrimExpr& d : target) out_size = out_size * d;
  if (!analyzer.ProveEqual(in_size, out_size)) {
    return OpError(call,
                   absl::StrCat("cannot reshape ", arith::ToString(analyzer.Simplify(in_size)),
                                " elements into ", arith::ToString(analyzer.Simplify(out_size))));
  }
  return StructInfo::Tensor(target, args[0]->dtype);
}

const std::map<std::string, InferFn, std::less<>>& Registry() {
  static const auto* registry = new std::map<std::string, InferFn, std::less<>>{
      {"add", InferElementwiseBinary},
      {"subtract", InferElementwiseBinary},
      {"multiply", InferElementwiseBinary},
      {"divide", InferElementwiseBinary},
      {"relu", InferUnary},
      {"sigmoid", InferUnary},
      {"tanh", InferUnary},
      {"exp", InferUnary},
      {"copy", InferUnary},
      {"matmul", InferMatmul},
      {"softmax", InferSoftmax},
      {"transpose", InferTranspose},
      {"reshape", InferReshape},
  };
  return *registry;
}

}  // namespace

bool IsRegistered(std::string_view op) { return Registry().count(op) > 0; }

std::vector<std::string> RegisteredOps() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : Registry()) names.push_back(name);
  return names;
}

absl::StatusOr<StructInfo> InferStructInfo(const ir::ExprNode& call,
                                           const arith::Analyzer& analyzer) {
  auto it = Registry().find(call.name);
  KILN_CHECK(it != Registry().end()) << "unregistered op " << call.name;
  return it->second(call, analyzer);
}

absl::StatusOr<std::vector<PrimExpr>> BroadcastShapes(const std::vector<PrimExpr>& a,
                                                      const std::vector<PrimExpr>& b,
                                                      const arith::Analyzer& analyzer) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<PrimExpr> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right, as numpy does.
    PrimExpr da = i < rank - a.size() ? arith::IntImm(1) : a[i - (rank - a.size())];
    PrimExpr db = i < rank - b.size() ? arith::IntImm(1) : b[i - (rank - b.size())];
    if (da->is_const_int(1)) {
      out[i] = db;
    } else if (db->is_const_int(1) || analyzer.ProveEqual(da, db)) {
      out[i] = da;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("cannot broadcast dimension ", i, ": ",
                                                     arith::ToString(da), " with ",
                                                     arith::ToString(db)));
    }
  }
  return out;
}

int64_t GetIntAttr(const ir::Attrs& attrs, const std::string& name, int64_t fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return fallback;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  return fallback;
}

std::vector<int64_t> GetIntsAttr(const ir::Attrs& attrs, const std::string& name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return {};
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return {};
}

}  // namespace kiln::op
