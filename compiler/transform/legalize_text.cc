// Text operators: tf_idf_vectorizer over integer tokens, as interp/image_boxes.cc defines it
// (onnxruntime's reading of the spec). The n-gram pool is an attribute, so the kernel is
// unrolled over it at compile time: for each pool n-gram and each skip, a loop over the start
// positions of a row counts the matches into the n-gram's output column.
#include <map>
#include <set>

#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

using NgramColumns = std::map<std::vector<int64_t>, int64_t>;  // n-gram -> output column

PrimExpr I(int64_t v) { return arith::IntImm(v); }

// pool_int64s holds the n-grams by length: ngram_counts[n - 1] is where the n-grams of
// length n start; ngram_indexes maps the i-th n-gram of the pool to its output column. A
// repeated n-gram keeps its last column, as the reference's map does.
absl::StatusOr<NgramColumns> ReadNgramPool(const ir::ExprNode& call) {
  std::vector<int64_t> pool = op::GetIntsAttr(call.attrs, "pool_int64s");
  std::vector<int64_t> starts = op::GetIntsAttr(call.attrs, "ngram_counts");
  std::vector<int64_t> indexes = op::GetIntsAttr(call.attrs, "ngram_indexes");
  NgramColumns columns;
  size_t id = 0;
  for (size_t level = 0; level < starts.size(); ++level) {
    int64_t n = static_cast<int64_t>(level) + 1;
    int64_t end = level + 1 < starts.size() ? starts[level + 1] : static_cast<int64_t>(pool.size());
    if (starts[level] < 0 || end > static_cast<int64_t>(pool.size()) || (end - starts[level]) % n) {
      return absl::InvalidArgumentError(
          "op tf_idf_vectorizer: ngram_counts does not split pool_int64s into n-grams");
    }
    for (int64_t at = starts[level]; at < end; at += n, ++id) {
      if (id >= indexes.size()) {
        return absl::InvalidArgumentError("op tf_idf_vectorizer: ngram_indexes is too short");
      }
      columns[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)] = indexes[id];
    }
  }
  return columns;
}

struct NgramScan {
  int64_t min_n, max_n, max_skip;
};

// Adds to counts[row, column] the occurrences of `gram` in that row of x, for every skip
// the attributes allow (unigrams once: skipping does not change them).
Stmt CountNgram(const Buffer& x, const Buffer& counts, const Indices& row,
                const std::vector<int64_t>& gram, int64_t column, const NgramScan& scan) {
  int64_t n = gram.size();
  PrimExpr len = x->shape.back();
  std::vector<Stmt> per_skip;
  for (int64_t skip = 0; skip <= (n == 1 ? 0 : scan.max_skip); ++skip) {
    PrimExpr span = I((n - 1) * (skip + 1));
    PrimExpr s = arith::MakeVar("s");
    PrimExpr match;
    for (int64_t i = 0; i < n; ++i) {
      Indices at = row;
      at.push_back(s + I(i * (skip + 1)));
      PrimExpr token = CastIfNeeded(DataType::Int(), arith::Load(x, at));
      PrimExpr same = arith::Binary(ExprKind::kEQ, token, I(gram[i]));
      match = match ? arith::Binary(ExprKind::kAnd, match, same) : same;
    }
    Indices out_at = row;
    out_at.push_back(I(column));
    PrimExpr one = arith::FloatImm(1, counts->dtype);
    Stmt add = ir::Store(counts, out_at, arith::Load(counts, out_at) + one);
    PrimExpr starts = arith::Max(len - span, I(0));
    per_skip.push_back(ir::For(s, I(0), starts, ir::ForKind::kSerial, ir::IfThenElse(match, add)));
  }
  return ir::Seq(per_skip);
}

// A column's value from its count under IDF (the weight where the n-gram occurs) or TFIDF
// (count times weight); under TF a column is its count and is not weighed.
PrimExpr Weigh(const std::string& mode, PrimExpr count, PrimExpr weight) {
  PrimExpr count_f64 = CastIfNeeded(DataType::Float(64), count);
  if (mode == "IDF") {
    return arith::Select(arith::Binary(ExprKind::kGT, count_f64, DoubleImm(0)), weight,
                         DoubleImm(0));
  }
  return count_f64 * weight;
}

// tf_idf_vectorizer(x [C] or [N, C]) -> f32 [W] or [N, W]: counts are accumulated in the
// output (small integers, exact in f32), then weighed column by column.
absl::StatusOr<Stmt> TfIdfVectorizerBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  if (!x->dtype.is_int() || (x->shape.size() != 1 && x->shape.size() != 2)) {
    return absl::InvalidArgumentError("op tf_idf_vectorizer: expects a 1-D or 2-D integer input");
  }
  KILN_ASSIGN_OR_RETURN(NgramColumns columns, ReadNgramPool(k.call));
  NgramScan scan{op::GetIntAttr(k.call.attrs, "min_gram_length", 1),
                 op::GetIntAttr(k.call.attrs, "max_gram_length", 1),
                 op::GetIntAttr(k.call.attrs, "max_skip_count", 0)};
  std::string mode = op::GetStringAttr(k.call.attrs, "mode", "TF");
  std::vector<double> weights = op::GetFloatsAttr(k.call.attrs, "weights");
  const Buffer& out = k.out;
  std::vector<PrimExpr> rows(out->shape.begin(), out->shape.end() - 1);
  return LoopNest(rows, "r", [&](const Indices& row) {
    std::vector<Stmt> body;
    body.push_back(LoopNest({out->shape.back()}, "c", [&](const Indices& c) {
      Indices at = row;
      at.push_back(c[0]);
      return ir::Store(out, at, Zero(out->dtype));
    }));
    for (const auto& [gram, column] : columns) {
      int64_t n = gram.size();
      if (n < std::max<int64_t>(scan.min_n, 1) || n > scan.max_n) continue;
      body.push_back(CountNgram(x, out, row, gram, column, scan));
    }
    // Only the pool's columns can count anything, and a zero count weighs 0 in every mode,
    // so those are the columns to weigh, each with its weight known at compile time.
    std::set<int64_t> counted;
    for (const auto& [gram, column] : columns) counted.insert(column);
    bool weighed = mode == "IDF" || mode == "TFIDF";
    for (int64_t c : weighed ? counted : std::set<int64_t>{}) {
      Indices at = row;
      at.push_back(I(c));
      double w = c < static_cast<int64_t>(weights.size()) ? weights[c] : 1.0;
      PrimExpr v = Weigh(mode, arith::Load(out, at), DoubleImm(w));
      body.push_back(ir::Store(out, at, CastIfNeeded(out->dtype, v)));
    }
    return ir::Seq(body);
  });
}

}  // namespace

void RegisterTextKernelBuilders(KernelBuilderTable& table) {
  table["tf_idf_vectorizer"] = TfIdfVectorizerBody;
}

}  // namespace kiln::transform
