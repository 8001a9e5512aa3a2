// Convolution and pooling: conv, max_pool (values only), average_pool, lp_pool and the
// global pools. Naive direct loops per output element; a window position that falls in the
// padding is skipped by a bounds check. The window geometry (pads, SAME_* splits) comes from
// op/nn_window, which struct-info inference and the reference kernels (interp/nn_conv.cc,
// interp/nn_pool.cc) share, so all three agree.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_window.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {

void RegisterLossKernelBuilders(KernelBuilderTable& table);   // legalize_loss.cc
void RegisterQuantKernelBuilders(KernelBuilderTable& table);  // legalize_quant.cc

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

// A 1-element scratch buffer holding one running value.
struct Scalar {
  Scalar(const std::string& name, DataType t)
      : buf(arith::MakeBuffer(name, t, {arith::IntImm(1)})) {}
  PrimExpr get() const { return arith::Load(buf, {arith::IntImm(0)}); }
  Stmt set(PrimExpr v) const { return ir::Store(buf, {arith::IntImm(0)}, v); }
  Buffer buf;
};

PrimExpr CastTo(DataType t, PrimExpr v) { return v->dtype == t ? v : arith::Cast(t, v); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }
PrimExpr And(PrimExpr a, PrimExpr b) {
  if (!a) return b;
  return arith::Binary(ExprKind::kAnd, a, b);
}
// Floats accumulate in double, as the reference kernels do.
DataType AccType(DataType t) { return t.is_float() ? DataType::Float(64) : t; }

// The smallest value of t: where a max starts.
PrimExpr Lowest(DataType t) {
  if (t.is_float()) return arith::FloatImm(-INFINITY, t);
  if (t.code == DataType::kUInt) return arith::IntImm(0, t);
  int64_t hi =
      t.bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits - 1)) - 1;
  return arith::IntImm(-hi - 1, t);
}

absl::Status Unimplemented(const KernelContext& k, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("op ", k.call.name, ": ", why));
}

// The concrete value of a dim, when it has no free variables.
std::optional<int64_t> ConstDim(const PrimExpr& e) {
  if (!arith::FreeVars(e).empty()) return std::nullopt;
  return op::EvaluateDim(e);
}

// The sliding-window geometry of one call over input x ([N, C, spatial...]).
struct Geometry {
  op::Window win;
  std::vector<PrimExpr> in, pad_begin, pad_end;  // per spatial dim
};

absl::StatusOr<Geometry> ReadGeometry(const KernelContext& k, const Buffer& x,
                                      std::vector<int64_t> kernel) {
  if (x->shape.size() < 3) return Unimplemented(k, "input must have rank >= 3");
  size_t spatial = x->shape.size() - 2;
  Geometry g;
  KILN_ASSIGN_OR_RETURN(g.win, op::ReadWindow(k.call, spatial, std::move(kernel)));
  for (size_t d = 0; d < spatial; ++d) {
    PrimExpr in = x->shape[d + 2];
    op::WindowDim dim = op::ConvWindowDim(g.win, d, in, k.analyzer);
    g.in.push_back(in);
    g.pad_begin.push_back(dim.pad_begin);
    g.pad_end.push_back(dim.pad_end);
  }
  return g;
}

// For every tap of the window at output position `pos` (spatial indices): body(input
// spatial indices, in-range condition, in-padded-input condition).
using TapBody = std::function<Stmt(const Indices&, PrimExpr, PrimExpr)>;
Stmt ForEachTap(const Geometry& g, const Indices& pos, const TapBody& body) {
  std::vector<PrimExpr> taps;
  for (int64_t e : g.win.kernel) taps.push_back(arith::IntImm(e));
  return LoopNest(taps, "t", [&](const Indices& t) {
    Indices at;
    PrimExpr inside, padded;
    for (size_t d = 0; d < t.size(); ++d) {
      PrimExpr i = pos[d] * arith::IntImm(g.win.strides[d]) - g.pad_begin[d] +
                   t[d] * arith::IntImm(g.win.dilations[d]);
      at.push_back(i);
      inside = And(inside, And(arith::Binary(ExprKind::kGE, i, arith::IntImm(0)),
                               arith::Binary(ExprKind::kLT, i, g.in[d])));
      padded = And(padded, And(arith::Binary(ExprKind::kGE, i, arith::IntImm(0) - g.pad_begin[d]),
                               arith::Binary(ExprKind::kLT, i, g.in[d] + g.pad_end[d])));
    }
    return body(at, inside, padded);
  });
}

