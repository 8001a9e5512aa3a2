// The symbolic analyzer: passes ask it questions (is a == b? is a >= b? what are e's bounds?)
// instead of pattern-matching expressions themselves.
#pragma once

#include <cstdint>
#include <limits>
#include <unordered_map>

#include "compiler/arith/expr.h"

namespace kiln::arith {

struct IntBounds {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  bool is_const() const { return min == max; }
};

class Analyzer {
 public:
  // Tells the analyzer that `var` lies in [min, max]. Shape variables are >= 0 unless bound
  // otherwise.
  void Bind(const PrimExpr& var, IntBounds bounds);
  // Tells the analyzer that `var` lies in [0, extent) for a symbolic `extent` (a loop's), so
  // that floordiv(var + q * extent, extent) simplifies to q where extent is provably >= 1.
  void BindBelow(const PrimExpr& var, const PrimExpr& extent);

  // Canonical form of an integer expression: a sum of products with constant coefficients,
  // constants folded, floordiv/floormod split where exact (by a constant, or by a product of
  // variables that is provably >= 1: the terms it divides leave the division). Non-integer
  // expressions are simplified in their integer sub-expressions only.
  PrimExpr Simplify(const PrimExpr& e) const;

  bool ProveEqual(const PrimExpr& a, const PrimExpr& b) const;
  bool ProveGE(const PrimExpr& a, const PrimExpr& b) const;  // a >= b for all bound values
  bool ProveLE(const PrimExpr& a, const PrimExpr& b) const { return ProveGE(b, a); }
  // Constant bounds of e given the variables' bounds (unbounded where unknown).
  IntBounds ConstBounds(const PrimExpr& e) const;

 private:
  friend class Canonicalizer;
  // Bounds of an expression already in canonical form.
  IntBounds BoundsOf(const PrimExpr& e) const;
  IntBounds VarBounds(const ExprNode* var) const;
  std::unordered_map<const ExprNode*, IntBounds> bounds_;
  std::unordered_map<const ExprNode*, PrimExpr> below_;  // BindBelow's extents
};

}  // namespace kiln::arith
