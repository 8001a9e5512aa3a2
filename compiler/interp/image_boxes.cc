// Reference kernels for box selection (non_max_suppression) and n-gram counting
// (tf_idf_vectorizer), following onnxruntime's definitions where the spec leaves room.
#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/image_index.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// ---- non_max_suppression ---------------------------------------------------------------

struct Box {
  double y1, x1, y2, x2;  // y1 <= y2, x1 <= x2
};

Box ReadBox(const NDArray& boxes, int64_t at, bool center_point) {
  double a = boxes.GetDouble(at), b = boxes.GetDouble(at + 1);
  double c = boxes.GetDouble(at + 2), d = boxes.GetDouble(at + 3);
  if (center_point) return {b - d / 2, a - c / 2, b + d / 2, a + c / 2};    // [xc, yc, w, h]
  return {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};  // [y1, x1, y2, x2]
}

// Intersection over union; 0 for boxes that do not overlap or have no area.
double IoU(const Box& a, const Box& b) {
  double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  double inter = ih * iw;
  double area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni;
}

// A scalar operand that may be omitted.
double OptionalScalar(const Value& v, double fallback) {
  if (v.is_none() || v.tensor().num_elements() == 0) return fallback;
  return v.tensor().GetDouble(0);
}

struct NmsParams {
  int64_t max_per_class;
  double iou_threshold, score_threshold;
  bool has_score_threshold, center_point;
};

// Greedy selection for one (batch, class): highest score first (lower index on ties), each
// kept unless it overlaps a kept box by more than the IoU threshold.
std::vector<int64_t> SelectBoxes(const NDArray& boxes, const NDArray& scores, int64_t box_base,
                                 int64_t score_base, int64_t n, const NmsParams& p) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) {
    if (!p.has_score_threshold || scores.GetDouble(score_base + i) > p.score_threshold) {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return scores.GetDouble(score_base + a) > scores.GetDouble(score_base + b);
  });
  std::vector<int64_t> kept;
  std::vector<Box> kept_boxes;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= p.max_per_class) break;
    Box box = ReadBox(boxes, box_base + i * 4, p.center_point);
    bool suppressed = std::any_of(kept_boxes.begin(), kept_boxes.end(),
                                  [&](const Box& k) { return IoU(box, k) > p.iou_threshold; });
    if (suppressed) continue;
    kept.push_back(i);
    kept_boxes.push_back(box);
  }
  return kept;
}

// non_max_suppression -> [selected, 3] rows of (batch, class, box), by batch, class, then
// selection order.
absl::StatusOr<Value> NonMaxSuppression(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* boxes, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* scores, TensorArg(call, args, 1));
  const Shape& bs = boxes->shape;
  const Shape& ss = scores->shape;
  if (args.size() != 5 || bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] ||
      ss[2] != bs[1]) {
    return KernelError(call, "expects boxes [batch, boxes, 4] and scores [batch, classes, boxes]");
  }
  NmsParams p;
  p.max_per_class =
      args[2].is_none() || args[2].tensor().num_elements() == 0 ? 0 : args[2].tensor().GetInt(0);
  p.iou_threshold = OptionalScalar(args[3], 0);
  p.has_score_threshold = !args[4].is_none() && args[4].tensor().num_elements() > 0;
  p.score_threshold = OptionalScalar(args[4], 0);
  p.center_point = op::GetIntAttr(call.attrs, "center_point_box", 0) != 0;
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < bs[0]; ++b) {
    for (int64_t c = 0; c < ss[1]; ++c) {
      for (int64_t i :
           SelectBoxes(*boxes, *scores, b * bs[1] * 4, (b * ss[1] + c) * ss[2], bs[1], p)) {
        rows.insert(rows.end(), {b, c, i});
      }
    }
  }
  NDArray out = NDArray::Zeros(DataType::Int(64), {static_cast<int64_t>(rows.size() / 3), 3});
  std::copy(rows.begin(), rows.end(), out.data<int64_t>());
  return Value(std::move(out));
}

// non_max_suppression_select -> (rows [batch * classes * boxes, 3], count): the selected rows
// first, zeros after them: the worst-case sized form that compiled code fills before the
// count binds the exact size.
absl::StatusOr<Value> NonMaxSuppressionSelect(const ir::ExprNode& call,
                                              const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(Value selected, NonMaxSuppression(call, args));
  const NDArray& rows = selected.tensor();
  const Shape& bs = args[0].tensor().shape;
  const Shape& ss = args[1].tensor().shape;
  NDArray out = NDArray::Zeros(DataType::Int(64), {bs[0] * ss[1] * bs[1], 3});
  std::copy(rows.data<int64_t>(), rows.data<int64_t>() + rows.num_elements(), out.data<int64_t>());
  NDArray n = NDArray::Zeros(DataType::Int(64), {});
  n.data<int64_t>()[0] = rows.shape[0];
  return Value::Tuple({Value(std::move(out)), Value(std::move(n))});
}

