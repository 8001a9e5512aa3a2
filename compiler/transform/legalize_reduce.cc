// Reductions and normalizations. Each output group (the input positions that reduce to one
// value) gets its statistics in kernel-local 1-element scratch buffers, then stores. The
// definitions follow the reference kernels in interp/reduce.cc, interp/nn.cc and
// interp/nn_norm.cc.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/reduce_internal.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

// Wraps a statement of the full input position in loops over one group's reduced dims.
using OverGroup = std::function<Stmt(const std::function<Stmt(const Indices&)>&)>;

// For each group of `shape` (one per position of the non-reduced dims; reduced dims are
// looped over with extent 1, so read at 0): body(kept position, loops over the group).
Stmt ForEachGroup(const std::vector<PrimExpr>& shape, const std::vector<bool>& reduced,
                  const std::function<Stmt(const Indices&, const OverGroup&)>& body) {
  std::vector<PrimExpr> outer_shape = shape, inner_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) continue;
    outer_shape[d] = arith::IntImm(1);
    inner_shape.push_back(shape[d]);
  }
  return LoopNest(outer_shape, "o", [&](const Indices& outer) {
    OverGroup over = [&](const std::function<Stmt(const Indices&)>& f) {
      return LoopNest(inner_shape, "r", [&](const Indices& inner) {
        Indices at = outer;
        size_t r = 0;
        for (size_t d = 0; d < at.size(); ++d) {
          if (reduced[d]) at[d] = inner[r++];
        }
        return f(at);
      });
    };
    return body(outer, over);
  });
}

// ForEachGroup for axes known only at run time: `reduced[d]` is a condition, so each dim is
// looped over both in the group's position (extent 1 where reduced) and within the group
// (extent 1 where kept). The kept position is the keepdims output position.
Stmt ForEachRuntimeGroup(const std::vector<PrimExpr>& shape, const std::vector<PrimExpr>& reduced,
                         const std::function<Stmt(const Indices&, const OverGroup&)>& body) {
  std::vector<PrimExpr> outer_shape, inner_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    outer_shape.push_back(arith::Select(reduced[d], arith::IntImm(1), shape[d]));
    inner_shape.push_back(arith::Select(reduced[d], shape[d], arith::IntImm(1)));
  }
  return LoopNest(outer_shape, "o", [&](const Indices& outer) {
    OverGroup over = [&](const std::function<Stmt(const Indices&)>& f) {
      return LoopNest(inner_shape, "r", [&](const Indices& inner) {
        Indices at;
        for (size_t d = 0; d < shape.size(); ++d) at.push_back(outer[d] + inner[d]);
        return f(at);
      });
    };
    return body(outer, over);
  });
}

// The number of elements in one group, as a value of type t.
PrimExpr GroupSize(const std::vector<PrimExpr>& shape, const std::vector<bool>& reduced,
                   DataType t) {
  PrimExpr n = arith::IntImm(1);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) n = n * shape[d];
  }
  return arith::Cast(t, n);
}

// The output position of a group: its kept position, without the reduced dims unless kept.
Indices OutIndex(const Indices& outer, const std::vector<bool>& reduced, bool keepdims) {
  if (keepdims) return outer;
  Indices out;
  for (size_t d = 0; d < outer.size(); ++d) {
    if (!reduced[d]) out.push_back(outer[d]);
  }
  return out;
}

// The type running values of type t are kept in: f16 accumulates in f32, as it computes.
DataType AccumulatorType(DataType t) {
  return t.is_float() && t.bits == 16 ? DataType::Float(32) : t;
}

// A 1-element scratch buffer holding one running value.
struct Scalar {
  Scalar(const std::string& name, DataType t)
      : buf(arith::MakeBuffer(name, AccumulatorType(t), {arith::IntImm(1)})) {}
  PrimExpr get() const { return arith::Load(buf, {arith::IntImm(0)}); }
  Stmt set(PrimExpr v) const { return ir::Store(buf, {arith::IntImm(0)}, v); }
  Buffer buf;
};

Stmt AllocateAll(const std::vector<const Scalar*>& scalars, Stmt body) {
  for (const Scalar* s : scalars) body = ir::Allocate(s->buf, body);
  return body;
}

