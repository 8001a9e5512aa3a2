#include "compiler/op/op_def.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::op {

using arith::PrimExpr;

absl::Status OpError(const ir::ExprNode& call, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("op ", call.name, ": ", message));
}

absl::StatusOr<const ir::StructInfo*> TensorArg(const ir::ExprNode& call, size_t i) {
  if (i >= call.args.size()) return OpError(call, absl::StrCat("missing argument ", i));
  const ir::StructInfo& info = call.args[i]->struct_info;
  if (!info.is_tensor()) return OpError(call, absl::StrCat("argument ", i, " is not a tensor"));
  return &info;
}

absl::StatusOr<std::vector<const ir::StructInfo*>> TensorArgs(const ir::ExprNode& call,
                                                              size_t count) {
  if (call.args.size() != count) {
    return OpError(call, absl::StrCat("expects ", count, " arguments, got ", call.args.size()));
  }
  std::vector<const ir::StructInfo*> out;
  for (size_t i = 0; i < count; ++i) {
    auto info = TensorArg(call, i);
    if (!info.ok()) return info.status();
    if (!(*info)->shape) {
      return OpError(call, absl::StrCat("argument ", i, " has an unknown shape"));
    }
    out.push_back(*info);
  }
  return out;
}

absl::StatusOr<int64_t> NormalizeAxis(const ir::ExprNode& call, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return OpError(call, absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

std::vector<PrimExpr> NamedPositions(const std::vector<PrimExpr>& axes, int64_t rank) {
  std::vector<PrimExpr> named;
  for (int64_t k = 0; k < rank; ++k) {
    PrimExpr any = arith::IntImm(0, arith::DataType::Bool());
    for (const PrimExpr& a : axes) {
      PrimExpr resolved = arith::Select(arith::Binary(arith::ExprKind::kLT, a, arith::IntImm(0)),
                                        a + arith::IntImm(rank), a);
      PrimExpr is_k = arith::Binary(arith::ExprKind::kEQ, resolved, arith::IntImm(k));
      any = arith::Binary(arith::ExprKind::kOr, any, is_k);
    }
    named.push_back(any);
  }
  return named;
}

template <typename T>
static const T* FindAttr(const ir::Attrs& attrs, const std::string& name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : std::get_if<T>(&it->second);
}

int64_t GetIntAttr(const ir::Attrs& attrs, const std::string& name, int64_t fallback) {
  const int64_t* v = FindAttr<int64_t>(attrs, name);
  return v ? *v : fallback;
}

double GetFloatAttr(const ir::Attrs& attrs, const std::string& name, double fallback) {
  if (const double* v = FindAttr<double>(attrs, name)) return *v;
  if (const int64_t* v = FindAttr<int64_t>(attrs, name)) return static_cast<double>(*v);
  return fallback;
}

std::string GetStringAttr(const ir::Attrs& attrs, const std::string& name,
                          const std::string& fallback) {
  const std::string* v = FindAttr<std::string>(attrs, name);
  return v ? *v : fallback;
}

std::vector<int64_t> GetIntsAttr(const ir::Attrs& attrs, const std::string& name) {
  const auto* v = FindAttr<std::vector<int64_t>>(attrs, name);
  return v ? *v : std::vector<int64_t>{};
}

std::vector<double> GetFloatsAttr(const ir::Attrs& attrs, const std::string& name) {
  const auto* v = FindAttr<std::vector<double>>(attrs, name);
  return v ? *v : std::vector<double>{};
}

std::vector<std::string> GetStringsAttr(const ir::Attrs& attrs, const std::string& name) {
  const auto* v = FindAttr<std::vector<std::string>>(attrs, name);
  return v ? *v : std::vector<std::string>{};
}

bool HasAttr(const ir::Attrs& attrs, const std::string& name) { return attrs.count(name) > 0; }

ir::StructInfo JoinStructInfo(const ir::StructInfo& a, const ir::StructInfo& b) {
  if (ir::StructuralEqual(a, b)) return a;
  if (a.is_tensor() && b.is_tensor() && a.dtype == b.dtype) {
    return ir::StructInfo::TensorRank(a.ndim == b.ndim ? a.ndim : -1, a.dtype);
  }
  if (a.kind == ir::StructInfo::Kind::kTuple && b.kind == a.kind &&
      a.fields.size() == b.fields.size()) {
    std::vector<ir::StructInfo> fields;
    for (size_t i = 0; i < a.fields.size(); ++i) {
      fields.push_back(JoinStructInfo(a.fields[i], b.fields[i]));
    }
    return ir::StructInfo::Tuple(std::move(fields));
  }
  return ir::StructInfo{};  // Object: nothing known
}

// True when `clamped` is min(`dim`, c) for a constant c >= 2: a fixed-size table sliced by a
// symbolic end, as GPT-2's causal-mask buffer is sliced by the sequence length. Broadcasting
// the two is valid only where they are equal: min(dim, c) is 1 only where dim is, and where
// they differ both exceed 1, which numpy rejects. So every valid input has them equal.
bool IsClampOf(const PrimExpr& clamped, const PrimExpr& dim, const arith::Analyzer& analyzer) {
  PrimExpr s = analyzer.Simplify(clamped);
  if (s->kind != arith::ExprKind::kMin) return false;
  for (int i : {0, 1}) {
    const PrimExpr& bound = s->args[i];
    if (bound->kind == arith::ExprKind::kIntImm && bound->int_value >= 2 &&
        analyzer.ProveEqual(s->args[1 - i], dim)) {
      return true;
    }
  }
  return false;
}

static bool ContainsSelect(const PrimExpr& e) {
  if (e->kind == arith::ExprKind::kSelect) return true;
  return std::any_of(e->args.begin(), e->args.end(), ContainsSelect);
}

bool DependsOnRuntimeValues(const std::vector<PrimExpr>& dims) {
  return std::any_of(dims.begin(), dims.end(), ContainsSelect);
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
    } else if (db->is_const_int(1) || analyzer.ProveEqual(da, db) || IsClampOf(db, da, analyzer)) {
      out[i] = da;
    } else if (IsClampOf(da, db, analyzer)) {
      out[i] = db;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("cannot broadcast dimension ", i, ": ",
                                                     arith::ToString(da), " with ",
                                                     arith::ToString(db)));
    }
  }
  return out;
}

}  // namespace kiln::op
