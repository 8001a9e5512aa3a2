// Kernels for unique_select and non_max_suppression_select: the first half of Unique and
// NonMaxSuppression, whose output sizes depend on the data. Each writes its results into
// outputs sized for the worst case, plus their count; the importer binds the count to a
// fresh symbolic variable (match_cast of tensor_to_shape, as for non_zero) and slices off the
// first `count` entries (frontend/onnx_image.cc). Loop-level IR, no sort: ranks are counted
// with O(n^2) comparisons, as TopKBody does, which suits the few boxes and slices these ops
// see in models. Kernel-local scratch must have a constant size, so the per-slice and
// per-box working arrays live in the worst-case outputs themselves. Every walk carries a
// dependence through kernel-level scratch, so the loops stay serial. Semantics as
// interp/image_index.cc (unique) and interp/image_boxes.cc (non_max_suppression).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

const DataType kI64 = DataType::Int(64);

PrimExpr Int(int64_t v) { return arith::IntImm(v); }
PrimExpr Lt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kLT, a, b); }
PrimExpr Gt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kGT, a, b); }
PrimExpr Eq(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kEQ, a, b); }
PrimExpr And(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kAnd, a, b); }
PrimExpr Or(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kOr, a, b); }

Stmt Serial(const PrimExpr& var, PrimExpr extent, Stmt body) {
  return ir::For(var, Int(0), std::move(extent), ir::ForKind::kSerial, std::move(body));
}

// Named i64 slots in one kernel-level scratch buffer.
struct Slots {
  Buffer buffer;
  explicit Slots(int64_t n) : buffer(arith::MakeBuffer("state", kI64, {Int(n)})) {}
  PrimExpr operator[](int64_t slot) const { return arith::Load(buffer, {Int(slot)}); }
  Stmt Set(int64_t slot, PrimExpr v) const { return ir::Store(buffer, {Int(slot)}, v); }
  Stmt Add(int64_t slot, PrimExpr v) const { return Set(slot, (*this)[slot] + v); }
};

Stmt Add(const Buffer& b, Indices at, PrimExpr v) {
  PrimExpr old = arith::Load(b, at);
  return ir::Store(b, std::move(at), old + v);
}

// ---- unique_select -----------------------------------------------------------------------

enum UniqueSlot : int64_t { kCompare, kPosition, kDistinct, kUniqueSlots };

// The slices of x along `axis`, compared element by element in row-major order.
struct SliceOrder {
  const Buffer& x;
  int64_t axis;
  const Slots& slots;

  Indices At(const Indices& e, const PrimExpr& slice) const {
    Indices at = e;
    at[axis] = slice;
    return at;
  }
  // slots[kCompare] = -1, 0 or 1 as slice a is before, equal to or after slice b; values
  // neither less nor greater (NaN) count as equal, as in the reference.
  Stmt Compare(const PrimExpr& a, const PrimExpr& b) const {
    std::vector<PrimExpr> shape = x->shape;
    shape[axis] = Int(1);
    Stmt walk = LoopNest(shape, "e", [&](const Indices& e) {
      PrimExpr va = arith::Load(x, At(e, a)), vb = arith::Load(x, At(e, b));
      PrimExpr sign = arith::Select(Lt(va, vb), Int(-1), arith::Select(Lt(vb, va), Int(1), Int(0)));
      return ir::IfThenElse(Eq(slots[kCompare], Int(0)), slots.Set(kCompare, sign));
    });
    return ir::Seq({slots.Set(kCompare, Int(0)), walk});
  }
};