// The kernel extents of weight w ([*, *, k...]), which must be constants.
absl::StatusOr<std::vector<int64_t>> KernelExtents(const KernelContext& k, const Buffer& w) {
  std::vector<int64_t> kernel;
  for (size_t d = 2; d < w->shape.size(); ++d) {
    std::optional<int64_t> e = ConstDim(w->shape[d]);
    if (!e) return Unimplemented(k, "kernel extents must be known at compile time");
    kernel.push_back(*e);
  }
  return kernel;
}

// What a direct convolution reads and how it finishes: x and w (minus their zero points,
// x's per input channel, w's per output channel, for the integer forms), the accumulator
// type, and the value stored from the accumulated sum at output position idx.
struct ConvSpec {
  Buffer x, w;
  const Buffer *x_zp = nullptr, *w_zp = nullptr;
  DataType acc_t;
  std::function<PrimExpr(PrimExpr acc, const Indices& idx)> finish;
};

PrimExpr Centered(const Buffer& buf, const Indices& at, const Buffer* zp, PrimExpr slice,
                  DataType acc_t) {
  PrimExpr v = CastTo(acc_t, arith::Load(buf, at));
  return zp ? v - CastTo(acc_t, ParamAt(*zp, slice)) : v;
}

// y[n, m, o] = finish(sum over the group's channels c and taps t of
// x[n, first_c + c, o * s - p + t * d] w[m, c, t]).
absl::StatusOr<Stmt> DirectConv(const KernelContext& k, const ConvSpec& spec) {
  const Buffer &x = spec.x, &w = spec.w, &y = k.out;
  if (w->shape.size() != x->shape.size() || x->shape.size() < 3) {
    return Unimplemented(k, "input and weight must have the same rank >= 3");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelExtents(k, w));
  KILN_ASSIGN_OR_RETURN(Geometry g, ReadGeometry(k, x, kernel));
  int64_t group = op::GetIntAttr(k.call.attrs, "group", 1);
  if (group < 1) return Unimplemented(k, "group must be positive");
  DataType acc_t = spec.acc_t;
  PrimExpr cg = w->shape[1];
  PrimExpr mg = k.analyzer.Simplify(arith::FloorDiv(w->shape[0], arith::IntImm(group)));
  return LoopNest(y->shape, "i", [&](const Indices& idx) {
    Scalar acc("acc", acc_t);
    Indices pos(idx.begin() + 2, idx.end());
    PrimExpr first_c = arith::FloorDiv(idx[1], mg) * cg;
    PrimExpr c = arith::MakeVar("c");
    // The weight is read at the tap itself, so the taps are looped over here directly.
    std::vector<PrimExpr> tap_shape;
    for (int64_t e : g.win.kernel) tap_shape.push_back(arith::IntImm(e));
    Stmt over_taps = LoopNest(tap_shape, "t", [&](const Indices& t) {
      Indices xi = {idx[0], first_c + c}, wi = {idx[1], c};
      PrimExpr inside;
      for (size_t d = 0; d < t.size(); ++d) {
        PrimExpr i = pos[d] * arith::IntImm(g.win.strides[d]) - g.pad_begin[d] +
                     t[d] * arith::IntImm(g.win.dilations[d]);
        xi.push_back(i);
        wi.push_back(t[d]);
        inside = And(inside, And(arith::Binary(ExprKind::kGE, i, arith::IntImm(0)),
                                 arith::Binary(ExprKind::kLT, i, g.in[d])));
      }
      PrimExpr prod = Centered(x, xi, spec.x_zp, first_c + c, acc_t) *
                      Centered(w, wi, spec.w_zp, idx[1], acc_t);
      return ir::IfThenElse(inside, acc.set(acc.get() + prod));
    });
    Stmt body = ir::Seq({
        acc.set(Zero(acc_t)),
        ir::For(c, arith::IntImm(0), cg, ir::ForKind::kSerial, over_taps),
        ir::Store(y, idx, spec.finish(acc.get(), idx)),
    });
    return ir::Allocate(acc.buf, body);
  });
}

// conv(x, w, bias?): the sum rounded to y's type, plus the bias in that type.
absl::StatusOr<Stmt> ConvBody(const KernelContext& k) {
  const Buffer* bias = OptionalInput(k, 2);
  ConvSpec spec{k.inputs[0], k.inputs[1]};
  spec.acc_t = AccType(k.out->dtype);
  spec.finish = [&](PrimExpr acc, const Indices& idx) {
    PrimExpr result = CastTo(k.out->dtype, acc);
    return bias ? result + arith::Load(*bias, {idx[1]}) : result;
  };
  return DirectConv(k, spec);
}

