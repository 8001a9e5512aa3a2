// Elementwise operators: one scalar expression of the broadcast operands per output element.
#include "compiler/transform/legalize_elementwise.h"

#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

PrimExpr TruncDiv(PrimExpr a, PrimExpr b) {
  PrimExpr q = arith::FloorDiv(a, b);
  PrimExpr zero = arith::IntImm(0, a->dtype);
  PrimExpr signs_differ = arith::Binary(ExprKind::kNE, arith::Binary(ExprKind::kLT, a, zero),
                                        arith::Binary(ExprKind::kLT, b, zero));
  PrimExpr inexact = arith::Binary(ExprKind::kNE, arith::FloorMod(a, b), zero);
  return arith::Select(arith::Binary(ExprKind::kAnd, signs_differ, inexact),
                       q + arith::IntImm(1, a->dtype), q);
}

// Integer division never traps in an artifact: x / 0 is 0 and, for signed types, x / -1 is
// the wrapping negation (INT_MIN / -1 would fault), both as in the reference kernel.
PrimExpr SafeIntDiv(PrimExpr a, PrimExpr b) {
  DataType t = a->dtype;
  PrimExpr zero = arith::IntImm(0, t), one = arith::IntImm(1, t);
  PrimExpr by_zero = arith::Binary(ExprKind::kEQ, b, zero);
  if (t.code != DataType::kInt) {
    return arith::Select(by_zero, zero, TruncDiv(a, arith::Select(by_zero, one, b)));
  }
  PrimExpr by_minus_one = arith::Binary(ExprKind::kEQ, b, arith::IntImm(-1, t));
  PrimExpr guarded = arith::Select(arith::Binary(ExprKind::kOr, by_zero, by_minus_one), one, b);
  return arith::Select(by_zero, zero, arith::Select(by_minus_one, zero - a, TruncDiv(a, guarded)));
}

PrimExpr Fold(ExprKind kind, const std::vector<PrimExpr>& x) {
  PrimExpr acc = x[0];
  for (size_t i = 1; i < x.size(); ++i) acc = arith::Binary(kind, acc, x[i]);
  return acc;
}

PrimExpr Eq(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kEQ, a, b); }
PrimExpr Lt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kLT, a, b); }
PrimExpr Gt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kGT, a, b); }
PrimExpr Imm(double v, DataType t) {
  return t.is_float() ? arith::FloatImm(v, t) : arith::IntImm(static_cast<int64_t>(v), t);
}

// mod(a, b) as the reference computes it: integers take the divisor's sign (floor mod), or
// the dividend's with `fmod` (C); x % 0 and (signed) x % -1 are 0, and are never executed,
// since both trap on x86.
PrimExpr IntMod(PrimExpr a, PrimExpr b, bool fmod) {
  DataType t = a->dtype;
  PrimExpr trap = Eq(b, Zero(t));
  if (t.code == DataType::kInt) trap = arith::Binary(ExprKind::kOr, trap, Eq(b, Imm(-1, t)));
  PrimExpr safe_b = arith::Select(trap, Imm(1, t), b);
  PrimExpr floor_mod = arith::FloorMod(a, safe_b);
  if (!fmod || t.code != DataType::kInt) return floor_mod;  // unsigned: both are urem
  PrimExpr signs_differ = arith::Binary(ExprKind::kNE, Lt(a, Zero(t)), Lt(safe_b, Zero(t)));
  PrimExpr adjust =
      arith::Binary(ExprKind::kAnd, signs_differ, arith::Binary(ExprKind::kNE, floor_mod, Zero(t)));
  return arith::Select(adjust, floor_mod - safe_b, floor_mod);
}

// Floats: C's fmod (a - trunc(a / b) * b), then moved to the divisor's sign unless `fmod`.
PrimExpr FloatMod(PrimExpr a, PrimExpr b, bool fmod) {
  DataType t = a->dtype;
  PrimExpr q = arith::Call(t, "trunc", {arith::Binary(ExprKind::kDiv, a, b)});
  PrimExpr r = a - q * b;
  if (fmod) return r;
  PrimExpr signs_differ = arith::Binary(ExprKind::kNE, Lt(r, Zero(t)), Lt(b, Zero(t)));
  PrimExpr adjust =
      arith::Binary(ExprKind::kAnd, signs_differ, arith::Binary(ExprKind::kNE, r, Zero(t)));
  return arith::Select(adjust, r + b, r);
}

