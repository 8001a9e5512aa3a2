// Image and scan operators: depth_to_space, space_to_depth, cum_sum, reverse_sequence and
// resize. The definitions follow the reference kernels in interp/image.cc and
// interp/image_index.cc; tuple-result ops (top_k, unique) are not kernels. Sampling at
// run-time positions (grid_sample, roi_align, max_unpool) is in legalize_image_sampling.cc.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {

void RegisterImageKernelBuilders(KernelBuilderTable& table);
void RegisterImageSamplingKernelBuilders(KernelBuilderTable& table);  // legalize_image_sampling.cc

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

PrimExpr Int(int64_t v) { return arith::IntImm(v); }
PrimExpr F64(double v) { return arith::FloatImm(v, DataType::Float(64)); }
PrimExpr ToF64(PrimExpr v) {
  return v->dtype == DataType::Float(64) ? v : arith::Cast(DataType::Float(64), v);
}
PrimExpr Cmp(ExprKind kind, PrimExpr a, PrimExpr b) { return arith::Binary(kind, a, b); }
PrimExpr And(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kAnd, a, b); }
PrimExpr Or(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kOr, a, b); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }
PrimExpr Clamp(PrimExpr v, PrimExpr lo, PrimExpr hi) { return arith::Min(arith::Max(v, lo), hi); }

// ---- depth_to_space, space_to_depth ----------------------------------------------------

// out[n, c, h*b + i, w*b + j] = x[n, channel(c, i, j), h, w]; DCR puts the block offset
// outermost in the channel, CRD innermost.
Stmt DepthToSpaceBody(const KernelContext& k) {
  int64_t b = op::GetIntAttr(k.call.attrs, "blocksize", 1);
  bool crd = op::GetStringAttr(k.call.attrs, "mode", "DCR") == "CRD";
  PrimExpr bb = Int(b);
  PrimExpr c_out = k.out->shape[1];
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr i = arith::FloorMod(idx[2], bb), j = arith::FloorMod(idx[3], bb);
    PrimExpr c = crd ? idx[1] * Int(b * b) + i * bb + j : (i * bb + j) * c_out + idx[1];
    return arith::Load(k.inputs[0], {idx[0], k.analyzer.Simplify(c), arith::FloorDiv(idx[2], bb),
                                     arith::FloorDiv(idx[3], bb)});
  });
}

// out[n, (i*b + j)*C + c, h, w] = x[n, c, h*b + i, w*b + j].
Stmt SpaceToDepthBody(const KernelContext& k) {
  int64_t b = op::GetIntAttr(k.call.attrs, "blocksize", 1);
  PrimExpr bb = Int(b);
  PrimExpr c_in = k.inputs[0]->shape[1];
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr block = arith::FloorDiv(idx[1], c_in), c = arith::FloorMod(idx[1], c_in);
    PrimExpr i = arith::FloorDiv(block, bb), j = arith::FloorMod(block, bb);
    return arith::Load(k.inputs[0], {idx[0], c, idx[2] * bb + i, idx[3] * bb + j});
  });
}

// ---- cum_sum ---------------------------------------------------------------------------

// Running sums along one axis, one line at a time in a 1-element scratch accumulator;
// floats add in double, integers in their own type, as the reference does.
Stmt CumSumAlong(const KernelContext& k, int64_t axis) {
  const Buffer& x = k.inputs[0];
  bool exclusive = op::GetIntAttr(k.call.attrs, "exclusive", 0) != 0;
  bool reverse = op::GetIntAttr(k.call.attrs, "reverse", 0) != 0;
  DataType acc_t = x->dtype.is_float() ? DataType::Float(64) : x->dtype;
  Buffer acc = arith::MakeBuffer("acc", acc_t, {Int(1)});
  PrimExpr n = x->shape[axis];
  std::vector<PrimExpr> outer_shape = x->shape;
  outer_shape[axis] = Int(1);
  auto cast_to = [](DataType t, PrimExpr v) { return v->dtype == t ? v : arith::Cast(t, v); };
  return LoopNest(outer_shape, "o", [&](const Indices& outer) {
    PrimExpr i = arith::MakeVar("t");
    Indices at = outer;
    at[axis] = reverse ? k.analyzer.Simplify(n - Int(1) - i) : i;
    PrimExpr sum = arith::Load(acc, {Int(0)});
    PrimExpr added = sum + cast_to(acc_t, arith::Load(x, at));
    Stmt store_sum = ir::Store(acc, {Int(0)}, added);
    std::vector<Stmt> step;
    if (exclusive) step.push_back(ir::Store(k.out, at, cast_to(x->dtype, sum)));
    step.push_back(store_sum);
    if (!exclusive)
      step.push_back(ir::Store(k.out, at, cast_to(x->dtype, arith::Load(acc, {Int(0)}))));
    Stmt loop = ir::For(i, Int(0), n, ir::ForKind::kSerial, ir::Seq(step));
    return ir::Allocate(acc, ir::Seq({ir::Store(acc, {Int(0)}, Zero(acc_t)), loop}));
  });
}