// A cast only where the type changes.
PrimExpr CastTo(DataType t, PrimExpr v) { return v->dtype == t ? v : arith::Cast(t, v); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }
PrimExpr Math(const std::string& fn, PrimExpr x) { return arith::Call(x->dtype, fn, {x}); }
PrimExpr Float(double v, DataType t) { return arith::FloatImm(v, t); }

// The smallest or largest value of t: where max or min reductions start.
PrimExpr Extreme(DataType t, bool lowest) {
  if (t.is_float()) return Float(lowest ? -INFINITY : INFINITY, t);
  if (t.code == DataType::kUInt) {
    return lowest ? arith::IntImm(0, t) : arith::IntImm(-1, t);  // all bits set
  }
  int64_t hi =
      t.bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits - 1)) - 1;
  return arith::IntImm(lowest ? -hi - 1 : hi, t);
}

// ---- reduce_* ----------------------------------------------------------------------------

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// Integer inputs reduce in their own type where the reference stays in integers; the others
// (mean, l2, logs) go through double and truncate, as the reference does.
DataType AccType(ReduceKind kind, DataType t) {
  if (t.is_float()) return t;
  switch (kind) {
    case ReduceKind::kMean:
    case ReduceKind::kL2:
    case ReduceKind::kLogSum:
    case ReduceKind::kLogSumExp:
      return DataType::Float(64);
    default:
      return t;
  }
}

PrimExpr Abs(PrimExpr x) {
  if (x->dtype.is_float()) return Math("fabs", x);
  return arith::Select(arith::Binary(ExprKind::kLT, x, Zero(x->dtype)), Zero(x->dtype) - x, x);
}

PrimExpr One(DataType t) { return t.is_float() ? Float(1, t) : arith::IntImm(1, t); }

PrimExpr Init(ReduceKind kind, DataType t) {
  if (kind == ReduceKind::kProd) return One(t);
  if (kind == ReduceKind::kMax) return Extreme(t, true);
  if (kind == ReduceKind::kMin) return Extreme(t, false);
  return Zero(t);
}

PrimExpr Update(ReduceKind kind, PrimExpr acc, PrimExpr x) {
  switch (kind) {
    case ReduceKind::kMax:
      return arith::Max(acc, x);  // codegen's float max propagates NaN, as numpy does
    case ReduceKind::kMin:
      return arith::Min(acc, x);
    case ReduceKind::kProd:
      return acc * x;
    case ReduceKind::kL1:
      return acc + Abs(x);
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare:
      return acc + x * x;
    default:
      return acc + x;
  }
}

PrimExpr Finish(ReduceKind kind, PrimExpr acc, PrimExpr count) {
  switch (kind) {
    case ReduceKind::kMean:
      return Div(acc, count);
    case ReduceKind::kL2:
      return Math("sqrt", acc);
    case ReduceKind::kLogSum:
      return Math("log", acc);
    default:
      return acc;
  }
}

// The axes: the attribute's plus those of a constant axes operand.
absl::StatusOr<std::vector<int64_t>> ReduceAxes(const KernelContext& k) {
  std::vector<int64_t> axes = op::GetIntsAttr(k.call.attrs, "axes");
  if (k.call.args.size() < 2 || ir::IsNone(k.call.args[1])) return axes;
  const ir::Expr& arg = k.call.args[1];
  if (arg->kind != ir::ExprKind::kConstant) {
    return absl::UnimplementedError(
        absl::StrCat("op ", k.call.name, ": axes known only at run time are not compiled yet"));
  }
  for (int64_t i = 0; i < arg->data->num_elements(); ++i) axes.push_back(arg->data->GetInt(i));
  return axes;
}

// log(sum(exp(x - max))) + max; an infinite max is the result itself, as in the reference.
Stmt LogSumExpGroup(const Buffer& x, const OverGroup& over, const Scalar& max, const Scalar& acc) {
  DataType t = acc.buf->dtype;
  auto in = [&](const Indices& at) { return CastTo(t, arith::Load(x, at)); };
  PrimExpr is_inf = arith::Binary(ExprKind::kEQ, Math("fabs", max.get()), Float(INFINITY, t));
  return ir::Seq({
      max.set(Float(-INFINITY, t)),
      over([&](const Indices& at) { return max.set(arith::Max(max.get(), in(at))); }),
      acc.set(Zero(t)),
      over([&](const Indices& at) { return acc.set(acc.get() + Math("exp", in(at)-max.get())); }),
      acc.set(arith::Select(is_inf, max.get(), max.get() + Math("log", acc.get()))),
  });
}