// 2^b for 0 <= b < bits, from b's binary digits (there is no shift expression).
PrimExpr PowerOfTwo(PrimExpr b, int bits) {
  DataType t = b->dtype;
  PrimExpr p = Imm(1, t);
  for (int k = 0; (1 << k) < bits; ++k) {
    PrimExpr digit = arith::FloorMod(arith::FloorDiv(b, Imm(1 << k, t)), Imm(2, t));
    PrimExpr factor = arith::IntImm(int64_t{1} << (1 << k), t);
    p = p * arith::Select(Eq(digit, Imm(1, t)), factor, Imm(1, t));
  }
  return p;
}

// Unsigned shifts only (as the reference); shifting by the width or more gives 0.
PrimExpr BitShift(PrimExpr a, PrimExpr b, bool left) {
  DataType t = a->dtype;
  if (t.code != DataType::kUInt) return nullptr;
  PrimExpr p = PowerOfTwo(b, t.bits);
  PrimExpr shifted = left ? a * p : arith::FloorDiv(a, p);
  return arith::Select(arith::Binary(ExprKind::kGE, b, Imm(t.bits, t)), Zero(t), shifted);
}

PrimExpr Sign(PrimExpr x) {
  DataType t = x->dtype;
  // Floats: NaN stays NaN (x, where neither comparison holds and x != x).
  PrimExpr zero = t.is_float() ? arith::Select(Eq(x, x), Zero(t), x) : Zero(t);
  return arith::Select(Gt(x, Zero(t)), Imm(1, t), arith::Select(Lt(x, Zero(t)), Imm(-1, t), zero));
}

// Halves to even (nearbyint): floor, then up when the rest is above a half, or exactly a
// half and the floor is odd. NaN and infinities fall through to floor + 1, which keeps them.
PrimExpr RoundHalfEven(PrimExpr x) {
  DataType t = x->dtype;
  PrimExpr r = arith::Call(t, "floor", {x});
  PrimExpr rest = x - r;
  PrimExpr half = Imm(0.5, t);
  PrimExpr even = Eq(r - Imm(2, t) * arith::Call(t, "floor", {r * half}), Zero(t));
  PrimExpr up = r + Imm(1, t);
  return arith::Select(Gt(rest, half), up,
                       arith::Select(Lt(rest, half), r, arith::Select(even, r, up)));
}

// The largest finite value of a float type: anything beyond is infinite.
PrimExpr FloatMaxImm(DataType t) {
  double m = t.bits == 32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
  return arith::FloatImm(m, t);
}

PrimExpr IsInf(PrimExpr x, const ir::Attrs& attrs) {
  DataType t = x->dtype;
  PrimExpr result = arith::IntImm(0, DataType::Bool());
  if (op::GetIntAttr(attrs, "detect_positive", 1) != 0) result = Gt(x, FloatMaxImm(t));
  if (op::GetIntAttr(attrs, "detect_negative", 1) != 0) {
    PrimExpr neg = Lt(x, Zero(t) - FloatMaxImm(t));
    result = result->kind == ExprKind::kIntImm ? neg : arith::Binary(ExprKind::kOr, result, neg);
  }
  return result;
}

// shrink: computed in double and converted back, as the reference does for every type.
PrimExpr Shrink(PrimExpr x, const ir::Attrs& attrs) {
  DataType f64 = DataType::Float(64);
  PrimExpr v = arith::Cast(f64, x);
  PrimExpr lambd = arith::FloatImm(op::GetFloatAttr(attrs, "lambd", 0.5), f64);
  PrimExpr bias = arith::FloatImm(op::GetFloatAttr(attrs, "bias", 0.0), f64);
  PrimExpr y = arith::Select(Lt(v, Zero(f64) - lambd), v + bias,
                             arith::Select(Gt(v, lambd), v - bias, Zero(f64)));
  return arith::Cast(x->dtype, y);
}

