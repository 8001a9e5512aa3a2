// Float math without libm. Each function is an internal, always-inline LLVM function built with
// IRBuilder; its body is branch-free (selects, not branches), so a loop that calls it still
// vectorizes. The algorithms and coefficients are fdlibm's (Sun Microsystems, 1993, "permission
// to use, copy, modify, and distribute this software is freely granted") as FreeBSD msun and
// musl carry them, and Cephes' tanh (f32 erf is our own fit); references at each function.
//
// Accuracy, as tests/unit/codegen_math_test.cc measures it against long double references
// (worst case over some 20,000 inputs per function, f32 / f64):
//   exp 0.79 / 0.83 ulp, log 0.74 / 0.74, tanh 1.19 / 1.22, sigmoid 0.50 / 1.86,
//   erf 0.79 / 0.84 (f32 in f32 arithmetic with one exp, 0.83 over all f32 below 4 with or
//   without FMA: fdlibm's erf through f64 cost a GELU-heavy model a sixth of its time, and its
//   f32 form, with two exps and six divisions, still 7% of BERT); the test asserts 1 ulp for
//   exp, log and erf and 2 for tanh and f64 sigmoid. Over 4 million inputs, without FMA, f32
//   exp is off by at most 0.94 ulp (its polynomial has no division: a tenth of a softmax),
//   tanh 1.30, erf 0.83; f32 sigmoid in f32 arithmetic was off by 2.16 there (e / (1 + e)
//   rounds three times), so it goes through f64. floor, ceil, trunc, round, sqrt and fabs are
//   exact.
//   pow: f32 is computed as exp(y*log|x|) in f64, so within 1 ulp; f64 has a relative error of
//   about |y*log(x)| * 2^-53 (fine for ML exponents, not a correctly rounded libm pow), except
//   that the exponents 2, 1, -1 and 0.5 are exact.
//   sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh: f32 is computed through
//   f64 and rounded once (0.51 ulp asserted), its sin/cos/tan exactly reduced at any size;
//   f64 measures sin, cos, atan < 1 ulp, tan, acos < 2, asin, the hyperbolics and their
//   inverses 2.0-2.5 ulp (3 asserted), and reduces sin/cos/tan accurately only below
//   2^20*pi/2.
// Special values follow C99 Annex F (nan in, nan out; exp(-inf) = 0; log(0) = -inf; log(x<0) =
// nan; pow's special cases), except that floating-point exception flags are not raised.
#include "compiler/codegen/math_library.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "compiler/arith/check.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::codegen {
namespace {

using llvm::Value;

// Builds the body of one math function for float (f32) or double (f64).
class MathEmitter {
 public:
  MathEmitter(MathLibrary& library, llvm::IRBuilder<>& b, llvm::Type* type)
      : library_(library), b_(b), type_(type), f32_(type->isFloatTy()) {
    int_type_ = f32_ ? b.getInt32Ty() : b.getInt64Ty();
  }

  Value* Emit(const std::string& name, const std::vector<Value*>& args) {
    Value* x = args[0];
    if (name == "exp") return Exp(x);
    if (name == "log") return Log(x);
    if (name == "tanh") return Tanh(x);
    if (name == "sigmoid") return f32_ ? ThroughDouble("sigmoid", {x}) : Sigmoid(x);
    if (name == "round") return Round(x);
    if (name == "floor") return Floor(x);
    if (name == "ceil") return Ceil(x);
    if (name == "trunc") return CopySign(Floor(Abs(x)), x);
    if (name == "erf") return Erf(x);
    if (name == "pow") return f32_ ? ThroughDouble("pow", {x, args[1]}) : Pow(x, args[1]);
    if (name == "sin" || name == "cos" || name == "tan") {
      if (!f32_) return Trig(name, x, /*f32_bits=*/nullptr);
      // f32: reduced and evaluated in f64, with an exact reduction for large arguments.
      MathEmitter f64(library_, b_, b_.getDoubleTy());
      Value* bits = b_.CreateBitCast(x, b_.getInt32Ty());
      return b_.CreateFPTrunc(f64.Trig(name, b_.CreateFPExt(x, b_.getDoubleTy()), bits), type_);
    }
    if (f32_) return ThroughDouble(name, {x});
    if (name == "asin") return Asin(x);
    if (name == "acos") return Acos(x);
    if (name == "atan") return Atan(x);
    if (name == "sinh") return Sinh(x);
    if (name == "cosh") return Cosh(x);
    if (name == "asinh") return Asinh(x);
    if (name == "acosh") return Acosh(x);
    if (name == "atanh") return Atanh(x);
    KILN_CHECK(false) << "no math function " << name;
    return nullptr;
  }

 private:
  Value* C(double v) { return llvm::ConstantFP::get(type_, v); }
  Value* Bits(uint64_t bits) {
    return llvm::ConstantFP::get(type_->getContext(),
                                 llvm::APFloat(type_->getFltSemantics(),
                                               llvm::APInt(type_->getPrimitiveSizeInBits(), bits)));
  }
  Value* I(int64_t v) { return llvm::ConstantInt::get(int_type_, v, /*IsSigned=*/true); }
  Value* Add(Value* a, Value* b) { return b_.CreateFAdd(a, b); }
  Value* Sub(Value* a, Value* b) { return b_.CreateFSub(a, b); }
  Value* Mul(Value* a, Value* b) { return b_.CreateFMul(a, b); }
  Value* Div(Value* a, Value* b) { return b_.CreateFDiv(a, b); }
  Value* Select(Value* c, Value* a, Value* b) { return b_.CreateSelect(c, a, b); }
  Value* Abs(Value* x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  Value* CopySign(Value* mag, Value* sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  Value* IsNaN(Value* x) { return b_.CreateFCmpUNO(x, x); }
  Value* Call(const std::string& name, const std::vector<Value*>& args) {
    return library_.Call(b_, name, args);
  }

  // c[0] + x*(c[1] + x*(c[2] + ...)), Horner's scheme as fdlibm writes it.
  Value* Poly(Value* x, std::initializer_list<double> coeffs) {
    const double* c = coeffs.begin();
    Value* r = C(c[coeffs.size() - 1]);
    for (int i = static_cast<int>(coeffs.size()) - 2; i >= 0; --i) r = Add(C(c[i]), Mul(x, r));
    return r;
  }

  // a*b + c, fused where the target has a fast FMA: the functions that use it are accurate
  // either way.
  Value* MulAdd(Value* a, Value* b, Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type_}, {a, b, c});
  }
  // Poly with MulAdd.
  Value* MulAddPoly(Value* x, std::initializer_list<double> coeffs) {
    const double* c = coeffs.begin();
    Value* r = C(c[coeffs.size() - 1]);
    for (int i = static_cast<int>(coeffs.size()) - 2; i >= 0; --i) r = MulAdd(x, r, C(c[i]));
    return r;
  }

