#include "compiler/arith/analyzer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "compiler/arith/check.h"

namespace kiln::arith {
namespace {

// A product of atoms (variables or expressions the canonical form treats as opaque), kept
// sorted so that equal products compare equal.
using Monomial = std::vector<PrimExpr>;

// Orders atoms by their text, then by identity, so printing is stable across runs.
bool AtomLess(const PrimExpr& a, const PrimExpr& b) {
  std::string sa = ToString(a), sb = ToString(b);
  if (sa != sb) return sa < sb;
  if (StructuralEqual(a, b)) return false;
  return StructuralHash(a) < StructuralHash(b) || (StructuralHash(a) == StructuralHash(b) && a < b);
}

struct MonomialLess {
  bool operator()(const Monomial& a, const Monomial& b) const {
    if (a.size() != b.size()) return a.size() < b.size();
    for (size_t i = 0; i < a.size(); ++i) {
      if (AtomLess(a[i], b[i])) return true;
      if (AtomLess(b[i], a[i])) return false;
    }
    return false;
  }
};

// sum(coeff * monomial) + constant
struct Sum {
  std::map<Monomial, int64_t, MonomialLess> terms;
  int64_t constant = 0;

  bool is_const() const { return terms.empty(); }
  void AddTerm(const Monomial& m, int64_t coeff) {
    if (coeff == 0) return;
    int64_t& c = terms[m];
    c += coeff;
    if (c == 0) terms.erase(m);
  }
  void Add(const Sum& other, int64_t scale) {
    constant += other.constant * scale;
    for (const auto& [m, c] : other.terms) AddTerm(m, c * scale);
  }
};

Sum Atom(PrimExpr e) {
  Sum s;
  s.terms[{std::move(e)}] = 1;
  return s;
}

Sum Constant(int64_t v) {
  Sum s;
  s.constant = v;
  return s;
}

Sum Multiply(const Sum& a, const Sum& b) {
  Sum out;
  out.constant = a.constant * b.constant;
  for (const auto& [m, c] : a.terms) out.AddTerm(m, c * b.constant);
  for (const auto& [m, c] : b.terms) out.AddTerm(m, c * a.constant);
  for (const auto& [ma, ca] : a.terms) {
    for (const auto& [mb, cb] : b.terms) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end(), AtomLess);
      out.AddTerm(m, ca * cb);
    }
  }
  return out;
}

PrimExpr MonomialExpr(const Monomial& m) {
  PrimExpr e = m[0];
  for (size_t i = 1; i < m.size(); ++i) e = e * m[i];
  return e;
}

PrimExpr ToExpr(const Sum& s) {
  PrimExpr out;
  for (const auto& [m, c] : s.terms) {
    PrimExpr term = MonomialExpr(m);
    int64_t mag = c < 0 ? -c : c;
    if (mag != 1) term = term * IntImm(mag);
    if (!out) {
      out = c < 0 ? IntImm(0) - term : term;
    } else {
      out = c < 0 ? out - term : out + term;
    }
  }
  if (!out) return IntImm(s.constant);
  if (s.constant > 0) out = out + IntImm(s.constant);
  if (s.constant < 0) out = out - IntImm(-s.constant);
  return out;
}