// base^e by square-and-multiply in double for a whole exponent 0 <= e < 128, else `other`.
// Exact while the result fits double's mantissa, where the intrinsic pow (exp(e * log b))
// may land just below a whole number, which the conversion to an integer then truncates.
PrimExpr WholePower(PrimExpr base, PrimExpr e, PrimExpr other) {
  DataType f64 = DataType::Float(64);
  PrimExpr whole = arith::Binary(
      ExprKind::kAnd, arith::Binary(ExprKind::kEQ, e, arith::Call(f64, "floor", {e})),
      arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kGE, e, arith::FloatImm(0, f64)),
                    Lt(e, arith::FloatImm(128, f64))));
  PrimExpr bits = arith::Cast(DataType::Int(), arith::Select(whole, e, arith::FloatImm(0, f64)));
  PrimExpr result = arith::FloatImm(1, f64), square = base;
  for (int i = 0; i < 7; ++i) {
    PrimExpr bit =
        arith::FloorMod(arith::FloorDiv(bits, arith::IntImm(int64_t{1} << i)), arith::IntImm(2));
    result = result * arith::Select(Eq(bit, arith::IntImm(1)), square, arith::FloatImm(1, f64));
    if (i < 6) square = square * square;
  }
  return arith::Select(whole, result, other);
}

// pow with a float on either side: in double, then converted (saturating) to the base's
// type, as the reference does. Two integers need the exact loop of PowInt.
PrimExpr Pow(PrimExpr base, PrimExpr exponent) {
  DataType t = base->dtype;
  if (t.is_float() && exponent->dtype == t) return arith::Call(t, "pow", {base, exponent});
  if (!t.is_float() && !exponent->dtype.is_float()) return nullptr;
  if (t.code == DataType::kBool || exponent->dtype.code == DataType::kBool) return nullptr;
  DataType f64 = DataType::Float(64);
  PrimExpr b = arith::Cast(f64, base), e = arith::Cast(f64, exponent);
  PrimExpr r = arith::Call(f64, "pow", {b, e});
  if (t.is_int()) r = WholePower(b, e, r);
  return t == f64 ? r : arith::Cast(t, r);
}