  // The integer nearest to v (ties to even), as a float and as an i32, for |v| < 2^22, without
  // a float-to-int conversion: adding 1.5 * 2^(mantissa bits) leaves it in the low bits of the
  // sum (as musl's exp does). Vectorized, this is an add and an integer subtract; conversions
  // are slower (f64 to i32 on AVX2), and the RVV ones with round-toward-zero abort Debian 12's
  // qemu-riscv64 (7.2, QEMU issue 1441) that the riscv64 tests run on.
  std::pair<Value*, Value*> NearestInt(Value* v) {
    Value* shift = C(1.5 * std::ldexp(1.0, f32_ ? 23 : 52));
    Value* sum = Add(v, shift);
    Value* low = b_.CreateSub(b_.CreateBitCast(sum, int_type_), b_.CreateBitCast(shift, int_type_));
    return {Sub(sum, shift), b_.CreateSExtOrTrunc(low, b_.getInt32Ty())};
  }

  // 2^n for n an i32 within the normal exponent range.
  Value* Pow2(Value* n) {
    int mantissa_bits = f32_ ? 23 : 52;
    int bias = f32_ ? 127 : 1023;
    Value* e = b_.CreateZExt(b_.CreateAdd(n, b_.getInt32(bias)), int_type_);
    return b_.CreateBitCast(b_.CreateShl(e, mantissa_bits), type_);
  }

  // y * 2^k in two steps, so that k may reach both ends of the range (overflow to inf,
  // gradual underflow with a single rounding).
  Value* Scale(Value* y, Value* k) {
    Value* k1 = b_.CreateAShr(k, 1);
    Value* k2 = b_.CreateSub(k, k1);
    return Mul(Mul(y, Pow2(k1)), Pow2(k2));
  }

  Value* ThroughDouble(const std::string& name, std::vector<Value*> args) {
    for (Value*& a : args) a = b_.CreateFPExt(a, b_.getDoubleTy());
    return b_.CreateFPTrunc(Call(name, args), type_);
  }

  // fdlibm e_exp.c / musl expf.c: x = k*ln2 + r with |r| <= ln2/2, exp(r) from a rational
  // approximation in r (f64), or 1 + r + r^2 * P(r) with SLEEF's degree-5 P (f32, no
  // division), then scaled by 2^k.
  Value* Exp(Value* x) {
    const double ln2_hi = f32_ ? 6.9314575195e-01 : 6.93147180369123816490e-01;
    const double ln2_lo = f32_ ? 1.4286067653e-06 : 1.90821492927058770002e-10;
    const double inv_ln2 = f32_ ? 1.4426950216e+00 : 1.44269504088896338700e+00;
    // Beyond these the result is 0 or inf anyway; clamping keeps k in Scale's range.
    const double lo = f32_ ? -104.0 : -746.0, hi = f32_ ? 89.0 : 710.0;
    Value* xc = Select(b_.CreateFCmpOGT(x, C(hi)), C(hi), x);
    xc = Select(b_.CreateFCmpOLT(xc, C(lo)), C(lo), xc);
    auto [kf, k] = NearestInt(Mul(xc, C(inv_ln2)));
    Value* high = Sub(xc, Mul(kf, C(ln2_hi)));
    Value* low = Mul(kf, C(ln2_lo));
    Value* r = Sub(high, low);
    if (f32_) {
      Value* p = MulAddPoly(r, {0.5, 0.166666671633720397949219, 0.0416664853692054748535156,
                                0.00833336077630519866943359, 0.00139304355252534151077271,
                                0.000198527617612853646278381});
      Value* y = Add(C(1.0), MulAdd(Mul(r, r), p, r));
      return Select(IsNaN(x), x, Scale(y, k));
    }
    Value* t = Mul(r, r);
    Value* p = f32_ ? Poly(t, {1.6666625440e-1, -2.7667332906e-3})
                    : Poly(t, {1.66666666666666019037e-01, -2.77777777770155933842e-03,
                               6.61375632143793436117e-05, -1.65339022054652515390e-06,
                               4.13813679705723846039e-08});
    Value* c = Sub(r, Mul(t, p));
    // y = 1 - ((lo - r*c/(2-c)) - hi)
    Value* y = Sub(C(1.0), Sub(Sub(low, Div(Mul(r, c), Sub(C(2.0), c))), high));
    return Select(IsNaN(x), x, Scale(y, k));
  }