// A constant axis gives one loop nest; an axis read at run time gives one nest per axis of
// the (known) rank, of which the one the axis names runs. An axis out of range writes
// nothing (the reference reports it as an error).
absl::StatusOr<Stmt> CumSumBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  int64_t rank = x->shape.size();
  if (x->dtype.code == DataType::kBool) {
    return absl::UnimplementedError("op cum_sum: bool tensors are not compiled");
  }
  auto axes = IntsOperand(k.call, 1);
  if (axes && axes->size() == 1 && (*axes)[0]->kind == ExprKind::kIntImm) {
    int64_t axis = (*axes)[0]->int_value;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("op cum_sum: axis ", (*axes)[0]->int_value,
                                                     " out of range for rank ", rank));
    }
    return CumSumAlong(k, axis);
  }
  const Buffer* axis_buf = OptionalInput(k, 1);
  if (axes || !axis_buf || rank == 0) return NotConstant(k.call, 1, "axis");
  PrimExpr axis = ScalarOperand(k, 1);
  if (axis->dtype != DataType::Int()) axis = arith::Cast(DataType::Int(), axis);
  std::vector<Stmt> cases;
  for (int64_t a = 0; a < rank; ++a) {
    PrimExpr named = Or(Cmp(ExprKind::kEQ, axis, Int(a)), Cmp(ExprKind::kEQ, axis, Int(a - rank)));
    cases.push_back(ir::IfThenElse(named, CumSumAlong(k, a)));
  }
  return ir::Seq(cases);
}

// ---- reverse_sequence ------------------------------------------------------------------

// Reverses the first sequence_lens[b] steps along time_axis of each batch entry b; a length
// outside [0, steps] fails the call, as in the reference.
Stmt ReverseSequenceBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  const Buffer& lens = k.inputs[1];
  int64_t batch_axis = op::GetIntAttr(k.call.attrs, "batch_axis", 1);
  int64_t time_axis = op::GetIntAttr(k.call.attrs, "time_axis", 0);
  PrimExpr steps = x->shape[time_axis];
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr len = CheckedSequenceLength(k, 1, arith::Load(lens, {idx[batch_axis]}), steps);
    PrimExpr t = idx[time_axis];
    Indices at = idx;
    at[time_axis] = arith::Select(Cmp(ExprKind::kLT, t, len), len - Int(1) - t, t);
    return arith::Load(x, at);
  });
}

// ---- resize ----------------------------------------------------------------------------

// One input index that contributes to an output element along one axis, with its weight
// (null: weight 1).
struct Tap {
  PrimExpr index;
  PrimExpr weight;
};

// How output coordinate i samples one axis: its taps, and (tf_crop_and_resize only) when
// it falls outside the crop.
struct AxisSample {
  std::vector<Tap> taps;
  PrimExpr outside;
};