// conv_integer(x, w, x_zero_point?, w_zero_point?): exact in i64, stored as i32.
absl::StatusOr<Stmt> ConvIntegerBody(const KernelContext& k) {
  ConvSpec spec{k.inputs[0], k.inputs[1], OptionalInput(k, 2), OptionalInput(k, 3)};
  spec.acc_t = DataType::Int();
  spec.finish = [&](PrimExpr acc, const Indices&) { return CastTo(k.out->dtype, acc); };
  return DirectConv(k, spec);
}

// qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias?): the integer sum
// plus the i32 bias, rescaled by x_scale * w_scale[m] / y_scale and quantized to y_zp's type.
absl::StatusOr<Stmt> QLinearConvBody(const KernelContext& k) {
  if (k.inputs.size() < 8) return Unimplemented(k, "expects 8 tensor operands");
  const std::vector<Buffer>& t = k.inputs;
  const Buffer* bias = OptionalInput(k, 8);
  ConvSpec spec{t[0], t[3], &t[2], &t[5]};
  spec.acc_t = DataType::Int();
  DataType f64 = DataType::Float(64), out_t = k.out->dtype;
  spec.finish = [&](PrimExpr acc, const Indices& idx) {
    PrimExpr sum = CastTo(f64, acc);
    if (bias) sum = sum + CastTo(f64, arith::Load(*bias, {idx[1]}));
    PrimExpr scale =
        Div(CastTo(f64, ParamAt(t[1], arith::IntImm(0))) * CastTo(f64, ParamAt(t[4], idx[1])),
            CastTo(f64, ParamAt(t[6], arith::IntImm(0))));
    PrimExpr v = sum * scale + CastTo(f64, ParamAt(t[7], arith::IntImm(0)));
    return arith::Cast(out_t, Saturate(v, out_t));
  };
  return DirectConv(k, spec);
}

// The transpose scatters x through the kernel (y[n, m, i * s - p + t * d] += x[n, c, i]
// w[c, m, t]); read as a gather, output position o takes tap t from input position
// i = (o + p - t * d) / s where that division is exact and i is inside the input.
absl::StatusOr<Stmt> ConvTransposeBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &w = k.inputs[1], &y = k.out;
  if (w->shape.size() != x->shape.size() || x->shape.size() < 3) {
    return Unimplemented(k, "input and weight must have the same rank >= 3");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelExtents(k, w));
  size_t spatial = kernel.size();
  KILN_ASSIGN_OR_RETURN(op::Window win, op::ReadWindow(k.call, spatial, kernel));
  std::vector<PrimExpr> pad_begin;
  for (size_t d = 0; d < spatial; ++d) {
    pad_begin.push_back(op::ConvTransposeWindowDim(win, d, x->shape[d + 2], k.analyzer).pad_begin);
  }
  int64_t group = op::GetIntAttr(k.call.attrs, "group", 1);
  if (group < 1) return Unimplemented(k, "group must be positive");
  const Buffer* bias = OptionalInput(k, 2);
  DataType acc_t = AccType(y->dtype);
  PrimExpr mg = w->shape[1];
  PrimExpr cg = k.analyzer.Simplify(arith::FloorDiv(x->shape[1], arith::IntImm(group)));
  std::vector<PrimExpr> tap_shape;
  for (int64_t e : kernel) tap_shape.push_back(arith::IntImm(e));
  return LoopNest(y->shape, "i", [&](const Indices& idx) {
    Scalar acc("acc", acc_t);
    PrimExpr first_c = arith::FloorDiv(idx[1], mg) * cg;
    PrimExpr m = arith::FloorMod(idx[1], mg);
    PrimExpr c = arith::MakeVar("c");
    Stmt over_taps = LoopNest(tap_shape, "t", [&](const Indices& t) {
      Indices xi = {idx[0], first_c + c}, wi = {first_c + c, m};
      PrimExpr hit;
      for (size_t d = 0; d < spatial; ++d) {
        PrimExpr s = arith::IntImm(win.strides[d]);
        PrimExpr num = idx[d + 2] + pad_begin[d] - t[d] * arith::IntImm(win.dilations[d]);
        PrimExpr i = arith::FloorDiv(num, s);
        xi.push_back(i);
        wi.push_back(t[d]);
        PrimExpr exact = arith::Binary(ExprKind::kEQ, arith::FloorMod(num, s), arith::IntImm(0));
        hit = And(hit, And(exact, And(arith::Binary(ExprKind::kGE, i, arith::IntImm(0)),
                                      arith::Binary(ExprKind::kLT, i, x->shape[d + 2]))));
      }
      PrimExpr prod = CastTo(acc_t, arith::Load(x, xi)) * CastTo(acc_t, arith::Load(w, wi));
      return ir::IfThenElse(hit, acc.set(acc.get() + prod));
    });
    PrimExpr result = acc.get();
    if (bias) result = result + CastTo(acc_t, arith::Load(*bias, {idx[1]}));
    Stmt body = ir::Seq({
        acc.set(Zero(acc_t)),
        ir::For(c, arith::IntImm(0), cg, ir::ForKind::kSerial, over_taps),
        ir::Store(y, idx, CastTo(y->dtype, result)),
    });
    return ir::Allocate(acc.buf, body);
  });
}