  // fdlibm e_log.c / musl logf.c: x = 2^k * (1+f) with sqrt(2)/2 <= 1+f < sqrt(2), then
  // log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2)) with s = f/(2+f).
  Value* Log(Value* x) {
    const int shift = f32_ ? 23 : 52;
    const int64_t bias = f32_ ? 0x7f : 0x3ff;
    const int64_t base = f32_ ? 0x3f3504f3 : int64_t{0x3fe6a09e} << 32;  // bits of sqrt(2)/2
    const int64_t one = f32_ ? 0x3f800000 : int64_t{0x3ff00000} << 32;
    const int64_t mantissa = (int64_t{1} << shift) - 1;
    // Subnormals: scale into the normal range first.
    Value* subnormal = b_.CreateFCmpOLT(x, Bits(f32_ ? 0x00800000 : uint64_t{1} << 52));
    Value* xs = Select(subnormal, Mul(x, C(f32_ ? 0x1p25 : 0x1p54)), x);
    Value* ix = b_.CreateAdd(b_.CreateBitCast(xs, int_type_), I(one - base));
    Value* k = b_.CreateSub(b_.CreateLShr(ix, shift), I(bias));
    k = b_.CreateSub(b_.CreateTrunc(k, b_.getInt32Ty()),
                     Select(subnormal, b_.getInt32(f32_ ? 25 : 54), b_.getInt32(0)));
    ix = b_.CreateAdd(b_.CreateAnd(ix, I(mantissa)), I(base));
    Value* f = Sub(b_.CreateBitCast(ix, type_), C(1.0));
    Value* s = Div(f, Add(C(2.0), f));
    Value* z = Mul(s, s);
    Value* w = Mul(z, z);
    Value* r;
    if (f32_) {
      // Lg1..Lg4 = 0xaaaaaa.0p-24, 0xccce13.0p-25, 0x91e9ee.0p-25, 0xf89e26.0p-26.
      r = Add(Mul(z, Poly(w, {0x1.555554p-1, 0x1.23d3dcp-2})),
              Mul(w, Poly(w, {0x1.999c26p-2, 0x1.f13c4cp-3})));
    } else {
      r = Add(Mul(z, Poly(w, {6.666666666666735130e-01, 2.857142874366239149e-01,
                              1.818357216161805012e-01, 1.479819860511658591e-01})),
              Mul(w, Poly(w, {3.999999999940941908e-01, 2.222219843214978396e-01,
                              1.531383769920937332e-01})));
    }
    const double ln2_hi = f32_ ? 6.9313812256e-01 : 6.93147180369123816490e-01;
    const double ln2_lo = f32_ ? 9.0580006145e-06 : 1.90821492927058770002e-10;
    Value* hfsq = Mul(C(0.5), Mul(f, f));
    Value* dk = b_.CreateSIToFP(k, type_);
    // s*(hfsq+R) + dk*ln2_lo - hfsq + f + dk*ln2_hi, left to right as musl.
    Value* result =
        Add(Add(Sub(Add(Mul(s, Add(hfsq, r)), Mul(dk, C(ln2_lo))), hfsq), f), Mul(dk, C(ln2_hi)));
    result = Select(b_.CreateFCmpOEQ(x, C(INFINITY)), x, result);
    result = Select(b_.CreateFCmpOEQ(x, C(0.0)), C(-INFINITY), result);
    result = Select(b_.CreateFCmpOLT(x, C(0.0)), C(NAN), result);
    return Select(IsNaN(x), x, result);
  }

  // Cephes tanhf / tanh: an odd polynomial (f32) or rational function (f64) below 0.625,
  // 1 - 2/(exp(2|x|) + 1) above it.
  Value* Tanh(Value* x) {
    Value* ax = Abs(x);
    Value* z = Mul(x, x);
    Value* small;
    if (f32_) {
      Value* p = Poly(z, {-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2,
                          -5.70498872745e-3});
      small = Add(Mul(Mul(p, z), x), x);
    } else {
      Value* p = Poly(
          z, {-1.61468768441708447952e3, -9.92877231001918586564e1, -9.64399179425052238628e-1});
      Value* q = Poly(
          z, {4.84406305325125486048e3, 2.23548839060100448583e3, 1.12811678491632931402e2, 1.0});
      small = Add(x, Mul(x, Div(Mul(z, p), q)));
    }
    Value* e = Call("exp", {Add(ax, ax)});
    Value* large = Sub(C(1.0), Div(C(2.0), Add(e, C(1.0))));
    // tanh is odd; the sign also makes tanh(-0) = -0.
    return CopySign(Select(b_.CreateFCmpOLT(ax, C(0.625)), small, large), x);
  }

  // 1/(1 + exp(-x)) for x >= 0 and exp(x)/(1 + exp(x)) below, so exp never overflows and
  // tiny results keep their precision.
  Value* Sigmoid(Value* x) {
    Value* e = Call("exp", {b_.CreateFNeg(Abs(x))});
    Value* one_plus = Add(C(1.0), e);
    return Select(b_.CreateFCmpOLT(x, C(0.0)), Div(e, one_plus), Div(C(1.0), one_plus));
  }

  // Round half to even: adding and subtracting 2^mantissa_bits rounds in the current (default,
  // nearest-even) mode; values at or above that magnitude are already integers.
  Value* Round(Value* x) {
    Value* ax = Abs(x);
    Value* big = C(f32_ ? 0x1p23 : 0x1p52);
    Value* r = CopySign(Sub(Add(ax, big), big), x);
    return Select(b_.CreateFCmpOLT(ax, big), r, x);
  }
  Value* Floor(Value* x) {
    Value* r = Round(x);
    return Select(b_.CreateFCmpOGT(r, x), Sub(r, C(1.0)), r);
  }
  Value* Ceil(Value* x) {
    Value* r = Round(x);
    return Select(b_.CreateFCmpOLT(r, x), Add(r, C(1.0)), r);
  }