// unique_select(x) {axis, sorted} -> (y, indices, inverse, counts, count), each sized for one
// entry per slice. `counts` first holds, per slice, the first slice equal to it; a slice that
// is its own first is distinct, and its position among the distinct ones (by value, or by
// first occurrence) goes to `inverse`, which every other slice then copies from its first.
absl::StatusOr<Stmt> UniqueSelectBody(const KernelContext& k) {
  if (k.outs.size() != 5) return absl::InternalError("unique_select: expected 5 results");
  const Buffer& x = k.inputs[0];
  const Buffer &y = k.outs[0], &indices = k.outs[1], &inverse = k.outs[2], &counts = k.outs[3];
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        op::NormalizeAxis(k.call, op::GetIntAttr(k.call.attrs, "axis", 0),
                                          static_cast<int64_t>(x->shape.size())));
  bool sorted = op::GetIntAttr(k.call.attrs, "sorted", 1) != 0;
  PrimExpr n = x->shape[axis];
  Slots slots(kUniqueSlots);
  SliceOrder order{x, axis, slots};
  PrimExpr i = arith::MakeVar("i"), j = arith::MakeVar("j");
  PrimExpr first_of_i = arith::Load(counts, {i}), first_of_j = arith::Load(counts, {j});
  PrimExpr i_is_first = Eq(first_of_i, i), j_is_first = Eq(first_of_j, j);

  // counts[i] = the first slice equal to slice i.
  Stmt find_first = ir::Seq({
      ir::Store(counts, {i}, i),
      Serial(j, i,
             ir::IfThenElse(i_is_first, ir::Seq({order.Compare(j, i),
                                                 ir::IfThenElse(Eq(slots[kCompare], Int(0)),
                                                                ir::Store(counts, {i}, j))}))),
  });
  // inverse[i] = the position of distinct slice i: how many distinct slices come before it.
  Stmt before =
      sorted ? ir::Seq({order.Compare(j, i),
                        ir::IfThenElse(Lt(slots[kCompare], Int(0)), slots.Add(kPosition, Int(1)))})
             : ir::IfThenElse(Lt(j, i), slots.Add(kPosition, Int(1)));
  Stmt place = ir::IfThenElse(
      i_is_first,
      ir::Seq({slots.Set(kPosition, Int(0)), Serial(j, n, ir::IfThenElse(j_is_first, before)),
               ir::Store(inverse, {i}, slots[kPosition]), slots.Add(kDistinct, Int(1))}));
  // Every slice takes its first's position; y and indices get the distinct slices.
  PrimExpr at = arith::Load(inverse, {i});
  std::vector<PrimExpr> slice = x->shape;
  slice[axis] = Int(1);
  Stmt copy = LoopNest(slice, "e", [&](const Indices& e) {
    return ir::Store(y, order.At(e, at), arith::Load(x, order.At(e, i)));
  });
  Stmt gather = ir::Seq({
      ir::Store(inverse, {i}, arith::Load(inverse, {first_of_i})),
      ir::IfThenElse(i_is_first, ir::Seq({ir::Store(indices, {at}, i), copy})),
  });
  return ir::Allocate(slots.buffer,
                      ir::Seq({
                          slots.Set(kDistinct, Int(0)),
                          Serial(i, n, find_first),
                          Serial(i, n, place),
                          Serial(i, n, gather),
                          Serial(i, n, ir::Store(counts, {i}, Int(0))),
                          Serial(i, n, Add(counts, {arith::Load(inverse, {i})}, Int(1))),
                          ir::Store(k.outs[4], {}, slots[kDistinct]),
                      }));
}

// ---- non_max_suppression_select ----------------------------------------------------------

enum NmsSlot : int64_t { kRows, kCandidates, kKept, kRank, kSuppressed, kMaxKept, kNmsSlots };
// The thresholds, read once (double).
enum NmsThreshold : int64_t { kIou, kScore, kNmsThresholds };

// One box as corners (y1, x1, y2, x2) in double, from [y1, x1, y2, x2] in either order or
// from [x_center, y_center, width, height].
struct Corners {
  PrimExpr y1, x1, y2, x2;
};