// The groups of a reduction and where each one's result goes: loops over the groups, the
// output position of a group, and the number of elements in one.
struct Groups {
  std::function<Stmt(const std::function<Stmt(const Indices&, const OverGroup&)>&)> for_each;
  std::function<Indices(const Indices&)> out_index;
  PrimExpr count;  // an integer
};

// Axes in the attribute or a constant operand: the reduced dims are known.
absl::StatusOr<Groups> KnownGroups(const KernelContext& k, const std::vector<int64_t>& axes) {
  const Buffer& x = k.inputs[0];
  int64_t rank = static_cast<int64_t>(x->shape.size());
  KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced, op::ReducedAxes(k.call, axes, rank));
  bool keepdims = op::GetIntAttr(k.call.attrs, "keepdims", 1) != 0;
  PrimExpr count = arith::IntImm(1);
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) count = count * x->shape[d];
  }
  return Groups{
      [x, reduced](const auto& body) { return ForEachGroup(x->shape, reduced, body); },
      [reduced, keepdims](const Indices& outer) { return OutIndex(outer, reduced, keepdims); },
      count};
}

// Axes read at run time (a ShapeExpr of symbolic values, checked by the host): the result
// keeps the reduced dims (inference gives it the keepdims shape).
absl::StatusOr<Groups> RuntimeGroups(const KernelContext& k, const std::vector<PrimExpr>& axes) {
  const Buffer& x = k.inputs[0];
  if (op::GetIntAttr(k.call.attrs, "keepdims", 1) == 0) {
    return absl::UnimplementedError(absl::StrCat(
        "op ", k.call.name, ": axes read at run time are compiled only with keepdims"));
  }
  std::vector<PrimExpr> reduced = op::NamedPositions(axes, x->shape.size());
  PrimExpr count = arith::IntImm(1);
  for (size_t d = 0; d < reduced.size(); ++d) {
    count = count * arith::Select(reduced[d], x->shape[d], arith::IntImm(1));
  }
  return Groups{
      [x, reduced](const auto& body) { return ForEachRuntimeGroup(x->shape, reduced, body); },
      [](const Indices& outer) { return outer; }, count};
}

absl::StatusOr<Stmt> ReduceBody(ReduceKind kind, const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  if (!x->dtype.is_float() && !x->dtype.is_int()) {
    return absl::UnimplementedError(
        absl::StrCat("op ", k.call.name, ": dtype ", x->dtype.ToString(), " is not compiled"));
  }
  absl::StatusOr<Groups> found;
  if (k.call.args.size() == 2 && k.call.args[1]->kind == ir::ExprKind::kShapeExpr) {
    found = RuntimeGroups(k, k.call.args[1]->values);
  } else {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(k));
    // With no axes and noop_with_empty_axes, the input itself (not, say, |x| for reduce_l2).
    if (axes.empty() && op::GetIntAttr(k.call.attrs, "noop_with_empty_axes", 0) != 0) {
      return Compute(y, [&](const Indices& idx) { return arith::Load(x, idx); });
    }
    found = KnownGroups(k, axes);
  }
  KILN_ASSIGN_OR_RETURN(Groups groups, std::move(found));
  DataType t = AccType(kind, x->dtype);
  Scalar acc("acc", t), max("max", t);
  PrimExpr count = arith::Cast(t, groups.count);
  return groups.for_each([&](const Indices& outer, const OverGroup& over) {
    Stmt stats;
    if (kind == ReduceKind::kLogSumExp) {
      stats = LogSumExpGroup(x, over, max, acc);
    } else {
      stats = ir::Seq({acc.set(Init(kind, t)), over([&](const Indices& at) {
                         PrimExpr v = CastTo(t, arith::Load(x, at));
                         return acc.set(Update(kind, acc.get(), v));
                       })});
    }
    Stmt store =
        ir::Store(y, groups.out_index(outer), CastTo(y->dtype, Finish(kind, acc.get(), count)));
    Stmt body = AllocateAll({&acc}, ir::Seq({stats, store}));
    return kind == ReduceKind::kLogSumExp ? AllocateAll({&max}, body) : body;
  });
}