  // f32: x + x*P(x^2) below 25/32 and 1 - exp(Q(|x| - 25/32))/4 up to 3.9192059, above which
  // erf rounds to 1. P and Q are our own weighted minimax fits to erf(x)/x - 1 and
  // log(4*erfc(x)) with f32 coefficients; the factor 4 keeps |Q| small (its rounding is
  // amplified by exp) where erfc is large. One exp and no other division; within 0.83 ulp
  // over every f32 below 4, with or without fused multiply-adds.
  // f64: fdlibm s_erf.c: x + x*P/Q below 0.84375, erx + P/Q around 1, and above that
  // 1 - exp(-x^2 - 0.5625 + R/S)/x.
  Value* Erf(Value* x) {
    Value* ax = Abs(x);
    if (f32_) {
      Value* p = MulAddPoly(Mul(x, x), {0x1.06eba8p-3, -0x1.81274p-2, 0x1.ce2d58p-4, -0x1.b7fedap-6,
                                        0x1.5427dep-8, -0x1.a47720p-11, 0x1.49531cp-14});
      Value* small = MulAdd(ax, p, ax);
      Value* q = MulAddPoly(Sub(ax, C(0.78125)),
                            {0x1.2f6c72p-4, -0x1.2364f2p+1, -0x1.a01e6cp-1, -0x1.a4cce4p-5,
                             0x1.9832d4p-7, -0x1.3d7846p-9, 0x1.5c6c42p-12, -0x1.97db70p-16});
      Value* large = MulAdd(C(-0.25), Call("exp", {q}), C(1.0));
      Value* result = Select(b_.CreateFCmpOLT(ax, C(0.78125)), small, large);
      result = Select(b_.CreateFCmpOLT(ax, C(0x1.f5a88ap+1)), result, C(1.0));
      return Select(IsNaN(x), x, CopySign(result, x));
    }
    Value* z = Mul(x, x);
    Value* small =
        Add(x, Mul(x, Div(Poly(z, {1.28379167095512558561e-01, -3.25042107247001499370e-01,
                                   -2.84817495755985104766e-02, -5.77027029648944159157e-03,
                                   -2.37630166566501626084e-05}),
                          Poly(z, {1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
                                   5.08130628187576562776e-03, 1.32494738004321644526e-04,
                                   -3.96022827877536812320e-06}))));
    Value* s = Sub(ax, C(1.0));
    Value* near_one = Add(C(8.45062911510467529297e-01),
                          Div(Poly(s, {-2.36211856075265944077e-03, 4.14856118683748331666e-01,
                                       -3.72207876035701323847e-01, 3.18346619901161753674e-01,
                                       -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                                       -2.16637559486879084300e-03}),
                              Poly(s, {1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
                                       7.18286544141962662868e-02, 1.26171219808761642112e-01,
                                       1.36370839120290507362e-02, 1.19844998467991074170e-02})));
    Value* tail = Select(b_.CreateFCmpOLT(ax, C(6.0)), ErfTail(ax), C(1.0));
    Value* result = CopySign(Select(b_.CreateFCmpOLT(ax, C(1.25)), near_one, tail), x);
    result = Select(b_.CreateFCmpOLT(ax, C(0.84375)), small, result);
    return Select(IsNaN(x), x, result);
  }

  // 1 - erfc(ax) for 1.25 <= ax < 6.
  Value* ErfTail(Value* ax) {
    Value* s = Div(C(1.0), Mul(ax, ax));
    Value* r1 = Div(Poly(s, {-9.86494403484714822705e-03, -6.93858572707181764372e-01,
                             -1.05586262253232909814e+01, -6.23753324503260060396e+01,
                             -1.62396669462573470355e+02, -1.84605092906711035994e+02,
                             -8.12874355063065934246e+01, -9.81432934416914548592e+00}),
                    Poly(s, {1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
                             4.34565877475229228821e+02, 6.45387271733267880336e+02,
                             4.29008140027567833386e+02, 1.08635005541779435134e+02,
                             6.57024977031928170135e+00, -6.04244152148580987438e-02}));
    Value* r2 = Div(
        Poly(s,
             {-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
              -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
              -4.83519191608651397019e+02}),
        Poly(s, {1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
                 1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03,
                 4.74528541206955367215e+02, -2.24409524465858183362e+01}));
    // |x| < 1/0.35, compared as fdlibm does on the high word.
    Value* r =
        Select(b_.CreateFCmpOLT(ax, f32_ ? Bits(0x4036DB6E) : Bits(0x4006DB6E00000000)), r1, r2);
    // exp(-x^2) as exp(-z^2) * exp((z-x)(z+x)) with z = x cut to half its significand (f64: 32
    // bits, f32: 12 as in fdlibm's erff), so z^2 is exact.
    int64_t high = f32_ ? 0xfffff000 : static_cast<int64_t>(0xffffffff00000000ULL);
    Value* zt = b_.CreateBitCast(b_.CreateAnd(b_.CreateBitCast(ax, int_type_), I(high)), type_);
    Value* e1 = Call("exp", {Sub(b_.CreateFNeg(Mul(zt, zt)), C(0.5625))});
    Value* e2 = Call("exp", {Add(Mul(Sub(zt, ax), Add(zt, ax)), r)});
    return Sub(C(1.0), Div(Mul(e1, e2), ax));
  }

  // pow(x, y) = exp(y * log|x|) with C99's special cases (double only). The exponents models
  // use most (2, 1, -1, 0.5) take an exact path.
  Value* Pow(Value* x, Value* y) {
    Value* r = Call("exp", {Mul(y, Call("log", {Abs(x)}))});
    Value* y_int = b_.CreateFCmpOEQ(Floor(y), y);
    Value* half = Mul(y, C(0.5));
    Value* y_odd = b_.CreateAnd(y_int, b_.CreateFCmpONE(Floor(half), half));
    Value* x_neg = b_.CreateICmpSLT(b_.CreateBitCast(x, int_type_), I(0));  // sign bit, -0 too
    r = Select(b_.CreateAnd(x_neg, y_odd), b_.CreateFNeg(r), r);
    Value* finite_negative =
        b_.CreateAnd(b_.CreateFCmpOLT(x, C(0.0)), b_.CreateFCmpONE(x, C(-INFINITY)));
    r = Select(b_.CreateAnd(finite_negative, b_.CreateNot(y_int)), C(NAN), r);
    r = Select(b_.CreateFCmpOEQ(y, C(2.0)), Mul(x, x), r);
    r = Select(b_.CreateFCmpOEQ(y, C(1.0)), x, r);
    r = Select(b_.CreateFCmpOEQ(y, C(-1.0)), Div(C(1.0), x), r);
    // pow(-0, 0.5) = +0 and pow(-inf, 0.5) = +inf, unlike sqrt.
    Value* root = Select(b_.CreateFCmpOEQ(x, C(-INFINITY)), C(INFINITY),
                         Add(b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x), C(0.0)));
    r = Select(b_.CreateFCmpOEQ(y, C(0.5)), root, r);
    Value* minus_one_inf =
        b_.CreateAnd(b_.CreateFCmpOEQ(x, C(-1.0)), b_.CreateFCmpOEQ(Abs(y), C(INFINITY)));
    Value* one = b_.CreateOr(b_.CreateOr(b_.CreateFCmpOEQ(x, C(1.0)), b_.CreateFCmpOEQ(y, C(0.0))),
                             minus_one_inf);
    return Select(one, C(1.0), r);
  }

