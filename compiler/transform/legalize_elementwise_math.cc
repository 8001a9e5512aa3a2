// Float activations as scalar expressions. The reference kernels compute these in double
// and round once, with expm1/log1p where it matters; the expressions below do the same with
// the few intrinsics codegen has (no expm1, log1p): a short Taylor series near zero.
#include <cmath>
#include <functional>
#include <map>

#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_elementwise.h"

namespace kiln::transform {
namespace {

using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;

const DataType kF64 = DataType::Float(64);

PrimExpr F(double v) { return arith::FloatImm(v, kF64); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }
PrimExpr Lt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kLT, a, b); }
PrimExpr Gt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kGT, a, b); }
PrimExpr Fn(const char* name, PrimExpr x) { return arith::Call(kF64, name, {x}); }

// Taylor terms below 1e-5 keep the relative error of exp(x) - 1 and log(1 + x) near
// double's epsilon where cancellation would lose it.
PrimExpr Expm1(PrimExpr x) {
  PrimExpr series = x + x * x * F(0.5) + x * x * x * F(1.0 / 6);
  return arith::Select(Lt(Fn("fabs", x), F(1e-5)), series, Fn("exp", x) - F(1));
}
PrimExpr Log1p(PrimExpr x) {
  PrimExpr series = x - x * x * F(0.5) + x * x * x * F(1.0 / 3);
  return arith::Select(Lt(Fn("fabs", x), F(1e-5)), series, Fn("log", F(1) + x));
}
// std::max(0.0, x) and std::min(0.0, x): 0 for NaN, unlike Max/Min, which propagate it.
PrimExpr MaxZero(PrimExpr x) { return arith::Select(Lt(F(0), x), x, F(0)); }
PrimExpr MinZero(PrimExpr x) { return arith::Select(Lt(x, F(0)), x, F(0)); }
PrimExpr Clamp01(PrimExpr x) {
  return arith::Select(Lt(x, F(0)), F(0), arith::Select(Gt(x, F(1)), F(1), x));
}
PrimExpr Softplus(PrimExpr x) {
  return arith::Select(Gt(x, F(0)), x + Log1p(Fn("exp", F(0) - x)), Log1p(Fn("exp", x)));
}

using Definition = std::function<PrimExpr(PrimExpr, const ir::Attrs&)>;

double Attr(const ir::Attrs& a, const char* name, double fallback) {
  return op::GetFloatAttr(a, name, fallback);
}

PrimExpr Gelu(PrimExpr x, const ir::Attrs& a) {
  if (op::GetStringAttr(a, "approximate", "none") == "tanh") {
    PrimExpr inner = F(std::sqrt(2 / M_PI)) * (x + F(0.044715) * x * x * x);
    return F(0.5) * x * (F(1) + Fn("tanh", inner));
  }
  return F(0.5) * x * (F(1) + Fn("erf", Div(x, F(std::sqrt(2.0)))));
}

// Each definition mirrors compiler/interp/elementwise_math.cc, attribute fallbacks included.
const std::map<std::string, Definition>& Definitions() {
  static const auto* defs = new std::map<std::string, Definition>{
      {"leaky_relu",
       [](PrimExpr x, const ir::Attrs& a) {
         return arith::Select(Lt(x, F(0)), F(Attr(a, "alpha", 0.01)) * x, x);
       }},
      {"elu",
       [](PrimExpr x, const ir::Attrs& a) {
         return arith::Select(Lt(x, F(0)), F(Attr(a, "alpha", 1.0)) * Expm1(x), x);
       }},
      {"selu",
       [](PrimExpr x, const ir::Attrs& a) {
         PrimExpr alpha = F(Attr(a, "alpha", 1.67326319217681884765625));
         PrimExpr gamma = F(Attr(a, "gamma", 1.05070102214813232421875));
         return arith::Select(arith::Binary(ExprKind::kLE, x, F(0)), gamma * alpha * Expm1(x),
                              gamma * x);
       }},
      {"celu",
       [](PrimExpr x, const ir::Attrs& a) {
         PrimExpr alpha = F(Attr(a, "alpha", 1.0));
         return MaxZero(x) + MinZero(alpha * Expm1(Div(x, alpha)));
       }},
      {"hard_sigmoid",
       [](PrimExpr x, const ir::Attrs& a) {
         return Clamp01(F(Attr(a, "alpha", 0.2)) * x + F(Attr(a, "beta", 0.5)));
       }},
      {"hard_swish",
       [](PrimExpr x, const ir::Attrs&) { return x * Clamp01(Div(x, F(6)) + F(0.5)); }},
      {"thresholded_relu",
       [](PrimExpr x, const ir::Attrs& a) {
         return arith::Select(Gt(x, F(Attr(a, "alpha", 1.0))), x, F(0));
       }},
      {"softsign", [](PrimExpr x, const ir::Attrs&) { return Div(x, F(1) + Fn("fabs", x)); }},
      {"softplus", [](PrimExpr x, const ir::Attrs&) { return Softplus(x); }},
      {"mish", [](PrimExpr x, const ir::Attrs&) { return x * Fn("tanh", Softplus(x)); }},
      {"gelu", Gelu},
  };
  return *defs;
}

}  // namespace

PrimExpr FloatActivation(const std::string& op, const PrimExpr& x, const ir::Attrs& attrs) {
  auto it = Definitions().find(op);
  if (it == Definitions().end() || !x->dtype.is_float()) return nullptr;
  PrimExpr wide = x->dtype == kF64 ? x : arith::Cast(kF64, x);
  PrimExpr y = it->second(wide, attrs);
  return x->dtype == kF64 ? y : arith::Cast(x->dtype, y);
}

const char* const* FloatActivationNames() {
  static const char* const kNames[] = {
      "leaky_relu",       "elu",      "selu",     "celu", "hard_sigmoid", "hard_swish",
      "thresholded_relu", "softsign", "softplus", "mish", "gelu",         nullptr};
  return kNames;
}

}  // namespace kiln::transform