// ---- arg_max, arg_min, hardmax -----------------------------------------------------------

// The position along `axis` of the group's first extreme (the last one with `last`), into
// `best`; comparisons as the reference's: NaN compares equal to everything.
Stmt ArgExtreme(const Buffer& x, int64_t axis, const Indices& outer, bool is_max, bool last,
                const Scalar& best) {
  PrimExpr i = arith::MakeVar("k");
  Indices at = outer, at_best = outer;
  at[axis] = i;
  at_best[axis] = best.get();
  PrimExpr xi = arith::Load(x, at), xb = arith::Load(x, at_best);
  PrimExpr wins =
      is_max ? arith::Binary(ExprKind::kLT, xb, xi) : arith::Binary(ExprKind::kLT, xi, xb);
  PrimExpr loses =
      is_max ? arith::Binary(ExprKind::kLT, xi, xb) : arith::Binary(ExprKind::kLT, xb, xi);
  PrimExpr take = last ? arith::Not(loses) : wins;
  return ir::Seq({best.set(arith::IntImm(0)),
                  ir::For(i, arith::IntImm(1), x->shape[axis] - arith::IntImm(1),
                          ir::ForKind::kSerial, ir::IfThenElse(take, best.set(i)))});
}

absl::StatusOr<int64_t> Axis(const KernelContext& k, int64_t fallback) {
  return op::NormalizeAxis(k.call, op::GetIntAttr(k.call.attrs, "axis", fallback),
                           static_cast<int64_t>(k.inputs[0]->shape.size()));
}

absl::StatusOr<Stmt> ArgBody(bool is_max, const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(k, 0));
  bool last = op::GetIntAttr(k.call.attrs, "select_last_index", 0) != 0;
  bool keepdims = op::GetIntAttr(k.call.attrs, "keepdims", 1) != 0;
  std::vector<bool> reduced(x->shape.size(), false);
  reduced[axis] = true;
  Scalar best("best", DataType::Int());
  return ForEachGroup(x->shape, reduced, [&](const Indices& outer, const OverGroup&) {
    Stmt store = ir::Store(y, OutIndex(outer, reduced, keepdims), CastTo(y->dtype, best.get()));
    return ir::Allocate(best.buf, ir::Seq({ArgExtreme(x, axis, outer, is_max, last, best), store}));
  });
}

// 1 at the first maximum along the axis, 0 elsewhere.
absl::StatusOr<Stmt> HardmaxBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(k, -1));
  std::vector<bool> reduced(x->shape.size(), false);
  reduced[axis] = true;
  Scalar best("best", DataType::Int());
  DataType t = y->dtype;
  return ForEachGroup(x->shape, reduced, [&](const Indices& outer, const OverGroup& over) {
    Stmt write = over([&](const Indices& at) {
      PrimExpr hit = arith::Binary(ExprKind::kEQ, at[axis], best.get());
      return ir::Store(y, at, arith::Select(hit, One(t), Zero(t)));
    });
    return ir::Allocate(best.buf, ir::Seq({ArgExtreme(x, axis, outer, true, false, best), write}));
  });
}

// ---- log_softmax and normalizations ------------------------------------------------------

// y = x - max - log(sum(exp(x - max))) along the axis.
absl::StatusOr<Stmt> LogSoftmaxBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(k, -1));
  std::vector<bool> reduced(x->shape.size(), false);
  reduced[axis] = true;
  DataType t = x->dtype;
  Scalar max("max", t), sum("sum", t);
  return ForEachGroup(x->shape, reduced, [&](const Indices&, const OverGroup& over) {
    Stmt body = ir::Seq({
        max.set(Float(-INFINITY, t)),
        over([&](const Indices& at) { return max.set(arith::Max(max.get(), arith::Load(x, at))); }),
        sum.set(Zero(t)),
        over([&](const Indices& at) {
          return sum.set(sum.get() + Math("exp", arith::Load(x, at) - max.get()));
        }),
        over([&](const Indices& at) {
          return ir::Store(y, at, arith::Load(x, at) - max.get() - Math("log", sum.get()));
        }),
    });
    return AllocateAll({&max, &sum}, body);
  });
}