  // sin, cos or tan of a double x. `f32_bits`, when x came from an f32, allows the exact
  // reduction of huge arguments (ReduceLargeF32); without it, |x| beyond 2^20*pi/2 loses
  // accuracy (fdlibm would need its multi-precision __rem_pio2_large there).
  Value* Trig(const std::string& name, Value* x, Value* f32_bits) {
    Value* ax = Abs(x);
    Value* finite = b_.CreateFCmpOLT(ax, C(INFINITY));
    Value* medium_ok = b_.CreateFCmpOLT(ax, C(0x1p20 * 1.5707963267948966));
    // Keeps the reductions' integer conversions defined for inf and NaN.
    Reduced r = ReduceMedium(Select(finite, ax, C(0.0)));
    if (f32_bits) {
      Reduced large = ReduceLargeF32(f32_bits);
      r.hi = Select(medium_ok, r.hi, large.hi);
      r.lo = Select(medium_ok, r.lo, large.lo);
      r.n = Select(medium_ok, r.n, large.n);
    }
    Value* s = SinKernel(r.hi, r.lo);
    Value* c = CosKernel(r.hi, r.lo);
    Value* q = b_.CreateAnd(r.n, b_.getInt32(3));
    Value* odd = b_.CreateICmpNE(b_.CreateAnd(q, b_.getInt32(1)), b_.getInt32(0));
    Value* upper = b_.CreateICmpNE(b_.CreateAnd(q, b_.getInt32(2)), b_.getInt32(0));
    Value* result;
    if (name == "sin") {
      // sin(r + q*pi/2) = sin r, cos r, -sin r, -cos r; sin is odd.
      result = Select(odd, c, s);
      result = Select(upper, b_.CreateFNeg(result), result);
      result = Select(b_.CreateFCmpOLT(x, C(0.0)), b_.CreateFNeg(result), result);
    } else if (name == "cos") {
      // cos(r + q*pi/2) = cos r, -sin r, -cos r, sin r; cos is even.
      result = Select(odd, s, c);
      Value* negate = b_.CreateXor(upper, odd);
      result = Select(negate, b_.CreateFNeg(result), result);
    } else {
      // tan(r + q*pi/2) = tan r for even q, -1/tan r for odd q; tan is odd.
      result = Select(odd, b_.CreateFNeg(Div(c, s)), Div(s, c));
      result = Select(b_.CreateFCmpOLT(x, C(0.0)), b_.CreateFNeg(result), result);
    }
    // sin(+-0) = +-0 keeps its sign; inf and nan give nan.
    result = Select(b_.CreateFCmpOEQ(x, C(0.0)), name == "cos" ? C(1.0) : x, result);
    return Select(finite, result, C(NAN));
  }

  // x = n*pi/2 + (hi + lo), |hi + lo| <= pi/4 (about).
  struct Reduced {
    Value* hi;
    Value* lo;
    Value* n;  // i32; only n mod 4 is used
  };

  Value* ExponentBits(Value* v) {
    return b_.CreateAnd(b_.CreateLShr(b_.CreateBitCast(v, int_type_), 52), I(0x7ff));
  }

  // fdlibm e_rem_pio2.c, medium case (|x| < 2^20*pi/2, x >= 0): Cody-Waite reduction by
  // pi/2 in three 33-bit pieces, taking the second and third only when cancellation needs
  // them. Branch-free: all three rounds are computed and selected.
  Reduced ReduceMedium(Value* x) {
    const double invpio2 = 6.36619772367581382433e-01;
    const double pio2_1 = 1.57079632673412561417e+00, pio2_1t = 6.07710050650619224932e-11;
    const double pio2_2 = 6.07710050630396597660e-11, pio2_2t = 2.02226624879595063154e-21;
    const double pio2_3 = 2.02226624871116645580e-21, pio2_3t = 8.47842766036889956997e-32;
    Value* fn = Round(Mul(x, C(invpio2)));
    // Only n mod 4 matters; taking it in floating point keeps the conversion in range.
    Value* n4 = Sub(fn, Mul(C(4.0), Floor(Mul(fn, C(0.25)))));
    Value* n = NearestInt(n4).second;
    Value* r1 = Sub(x, Mul(fn, C(pio2_1)));
    Value* w1 = Mul(fn, C(pio2_1t));
    Value* y1 = Sub(r1, w1);
    auto round = [&](Value* t, double p, double pt, Value** r, Value** w) {
      Value* head = Mul(fn, C(p));
      *r = Sub(t, head);
      *w = Sub(Mul(fn, C(pt)), Sub(Sub(t, *r), head));
    };
    Value *r2, *w2, *r3, *w3;
    round(r1, pio2_2, pio2_2t, &r2, &w2);
    Value* y2 = Sub(r2, w2);
    round(r2, pio2_3, pio2_3t, &r3, &w3);
    Value* y3 = Sub(r3, w3);
    Value* j = ExponentBits(x);
    Value* second = b_.CreateICmpSGT(b_.CreateSub(j, ExponentBits(y1)), I(16));
    Value* third = b_.CreateAnd(second, b_.CreateICmpSGT(b_.CreateSub(j, ExponentBits(y2)), I(49)));
    Value* r = Select(third, r3, Select(second, r2, r1));
    Value* w = Select(third, w3, Select(second, w2, w1));
    Value* hi = Select(third, y3, Select(second, y2, y1));
    return {hi, Sub(Sub(r, hi), w), n};
  }