// Elementwise ops whose body is one scalar expression of the broadcast operands; nullptr
// for ops this table does not define. `out` is the result dtype.
PrimExpr ScalarOp(const std::string& op, const std::vector<PrimExpr>& x, DataType out,
                  const ir::Attrs& attrs) {
  static const std::map<std::string, ExprKind> kBinary = {{"equal", ExprKind::kEQ},
                                                          {"less", ExprKind::kLT},
                                                          {"greater", ExprKind::kGT},
                                                          {"less_or_equal", ExprKind::kLE},
                                                          {"greater_or_equal", ExprKind::kGE},
                                                          {"and", ExprKind::kAnd},
                                                          {"or", ExprKind::kOr},
                                                          {"xor", ExprKind::kNE}};
  static const std::set<std::string> kFloatMath = {
      "sqrt", "log",  "floor", "ceil", "erf",  "exp",  "tanh",  "sigmoid", "sin",  "cos",
      "tan",  "asin", "acos",  "atan", "sinh", "cosh", "asinh", "acosh",   "atanh"};
  DataType t = x[0]->dtype;
  if (auto it = kBinary.find(op); it != kBinary.end() && x.size() == 2) {
    return arith::Binary(it->second, x[0], x[1]);
  }
  if (op == "add") return x[0] + x[1];
  if (op == "subtract") return x[0] - x[1];
  if (op == "multiply") return x[0] * x[1];
  if (op == "divide") {
    return t.is_float() ? arith::Binary(ExprKind::kDiv, x[0], x[1]) : SafeIntDiv(x[0], x[1]);
  }
  if (op == "copy") return x[0];
  // ONNX Cast: truncation toward zero, saturation and NaN -> 0 into integers, x != 0 into
  // bool; codegen's conversions are defined exactly so.
  if (op == "cast") return arith::Cast(out, x[0]);
  if (op == "relu") {
    // Written as a select so that NaN stays NaN, as in numpy's maximum.
    return arith::Select(arith::Binary(ExprKind::kLT, x[0], Zero(t)), Zero(t), x[0]);
  }
  if (op == "prelu") return arith::Select(Lt(x[0], Zero(t)), x[1] * x[0], x[0]);
  if (op == "not") return arith::Not(x[0]);
  if (op == "where") return arith::Select(x[0], x[1], x[2]);
  if (op == "max") return Fold(ExprKind::kMax, x);
  if (op == "min") return Fold(ExprKind::kMin, x);
  if (op == "sum") return Fold(ExprKind::kAdd, x);
  if (op == "neg") return Zero(t) - x[0];
  if (op == "sign") return Sign(x[0]);
  if (op == "shrink") return Shrink(x[0], attrs);
  if (op == "pow") return Pow(x[0], x[1]);
  if (op == "mod") {
    bool fmod = op::GetIntAttr(attrs, "fmod", 0) != 0;
    return t.is_float() ? FloatMod(x[0], x[1], fmod) : IntMod(x[0], x[1], fmod);
  }
  if (op == "bit_shift") {
    return BitShift(x[0], x[1], op::GetStringAttr(attrs, "direction", "") == "LEFT");
  }
  if (!t.is_float()) return nullptr;
  if (kFloatMath.count(op)) return arith::Call(t, op, {x[0]});
  if (op == "abs") return arith::Call(t, "fabs", {x[0]});
  if (op == "reciprocal") return arith::Binary(ExprKind::kDiv, arith::FloatImm(1, t), x[0]);
  if (op == "round") return RoundHalfEven(x[0]);
  if (op == "is_nan") return arith::Binary(ExprKind::kNE, x[0], x[0]);
  if (op == "is_inf") return IsInf(x[0], attrs);
  if (op == "mean") {
    return arith::Binary(ExprKind::kDiv, Fold(ExprKind::kAdd, x),
                         arith::FloatImm(static_cast<double>(x.size()), t));
  }
  return FloatActivation(op, x[0], attrs);
}

KernelBuilder Elementwise(const std::string& op) {
  return [op](const KernelContext& k) -> absl::StatusOr<Stmt> {
    std::vector<PrimExpr> probe;
    for (const Buffer& in : k.inputs) probe.push_back(arith::MakeVar("probe", in->dtype));
    if (probe.empty() || !ScalarOp(op, probe, k.out->dtype, k.call.attrs)) {
      return absl::UnimplementedError(
          absl::StrCat("no loop-level definition for op ", op, " on ", k.out->dtype.ToString()));
    }
    return Compute(k.out, [&](const Indices& idx) {
      std::vector<PrimExpr> operands;
      for (const Buffer& in : k.inputs) operands.push_back(LoadBroadcast(in, idx));
      return ScalarOp(op, operands, k.out->dtype, k.call.attrs);
    });
  };
}

// The input buffer of call argument `arg`, or nullptr where that argument is omitted:
// k.inputs leaves out shape and none arguments.
Buffer InputOf(const KernelContext& k, size_t arg) {
  size_t slot = 0;
  for (size_t i = 0; i < arg; ++i) {
    const ir::Expr& a = k.call.args[i];
    if (a->kind != ir::ExprKind::kShapeExpr && !ir::IsNone(a)) ++slot;
  }
  if (ir::IsNone(k.call.args[arg])) return nullptr;
  return k.inputs[slot];
}

// clip(x, min, max): each bound, a one-element tensor, clamps only if given; NaN stays.
absl::StatusOr<Stmt> ClipBody(const KernelContext& k) {
  if (k.call.args.size() != 3) return absl::InvalidArgumentError("clip expects 3 arguments");
  Buffer x = InputOf(k, 0), lo = InputOf(k, 1), hi = InputOf(k, 2);
  auto scalar = [](const Buffer& b) {
    return arith::Load(b, Indices(b->shape.size(), arith::IntImm(0)));
  };
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr v = arith::Load(x, idx);
    if (lo) v = arith::Select(Lt(v, scalar(lo)), scalar(lo), v);
    if (hi) v = arith::Select(Gt(v, scalar(hi)), scalar(hi), v);
    return v;
  });
}