// Mean, then the population variance E[(x - mean)^2], of one group into `mean` and `var`.
Stmt Moments(const Buffer& x, const OverGroup& over, PrimExpr count, const Scalar& mean,
             const Scalar& var) {
  DataType t = mean.buf->dtype;
  return ir::Seq({
      mean.set(Zero(t)),
      over([&](const Indices& at) { return mean.set(mean.get() + CastTo(t, arith::Load(x, at))); }),
      mean.set(Div(mean.get(), CastTo(t, count))),
      var.set(Zero(var.buf->dtype)),
      over([&](const Indices& at) {
        PrimExpr d = CastTo(t, arith::Load(x, at)) - mean.get();
        return var.set(var.get() + d * d);
      }),
      var.set(Div(var.get(), CastTo(t, count))),
  });
}

// Normalizes each group of x over `reduced`: y = affine(at, (x - mean) / denom(var)).
Stmt NormalizeGroups(const KernelContext& k, const std::vector<bool>& reduced,
                     const std::function<PrimExpr(PrimExpr var)>& denom,
                     const std::function<PrimExpr(const Indices&, PrimExpr)>& affine) {
  const Buffer &x = k.inputs[0], &y = k.out;
  DataType t = AccumulatorType(x->dtype);
  Scalar mean("mean", t), var("var", t);
  PrimExpr count = GroupSize(x->shape, reduced, t);
  return ForEachGroup(x->shape, reduced, [&](const Indices&, const OverGroup& over) {
    Stmt normalize = over([&](const Indices& at) {
      PrimExpr v = Div(CastTo(t, arith::Load(x, at)) - mean.get(), denom(var.get()));
      return ir::Store(y, at, affine(at, v));
    });
    return AllocateAll({&mean, &var}, ir::Seq({Moments(x, over, count, mean, var), normalize}));
  });
}

absl::Status NeedFloat(const KernelContext& k) {
  if (k.inputs[0]->dtype.is_float()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("op ", k.call.name, ": only float is compiled"));
}

// Over dims [axis, rank); scale and bias broadcast to x.
absl::StatusOr<Stmt> LayerNormBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedFloat(k));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(k, -1));
  DataType t = k.inputs[0]->dtype;
  double eps = op::GetFloatAttr(k.call.attrs, "epsilon", 1e-5);
  std::vector<bool> reduced(k.inputs[0]->shape.size(), false);
  for (size_t d = axis; d < reduced.size(); ++d) reduced[d] = true;
  auto denom = [&](PrimExpr var) { return Math("sqrt", var + Float(eps, t)); };
  auto affine = [&](const Indices& at, PrimExpr v) {
    v = v * LoadBroadcast(k.inputs[1], at);
    return k.inputs.size() > 2 ? v + LoadBroadcast(k.inputs[2], at) : v;
  };
  return NormalizeGroups(k, reduced, denom, affine);
}

// layer_normalization's optional outputs: (mean, 1 / sqrt(var + epsilon)) of each group over
// dims [axis, rank), in the stash type (the outputs' type).
absl::StatusOr<Stmt> LayerNormStatsBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedFloat(k));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(k, -1));
  const Buffer& x = k.inputs[0];
  const Buffer &mean_out = k.outs[0], &inv_std_out = k.outs[1];
  DataType t = mean_out->dtype;
  double eps = op::GetFloatAttr(k.call.attrs, "epsilon", 1e-5);
  std::vector<bool> reduced(x->shape.size(), false);
  for (size_t d = axis; d < reduced.size(); ++d) reduced[d] = true;
  Scalar mean("mean", t), var("var", t);
  PrimExpr count = GroupSize(x->shape, reduced, mean.buf->dtype);
  // A group's kept position has its reduced dims at 0: the stats' position, as they are 1.
  return ForEachGroup(x->shape, reduced, [&](const Indices& outer, const OverGroup& over) {
    PrimExpr inv_std =
        Div(Float(1, var.buf->dtype), Math("sqrt", var.get() + Float(eps, var.buf->dtype)));
    Stmt store =
        ir::Seq({ir::Store(mean_out, outer, mean.get()), ir::Store(inv_std_out, outer, inv_std)});
    return AllocateAll({&mean, &var}, ir::Seq({Moments(x, over, count, mean, var), store}));
  });
}

