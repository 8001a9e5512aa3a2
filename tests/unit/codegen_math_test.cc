// Accuracy and special values of the generated math functions (compiler/codegen/
// math_library.cc), run inside vectorized kernels, against long double references.
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

const char* const kUnary[] = {"exp",  "log",   "tanh",  "sigmoid", "erf",   "sqrt", "fabs", "floor",
                              "ceil", "trunc", "round", "sin",     "cos",   "tan",  "asin", "acos",
                              "atan", "sinh",  "cosh",  "asinh",   "acosh", "atanh"};

long double Reference(const std::string& name, long double x) {
  if (name == "exp") return std::exp(x);
  if (name == "log") return std::log(x);
  if (name == "tanh") return std::tanh(x);
  if (name == "sigmoid") return 1.0L / (1.0L + std::exp(-x));
  if (name == "erf") return std::erf(x);
  if (name == "sqrt") return std::sqrt(x);
  if (name == "fabs") return std::fabs(x);
  if (name == "floor") return std::floor(x);
  if (name == "ceil") return std::ceil(x);
  if (name == "trunc") return std::trunc(x);
  if (name == "round") return std::nearbyint(x);  // default mode: half to even
  if (name == "sin") return std::sin(x);
  if (name == "cos") return std::cos(x);
  if (name == "tan") return std::tan(x);
  if (name == "asin") return std::asin(x);
  if (name == "acos") return std::acos(x);
  if (name == "atan") return std::atan(x);
  if (name == "sinh") return std::sinh(x);
  if (name == "cosh") return std::cosh(x);
  if (name == "asinh") return std::asinh(x);
  if (name == "acosh") return std::acosh(x);
  if (name == "atanh") return std::atanh(x);
  ADD_FAILURE() << "no reference for " << name;
  return 0;
}