int64_t FloorDivConst(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

void Analyzer::Bind(const PrimExpr& var, IntBounds bounds) {
  KILN_CHECK(var->kind == ExprKind::kVar) << "Bind needs a variable";
  bounds_[var.get()] = bounds;
}

void Analyzer::BindBelow(const PrimExpr& var, const PrimExpr& extent) {
  KILN_CHECK(var->kind == ExprKind::kVar) << "BindBelow needs a variable";
  below_[var.get()] = extent;
}

IntBounds Analyzer::VarBounds(const ExprNode* var) const {
  auto it = bounds_.find(var);
  if (it != bounds_.end()) return it->second;
  return IntBounds{0, std::numeric_limits<int64_t>::max()};
}

class Canonicalizer {
 public:
  explicit Canonicalizer(const Analyzer& analyzer) : analyzer_(analyzer) {}

  Sum ToSum(const PrimExpr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return Constant(e->int_value);
      case ExprKind::kAdd: {
        Sum s = ToSum(e->args[0]);
        s.Add(ToSum(e->args[1]), 1);
        return s;
      }
      case ExprKind::kSub: {
        Sum s = ToSum(e->args[0]);
        s.Add(ToSum(e->args[1]), -1);
        return s;
      }
      case ExprKind::kMul:
        return Multiply(ToSum(e->args[0]), ToSum(e->args[1]));
      case ExprKind::kFloorDiv:
      case ExprKind::kFloorMod:
        return DivMod(e);
      case ExprKind::kMin:
      case ExprKind::kMax:
        return MinMax(e);
      default: {
        PrimExpr s = SimplifyOperands(e);
        if (s->kind == ExprKind::kIntImm) return Constant(s->int_value);
        // A select with a known condition became one of its (simplified) branches.
        if (s->kind != e->kind) return ToSum(s);
        return Atom(s);
      }
    }
  }

  PrimExpr Simplify(const PrimExpr& e) {
    if (e->dtype.is_int() && e->kind != ExprKind::kLoad && e->kind != ExprKind::kCall &&
        e->kind != ExprKind::kCast) {
      return ToExpr(ToSum(e));
    }
    return SimplifyOperands(e);
  }

 private:
  PrimExpr SimplifyOperands(const PrimExpr& e) {
    if (e->args.empty()) return e;
    std::vector<PrimExpr> args;
    bool changed = false;
    for (const PrimExpr& arg : e->args) {
      args.push_back(Simplify(arg));
      changed |= args.back() != arg;
    }
    if (!changed) return FoldLogic(e);
    ExprNode copy = *e;
    copy.args = std::move(args);
    return FoldLogic(std::make_shared<const ExprNode>(std::move(copy)));
  }

  // Comparisons and logic over constants become constants; a select with a constant
  // condition becomes its branch.
  static PrimExpr FoldLogic(const PrimExpr& e) {
    if (e->kind == ExprKind::kSelect && e->args[0]->kind == ExprKind::kIntImm) {
      return e->args[0]->int_value ? e->args[1] : e->args[2];
    }
    bool logic = e->kind >= ExprKind::kEQ && e->kind <= ExprKind::kNot;
    if (!logic) return e;
    for (const PrimExpr& arg : e->args) {
      if (arg->kind != ExprKind::kIntImm) return e;
    }
    auto value = EvaluateInt(e, [](const ExprNode&) { return std::optional<int64_t>(); });
    return value.ok() ? IntImm(*value, e->dtype) : e;
  }

  // floordiv(x*c + y, c) = x + floordiv(y, c) and floormod(x*c + y, c) = floormod(y, c) for
  // any integers x, y and c > 0: the part of the sum divisible by c leaves exactly.
  Sum DivMod(const PrimExpr& e) {
    bool is_div = e->kind == ExprKind::kFloorDiv;
    Sum a = ToSum(e->args[0]);
    Sum b = ToSum(e->args[1]);
    if (!b.is_const()) return DivModBySymbol(e->kind, a, b);
    if (b.constant <= 0) {
      return Atom(Binary(e->kind, ToExpr(a), ToExpr(b)));
    }
    int64_t c = b.constant;
    Sum exact, rest;
    for (const auto& [m, coeff] : a.terms) {
      if (coeff % c == 0) {
        exact.AddTerm(m, coeff / c);
      } else {
        rest.AddTerm(m, coeff);
      }
    }
    int64_t rest_const = a.constant;
    if (rest.is_const()) {
      // Everything symbolic divided exactly; the constant remainder folds.
      exact.constant = FloorDivConst(rest_const, c);
      if (is_div) return exact;
      return Constant(rest_const - FloorDivConst(rest_const, c) * c);
    }
    exact.constant += FloorDivConst(rest_const, c);
    rest.constant = rest_const - FloorDivConst(rest_const, c) * c;
    // A remainder that provably stays in [0, c) divides to zero.
    IntBounds rb = analyzer_.BoundsOf(ToExpr(rest));
    if (rb.min >= 0 && rb.max < c) {
      if (is_div) return exact;
      return rest;
    }
    PrimExpr opaque = Binary(e->kind, ToExpr(rest), IntImm(c));
    if (!is_div) return Atom(opaque);
    exact.Add(Atom(opaque), 1);
    return exact;
  }

  // The same split for a divisor n = c * (a product of atoms) that is provably >= 1: a term
  // whose atoms include n's and whose coefficient c divides leaves the division, and a
  // remainder that provably stays in [0, n) divides to zero. A reshape's flat index,
  // floordiv(j + i * seq, seq) with j < seq, is i.
  Sum DivModBySymbol(ExprKind kind, const Sum& a, const Sum& n) {
    const bool is_div = kind == ExprKind::kFloorDiv;
    Sum opaque = Atom(Binary(kind, ToExpr(a), ToExpr(n)));
    if (n.constant != 0 || n.terms.size() != 1 || analyzer_.BoundsOf(ToExpr(n)).min < 1) {
      return opaque;
    }
    const auto& [divisor, c] = *n.terms.begin();
    Sum exact, rest = Constant(a.constant);
    for (const auto& [m, coeff] : a.terms) {
      std::optional<Monomial> q = Quotient(m, divisor);
      if (!q || coeff % c != 0) {
        rest.AddTerm(m, coeff);
      } else if (q->empty()) {
        exact.constant += coeff / c;
      } else {
        exact.AddTerm(*q, coeff / c);
      }
    }
    if (analyzer_.BoundsOf(ToExpr(rest)).min >= 0 && Below(rest, n)) {
      return is_div ? exact : rest;
    }
    if (exact.is_const() && exact.constant == 0) return opaque;
    Sum part = Atom(Binary(kind, ToExpr(rest), ToExpr(n)));
    if (!is_div) return part;
    exact.Add(part, 1);
    return exact;
  }

  // m / d as a monomial where d's atoms are among m's; nullopt otherwise.
  static std::optional<Monomial> Quotient(Monomial m, const Monomial& d) {
    for (const PrimExpr& atom : d) {
      auto it = std::find_if(m.begin(), m.end(),
                             [&](const PrimExpr& x) { return StructuralEqual(x, atom); });
      if (it == m.end()) return std::nullopt;
      m.erase(it);
    }
    return m;
  }

  // Whether s < n for all bound values: each term at its largest, a variable bound below a
  // symbolic extent (BindBelow) at extent - 1.
  bool Below(const Sum& s, const Sum& n) {
    Sum top = Constant(s.constant);
    for (const auto& [m, coeff] : s.terms) {
      auto below = m.size() == 1 ? analyzer_.below_.find(m[0].get()) : analyzer_.below_.end();
      if (coeff > 0 && below != analyzer_.below_.end()) {
        top.Add(ToSum(below->second), coeff);
        top.constant -= coeff;
        continue;
      }
      IntBounds t = analyzer_.BoundsOf(ToExpr(Multiply(Constant(coeff), OneTerm(m))));
      if (t.max == std::numeric_limits<int64_t>::max()) return false;
      top.constant += t.max;
    }
    Sum slack = n;
    slack.Add(top, -1);
    slack.constant -= 1;
    return analyzer_.BoundsOf(ToExpr(slack)).min >= 0;
  }

  static Sum OneTerm(const Monomial& m) {
    Sum s;
    s.terms[m] = 1;
    return s;
  }

  Sum MinMax(const PrimExpr& e) {
    PrimExpr a = Simplify(e->args[0]);
    PrimExpr b = Simplify(e->args[1]);
    bool is_min = e->kind == ExprKind::kMin;
    if (analyzer_.ProveGE(a, b)) return ToSum(is_min ? b : a);
    if (analyzer_.ProveGE(b, a)) return ToSum(is_min ? a : b);
    return Atom(Binary(e->kind, a, b));
  }

  const Analyzer& analyzer_;
};

