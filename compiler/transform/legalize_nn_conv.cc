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
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {
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

// y[n, m, o] = bias[m] + sum over the group's channels c and taps t of
// x[n, first_c + c, o * s - p + t * d] w[m, c, t].
absl::StatusOr<Stmt> ConvBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &w = k.inputs[1], &y = k.out;
  if (w->shape.size() != x->shape.size() || x->shape.size() < 3) {
    return Unimplemented(k, "input and weight must have the same rank >= 3");
  }
  std::vector<int64_t> kernel;
  for (size_t d = 2; d < w->shape.size(); ++d) {
    std::optional<int64_t> e = ConstDim(w->shape[d]);
    if (!e) return Unimplemented(k, "kernel extents must be known at compile time");
    kernel.push_back(*e);
  }
  KILN_ASSIGN_OR_RETURN(Geometry g, ReadGeometry(k, x, kernel));
  int64_t group = op::GetIntAttr(k.call.attrs, "group", 1);
  if (group < 1) return Unimplemented(k, "group must be positive");
  const Buffer* bias = k.inputs.size() > 2 ? &k.inputs[2] : nullptr;
  DataType acc_t = AccType(y->dtype);
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
      PrimExpr prod = CastTo(acc_t, arith::Load(x, xi)) * CastTo(acc_t, arith::Load(w, wi));
      return ir::IfThenElse(inside, acc.set(acc.get() + prod));
    });
    PrimExpr result = CastTo(y->dtype, acc.get());
    if (bias) result = result + arith::Load(*bias, {idx[1]});
    Stmt body = ir::Seq({
        acc.set(Zero(acc_t)),
        ir::For(c, arith::IntImm(0), cg, ir::ForKind::kSerial, over_taps),
        ir::Store(y, idx, result),
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
absl::StatusOr<Stmt> GlobalPoolBody(const KernelContext& k, bool max) {
  const Buffer &x = k.inputs[0], &y = k.out;
  if (x->shape.size() < 3) return Unimplemented(k, "input must have rank >= 3");
  DataType acc_t = max ? x->dtype : AccType(x->dtype);
  if (!max && !acc_t.is_float()) return Unimplemented(k, "only float inputs are compiled");
  std::vector<PrimExpr> plane(x->shape.begin() + 2, x->shape.end());
  PrimExpr size = arith::IntImm(1);
  for (const PrimExpr& e : plane) size = size * e;
  return LoopNest(y->shape, "i", [&](const Indices& idx) {
    Scalar acc("acc", acc_t);
    Stmt over_plane = LoopNest(plane, "r", [&](const Indices& r) {
      Indices xi = {idx[0], idx[1]};
      xi.insert(xi.end(), r.begin(), r.end());
      PrimExpr v = CastTo(acc_t, arith::Load(x, xi));
      return acc.set(max ? arith::Max(acc.get(), v) : acc.get() + v);
    });
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
  table["max_pool"] = [](const KernelContext& k) { return PoolBody(k, PoolKind::kMax); };
  table["average_pool"] = [](const KernelContext& k) { return PoolBody(k, PoolKind::kAverage); };
  table["lp_pool"] = [](const KernelContext& k) { return PoolBody(k, PoolKind::kLp); };
  table["global_average_pool"] = [](const KernelContext& k) { return GlobalPoolBody(k, false); };
  table["global_max_pool"] = [](const KernelContext& k) { return GlobalPoolBody(k, true); };
}

}  // namespace kiln::transform