// Per-channel parameters (dim 1) must be 1-D to be indexed by the channel.
absl::Status NeedChannelParams(const KernelContext& k, size_t count) {
  KILN_RETURN_IF_ERROR(NeedFloat(k));
  bool ok = k.inputs.size() == count && k.inputs[0]->shape.size() >= 2;
  for (size_t i = 1; ok && i < count; ++i) ok = k.inputs[i]->shape.size() == 1;
  if (ok) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat("op ", k.call.name, ": needs rank >= 2 input and 1-D channel parameters"));
}

PrimExpr Channel(const Buffer& p, const Indices& at) { return arith::Load(p, {at[1]}); }

// Statistics per [n, c] over the spatial dims.
absl::StatusOr<Stmt> InstanceNormBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedChannelParams(k, 3));
  DataType t = k.inputs[0]->dtype;
  double eps = op::GetFloatAttr(k.call.attrs, "epsilon", 1e-5);
  std::vector<bool> reduced(k.inputs[0]->shape.size(), true);
  reduced[0] = reduced[1] = false;
  auto denom = [&](PrimExpr var) { return Math("sqrt", var + Float(eps, t)); };
  auto affine = [&](const Indices& at, PrimExpr v) {
    return v * Channel(k.inputs[1], at) + Channel(k.inputs[2], at);
  };
  return NormalizeGroups(k, reduced, denom, affine);
}

// (x - mean) / (sqrt(var) + 1e-9) over `axes`, as ONNX's function body computes it.
absl::StatusOr<Stmt> MeanVarianceNormBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedFloat(k));
  DataType t = k.inputs[0]->dtype;
  int64_t rank = static_cast<int64_t>(k.inputs[0]->shape.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : op::GetIntsAttr(k.call.attrs, "axes")) {
    KILN_ASSIGN_OR_RETURN(int64_t a, op::NormalizeAxis(k.call, axis, rank));
    reduced[a] = true;
  }
  auto denom = [&](PrimExpr var) { return Math("sqrt", var) + Float(1e-9, t); };
  auto affine = [](const Indices&, PrimExpr v) { return v; };
  return NormalizeGroups(k, reduced, denom, affine);
}

// Inference form: given statistics, elementwise per channel.
absl::StatusOr<Stmt> BatchNormBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedChannelParams(k, 5));
  DataType t = k.inputs[0]->dtype;
  double eps = op::GetFloatAttr(k.call.attrs, "epsilon", 1e-5);
  return Compute(k.out, [&](const Indices& at) {
    PrimExpr v = Div(arith::Load(k.inputs[0], at) - Channel(k.inputs[3], at),
                     Math("sqrt", Channel(k.inputs[4], at) + Float(eps, t)));
    return v * Channel(k.inputs[1], at) + Channel(k.inputs[2], at);
  });
}

// Training form: statistics per channel over the batch and spatial dims normalize y, and
// update the running ones: running = given * momentum + batch statistic * (1 - momentum).
absl::StatusOr<Stmt> BatchNormTrainingBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedChannelParams(k, 5));
  if (k.outs.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("op ", k.call.name, ": expected 3 results"));
  }
  const Buffer& x = k.inputs[0];
  DataType t = AccumulatorType(x->dtype);
  double eps = op::GetFloatAttr(k.call.attrs, "epsilon", 1e-5);
  double momentum = op::GetFloatAttr(k.call.attrs, "momentum", 0.9);
  std::vector<bool> reduced(x->shape.size(), true);
  reduced[1] = false;
  Scalar mean("mean", t), var("var", t);
  PrimExpr count = GroupSize(x->shape, reduced, t);
  auto running = [&](const Buffer& out, const Buffer& given, PrimExpr c, const Scalar& stat) {
    PrimExpr v = CastTo(t, arith::Load(given, {c})) * Float(momentum, t) +
                 stat.get() * Float(1 - momentum, t);
    return ir::Store(out, {c}, v);
  };
  return ForEachGroup(x->shape, reduced, [&](const Indices& outer, const OverGroup& over) {
    Stmt normalize = over([&](const Indices& at) {
      PrimExpr v =
          Div(CastTo(t, arith::Load(x, at)) - mean.get(), Math("sqrt", var.get() + Float(eps, t)));
      return ir::Store(k.outs[0], at, v * Channel(k.inputs[1], at) + Channel(k.inputs[2], at));
    });
    Stmt update = ir::Seq({running(k.outs[1], k.inputs[3], outer[1], mean),
                           running(k.outs[2], k.inputs[4], outer[1], var)});
    return AllocateAll({&mean, &var},
                       ir::Seq({Moments(x, over, count, mean, var), normalize, update}));
  });
}