namespace {

// Saturating interval arithmetic, so unknown bounds stay unknown instead of overflowing.
constexpr int64_t kMinI = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxI = std::numeric_limits<int64_t>::max();

int64_t SatAdd(int64_t a, int64_t b) {
  if (a == kMinI || b == kMinI) return kMinI;
  if (a == kMaxI || b == kMaxI) return kMaxI;
  __int128 r = static_cast<__int128>(a) + b;
  return r > kMaxI ? kMaxI : r < kMinI ? kMinI : static_cast<int64_t>(r);
}

int64_t SatMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  if (a == kMinI || b == kMinI || a == kMaxI || b == kMaxI) return neg ? kMinI : kMaxI;
  __int128 r = static_cast<__int128>(a) * b;
  return r > kMaxI ? kMaxI : r < kMinI ? kMinI : static_cast<int64_t>(r);
}

IntBounds MulBounds(IntBounds a, IntBounds b) {
  int64_t c[4] = {SatMul(a.min, b.min), SatMul(a.min, b.max), SatMul(a.max, b.min),
                  SatMul(a.max, b.max)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

}  // namespace

PrimExpr Analyzer::Simplify(const PrimExpr& e) const { return Canonicalizer(*this).Simplify(e); }

bool Analyzer::ProveEqual(const PrimExpr& a, const PrimExpr& b) const {
  if (StructuralEqual(a, b)) return true;
  PrimExpr d = Simplify(a - b);
  return d->is_const_int(0);
}

bool Analyzer::ProveGE(const PrimExpr& a, const PrimExpr& b) const {
  if (StructuralEqual(a, b)) return true;
  return ConstBounds(a - b).min >= 0;
}

IntBounds Analyzer::ConstBounds(const PrimExpr& e) const {
  // Canonical form first, so that n - n is [0, 0] rather than unbounded.
  return BoundsOf(Simplify(e));
}

IntBounds Analyzer::BoundsOf(const PrimExpr& e) const {
  auto neg = [](int64_t v) { return v == kMinI ? kMaxI : v == kMaxI ? kMinI : -v; };
  switch (e->kind) {
    case ExprKind::kIntImm:
      return {e->int_value, e->int_value};
    case ExprKind::kVar:
      return VarBounds(e.get());
    case ExprKind::kAdd: {
      IntBounds a = BoundsOf(e->args[0]), b = BoundsOf(e->args[1]);
      return {SatAdd(a.min, b.min), SatAdd(a.max, b.max)};
    }
    case ExprKind::kSub: {
      IntBounds a = BoundsOf(e->args[0]), b = BoundsOf(e->args[1]);
      return {SatAdd(a.min, neg(b.max)), SatAdd(a.max, neg(b.min))};
    }
    case ExprKind::kMul:
      return MulBounds(BoundsOf(e->args[0]), BoundsOf(e->args[1]));
    case ExprKind::kMin:
    case ExprKind::kMax: {
      IntBounds a = BoundsOf(e->args[0]), b = BoundsOf(e->args[1]);
      if (e->kind == ExprKind::kMin) return {std::min(a.min, b.min), std::min(a.max, b.max)};
      return {std::max(a.min, b.min), std::max(a.max, b.max)};
    }
    case ExprKind::kFloorMod: {
      IntBounds b = BoundsOf(e->args[1]);
      if (b.is_const() && b.min > 0) return {0, b.min - 1};
      return {};
    }
    case ExprKind::kFloorDiv: {
      IntBounds a = BoundsOf(e->args[0]), b = BoundsOf(e->args[1]);
      if (!b.is_const() || b.min <= 0) return {};
      auto div = [&](int64_t v) { return v == kMinI || v == kMaxI ? v : FloorDivConst(v, b.min); };
      return {div(a.min), div(a.max)};
    }
    default:
      return {};
  }
}

}  // namespace kiln::arith