  // |x| of an f32 (given as its bits) reduced exactly by pi/2, for |x| >= 2^7 (ARM's
  // optimized-routines sincosf.h, reduce_large): the 24-bit mantissa times 96 bits of 2/pi
  // picked by the exponent, in 64-bit integers; the top 2 bits of the fraction are the
  // quadrant. The 2/pi table is a vector constant, so the function still reads no memory.
  Reduced ReduceLargeF32(Value* bits) {
    static const uint32_t kInvPio4[24] = {
        0xa2,       0xa2f9,     0xa2f983,   0xa2f9836e, 0xf9836e4e, 0x836e4e44,
        0x6e4e4415, 0x4e441529, 0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
        0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0, 0x34ddc0db, 0xddc0db62,
        0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041};
    auto* table =
        llvm::ConstantDataVector::get(b_.getContext(), llvm::ArrayRef<uint32_t>(kInvPio4, 24));
    auto* i32 = b_.getInt32Ty();
    auto* i64 = b_.getInt64Ty();
    Value* index = b_.CreateAnd(b_.CreateLShr(bits, 26), 15);
    Value* shift = b_.CreateAnd(b_.CreateLShr(bits, 23), 7);
    Value* m = b_.CreateShl(b_.CreateOr(b_.CreateAnd(bits, 0xffffff), 0x800000), shift);
    auto entry = [&](int offset) {
      return b_.CreateExtractElement(table, b_.CreateAdd(index, b_.getInt32(offset)));
    };
    Value* m64 = b_.CreateZExt(m, i64);
    Value* res0 = b_.CreateZExt(b_.CreateMul(m, entry(0)), i64);
    Value* res1 = b_.CreateMul(m64, b_.CreateZExt(entry(4), i64));
    Value* res2 = b_.CreateMul(m64, b_.CreateZExt(entry(8), i64));
    res0 = b_.CreateOr(b_.CreateLShr(res2, 32), b_.CreateShl(res0, 32));
    res0 = b_.CreateAdd(res0, res1);
    Value* n = b_.CreateLShr(b_.CreateAdd(res0, b_.getInt64(uint64_t{1} << 61)), 62);
    res0 = b_.CreateSub(res0, b_.CreateShl(n, 62));
    Value* r = Mul(b_.CreateSIToFP(res0, type_), C(0x1.921FB54442D18p-62));
    return {r, C(0.0), b_.CreateTrunc(n, i32)};
  }

  // fdlibm k_sin.c: sin(x + y) for |x| <= pi/4, y the tail of x.
  Value* SinKernel(Value* x, Value* y) {
    Value* z = Mul(x, x);
    Value* w = Mul(z, z);
    Value* r = Add(
        Poly(z,
             {8.33333333332248946124e-03, -1.98412698298579493134e-04, 2.75573137070700676789e-06}),
        Mul(Mul(z, w), Poly(z, {-2.50507602534068634195e-08, 1.58969099521155010221e-10})));
    Value* v = Mul(z, x);
    Value* s1 = C(-1.66666666666666324348e-01);
    return Sub(x, Sub(Sub(Mul(z, Sub(Mul(C(0.5), y), Mul(v, r))), y), Mul(v, s1)));
  }

  // fdlibm k_cos.c (FreeBSD's revision): cos(x + y) for |x| <= pi/4.
  Value* CosKernel(Value* x, Value* y) {
    Value* z = Mul(x, x);
    Value* w = Mul(z, z);
    Value* r = Add(Mul(z, Poly(z, {4.16666666666666019037e-02, -1.38888888888741095749e-03,
                                   2.48015872894767294178e-05})),
                   Mul(Mul(w, w), Poly(z, {-2.75573143513906633035e-07, 2.08757232129817482790e-09,
                                           -1.13596475577881948265e-11})));
    Value* hz = Mul(C(0.5), z);
    Value* one_minus = Sub(C(1.0), hz);
    return Add(one_minus, Add(Sub(Sub(C(1.0), one_minus), hz), Sub(Mul(z, r), Mul(x, y))));
  }

  // fdlibm s_atan.c: |x| reduced to one of five intervals around 0, 0.5, 1, 1.5 and inf,
  // atan(t) there by an odd polynomial, plus atan of the interval's centre in two parts.
  Value* Atan(Value* x) {
    Value* ax = Abs(x);
    Value* below_0_6875 = b_.CreateFCmpOLT(ax, C(0.6875));
    Value* below_1_1875 = b_.CreateFCmpOLT(ax, C(1.1875));
    Value* below_2_4375 = b_.CreateFCmpOLT(ax, C(2.4375));
    Value* small = b_.CreateFCmpOLT(ax, C(0.4375));
    Value* t =
        Select(below_2_4375, Div(Sub(ax, C(1.5)), Add(C(1.0), Mul(C(1.5), ax))), Div(C(-1.0), ax));
    t = Select(below_1_1875, Div(Sub(ax, C(1.0)), Add(ax, C(1.0))), t);
    t = Select(below_0_6875, Div(Sub(Add(ax, ax), C(1.0)), Add(C(2.0), ax)), t);
    t = Select(small, ax, t);
    auto pick = [&](double a, double b, double c, double d) {
      return Select(below_0_6875, C(a),
                    Select(below_1_1875, C(b), Select(below_2_4375, C(c), C(d))));
    };
    Value* hi = pick(4.63647609000806093515e-01, 7.85398163397448278999e-01,
                     9.82793723247329054082e-01, 1.57079632679489655800e+00);
    Value* lo = pick(2.26987774529616870924e-17, 3.06161699786838301793e-17,
                     1.39033110312309984516e-17, 6.12323399573676603587e-17);
    Value* z = Mul(t, t);
    Value* w = Mul(z, z);
    Value* s1 = Mul(z, Poly(w, {3.33333333333329318027e-01, 1.42857142725034663711e-01,
                                9.09088713343650656196e-02, 6.66107313738753120669e-02,
                                4.97687799461593236017e-02, 1.62858201153657823623e-02}));
    Value* s2 = Mul(w, Poly(w, {-1.99999999998764832476e-01, -1.11111104054623557880e-01,
                                -7.69187620504482999495e-02, -5.83357013379057348645e-02,
                                -3.65315727442169155270e-02}));
    Value* tail = Mul(t, Add(s1, s2));
    Value* reduced = Sub(hi, Sub(Sub(tail, lo), t));
    Value* result = CopySign(Select(small, Sub(t, tail), reduced), x);
    return Select(IsNaN(x), x, result);
  }