// Error of `got` in units in the last place of T at the exact value; 0 when both are the same
// nan or infinity, infinite when only one is.
template <typename T>
double UlpError(T got, long double exact) {
  constexpr int digits = std::numeric_limits<T>::digits;              // 24 or 53
  constexpr int min_exponent = std::numeric_limits<T>::min_exponent;  // -125 or -1021
  if (std::isnan(exact)) return std::isnan(got) ? 0 : INFINITY;
  T rounded = static_cast<T>(exact);
  if (std::isinf(rounded) || exact == 0) return got == rounded ? 0 : INFINITY;
  if (std::isnan(got) || std::isinf(got)) return INFINITY;
  int exponent;
  std::frexp(exact, &exponent);
  long double ulp = std::ldexp(1.0L, std::max(exponent, min_exponent) - digits);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

// Evenly spaced points on each range, random points on it, and `extra`.
template <typename T>
std::vector<T> Inputs(std::vector<std::pair<double, double>> ranges, std::vector<T> extra = {}) {
  std::mt19937_64 rng(1234);
  std::vector<T> values = std::move(extra);
  for (auto [lo, hi] : ranges) {
    std::uniform_real_distribution<double> uniform(lo, hi);
    for (int i = 0; i <= 4000; ++i) values.push_back(static_cast<T>(lo + (hi - lo) * i / 4000));
    for (int i = 0; i < 4000; ++i) values.push_back(static_cast<T>(uniform(rng)));
  }
  return values;
}

// Positive values spread over the whole exponent range, subnormals included.
template <typename T>
std::vector<T> PositiveInputs() {
  std::mt19937_64 rng(99);
  int lo = std::numeric_limits<T>::min_exponent - std::numeric_limits<T>::digits;
  std::uniform_real_distribution<double> exponent(lo, std::numeric_limits<T>::max_exponent);
  std::vector<T> values = Inputs<T>({{0.5, 2.0}, {0.999, 1.001}});
  for (int i = 0; i < 20000; ++i) {
    T v = static_cast<T>(std::exp2(exponent(rng)));
    if (v > 0 && std::isfinite(v)) values.push_back(v);
  }
  values.push_back(std::numeric_limits<T>::denorm_min());
  values.push_back(std::numeric_limits<T>::min());
  values.push_back(std::numeric_limits<T>::max());
  return values;
}

template <typename T>
std::vector<T> InputsFor(const std::string& name) {
  bool f32 = sizeof(T) == 4;
  std::vector<T> tiny = {T(1e-30), T(-1e-30), std::numeric_limits<T>::denorm_min(), T(0.0),
                         T(-0.0)};
  if (name == "exp") return Inputs<T>({{f32 ? -104 : -746, f32 ? 89 : 710}, {-1, 1}}, tiny);
  if (name == "log" || name == "sqrt") return PositiveInputs<T>();
  if (name == "tanh") return Inputs<T>({{-12, 12}, {-1, 1}, {-1e-3, 1e-3}}, tiny);
  if (name == "sigmoid") return Inputs<T>({{f32 ? -100 : -700, f32 ? 100 : 700}, {-2, 2}}, tiny);
  if (name == "erf") {
    // f32 switches from a polynomial to 1 - exp(...) at 0.78125, and rounds to 1 from 3.9192.
    return Inputs<T>(
        {{-7, 7}, {-1.5, 1.5}, {-1e-3, 1e-3}, {0.77, 0.79}, {-0.79, -0.77}, {3.9, 3.93}}, tiny);
  }
  if (name == "sin" || name == "cos" || name == "tan") {
    // f64 reduces exactly only below 2^20*pi/2 (math_library.cc); f32 everywhere.
    std::vector<T> extra = tiny;
    for (double v : {1e10, -1e10, 1e20, 3.0e38, -3.0e38, 16777216.0, 1.6e6, 1.7e6, 7.0e8}) {
      if (f32 || std::fabs(v) < 1.6e6) extra.push_back(static_cast<T>(v));
    }
    std::vector<std::pair<double, double>> ranges = {{-10, 10}, {-1e4, 1e4}, {-1.6e6, 1.6e6}};
    if (f32) ranges.push_back({-3e38, 3e38}), ranges.push_back({-1e9, 1e9});
    return Inputs<T>(ranges, extra);
  }
  if (name == "asin" || name == "acos" || name == "atanh") {
    return Inputs<T>({{-1, 1}, {-1e-3, 1e-3}, {0.99, 1}, {-1, -0.99}},
                     {T(1), T(-1), T(1.5), T(-1.5), T(1e-30), T(0.0), T(-0.0)});
  }
  if (name == "atan" || name == "asinh") {
    return Inputs<T>({{-10, 10}, {-1e6, 1e6}, {-1, 1}, {-1e-3, 1e-3}},
                     {T(1e30), T(-1e30), T(1e-30), T(0.0), T(-0.0), std::numeric_limits<T>::max()});
  }
  if (name == "sinh" || name == "cosh") {
    return Inputs<T>({{f32 ? -90 : -711, f32 ? 90 : 711}, {-1, 1}, {-1e-3, 1e-3}}, tiny);
  }
  if (name == "acosh") {
    return Inputs<T>({{1, 10}, {1, 1.001}, {1, 1e6}},
                     {T(0.5), T(1e30), std::numeric_limits<T>::max()});
  }
  return Inputs<T>({{-1e6, 1e6}, {-10, 10}, {-1, 1}},
                   {T(0.5), T(-0.5), T(1.5), T(2.5), T(-2.5), T(0.49999997), T(1e30), T(-1e30)});
}

// Worst error allowed, in ulps of the exact result.
double Bound(const std::string& name, bool f32) {
  if (name == "tanh") return 2.0;
  if (name == "exp" || name == "log" || name == "erf") return 1.0;
  // f32 goes through f64 and is rounded once.
  static const std::map<std::string, double> kF64 = {
      {"sin", 1.0},   {"cos", 1.0},   {"tan", 2.0},   {"asin", 3.0},
      {"acos", 2.0},  {"atan", 1.0},  {"sinh", 3.0},  {"cosh", 3.0},
      {"asinh", 3.0}, {"acosh", 3.0}, {"atanh", 3.0}, {"sigmoid", 2.0}};
  if (auto it = kF64.find(name); it != kF64.end()) return f32 ? 0.51 : it->second;
  return 0.5;  // correctly rounded: sqrt, fabs and the roundings (exact)
}

// One kernel and host function `run_<name>` per unary function, for one float type.
template <typename T>
class MathTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const DataType kType = DataType::Float(sizeof(T) * 8);
    ir::IRModule module;
    for (const char* name : kUnary) {
      std::string fn = name;
      AddElementwise(module, "run_" + fn, fn + "_kernel", {kType}, kType,
                     [fn, kType](auto x) { return arith::Call(kType, fn, {x[0]}); });
    }
    AddElementwise(module, "run_pow", "pow_kernel", {kType, kType}, kType, [kType](auto x) {
      return arith::Call(kType, "pow", {x[0], x[1]});
    });
    artifact_ = Artifact::Build(module).release();
  }
  static void TearDownTestSuite() {
    delete artifact_;
    artifact_ = nullptr;
  }

  std::vector<T> Run(const std::string& name, std::vector<T> x) {
    return RunEntry<T>(*artifact_, ("run_" + name).c_str(), kDLFloat, std::pair{x, kDLFloat});
  }
  std::vector<T> Pow(std::vector<T> x, std::vector<T> y) {
    return RunEntry<T>(*artifact_, "run_pow", kDLFloat, std::pair{x, kDLFloat},
                       std::pair{y, kDLFloat});
  }

  static Artifact* artifact_;
};
template <typename T>
Artifact* MathTest<T>::artifact_ = nullptr;