Corners ReadCorners(const Buffer& boxes, const PrimExpr& b, const PrimExpr& i, bool center) {
  auto v = [&](int64_t col) {
    return CastIfNeeded(DataType::Float(64), arith::Load(boxes, {b, i, Int(col)}));
  };
  PrimExpr a = v(0), bb = v(1), c = v(2), d = v(3), half = DoubleImm(0.5);
  if (center) return {bb - d * half, a - c * half, bb + d * half, a + c * half};
  return {arith::Min(a, c), arith::Min(bb, d), arith::Max(a, c), arith::Max(bb, d)};
}

// Whether the intersection over union of p and q is above `threshold`; boxes that do not
// overlap or have no area have an IoU of 0.
PrimExpr OverlapsAbove(const Corners& p, const Corners& q, const PrimExpr& threshold) {
  PrimExpr zero = DoubleImm(0);
  PrimExpr ih = arith::Min(p.y2, q.y2) - arith::Max(p.y1, q.y1);
  PrimExpr iw = arith::Min(p.x2, q.x2) - arith::Max(p.x1, q.x1);
  PrimExpr inter = ih * iw;
  PrimExpr area_p = (p.y2 - p.y1) * (p.x2 - p.x1), area_q = (q.y2 - q.y1) * (q.x2 - q.x1);
  PrimExpr uni = area_p + area_q - inter;
  PrimExpr defined = And(And(Gt(ih, zero), Gt(iw, zero)),
                         And(And(Gt(area_p, zero), Gt(area_q, zero)), Gt(uni, zero)));
  PrimExpr ratio = arith::Binary(ExprKind::kDiv, inter, arith::Select(defined, uni, DoubleImm(1)));
  return Gt(arith::Select(defined, ratio, zero), threshold);
}

// Whether optional operand `arg` is given and not empty (known at run time only where its
// shape is symbolic).
PrimExpr Given(const KernelContext& k, size_t arg) {
  const Buffer* b = OptionalInput(k, arg);
  if (!b) return arith::IntImm(0, DataType::Bool());
  PrimExpr size = Int(1);
  for (const PrimExpr& d : (*b)->shape) size = size * d;
  return Gt(size, Int(0));
}

// Stores scalar operand `arg` (as dst's dtype) at dst[slot], or `fallback` where it is omitted
// or given empty, as the reference reads it; it is read only when it is not empty.
Stmt ReadOptionalScalar(const KernelContext& k, size_t arg, const Buffer& dst, int64_t slot,
                        PrimExpr fallback) {
  Stmt use_fallback = ir::Store(dst, {Int(slot)}, fallback);
  if (!OptionalInput(k, arg)) return use_fallback;
  return ir::IfThenElse(
      Given(k, arg), ir::Store(dst, {Int(slot)}, CastIfNeeded(dst->dtype, ScalarOperand(k, arg))),
      use_fallback);
}

