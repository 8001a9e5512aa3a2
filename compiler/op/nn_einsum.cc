// einsum: a general equation parser (implicit and explicit outputs, ellipsis, repeated
// labels for diagonals, summed labels) and its struct-info inference.
#include "compiler/op/nn_einsum.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_ops.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

constexpr int kEllipsis = -1;

// One term's labels, with kEllipsis where "..." stands.
absl::StatusOr<std::vector<int>> ParseTerm(const ir::ExprNode& call, const std::string& term) {
  std::vector<int> out;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (term.compare(i, 3, "...") != 0)
        return OpError(call, "malformed ellipsis in '" + term + "'");
      if (std::count(out.begin(), out.end(), kEllipsis)) {
        return OpError(call, "more than one ellipsis in '" + term + "'");
      }
      out.push_back(kEllipsis);
      i += 2;
    } else if (std::islower(static_cast<unsigned char>(c))) {
      out.push_back(c - 'a');
    } else if (std::isupper(static_cast<unsigned char>(c))) {
      out.push_back(26 + c - 'A');
    } else {
      return OpError(call, absl::StrCat("unexpected character '", std::string(1, c),
                                        "' in equation term '", term, "'"));
    }
  }
  return out;
}

// Replaces the ellipsis of a term by `count` labels, the last ones of `total`.
std::vector<int> ExpandEllipsis(const std::vector<int>& term, int count, int total) {
  std::vector<int> out;
  for (int label : term) {
    if (label != kEllipsis) {
      out.push_back(label);
      continue;
    }
    for (int t = 0; t < count; ++t) out.push_back(EinsumSpec::kEllipsisLabel + total - count + t);
  }
  return out;
}

// The implicit output: the ellipsis dims, then the labels used exactly once, in ASCII order
// (upper case first), as numpy does.
std::vector<int> ImplicitOutput(const EinsumSpec& spec, int ellipsis_dims) {
  std::vector<int> out, uses(EinsumSpec::kEllipsisLabel, 0);
  for (int t = 0; t < ellipsis_dims; ++t) out.push_back(EinsumSpec::kEllipsisLabel + t);
  for (const auto& term : spec.inputs) {
    for (int label : term) {
      if (label < EinsumSpec::kEllipsisLabel) ++uses[label];
    }
  }
  for (int label : {26, 0}) {  // A..Z, then a..z
    for (int l = label; l < label + 26; ++l) {
      if (uses[l] == 1) out.push_back(l);
    }
  }
  return out;
}

absl::StatusOr<std::vector<int>> ExplicitOutput(const ir::ExprNode& call, const EinsumSpec& spec,
                                                const std::string& text, int ellipsis_dims) {
  KILN_ASSIGN_OR_RETURN(std::vector<int> term, ParseTerm(call, text));
  std::vector<int> out = ExpandEllipsis(term, ellipsis_dims, ellipsis_dims);
  for (size_t i = 0; i < out.size(); ++i) {
    bool used = false;
    for (const auto& in : spec.inputs) used |= std::count(in.begin(), in.end(), out[i]) > 0;
    if (!used && out[i] < EinsumSpec::kEllipsisLabel) {
      return OpError(call, "output label '" + text + "' does not appear in any input");
    }
    if (std::count(out.begin(), out.end(), out[i]) > 1) {
      return OpError(call, "output '" + text + "' repeats a label");
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<EinsumSpec> ParseEinsum(const ir::ExprNode& call, const std::string& equation,
                                       const std::vector<int64_t>& ranks) {
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != ranks.size()) {
    return OpError(call, absl::StrCat("equation '", equation, "' has ", terms.size(),
                                      " input terms for ", ranks.size(), " operands"));
  }
  std::vector<std::vector<int>> parsed;
  std::vector<int> ellipsis_dims;
  int total = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(std::vector<int> term, ParseTerm(call, terms[i]));
    int letters = std::count_if(term.begin(), term.end(), [](int l) { return l != kEllipsis; });
    bool has_ellipsis = letters != static_cast<int>(term.size());
    int extra = static_cast<int>(ranks[i]) - letters;
    if (extra < 0 || (!has_ellipsis && extra != 0)) {
      return OpError(call, absl::StrCat("term '", terms[i], "' does not fit operand ", i,
                                        " of rank ", ranks[i]));
    }
    total = std::max(total, extra);
    parsed.push_back(std::move(term));
    ellipsis_dims.push_back(extra);
  }
  EinsumSpec spec;
  for (size_t i = 0; i < parsed.size(); ++i) {
    spec.inputs.push_back(ExpandEllipsis(parsed[i], ellipsis_dims[i], total));
  }
  spec.num_labels = EinsumSpec::kEllipsisLabel + total;
  if (arrow == std::string::npos) {
    spec.output = ImplicitOutput(spec, total);
  } else {
    KILN_ASSIGN_OR_RETURN(spec.output,
                          ExplicitOutput(call, spec, equation.substr(arrow + 2), total));
  }
  return spec;
}

namespace {

// The extent of every label: dims sharing a label must agree (1 broadcasts).
absl::StatusOr<StructInfo> InferEinsum(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.empty()) return OpError(call, "expects at least one operand");
  std::vector<const StructInfo*> args;
  std::vector<int64_t> ranks;
  bool shapes_known = true;
  for (size_t i = 0; i < call.args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const StructInfo* a, TensorArg(call, i));
    if (a->ndim < 0) return StructInfo::TensorRank(-1, a->dtype);
    if (!args.empty() && a->dtype != args.front()->dtype) {
      return OpError(call, "operand dtypes differ");
    }
    shapes_known &= a->shape.has_value();
    args.push_back(a);
    ranks.push_back(a->ndim);
  }
  KILN_ASSIGN_OR_RETURN(EinsumSpec spec,
                        ParseEinsum(call, GetStringAttr(call.attrs, "equation", ""), ranks));
  if (!shapes_known) return StructInfo::TensorRank(spec.output.size(), args[0]->dtype);
  std::vector<PrimExpr> extent(spec.num_labels);
  for (size_t i = 0; i < args.size(); ++i) {
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      PrimExpr& e = extent[spec.inputs[i][d]];
      const PrimExpr& dim = (*args[i]->shape)[d];
      if (!e || e->is_const_int(1)) {
        e = dim;
      } else if (!dim->is_const_int(1) && !analyzer.ProveEqual(e, dim)) {
        return OpError(call, absl::StrCat("operand ", i, " dim ", d, " is ", arith::ToString(dim),
                                          ", but its label has extent ", arith::ToString(e)));
      }
    }
  }
  std::vector<PrimExpr> out;
  for (int label : spec.output) out.push_back(extent[label]);
  return StructInfo::Tensor(std::move(out), args[0]->dtype);
}

}  // namespace

std::vector<OpDef> NNEinsumOps() { return {{"einsum", InferEinsum}}; }

}  // namespace kiln::op