using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MathTest, FloatTypes);

TYPED_TEST(MathTest, UnaryFunctionsAreAccurate) {
  using T = TypeParam;
  ASSERT_NE(this->artifact_, nullptr);
  for (const char* name : kUnary) {
    std::vector<T> x = InputsFor<T>(name);
    std::vector<T> y = this->Run(name, x);
    double worst = 0;
    T worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double e = UlpError<T>(y[i], Reference(name, x[i]));
      if (e > worst) worst = e, worst_x = x[i];
    }
    EXPECT_LE(worst, Bound(name, sizeof(T) == 4))
        << name << " is off by " << worst << " ulp at x = " << worst_x << " (" << x.size()
        << " inputs)";
  }
}

TYPED_TEST(MathTest, SpecialValues) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  struct Case {
    const char* name;
    T x, expected;
  };
  const Case cases[] = {
      {"exp", nan, nan},
      {"exp", inf, inf},
      {"exp", -inf, 0},
      {"exp", 0, 1},
      {"exp", 1000, inf},
      {"exp", -1000, 0},
      {"log", nan, nan},
      {"log", -1, nan},
      {"log", -inf, nan},
      {"log", 0, -inf},
      {"log", T(-0.0), -inf},
      {"log", inf, inf},
      {"log", 1, 0},
      {"tanh", inf, 1},
      {"tanh", -inf, -1},
      {"tanh", nan, nan},
      {"tanh", T(-0.0), T(-0.0)},
      {"tanh", 30, 1},
      {"sigmoid", inf, 1},
      {"sigmoid", -inf, 0},
      {"sigmoid", nan, nan},
      {"sigmoid", 0, 0.5},
      {"erf", inf, 1},
      {"erf", -inf, -1},
      {"erf", nan, nan},
      {"erf", T(-0.0), T(-0.0)},
      {"erf", 10, 1},
      {"sqrt", -1, nan},
      {"sqrt", inf, inf},
      {"floor", -inf, -inf},
      {"floor", nan, nan},
      {"floor", T(-0.5), -1},
      {"ceil", T(-0.5), T(-0.0)},
      {"ceil", inf, inf},
      {"trunc", T(-0.7), T(-0.0)},
      {"round", T(2.5), 2},
      {"round", T(3.5), 4},
      {"round", T(-2.5), -2},
      {"round", nan, nan},
      {"fabs", -inf, inf},
      {"sin", inf, nan},
      {"sin", nan, nan},
      {"sin", T(-0.0), T(-0.0)},
      {"cos", -inf, nan},
      {"cos", 0, 1},
      {"tan", nan, nan},
      {"tan", T(-0.0), T(-0.0)},
      {"asin", 2, nan},
      {"asin", T(-0.0), T(-0.0)},
      {"acos", 1, 0},
      {"acos", -2, nan},
      {"atan", inf, T(M_PI_2)},
      {"atan", -inf, T(-M_PI_2)},
      {"atan", nan, nan},
      {"sinh", -inf, -inf},
      {"sinh", T(-0.0), T(-0.0)},
      {"cosh", -inf, inf},
      {"cosh", nan, nan},
      {"asinh", -inf, -inf},
      {"asinh", T(-0.0), T(-0.0)},
      {"acosh", 1, 0},
      {"acosh", T(0.5), nan},
      {"acosh", inf, inf},
      {"atanh", 1, inf},
      {"atanh", -1, -inf},
      {"atanh", 2, nan},
      {"atanh", T(-0.0), T(-0.0)},
  };
  for (const Case& c : cases) {
    T got = this->Run(c.name, {c.x})[0];
    if (std::isnan(c.expected)) {
      EXPECT_TRUE(std::isnan(got)) << c.name << "(" << c.x << ") = " << got;
    } else {
      EXPECT_EQ(got, c.expected) << c.name << "(" << c.x << ")";
      EXPECT_EQ(std::signbit(got), std::signbit(c.expected)) << c.name << "(" << c.x << ")";
    }
  }
}