  // asin x = atan(x / sqrt((1-x)(1+x))): the factored form keeps 1 - x^2 accurate near
  // |x| = 1; |x| > 1 gives sqrt of a negative, nan.
  Value* Asin(Value* x) {
    Value* ax = Abs(x);
    Value* root =
        b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, Mul(Sub(C(1.0), ax), Add(C(1.0), ax)));
    return CopySign(Atan(Div(ax, root)), x);
  }

  // acos x = 2 atan(sqrt((1-x)/(1+x))); 1-x and 1+x are exact where each is small.
  Value* Acos(Value* x) {
    Value* ratio = Div(Sub(C(1.0), x), Add(C(1.0), x));
    return Mul(C(2.0), Atan(b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, ratio)));
  }

  // log(1 + u) without losing u's low bits (Goldberg, "What every computer scientist should
  // know about floating-point arithmetic", 1991, theorem 4): log(w) * u / (w - 1), w = 1 + u.
  Value* Log1p(Value* u) {
    Value* w = Add(C(1.0), u);
    Value* r = Div(Mul(Call("log", {w}), u), Sub(w, C(1.0)));
    r = Select(b_.CreateFCmpOEQ(w, C(INFINITY)), w, r);
    return Select(b_.CreateFCmpOEQ(w, C(1.0)), u, r);
  }

  // sinh: a Taylor series to x^17 below 0.5 (where e^x - e^-x cancels), (e - 1/e)/2 up to
  // 22, and e^(x/2) * e^(x/2)/2 beyond, which does not overflow before sinh does.
  Value* Sinh(Value* x) {
    Value* ax = Abs(x);
    Value* z = Mul(ax, ax);
    Value* series =
        Add(ax, Mul(Mul(ax, z),
                    Poly(z, {1.0 / 6, 1.0 / 120, 1.0 / 5040, 1.0 / 362880, 1.0 / 39916800,
                             1.0 / 6227020800.0, 1.0 / 1307674368000.0, 1.0 / 355687428096000.0})));
    Value* e = Call("exp", {ax});
    Value* mid = Mul(C(0.5), Sub(e, Div(C(1.0), e)));
    Value* h = Call("exp", {Mul(C(0.5), ax)});
    Value* large = Mul(Mul(C(0.5), h), h);
    Value* r = Select(b_.CreateFCmpOLT(ax, C(22.0)), mid, large);
    r = Select(b_.CreateFCmpOLT(ax, C(0.5)), series, r);
    return Select(IsNaN(x), x, CopySign(r, x));
  }

  Value* Cosh(Value* x) {
    Value* ax = Abs(x);
    Value* e = Call("exp", {ax});
    Value* mid = Add(Mul(C(0.5), e), Div(C(0.5), e));
    Value* h = Call("exp", {Mul(C(0.5), ax)});
    Value* large = Mul(Mul(C(0.5), h), h);
    return Select(b_.CreateFCmpOLT(ax, C(22.0)), mid, large);
  }

  // asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), log|x| + ln 2 past 2^28.
  Value* Asinh(Value* x) {
    Value* ax = Abs(x);
    Value* z = Mul(ax, ax);
    Value* root = b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, Add(C(1.0), z));
    Value* r = Log1p(Add(ax, Div(z, Add(C(1.0), root))));
    Value* large = Add(Call("log", {ax}), C(M_LN2));
    r = Select(b_.CreateFCmpOLT(ax, C(0x1p28)), r, large);
    return Select(IsNaN(x), x, CopySign(r, x));
  }

  // acosh: log1p(t + sqrt(2t + t^2)), t = x - 1 (exact), below 2; fdlibm's
  // log(2x - 1/(x + sqrt(x^2 - 1))) up to 2^28, log x + ln 2 beyond; nan below 1.
  Value* Acosh(Value* x) {
    Value* t = Sub(x, C(1.0));
    Value* near_one =
        Log1p(Add(t, b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, Add(Add(t, t), Mul(t, t)))));
    Value* root = b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, Sub(Mul(x, x), C(1.0)));
    Value* mid = Call("log", {Sub(Add(x, x), Div(C(1.0), Add(x, root)))});
    Value* large = Add(Call("log", {x}), C(M_LN2));
    Value* r = Select(b_.CreateFCmpOLT(x, C(0x1p28)), mid, large);
    r = Select(b_.CreateFCmpOLT(x, C(2.0)), near_one, r);
    return Select(b_.CreateFCmpOLT(x, C(1.0)), C(NAN), r);
  }

  // fdlibm e_atanh.c: atanh |x| = log1p(2|x| + 2x^2/(1-|x|))/2 below 0.5,
  // log1p(2|x|/(1-|x|))/2 above; 1 gives inf, beyond 1 nan.
  Value* Atanh(Value* x) {
    Value* ax = Abs(x);
    Value* t = Add(ax, ax);
    Value* one_minus = Sub(C(1.0), ax);
    Value* small = Log1p(Add(t, Div(Mul(t, ax), one_minus)));
    Value* large = Log1p(Div(t, one_minus));
    Value* r = Mul(C(0.5), Select(b_.CreateFCmpOLT(ax, C(0.5)), small, large));
    r = Select(b_.CreateFCmpOGT(ax, C(1.0)), C(NAN), r);
    return Select(IsNaN(x), x, CopySign(r, x));
  }

  MathLibrary& library_;
  llvm::IRBuilder<>& b_;
  llvm::Type* type_;
  llvm::Type* int_type_;
  bool f32_;
};

}  // namespace

bool MathLibrary::IsMathFunction(const std::string& name) { return Arity(name) > 0; }

int MathLibrary::Arity(const std::string& name) {
  static const char* const kUnary[] = {
      "exp", "log", "sqrt", "tanh", "sigmoid", "fabs", "floor", "ceil", "trunc", "round", "erf",
      "sin", "cos", "tan",  "asin", "acos",    "atan", "sinh",  "cosh", "asinh", "acosh", "atanh"};
  if (name == "pow") return 2;
  for (const char* n : kUnary) {
    if (name == n) return 1;
  }
  return 0;
}

llvm::Value* MathLibrary::Call(llvm::IRBuilder<>& b, const std::string& name,
                               const std::vector<llvm::Value*>& args) {
  KILN_CHECK_EQ(static_cast<int>(args.size()), Arity(name)) << "arguments of " << name;
  llvm::Type* type = args[0]->getType();
  KILN_CHECK(type->isFloatTy() || type->isDoubleTy()) << name << " needs f32 or f64 operands";
  for (llvm::Value* a : args) KILN_CHECK(a->getType() == type) << "mixed operand types of " << name;
  // These two are single instructions on every target we emit for.
  if (name == "sqrt") return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, args[0]);
  if (name == "fabs") return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, args[0]);
  return b.CreateCall(GetOrCreate(name, type), args);
}