// pow of two integers, exact and wrapping like the reference's repeated squaring: one pass
// per exponent bit over kernel-local scratch. A negative exponent gives the truncated
// reciprocal: 1 for base 1, +-1 for base -1, else 0.
Stmt IntPowBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.inputs[1], &out = k.out;
  DataType t = out->dtype, e = y->dtype;
  Indices at = {arith::IntImm(0)};
  Buffer acc = arith::MakeBuffer("acc", t, {arith::IntImm(1)});
  Buffer base = arith::MakeBuffer("base", t, {arith::IntImm(1)});
  Buffer rest = arith::MakeBuffer("rest", e, {arith::IntImm(1)});
  return LoopNest(out->shape, "i", [&](const Indices& idx) {
    PrimExpr exponent = LoadBroadcast(y, idx);
    PrimExpr b = arith::Load(base, at), r = arith::Load(rest, at);
    Stmt step = ir::Seq({
        ir::IfThenElse(Eq(arith::FloorMod(r, Imm(2, e)), Imm(1, e)),
                       ir::Store(acc, at, arith::Load(acc, at) * b)),
        ir::Store(base, at, b * b),
        ir::Store(rest, at, arith::FloorDiv(r, Imm(2, e))),
    });
    PrimExpr v = LoadBroadcast(x, idx);
    PrimExpr odd = Eq(arith::FloorMod(exponent, Imm(2, e)), Imm(1, e));
    PrimExpr reciprocal = arith::Select(Eq(v, Imm(1, t)), Imm(1, t), Zero(t));
    if (t.code == DataType::kInt) {
      reciprocal =
          arith::Select(Eq(v, Imm(-1, t)), arith::Select(odd, Imm(-1, t), Imm(1, t)), reciprocal);
    }
    PrimExpr result = arith::Load(acc, at);
    if (e.code == DataType::kInt) result = arith::Select(Lt(exponent, Zero(e)), reciprocal, result);
    Stmt body = ir::Seq({
        ir::Store(acc, at, Imm(1, t)),
        ir::Store(base, at, v),
        ir::Store(rest, at, exponent),
        ir::For(arith::MakeVar("bit"), arith::IntImm(0), arith::IntImm(e.bits),
                ir::ForKind::kSerial, step),
        ir::Store(out, idx, result),
    });
    return ir::Allocate(acc, ir::Allocate(base, ir::Allocate(rest, body)));
  });
}

absl::StatusOr<Stmt> PowBody(const KernelContext& k) {
  bool ints = k.inputs.size() == 2 && k.inputs[0]->dtype.is_int() && k.inputs[1]->dtype.is_int();
  if (ints) return IntPowBody(k);
  return Elementwise("pow")(k);
}

}  // namespace

void RegisterElementwiseKernelBuilders(KernelBuilderTable& table) {
  for (const char* op : {"add",
                         "subtract",
                         "multiply",
                         "divide",
                         "copy",
                         "relu",
                         "not",
                         "where",
                         "max",
                         "min",
                         "sum",
                         "mean",
                         "neg",
                         "abs",
                         "reciprocal",
                         "pow",
                         "equal",
                         "less",
                         "greater",
                         "less_or_equal",
                         "greater_or_equal",
                         "and",
                         "or",
                         "xor",
                         "sqrt",
                         "log",
                         "floor",
                         "ceil",
                         "erf",
                         "exp",
                         "tanh",
                         "sigmoid",
                         "sin",
                         "cos",
                         "tan",
                         "asin",
                         "acos",
                         "atan",
                         "sinh",
                         "cosh",
                         "asinh",
                         "acosh",
                         "atanh",
                         "cast",
                         "prelu",
                         "sign",
                         "shrink",
                         "mod",
                         "bit_shift",
                         "round",
                         "is_nan",
                         "is_inf"}) {
    table[op] = Elementwise(op);
  }
  for (const char* const* op = FloatActivationNames(); *op; ++op) table[*op] = Elementwise(*op);
  table["clip"] = ClipBody;
  table["pow"] = PowBody;
}

}  // namespace kiln::transform