// y = x / (bias + alpha / size * sum of x^2 over the `size` neighbouring channels)^beta.
absl::StatusOr<Stmt> LrnBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(NeedFloat(k));
  const Buffer &x = k.inputs[0], &y = k.out;
  if (x->shape.size() < 2) return absl::UnimplementedError("op lrn: input must have rank >= 2");
  DataType t = x->dtype;
  double alpha = op::GetFloatAttr(k.call.attrs, "alpha", 1e-4);
  double beta = op::GetFloatAttr(k.call.attrs, "beta", 0.75);
  double bias = op::GetFloatAttr(k.call.attrs, "bias", 1.0);
  int64_t size = op::GetIntAttr(k.call.attrs, "size", 1);
  Scalar sum("sum", t);
  return LoopNest(x->shape, "i", [&](const Indices& idx) {
    PrimExpr j = arith::MakeVar("j");
    Indices at = idx;
    at[1] = idx[1] + j - arith::IntImm((size - 1) / 2);
    PrimExpr inside =
        arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kGE, at[1], arith::IntImm(0)),
                      arith::Binary(ExprKind::kLT, at[1], x->shape[1]));
    PrimExpr sq = arith::Load(x, at) * arith::Load(x, at);
    Stmt window = ir::For(j, arith::IntImm(0), arith::IntImm(size), ir::ForKind::kSerial,
                          ir::IfThenElse(inside, sum.set(sum.get() + sq)));
    PrimExpr base = Float(bias, t) + Float(alpha / static_cast<double>(size), t) * sum.get();
    PrimExpr v = Div(arith::Load(x, idx), arith::Call(t, "pow", {base, Float(beta, t)}));
    return ir::Allocate(sum.buf, ir::Seq({sum.set(Zero(t)), window, ir::Store(y, idx, v)}));
  });
}

}  // namespace

void RegisterReduceKernelBuilders(KernelBuilderTable& table) {
  const std::pair<const char*, ReduceKind> reductions[] = {
      {"reduce_sum", ReduceKind::kSum},
      {"reduce_mean", ReduceKind::kMean},
      {"reduce_max", ReduceKind::kMax},
      {"reduce_min", ReduceKind::kMin},
      {"reduce_prod", ReduceKind::kProd},
      {"reduce_l1", ReduceKind::kL1},
      {"reduce_l2", ReduceKind::kL2},
      {"reduce_log_sum", ReduceKind::kLogSum},
      {"reduce_log_sum_exp", ReduceKind::kLogSumExp},
      {"reduce_sum_square", ReduceKind::kSumSquare},
  };
  for (const auto& [name, kind] : reductions) {
    table[name] = [kind = kind](const KernelContext& k) { return ReduceBody(kind, k); };
  }
  table["arg_max"] = [](const KernelContext& k) { return ArgBody(true, k); };
  table["arg_min"] = [](const KernelContext& k) { return ArgBody(false, k); };
  table["hardmax"] = HardmaxBody;
  table["log_softmax"] = LogSoftmaxBody;
  table["layer_normalization"] = LayerNormBody;
  table["layer_normalization_stats"] = LayerNormStatsBody;
  table["instance_normalization"] = InstanceNormBody;
  table["mean_variance_normalization"] = MeanVarianceNormBody;
  table["batch_normalization"] = BatchNormBody;
  table["batch_normalization_training"] = BatchNormTrainingBody;
  table["lrn"] = LrnBody;
}

}  // namespace kiln::transform