// ---- tf_idf_vectorizer -----------------------------------------------------------------

struct NgramTable {
  std::map<std::vector<int64_t>, int64_t> column;  // n-gram -> output column
  int64_t width = 0;
};

// pool_int64s holds the n-grams by length: ngram_counts[n - 1] is where the n-grams start;
// ngram_indexes maps the i-th n-gram of the pool to its output column.
absl::StatusOr<NgramTable> BuildNgramTable(const ir::ExprNode& call) {
  std::vector<int64_t> pool = op::GetIntsAttr(call.attrs, "pool_int64s");
  std::vector<int64_t> starts = op::GetIntsAttr(call.attrs, "ngram_counts");
  std::vector<int64_t> indexes = op::GetIntsAttr(call.attrs, "ngram_indexes");
  NgramTable table;
  for (int64_t i : indexes) table.width = std::max(table.width, i + 1);
  size_t id = 0;
  for (size_t level = 0; level < starts.size(); ++level) {
    int64_t n = static_cast<int64_t>(level) + 1;
    int64_t end = level + 1 < starts.size() ? starts[level + 1] : static_cast<int64_t>(pool.size());
    if (starts[level] < 0 || end > static_cast<int64_t>(pool.size()) || (end - starts[level]) % n) {
      return KernelError(call, "ngram_counts does not split pool_int64s into n-grams");
    }
    for (int64_t at = starts[level]; at < end; at += n, ++id) {
      if (id >= indexes.size()) return KernelError(call, "ngram_indexes is too short");
      table.column[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)] = indexes[id];
    }
  }
  return table;
}

// Counts the n-grams of one row: every length in [min, max], every skip in
// [0, max_skip_count] (unigrams once, since skipping does not change them).
void CountRow(const std::vector<int64_t>& row, const NgramTable& table, const ir::Attrs& attrs,
              std::vector<double>& counts) {
  int64_t min_n = op::GetIntAttr(attrs, "min_gram_length", 1);
  int64_t max_n = op::GetIntAttr(attrs, "max_gram_length", 1);
  int64_t max_skip = op::GetIntAttr(attrs, "max_skip_count", 0);
  int64_t len = static_cast<int64_t>(row.size());
  for (int64_t n = std::max<int64_t>(min_n, 1); n <= max_n; ++n) {
    for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); ++skip) {
      for (int64_t s = 0; s + (n - 1) * (skip + 1) < len; ++s) {
        std::vector<int64_t> gram;
        for (int64_t k = 0; k < n; ++k) gram.push_back(row[s + k * (skip + 1)]);
        auto it = table.column.find(gram);
        if (it != table.column.end()) counts[it->second] += 1;
      }
    }
  }
}

absl::StatusOr<Value> TfIdfVectorizer(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (!x->dtype.is_int() || (x->shape.size() != 1 && x->shape.size() != 2)) {
    return KernelError(call, "expects a 1-D or 2-D integer input");
  }
  KILN_ASSIGN_OR_RETURN(NgramTable table, BuildNgramTable(call));
  std::string mode = op::GetStringAttr(call.attrs, "mode", "TF");
  std::vector<double> weights = op::GetFloatsAttr(call.attrs, "weights");
  int64_t rows = x->shape.size() == 2 ? x->shape[0] : 1;
  int64_t cols = x->shape.back();
  Shape out_shape = {table.width};
  if (x->shape.size() == 2) out_shape.insert(out_shape.begin(), rows);
  NDArray out = NDArray::Zeros(DataType::Float(), out_shape);
  std::vector<int64_t> values = ToInt64s(*x);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> row(values.begin() + r * cols, values.begin() + (r + 1) * cols);
    std::vector<double> counts(table.width, 0);
    CountRow(row, table, call.attrs, counts);
    for (int64_t c = 0; c < table.width; ++c) {
      double w = c < static_cast<int64_t>(weights.size()) ? weights[c] : 1.0;
      double v =
          mode == "IDF" ? (counts[c] > 0 ? w : 0) : (mode == "TFIDF" ? counts[c] * w : counts[c]);
      out.SetDouble(r * table.width + c, v);
    }
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterImageBoxKernels(KernelTable& table) {
  table["non_max_suppression"] = NonMaxSuppression;
  table["non_max_suppression_select"] = NonMaxSuppressionSelect;
  table["tf_idf_vectorizer"] = TfIdfVectorizer;
}

}  // namespace kiln::interp
