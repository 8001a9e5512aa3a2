// The analyzer: canonical forms, proofs and bounds, plus a property test that simplification
// keeps every expression's value and is idempotent.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>

#include "compiler/arith/analyzer.h"

namespace kiln::arith {
namespace {

class AnalyzerTest : public ::testing::Test {
 protected:
  PrimExpr n = MakeVar("n");
  PrimExpr m = MakeVar("m");
  Analyzer analyzer;
  std::string S(const PrimExpr& e) { return ToString(analyzer.Simplify(e)); }
};

TEST_F(AnalyzerTest, CollectsLikeTermsAndFoldsConstants) {
  EXPECT_EQ(S(n + n + IntImm(2) * n), "n * 4");
  EXPECT_EQ(S(n * IntImm(3) - n * IntImm(3)), "0");
  EXPECT_EQ(S((n + IntImm(1)) * (n - IntImm(1))), "n * n - 1");
  EXPECT_EQ(S(IntImm(6) * IntImm(7)), "42");
  // Order of terms does not depend on how the expression was written.
  EXPECT_EQ(S(m + n), S(n + m));
}

TEST_F(AnalyzerTest, FloorDivAndModByConstantSplitExactParts) {
  EXPECT_EQ(S(FloorDiv(n * IntImm(784), IntImm(784))), "n");
  EXPECT_EQ(S(FloorDiv(n * IntImm(8) + IntImm(3), IntImm(4))), "n * 2");
  EXPECT_EQ(S(FloorMod(n * IntImm(8) + IntImm(3), IntImm(4))), "3");
  EXPECT_EQ(S(FloorDiv(IntImm(-7), IntImm(2))), "-4");
  EXPECT_EQ(S(FloorMod(IntImm(-7), IntImm(2))), "1");
  // n + 5 is not a multiple of 4: the division stays, with the exact part taken out.
  EXPECT_EQ(S(FloorDiv(n * IntImm(4) + m, IntImm(4))), "floordiv(m, 4) + n");
}

TEST_F(AnalyzerTest, FloorDivAndModBySymbolSplitWhereTheDivisorIsPositive) {
  PrimExpr i = MakeVar("i"), j = MakeVar("j");
  // n may be 0: nothing splits.
  EXPECT_EQ(S(FloorDiv(i * n + j, n)), "floordiv(j + i * n, n)");
  analyzer.Bind(n, {1, std::numeric_limits<int64_t>::max()});
  EXPECT_EQ(S(FloorDiv(i * n + j, n)), "floordiv(j, n) + i");
  EXPECT_EQ(S(FloorMod(i * n + j, n)), "floormod(j, n)");
  EXPECT_EQ(S(FloorDiv(i * n * IntImm(16) + j, n * IntImm(8))), "floordiv(j, n * 8) + i * 2");
  // A coefficient the divisor's does not divide stays inside.
  EXPECT_EQ(S(FloorDiv(i * n * IntImm(3), n * IntImm(2))), "floordiv(i * n * 3, n * 2)");
  // j in [0, n): the remainder divides to zero, as in a reshape's flat index.
  analyzer.BindBelow(j, n);
  EXPECT_EQ(S(FloorDiv(i * n + j, n)), "i");
  EXPECT_EQ(S(FloorMod(i * n + j, n)), "j");
  EXPECT_EQ(S(FloorMod(FloorDiv(j + i * n, n), m)), "floormod(i, m)");
  // j + 1 may reach n.
  EXPECT_EQ(S(FloorMod(j + IntImm(1), n)), "floormod(j + 1, n)");
}

TEST_F(AnalyzerTest, ProvesWithNonNegativeShapeVars) {
  EXPECT_TRUE(analyzer.ProveEqual(n * IntImm(2), n + n));
  EXPECT_FALSE(analyzer.ProveEqual(n, m));
  EXPECT_TRUE(analyzer.ProveGE(n + IntImm(1), n));
  EXPECT_TRUE(analyzer.ProveGE(n * m, IntImm(0)));
  EXPECT_FALSE(analyzer.ProveGE(n, m));
  EXPECT_EQ(S(Max(n + IntImm(1), n)), "n + 1");
  EXPECT_EQ(S(Min(n, m)), "min(n, m)");  // neither is provably smaller
}

TEST_F(AnalyzerTest, FoldsConstantComparisonsAndSelects) {
  EXPECT_EQ(S(Binary(ExprKind::kLT, IntImm(2), IntImm(3))), "1:bool");
  EXPECT_EQ(S(Select(Binary(ExprKind::kGE, IntImm(2), IntImm(3)), n, m + IntImm(1))), "m + 1");
  // A condition that depends on n stays.
  EXPECT_EQ(S(Select(Binary(ExprKind::kLT, n, IntImm(3)), n, m)), "select(n < 3, n, m)");
}

TEST_F(AnalyzerTest, ConstBoundsUseVariableBounds) {
  analyzer.Bind(n, {1, 8});
  analyzer.Bind(m, {2, 3});
  IntBounds b = analyzer.ConstBounds(n * m - IntImm(1));
  EXPECT_EQ(b.min, 1);
  EXPECT_EQ(b.max, 23);
  EXPECT_EQ(analyzer.ConstBounds(FloorMod(n, IntImm(4))).max, 3);
  EXPECT_EQ(analyzer.ConstBounds(n - n).min, 0);
}

// Random integer expressions over three variables.
PrimExpr RandomExpr(std::mt19937& rng, const std::vector<PrimExpr>& vars, int depth) {
  std::uniform_int_distribution<int> pick(0, depth <= 0 ? 1 : 8);
  switch (pick(rng)) {
    case 0:
      return IntImm(std::uniform_int_distribution<int>(-5, 5)(rng));
    case 1:
      return vars[std::uniform_int_distribution<size_t>(0, vars.size() - 1)(rng)];
    case 2:
      return RandomExpr(rng, vars, depth - 1) + RandomExpr(rng, vars, depth - 1);
    case 3:
      return RandomExpr(rng, vars, depth - 1) - RandomExpr(rng, vars, depth - 1);
    case 4:
      return RandomExpr(rng, vars, depth - 1) * RandomExpr(rng, vars, depth - 1);
    case 5:
      return FloorDiv(RandomExpr(rng, vars, depth - 1),
                      IntImm(std::uniform_int_distribution<int>(1, 6)(rng)));
    case 6:
      return FloorMod(RandomExpr(rng, vars, depth - 1),
                      IntImm(std::uniform_int_distribution<int>(1, 6)(rng)));
    case 7:
      return Min(RandomExpr(rng, vars, depth - 1), RandomExpr(rng, vars, depth - 1));
    default:
      return Max(RandomExpr(rng, vars, depth - 1), RandomExpr(rng, vars, depth - 1));
  }
}

// floordiv(q * n + r, n) = q and floormod(q * n + r, n) = r for every n >= 1 and r in [0, n),
// with q and r any of the variables' sums and products: simplification keeps each value.
TEST(AnalyzerPropertyTest, DivisionBySymbolKeepsValues) {
  unsigned seed = std::random_device{}();
  std::cout << "symbolic division property test seed: " << seed << std::endl;
  std::mt19937 rng(seed);
  PrimExpr n = MakeVar("n"), r = MakeVar("r"), a = MakeVar("a"), b = MakeVar("b");
  Analyzer analyzer;
  analyzer.Bind(n, {1, 6});
  analyzer.BindBelow(r, n);
  analyzer.Bind(a, {-10, 10});
  analyzer.Bind(b, {0, 3});
  auto term = [&](int depth) { return RandomExpr(rng, {a, b, r}, depth); };
  for (int trial = 0; trial < 2000; ++trial) {
    PrimExpr divisor = trial % 2 ? n : n * IntImm(std::uniform_int_distribution<int>(1, 3)(rng));
    PrimExpr numerator = term(2) * divisor + (trial % 3 ? r : term(2));
    PrimExpr e = trial % 4 < 2 ? FloorDiv(numerator, divisor) : FloorMod(numerator, divisor);
    PrimExpr s = analyzer.Simplify(e);
    for (int k = 0; k < 8; ++k) {
      int64_t nv = std::uniform_int_distribution<int64_t>(1, 6)(rng);
      std::map<const ExprNode*, int64_t> values = {
          {n.get(), nv},
          {r.get(), std::uniform_int_distribution<int64_t>(0, nv - 1)(rng)},
          {a.get(), std::uniform_int_distribution<int64_t>(-10, 10)(rng)},
          {b.get(), std::uniform_int_distribution<int64_t>(0, 3)(rng)}};
      auto lookup = [&](const ExprNode& var) -> std::optional<int64_t> {
        auto it = values.find(&var);
        return it == values.end() ? std::nullopt : std::optional<int64_t>(it->second);
      };
      auto want = EvaluateInt(e, lookup);
      auto got = EvaluateInt(s, lookup);
      ASSERT_TRUE(want.ok() && got.ok()) << e;
      ASSERT_EQ(*want, *got) << "seed " << seed << ": " << e << " simplified to " << s;
    }
  }
}

TEST(AnalyzerPropertyTest, SimplifyKeepsValuesAndIsIdempotent) {
  unsigned seed = std::random_device{}();
  std::cout << "arith property test seed: " << seed << std::endl;
  std::mt19937 rng(seed);
  std::vector<PrimExpr> vars = {MakeVar("a"), MakeVar("b"), MakeVar("c")};
  Analyzer analyzer;
  for (const PrimExpr& v : vars) analyzer.Bind(v, {-10, 10});
  for (int trial = 0; trial < 2000; ++trial) {
    PrimExpr e = RandomExpr(rng, vars, 4);
    PrimExpr s = analyzer.Simplify(e);
    ASSERT_TRUE(StructuralEqual(analyzer.Simplify(s), s))
        << "seed " << seed << ": not idempotent: " << e << " -> " << s << " -> "
        << analyzer.Simplify(s);
    for (int k = 0; k < 5; ++k) {
      std::vector<int64_t> values;
      for (size_t i = 0; i < vars.size(); ++i) {
        values.push_back(std::uniform_int_distribution<int>(-10, 10)(rng));
      }
      auto lookup = [&](const ExprNode& var) -> std::optional<int64_t> {
        for (size_t i = 0; i < vars.size(); ++i) {
          if (vars[i].get() == &var) return values[i];
        }
        return std::nullopt;
      };
      auto want = EvaluateInt(e, lookup);
      auto got = EvaluateInt(s, lookup);
      ASSERT_TRUE(want.ok() && got.ok());
      ASSERT_EQ(*want, *got) << "seed " << seed << ": " << e << " simplified to " << s
                             << " at a=" << values[0] << " b=" << values[1] << " c=" << values[2];
    }
  }
}

}  // namespace
}  // namespace kiln::arith