enum class PoolKind { kMax, kAverage, kLp };

absl::StatusOr<Stmt> PoolBody(const KernelContext& k, PoolKind kind) {
  const Buffer &x = k.inputs[0], &y = k.out;
  KILN_ASSIGN_OR_RETURN(Geometry g, ReadGeometry(k, x, {}));
  bool include_pad = op::GetIntAttr(k.call.attrs, "count_include_pad", 0) != 0;
  double p = static_cast<double>(op::GetIntAttr(k.call.attrs, "p", 2));
  DataType acc_t = kind == PoolKind::kMax ? x->dtype : AccType(x->dtype);
  if (kind != PoolKind::kMax && !acc_t.is_float()) {
    return Unimplemented(k, "only float inputs are compiled");
  }
  return LoopNest(y->shape, "i", [&](const Indices& idx) {
    Scalar acc("acc", acc_t), count("count", acc_t);
    Indices pos(idx.begin() + 2, idx.end());
    Stmt over_taps = ForEachTap(g, pos, [&](const Indices& at, PrimExpr inside, PrimExpr padded) {
      Indices xi = {idx[0], idx[1]};
      xi.insert(xi.end(), at.begin(), at.end());
      PrimExpr v = CastTo(acc_t, arith::Load(x, xi));
      PrimExpr one = arith::FloatImm(1, acc_t);
      switch (kind) {
        case PoolKind::kMax:
          return ir::IfThenElse(inside, acc.set(arith::Max(acc.get(), v)));
        case PoolKind::kLp:
          return ir::IfThenElse(inside,
                                acc.set(acc.get() + arith::Call(acc_t, "pow",
                                                                {arith::Call(acc_t, "fabs", {v}),
                                                                 arith::FloatImm(p, acc_t)})));
        case PoolKind::kAverage:
          break;
      }
      Stmt add = ir::Seq({acc.set(acc.get() + v)});
      if (include_pad) {
        return ir::Seq(
            {ir::IfThenElse(inside, add), ir::IfThenElse(padded, count.set(count.get() + one))});
      }
      return ir::IfThenElse(inside, ir::Seq({add, count.set(count.get() + one)}));
    });
    PrimExpr result;
    switch (kind) {
      case PoolKind::kMax:
        result = acc.get();
        break;
      case PoolKind::kLp:
        result = arith::Call(acc_t, "pow", {acc.get(), arith::FloatImm(1.0 / p, acc_t)});
        break;
      case PoolKind::kAverage:
        result = Div(acc.get(), count.get());
        break;
    }
    Stmt body = ir::Seq({
        acc.set(kind == PoolKind::kMax ? Lowest(acc_t) : Zero(acc_t)),
        count.set(Zero(acc_t)),
        over_taps,
        ir::Store(y, idx, CastTo(y->dtype, result)),
    });
    return ir::Allocate(acc.buf, ir::Allocate(count.buf, body));
  });
}