TYPED_TEST(MathTest, PowSpecialCasesMatchC99) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> xs = {0, T(-0.0), 1, -1, 2, -2, T(0.5), T(-0.5), inf, -inf, nan};
  const std::vector<T> ys = {0, T(-0.0), 1, -1, 2, 3, -3, T(0.5), T(-0.5), inf, -inf, nan};
  std::vector<T> x, y;
  for (T a : xs) {
    for (T b : ys) {
      x.push_back(a);
      y.push_back(b);
    }
  }
  std::vector<T> got = this->Pow(x, y);
  for (size_t i = 0; i < x.size(); ++i) {
    T expected = std::pow(x[i], y[i]);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got[i])) << "pow(" << x[i] << ", " << y[i] << ") = " << got[i];
    } else if (std::isfinite(expected) && expected != 0 && std::fabs(expected) != 1 &&
               std::fabs(y[i]) != 2 && std::fabs(y[i]) != 1 && y[i] != T(0.5)) {
      // An ordinary value (pow(2, 3)): as accurate as PowIsAccurate asks.
      EXPECT_LE(UlpError<T>(got[i], expected), 1.0) << "pow(" << x[i] << ", " << y[i] << ")";
    } else {
      EXPECT_EQ(got[i], expected) << "pow(" << x[i] << ", " << y[i] << ")";
      EXPECT_EQ(std::signbit(got[i]), std::signbit(expected))
          << "pow(" << x[i] << ", " << y[i] << ")";
    }
  }
}

TYPED_TEST(MathTest, PowIsAccurate) {
  using T = TypeParam;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_x(-7, 7), exponent(-20, 20);
  std::vector<T> x, y;
  for (int i = 0; i < 20000; ++i) {
    T a = static_cast<T>(std::exp(log_x(rng))), b = static_cast<T>(exponent(rng));
    if (i % 4 == 0) b = std::round(b), a = -a;  // negative bases need integer exponents
    x.push_back(a);
    y.push_back(b);
  }
  std::vector<T> got = this->Pow(x, y);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    long double exact = std::pow(static_cast<long double>(x[i]), static_cast<long double>(y[i]));
    double e = UlpError<T>(got[i], exact);
    // f64 pow is exp(y*log|x|): its error grows with |y*log(x)| (math_library.cc).
    if (sizeof(T) == 8) e /= 1 + 2 * std::fabs(y[i] * std::log(std::fabs(x[i])));
    worst = std::max(worst, e);
  }
  EXPECT_LE(worst, 1.0);
}

}  // namespace
}  // namespace kiln::codegen::testing