namespace {

// half -> f32 (F. Giesen, "half_to_float_fast5"): move exponent and mantissa into place and
// rebias; inf/NaN get the f32 all-ones exponent; subnormals are renormalized by an exact f32
// subtraction of 2^-14.
Value* EmitHalfToFloat(llvm::IRBuilder<>& b, Value* bits) {
  auto* i32 = b.getInt32Ty();
  auto* f32 = b.getFloatTy();
  Value* h = b.CreateZExt(bits, i32);
  Value* sign = b.CreateShl(b.CreateAnd(h, 0x8000), 16);
  Value* o = b.CreateShl(b.CreateAnd(h, 0x7fff), 13);
  Value* exponent = b.CreateAnd(o, 0x0f800000);
  o = b.CreateAdd(o, b.getInt32((127 - 15) << 23));
  Value* inf_nan = b.CreateAdd(o, b.getInt32((128 - 16) << 23));
  Value* magic = b.CreateBitCast(b.getInt32(113 << 23), f32);
  Value* subnormal = b.CreateBitCast(
      b.CreateFSub(b.CreateBitCast(b.CreateAdd(o, b.getInt32(1 << 23)), f32), magic), i32);
  Value* r = b.CreateSelect(b.CreateICmpEQ(exponent, b.getInt32(0x0f800000)), inf_nan, o);
  r = b.CreateSelect(b.CreateICmpEQ(exponent, b.getInt32(0)), subnormal, r);
  return b.CreateBitCast(b.CreateOr(r, sign), f32);
}

// f32 -> half, round to nearest even (F. Giesen, "float_to_half_fast3_rtne"), branch-free.
// Results that are subnormal halves come from an f32 addition of 0.5, which rounds the
// mantissa at exactly the half's last place.
Value* EmitFloatToHalf(llvm::IRBuilder<>& b, Value* value) {
  auto* i32 = b.getInt32Ty();
  auto* f32 = b.getFloatTy();
  Value* u = b.CreateBitCast(value, i32);
  Value* sign = b.CreateAnd(u, 0x80000000u);
  Value* a = b.CreateXor(u, sign);  // |value|
  Value* nan_or_inf = b.CreateSelect(b.CreateICmpUGT(a, b.getInt32(255u << 23)), b.getInt32(0x7e00),
                                     b.getInt32(0x7c00));
  Value* denorm_magic = b.getInt32(((127 - 15) + (23 - 10) + 1) << 23);
  Value* shifted = b.CreateFAdd(b.CreateBitCast(a, f32), b.CreateBitCast(denorm_magic, f32));
  Value* subnormal = b.CreateSub(b.CreateBitCast(shifted, i32), denorm_magic);
  Value* odd = b.CreateAnd(b.CreateLShr(a, 13), 1);
  Value* rebiased = b.CreateAdd(a, b.getInt32(((15 - 127) << 23) + 0xfff));
  Value* normal = b.CreateLShr(b.CreateAdd(rebiased, odd), 13);
  Value* finite = b.CreateSelect(b.CreateICmpULT(a, b.getInt32(113u << 23)), subnormal, normal);
  Value* r = b.CreateSelect(b.CreateICmpUGE(a, b.getInt32((127u + 16) << 23)), nan_or_inf, finite);
  r = b.CreateOr(r, b.CreateLShr(sign, 16));
  return b.CreateTrunc(r, b.getInt16Ty());
}

void SetPureInlineAttributes(llvm::Function* fn) {
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::WillReturn);
  fn->addFnAttr(llvm::Attribute::NoSync);
  fn->addFnAttr(llvm::Attribute::NoFree);
  fn->addFnAttr(llvm::Attribute::Speculatable);
  fn->setDoesNotAccessMemory();
}

}  // namespace

llvm::Value* MathLibrary::HalfBitsToFloat(llvm::IRBuilder<>& b, llvm::Value* bits) {
  KILN_CHECK(bits->getType()->isIntegerTy(16)) << "half bits must be i16";
  return b.CreateCall(GetOrCreateHalfConversion(/*to_half=*/false), {bits});
}

llvm::Value* MathLibrary::FloatToHalfBits(llvm::IRBuilder<>& b, llvm::Value* value) {
  KILN_CHECK(value->getType()->isFloatTy()) << "only f32 values are rounded to half";
  return b.CreateCall(GetOrCreateHalfConversion(/*to_half=*/true), {value});
}

llvm::Function* MathLibrary::GetOrCreateHalfConversion(bool to_half) {
  auto& ctx = module_.getContext();
  llvm::Type* i16 = llvm::Type::getInt16Ty(ctx);
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  auto key = std::make_pair(std::string(to_half ? "to_half" : "from_half"), to_half ? f32 : i16);
  if (auto it = functions_.find(key); it != functions_.end()) return it->second;
  auto* fn_type = llvm::FunctionType::get(to_half ? i16 : f32, {to_half ? f32 : i16}, false);
  auto* fn = llvm::Function::Create(fn_type, llvm::GlobalValue::InternalLinkage,
                                    to_half ? "kiln.half.from_f32" : "kiln.half.to_f32", module_);
  SetPureInlineAttributes(fn);
  functions_[key] = fn;
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* arg = fn->getArg(0);
  b.CreateRet(to_half ? EmitFloatToHalf(b, arg) : EmitHalfToFloat(b, arg));
  return fn;
}

llvm::Function* MathLibrary::GetOrCreate(const std::string& name, llvm::Type* type) {
  auto key = std::make_pair(name, type);
  if (auto it = functions_.find(key); it != functions_.end()) return it->second;
  std::vector<llvm::Type*> params(Arity(name), type);
  auto* fn_type = llvm::FunctionType::get(type, params, /*isVarArg=*/false);
  std::string symbol = "kiln.math." + name + (type->isFloatTy() ? ".f32" : ".f64");
  auto* fn = llvm::Function::Create(fn_type, llvm::GlobalValue::InternalLinkage, symbol, module_);
  SetPureInlineAttributes(fn);
  functions_[key] = fn;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(module_.getContext(), "entry", fn));
  std::vector<llvm::Value*> args;
  for (llvm::Argument& a : fn->args()) args.push_back(&a);
  MathEmitter emitter(*this, b, type);
  b.CreateRet(emitter.Emit(name, args));
  return fn;
}

}  // namespace kiln::codegen