// global_average_pool and global_max_pool reduce each [N, C] plane to one value.
// max_pool's Indices output: the flat index into x of each window's first maximum, with the
// spatial part column-major when storage_order is 1 (interp/nn_pool.cc MaxPoolIndices).
absl::StatusOr<Stmt> MaxPoolIndicesBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  KILN_ASSIGN_OR_RETURN(Geometry g, ReadGeometry(k, x, {}));
  bool column_major = op::GetIntAttr(k.call.attrs, "storage_order", 0) != 0;
  DataType i64 = DataType::Int(64);
  PrimExpr plane = arith::IntImm(1);
  for (const PrimExpr& e : g.in) plane = plane * e;
  auto flat = [&](const Indices& at) {
    PrimExpr f = arith::IntImm(0), stride = arith::IntImm(1);
    for (size_t n = 0; n < at.size(); ++n) {
      size_t d = column_major ? n : at.size() - 1 - n;
      f = f + at[d] * stride;
      stride = stride * g.in[d];
    }
    return f;
  };
  return LoopNest(y->shape, "i", [&](const Indices& idx) {
    Scalar best("best", x->dtype), best_at("best_at", i64);
    Indices pos(idx.begin() + 2, idx.end());
    Stmt over_taps = ForEachTap(g, pos, [&](const Indices& at, PrimExpr inside, PrimExpr) {
      Indices xi = {idx[0], idx[1]};
      xi.insert(xi.end(), at.begin(), at.end());
      PrimExpr v = arith::Load(x, xi);
      PrimExpr first = arith::Binary(ExprKind::kLT, best_at.get(), arith::IntImm(0, i64));
      PrimExpr better =
          arith::Binary(ExprKind::kOr, first, arith::Binary(ExprKind::kGT, v, best.get()));
      return ir::IfThenElse(And(inside, better),
                            ir::Seq({best.set(v), best_at.set(CastTo(i64, flat(at)))}));
    });
    PrimExpr base = (idx[0] * x->shape[1] + idx[1]) * plane;
    Stmt body = ir::Seq({best_at.set(arith::IntImm(-1, i64)), over_taps,
                         ir::Store(y, idx, CastTo(i64, base) + best_at.get())});
    return ir::Allocate(best.buf, ir::Allocate(best_at.buf, body));
  });
}

// The plane is one loop over its elements in memory order: x is dense and row-major, so
// x[n, c, 0.., r] with r < the plane's size addresses its r-th element. As one contiguous loop
// the rows rule runs it in vector lanes and the (n, c) planes in parallel (mobilenet_v2's
// 1280 planes of 7 x 7 ran on one thread, their sum a chain of f64 adds: 4x ORT's time). Float
// sums are in f32 (f64 for f64), as reduce_mean's.
absl::StatusOr<Stmt> GlobalPoolBody(const KernelContext& k, bool max) {
  const Buffer &x = k.inputs[0], &y = k.out;
  if (x->shape.size() < 3) return Unimplemented(k, "input must have rank >= 3");
  if (!max && !x->dtype.is_float()) return Unimplemented(k, "only float inputs are compiled");
  DataType acc_t = max || x->dtype.bits >= 32 ? x->dtype : DataType::Float(32);
  PrimExpr size = arith::IntImm(1);
  for (size_t d = 2; d < x->shape.size(); ++d) size = size * x->shape[d];
  return LoopNest(y->shape, "i", [&](const Indices& idx) {
    Scalar acc("acc", acc_t);
    PrimExpr r = arith::MakeVar("r");
    Indices xi = {idx[0], idx[1]};
    while (xi.size() + 1 < x->shape.size()) xi.push_back(arith::IntImm(0));
    xi.push_back(r);
    PrimExpr v = CastTo(acc_t, arith::Load(x, xi));
    Stmt over_plane = ir::For(r, arith::IntImm(0), size, ir::ForKind::kSerial,
                              acc.set(max ? arith::Max(acc.get(), v) : acc.get() + v));
    PrimExpr result = max ? acc.get() : Div(acc.get(), arith::Cast(acc_t, size));
    Stmt body = ir::Seq({
        acc.set(max ? Lowest(acc_t) : Zero(acc_t)),
        over_plane,
        ir::Store(y, idx, CastTo(y->dtype, result)),
    });
    return ir::Allocate(acc.buf, body);
  });
}

}  // namespace

void RegisterNNConvKernelBuilders(KernelBuilderTable& table) {
  table["conv"] = ConvBody;
  table["conv_transpose"] = ConvTransposeBody;
  table["conv_integer"] = ConvIntegerBody;
  table["qlinear_conv"] = QLinearConvBody;
  table["max_pool"] = [](const KernelContext& k) { return PoolBody(k, PoolKind::kMax); };
  table["max_pool_indices"] = MaxPoolIndicesBody;
  table["average_pool"] = [](const KernelContext& k) { return PoolBody(k, PoolKind::kAverage); };
  table["lp_pool"] = [](const KernelContext& k) { return PoolBody(k, PoolKind::kLp); };
  table["global_average_pool"] = [](const KernelContext& k) { return GlobalPoolBody(k, false); };
  table["global_max_pool"] = [](const KernelContext& k) { return GlobalPoolBody(k, true); };
  RegisterLossKernelBuilders(table);
  RegisterQuantKernelBuilders(table);
}

}  // namespace kiln::transform