struct ResizeParams {
  std::string mode, transform, nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// The float values of constant call.args[i], or nullopt.
std::optional<std::vector<double>> FloatsOperand(const ir::ExprNode& call, size_t i) {
  if (i >= call.args.size()) return std::nullopt;
  const ir::ExprNode& arg = *call.args[i];
  if (arg.kind != ir::ExprKind::kConstant) return std::nullopt;
  std::vector<double> values;
  for (int64_t j = 0; j < arg.data->num_elements(); ++j) values.push_back(arg.data->GetDouble(j));
  return values;
}

PrimExpr Math(const std::string& fn, PrimExpr x) { return arith::Call(x->dtype, fn, {x}); }

// The source coordinate of output coordinate x (as the reference's SourceCoordinate).
PrimExpr SourceCoordinate(const ResizeParams& p, PrimExpr x, PrimExpr scale, PrimExpr in,
                          PrimExpr out_len, PrimExpr roi_lo, PrimExpr roi_hi) {
  const std::string& t = p.transform;
  PrimExpr len_is_1 = Cmp(ExprKind::kEQ, out_len, F64(1));
  if (t == "align_corners") {
    return arith::Select(len_is_1, F64(0), Div(x * (in - F64(1)), out_len - F64(1)));
  }
  if (t == "asymmetric") return Div(x, scale);
  if (t == "tf_half_pixel_for_nn") return Div(x + F64(0.5), scale);
  if (t == "pytorch_half_pixel") {
    return arith::Select(len_is_1, F64(-0.5), Div(x + F64(0.5), scale) - F64(0.5));
  }
  if (t == "tf_crop_and_resize") {
    PrimExpr start = roi_lo * (in - F64(1));
    PrimExpr one = Div((roi_hi - roi_lo) * (in - F64(1)), F64(2)) + start;
    PrimExpr many = Div(x * (roi_hi - roi_lo) * (in - F64(1)), out_len - F64(1)) + start;
    return arith::Select(len_is_1, one, many);
  }
  return Div(x + F64(0.5), scale) - F64(0.5);  // half_pixel
}

// Taps of one axis at source coordinate x_ori, as the reference's SampleAxis and
// Coefficients.
AxisSample SampleAxis(const ResizeParams& p, PrimExpr x_ori, PrimExpr scale, PrimExpr in_i) {
  AxisSample s;
  PrimExpr in = ToF64(in_i);
  if (p.transform == "tf_crop_and_resize") {
    s.outside = Or(Cmp(ExprKind::kLT, x_ori, F64(0)), Cmp(ExprKind::kGT, x_ori, in - F64(1)));
  }
  PrimExpr fl = Math("floor", x_ori);
  PrimExpr whole = Cmp(ExprKind::kEQ, x_ori, fl);
  PrimExpr base = arith::Select(whole, fl - F64(1), fl);
  PrimExpr ratio = arith::Select(whole, F64(1), x_ori - fl);
  std::vector<PrimExpr> coeffs;
  if (p.mode == "cubic") {
    PrimExpr a = F64(p.cubic_a), r = ratio, q = F64(1) - ratio;
    PrimExpr r1 = r + F64(1), q1 = q + F64(1);
    coeffs = {((a * r1 - F64(5) * a) * r1 + F64(8) * a) * r1 - F64(4) * a,
              ((a + F64(2)) * r - (a + F64(3))) * r * r + F64(1),
              ((a + F64(2)) * q - (a + F64(3))) * q * q + F64(1),
              ((a * q1 - F64(5) * a) * q1 + F64(8) * a) * q1 - F64(4) * a};
  } else if (p.mode == "linear") {
    coeffs = {F64(1) - ratio, ratio};
  } else {
    const std::string& m = p.nearest_mode;
    PrimExpr ceil;
    if (m == "round_prefer_ceil") {
      ceil = Cmp(ExprKind::kGE, ratio, F64(0.5));
    } else if (m == "floor") {
      ceil = Cmp(ExprKind::kEQ, ratio, F64(1));
    } else if (m == "ceil") {
      ceil = nullptr;
    } else if (m == "simple") {
      ceil = Or(Cmp(ExprKind::kEQ, ratio, F64(1)), Cmp(ExprKind::kLT, scale, F64(1)));
    } else {
      ceil = Cmp(ExprKind::kGT, ratio, F64(0.5));  // round_prefer_floor (ratio 1 included)
    }
    PrimExpr idx = arith::Cast(DataType::Int(), base) + Int(1);
    if (ceil) idx = arith::Select(ceil, idx, idx - Int(1));
    s.taps.push_back({Clamp(idx, Int(0), in_i - Int(1)), nullptr});
    return s;
  }
  PrimExpr first = arith::Cast(DataType::Int(), base) - Int(coeffs.size() == 4 ? 1 : 0);
  std::vector<PrimExpr> raw;
  PrimExpr sum = F64(0);
  for (size_t i = 0; i < coeffs.size(); ++i) {
    PrimExpr idx = first + Int(i);
    PrimExpr w = coeffs[i];
    if (p.exclude_outside) {
      PrimExpr inside = And(Cmp(ExprKind::kGE, idx, Int(0)), Cmp(ExprKind::kLT, idx, in_i));
      w = arith::Select(inside, w, F64(0));
      sum = sum + w;
    }
    raw.push_back(w);
    s.taps.push_back({Clamp(idx, Int(0), in_i - Int(1)), nullptr});
  }
  for (size_t i = 0; i < raw.size(); ++i) {
    s.taps[i].weight = p.exclude_outside ? Div(raw[i], sum) : raw[i];
  }
  return s;
}

// Whether axis d maps output coordinate i to input coordinate i exactly: a constant scale 1
// under a transformation that keeps whole coordinates whole.
bool IdentityAxis(const ResizeParams& p, const std::optional<double>& scale) {
  if (!scale || *scale != 1.0) return false;
  const std::string& t = p.transform;
  return t == "half_pixel" || t == "asymmetric" || t == "align_corners" ||
         t == "pytorch_half_pixel";
}

// The `count` values of operand i as doubles: constants where the operand is one, else
// loads from its input buffer at run time; nullopt when it is neither.
std::optional<std::vector<PrimExpr>> FloatValues(const KernelContext& k, size_t i, size_t count) {
  std::vector<PrimExpr> values;
  if (k.call.args[i]->kind == ir::ExprKind::kShapeExpr) {  // sizes read at run time
    if (k.call.args[i]->values.size() != count) return std::nullopt;
    for (const PrimExpr& v : k.call.args[i]->values) values.push_back(ToF64(v));
    return values;
  }
  if (auto constant = FloatsOperand(k.call, i)) {
    if (constant->size() != count) return std::nullopt;
    for (double v : *constant) values.push_back(F64(v));
    return values;
  }
  const Buffer* buf = OptionalInput(k, i);
  if (!buf || (*buf)->shape.size() != 1 || !k.analyzer.ProveEqual((*buf)->shape[0], Int(count))) {
    return std::nullopt;
  }
  for (size_t j = 0; j < count; ++j) values.push_back(ToF64(arith::Load(*buf, {Int(j)})));
  return values;
}

// Whether operand i is omitted or has no elements.
bool EmptyOperand(const KernelContext& k, size_t i) {
  if (ir::IsNone(k.call.args[i])) return true;
  if (auto constant = FloatsOperand(k.call, i)) return constant->empty();
  const Buffer* buf = OptionalInput(k, i);
  return buf && (*buf)->shape.size() == 1 && (*buf)->shape[0]->is_const_int(0);
}

// Scales, sizes and roi may be constants or tensors read at run time; the output shape is
// known either way (struct-info inference or the model's declared output).
absl::StatusOr<Stmt> ResizeBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  size_t rank = x->shape.size();
  if (k.call.args.size() != 4) return absl::UnimplementedError("op resize: expects 4 operands");
  ResizeParams p;
  p.mode = op::GetStringAttr(k.call.attrs, "mode", "nearest");
  p.transform = op::GetStringAttr(k.call.attrs, "coordinate_transformation_mode", "half_pixel");
  p.nearest_mode = op::GetStringAttr(k.call.attrs, "nearest_mode", "round_prefer_floor");
  p.cubic_a = op::GetFloatAttr(k.call.attrs, "cubic_coeff_a", -0.75);
  p.exclude_outside = op::GetIntAttr(k.call.attrs, "exclude_outside", 0) != 0;
  p.extrapolation = op::GetFloatAttr(k.call.attrs, "extrapolation_value", 0);
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
    return absl::UnimplementedError("op resize: unknown mode " + p.mode);
  }
  std::vector<PrimExpr> roi(rank, F64(0));
  roi.resize(2 * rank, F64(1));
  if (!EmptyOperand(k, 1)) {
    auto values = FloatValues(k, 1, 2 * rank);
    if (!values) return NotConstant(k.call, 1, "roi of 2 * rank entries");
    roi = *values;
  }
  // Sizes may come with scales read at run time (the shape they give): scales decide then.
  bool by_sizes = EmptyOperand(k, 2);
  size_t given_at = by_sizes ? 3 : 2;
  auto given = FloatValues(k, given_at, rank);
  if (!given) return NotConstant(k.call, given_at, "a tensor of rank entries of scales or sizes");
  auto given_consts = FloatsOperand(k.call, given_at);
  for (const PrimExpr& d : x->shape) {
    if (d->is_const_int(0)) return absl::UnimplementedError("op resize: empty input");
  }
  std::vector<std::optional<double>> const_scale(rank);
  std::vector<PrimExpr> scale(rank), out_len(rank);
  for (size_t d = 0; d < rank; ++d) {
    PrimExpr in = ToF64(x->shape[d]);
    bool in_const = x->shape[d]->kind == ExprKind::kIntImm;
    if (by_sizes) {
      out_len[d] = (*given)[d];
      scale[d] = Div(out_len[d], in);
      if (in_const && given_consts) {
        const_scale[d] = (*given_consts)[d] / static_cast<double>(x->shape[d]->int_value);
        scale[d] = F64(*const_scale[d]);
      }
    } else {
      if (given_consts) const_scale[d] = (*given_consts)[d];
      scale[d] = (*given)[d];
      out_len[d] = scale[d] * in;
    }
  }
  DataType out_t = k.out->dtype;
  return Compute(k.out, [&](const Indices& idx) {
    std::vector<AxisSample> samples(rank);
    PrimExpr outside;
    for (size_t d = 0; d < rank; ++d) {
      if (IdentityAxis(p, const_scale[d])) {
        samples[d].taps.push_back({idx[d], nullptr});
        continue;
      }
      PrimExpr x_ori = SourceCoordinate(p, ToF64(idx[d]), scale[d], ToF64(x->shape[d]), out_len[d],
                                        roi[d], roi[rank + d]);
      samples[d] = SampleAxis(p, x_ori, scale[d], x->shape[d]);
      if (samples[d].outside)
        outside = outside ? Or(outside, samples[d].outside) : samples[d].outside;
    }
    // Sum over the product of the axes' taps, weights multiplied in axis order.
    PrimExpr sum;
    Indices at(rank);
    std::function<void(size_t, PrimExpr)> visit = [&](size_t d, PrimExpr weight) {
      if (d == rank) {
        PrimExpr v = ToF64(arith::Load(x, at));
        PrimExpr term = weight ? weight * v : v;
        sum = sum ? sum + term : term;
        return;
      }
      for (const Tap& t : samples[d].taps) {
        at[d] = t.index;
        PrimExpr w = !t.weight ? weight : (weight ? weight * t.weight : t.weight);
        visit(d + 1, w);
      }
    };
    visit(0, nullptr);
    if (outside) sum = arith::Select(outside, F64(p.extrapolation), sum);
    return out_t == DataType::Float(64) ? sum : arith::Cast(out_t, sum);
  });
}

}  // namespace

void RegisterImageKernelBuilders(KernelBuilderTable& table) {
  auto always = [](Stmt (*body)(const KernelContext&)) {
    return [body](const KernelContext& k) -> absl::StatusOr<Stmt> { return body(k); };
  };
  table["depth_to_space"] = always(DepthToSpaceBody);
  table["space_to_depth"] = always(SpaceToDepthBody);
  table["cum_sum"] = CumSumBody;
  table["reverse_sequence"] = always(ReverseSequenceBody);
  table["resize"] = ResizeBody;
  RegisterImageSamplingKernelBuilders(table);
}

}  // namespace kiln::transform