// non_max_suppression_select(boxes, scores, max_output, iou_threshold, score_threshold)
// {center_point_box} -> (rows [batch * classes * boxes, 3], count). For each (batch, class),
// the boxes above the score threshold are first listed from the rows' next free position by
// rank (higher score first, lower index on ties, as the reference's stable sort); the greedy
// pass then compacts that list in place, keeping a box unless it overlaps a kept one by more
// than the IoU threshold, until max_output are kept. A (batch, class) never needs more rows
// than it has boxes, so the list always fits.
absl::StatusOr<Stmt> NonMaxSuppressionSelectBody(const KernelContext& k) {
  if (k.outs.size() != 2) return absl::InternalError("non_max_suppression_select: 2 results");
  const Buffer &boxes = k.inputs[0], &scores = k.inputs[1], &rows = k.outs[0];
  bool center = op::GetIntAttr(k.call.attrs, "center_point_box", 0) != 0;
  DataType f64 = DataType::Float(64);
  PrimExpr batches = boxes->shape[0], classes = scores->shape[1], n = boxes->shape[1];
  Slots slots(kNmsSlots);
  Buffer thresholds = arith::MakeBuffer("thresholds", f64, {Int(kNmsThresholds)});
  Stmt read_params = ir::Seq({
      ReadOptionalScalar(k, 2, slots.buffer, kMaxKept, Int(0)),
      ReadOptionalScalar(k, 3, thresholds, kIou, DoubleImm(0)),
      ReadOptionalScalar(k, 4, thresholds, kScore, DoubleImm(0)),
  });
  PrimExpr max_kept = slots[kMaxKept];
  PrimExpr iou_threshold = arith::Load(thresholds, {Int(kIou)});
  PrimExpr has_score_threshold = Given(k, 4);
  PrimExpr b = arith::MakeVar("b"), c = arith::MakeVar("c");
  PrimExpr i = arith::MakeVar("i"), j = arith::MakeVar("j");
  auto score = [&](const PrimExpr& box) {
    return CastIfNeeded(f64, arith::Load(scores, {b, c, box}));
  };
  auto candidate = [&](const PrimExpr& box) {
    if (has_score_threshold->is_const_int(0)) return arith::IntImm(1, DataType::Bool());
    return Or(arith::Not(has_score_threshold),
              Gt(score(box), arith::Load(thresholds, {Int(kScore)})));
  };
  PrimExpr base = slots[kRows];
  auto listed = [&](const PrimExpr& pos) { return arith::Load(rows, {base + pos, Int(2)}); };

  // rows[base + rank(i), 2] = i for every candidate i.
  PrimExpr ahead =
      And(candidate(j), Or(Gt(score(j), score(i)), And(Eq(score(j), score(i)), Lt(j, i))));
  Stmt list = ir::IfThenElse(
      candidate(i),
      ir::Seq({slots.Set(kRank, Int(0)),
               Serial(j, n, ir::IfThenElse(ahead, slots.Add(kRank, Int(1)))),
               ir::Store(rows, {base + slots[kRank], Int(2)}, i), slots.Add(kCandidates, Int(1))}));
  // The box listed at position i is kept unless a kept one (at positions < kept <= i)
  // suppresses it.
  Corners box = ReadCorners(boxes, b, listed(i), center);
  Corners kept_box = ReadCorners(boxes, b, listed(j), center);
  PrimExpr kept = slots[kKept];
  Stmt check = ir::IfThenElse(And(Lt(j, kept), OverlapsAbove(kept_box, box, iou_threshold)),
                              slots.Set(kSuppressed, Int(1)));
  PrimExpr at = base + kept;
  Stmt keep = ir::IfThenElse(
      Eq(slots[kSuppressed], Int(0)),
      ir::Seq({ir::Store(rows, {at, Int(2)}, listed(i)), ir::Store(rows, {at, Int(0)}, b),
               ir::Store(rows, {at, Int(1)}, c), slots.Add(kKept, Int(1))}));
  Stmt select =
      ir::IfThenElse(And(Lt(i, slots[kCandidates]), Lt(kept, max_kept)),
                     ir::Seq({slots.Set(kSuppressed, Int(0)), Serial(j, i, check), keep}));
  Stmt per_class = ir::Seq({
      slots.Set(kCandidates, Int(0)),
      slots.Set(kKept, Int(0)),
      Serial(i, n, list),
      Serial(i, n, select),
      slots.Add(kRows, kept),
  });
  Stmt body = ir::Seq({read_params, slots.Set(kRows, Int(0)),
                       Serial(b, batches, Serial(c, classes, per_class)),
                       ir::Store(k.outs[1], {}, slots[kRows])});
  return ir::Allocate(slots.buffer, ir::Allocate(thresholds, body));
}

}  // namespace

void RegisterUniqueNmsKernelBuilders(KernelBuilderTable& table) {
  table["unique_select"] = UniqueSelectBody;
  table["non_max_suppression_select"] = NonMaxSuppressionSelectBody;
}

}  // namespace kiln::transform
