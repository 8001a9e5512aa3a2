#include "compiler/arith/expr.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/arith/check.h"

namespace kiln::arith {

std::string DataType::ToString() const {
  switch (code) {
    case kInt:
      return absl::StrCat("i", bits);
    case kUInt:
      return absl::StrCat("u", bits);
    case kFloat:
      return absl::StrCat("f", bits);
    case kBool:
      return "bool";
    case kHandle:
      return "handle";
  }
  return "?";
}

absl::StatusOr<DataType> DataType::Parse(const std::string& text) {
  if (text == "bool") return Bool();
  if (text == "handle") return Handle();
  if (text.size() >= 2) {
    int bits = 0;
    for (size_t i = 1; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) bits = -1000;
      bits = bits * 10 + (text[i] - '0');
    }
    bool ok_bits = bits == 8 || bits == 16 || bits == 32 || bits == 64;
    if (text[0] == 'i' && ok_bits) return Int(bits);
    if (text[0] == 'u' && ok_bits) return UInt(bits);
    if (text[0] == 'f' && (bits == 16 || bits == 32 || bits == 64)) return Float(bits);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", text, "'"));
}

const char* ExprKindName(ExprKind kind) {
  switch (kind) {
    case ExprKind::kIntImm:
      return "int";
    case ExprKind::kFloatImm:
      return "float";
    case ExprKind::kVar:
      return "var";
    case ExprKind::kAdd:
      return "+";
    case ExprKind::kSub:
      return "-";
    case ExprKind::kMul:
      return "*";
    case ExprKind::kDiv:
      return "/";
    case ExprKind::kFloorDiv:
      return "floordiv";
    case ExprKind::kFloorMod:
      return "floormod";
    case ExprKind::kMin:
      return "min";
    case ExprKind::kMax:
      return "max";
    case ExprKind::kEQ:
      return "==";
    case ExprKind::kNE:
      return "!=";
    case ExprKind::kLT:
      return "<";
    case ExprKind::kLE:
      return "<=";
    case ExprKind::kGT:
      return ">";
    case ExprKind::kGE:
      return ">=";
    case ExprKind::kAnd:
      return "&&";
    case ExprKind::kOr:
      return "||";
    case ExprKind::kNot:
      return "!";
    case ExprKind::kSelect:
      return "select";
    case ExprKind::kCast:
      return "cast";
    case ExprKind::kCall:
      return "call";
    case ExprKind::kLoad:
      return "load";
  }
  return "?";
}

bool IsBinary(ExprKind kind) { return kind >= ExprKind::kAdd && kind <= ExprKind::kOr; }

static bool IsComparison(ExprKind kind) { return kind >= ExprKind::kEQ && kind <= ExprKind::kOr; }

static PrimExpr Make(ExprNode node) { return std::make_shared<const ExprNode>(std::move(node)); }

Buffer MakeBuffer(std::string name, DataType dtype, std::vector<PrimExpr> shape) {
  return std::make_shared<const BufferNode>(BufferNode{std::move(name), dtype, std::move(shape)});
}

PrimExpr IntImm(int64_t value, DataType dtype) {
  return Make({.kind = ExprKind::kIntImm, .dtype = dtype, .int_value = value});
}

PrimExpr FloatImm(double value, DataType dtype) {
  return Make({.kind = ExprKind::kFloatImm, .dtype = dtype, .float_value = value});
}

PrimExpr MakeVar(std::string name, DataType dtype) {
  return Make({.kind = ExprKind::kVar, .dtype = dtype, .name = std::move(name)});
}

PrimExpr Binary(ExprKind kind, PrimExpr a, PrimExpr b) {
  KILN_CHECK(IsBinary(kind)) << ExprKindName(kind) << " is not a binary operator";
  KILN_CHECK(a && b) << "null operand of " << ExprKindName(kind);
  DataType dtype = IsComparison(kind) ? DataType::Bool() : a->dtype;
  return Make({.kind = kind, .dtype = dtype, .args = {std::move(a), std::move(b)}});
}

PrimExpr Not(PrimExpr a) {
  return Make({.kind = ExprKind::kNot, .dtype = DataType::Bool(), .args = {std::move(a)}});
}

PrimExpr Select(PrimExpr cond, PrimExpr t, PrimExpr f) {
  DataType dtype = t->dtype;
  return Make({.kind = ExprKind::kSelect, .dtype = dtype, .args = {cond, t, f}});
}

PrimExpr Cast(DataType dtype, PrimExpr value) {
  return Make({.kind = ExprKind::kCast, .dtype = dtype, .args = {std::move(value)}});
}

PrimExpr Call(DataType dtype, std::string name, std::vector<PrimExpr> args) {
  return Make(
      {.kind = ExprKind::kCall, .dtype = dtype, .name = std::move(name), .args = std::move(args)});
}

PrimExpr Load(Buffer buffer, std::vector<PrimExpr> indices) {
  KILN_CHECK_EQ(buffer->shape.size(), indices.size()) << "load of " << buffer->name;
  DataType dtype = buffer->dtype;
  return Make({.kind = ExprKind::kLoad,
               .dtype = dtype,
               .args = std::move(indices),
               .buffer = std::move(buffer)});
}

bool StructuralEqual(const PrimExpr& a, const PrimExpr& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (a->kind != b->kind || a->dtype != b->dtype) return false;
  switch (a->kind) {
    case ExprKind::kVar:
      return false;  // identity, checked above
    case ExprKind::kIntImm:
      return a->int_value == b->int_value;
    case ExprKind::kFloatImm:
      return a->float_value == b->float_value ||
             (std::isnan(a->float_value) && std::isnan(b->float_value));
    case ExprKind::kLoad:
      if (a->buffer != b->buffer) return false;
      break;
    case ExprKind::kCall:
      if (a->name != b->name) return false;
      break;
    default:
      break;
  }
  if (a->args.size() != b->args.size()) return false;
  for (size_t i = 0; i < a->args.size(); ++i) {
    if (!StructuralEqual(a->args[i], b->args[i])) return false;
  }
  return true;
}

size_t StructuralHash(const PrimExpr& e) {
  size_t h = absl::HashOf(static_cast<int>(e->kind), static_cast<int>(e->dtype.code),
                          static_cast<int>(e->dtype.bits));
  switch (e->kind) {
    case ExprKind::kVar:
      return absl::HashOf(h, e.get());
    case ExprKind::kIntImm:
      return absl::HashOf(h, e->int_value);
    case ExprKind::kFloatImm:
      return absl::HashOf(h, e->float_value);
    case ExprKind::kLoad:
      h = absl::HashOf(h, e->buffer.get());
      break;
    case ExprKind::kCall:
      h = absl::HashOf(h, e->name);
      break;
    default:
      break;
  }
  for (const PrimExpr& arg : e->args) h = absl::HashOf(h, StructuralHash(arg));
  return h;
}

std::string FloatLiteral(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  // %.17g round-trips a double exactly; make sure it reads back as a float literal.
  std::string s = absl::StrFormat("%.17g", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

int InfixPrecedence(ExprKind kind) {
  switch (kind) {
    case ExprKind::kOr:
      return 1;
    case ExprKind::kAnd:
      return 2;
    case ExprKind::kEQ:
    case ExprKind::kNE:
      return 3;
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return 4;
    case ExprKind::kAdd:
    case ExprKind::kSub:
      return 5;
    case ExprKind::kMul:
    case ExprKind::kDiv:
      return 6;
    default:
      return 10;  // atoms and function-call syntax
  }
}

static void Print(std::ostream& os, const PrimExpr& e, int parent_precedence) {
  int prec = InfixPrecedence(e->kind);
  bool infix = IsBinary(e->kind) && prec < 10;
  bool parens = infix && prec <= parent_precedence;
  if (parens) os << "(";
  auto print_args = [&](size_t from) {
    for (size_t i = from; i < e->args.size(); ++i) {
      if (i > from) os << ", ";
      Print(os, e->args[i], 0);
    }
  };
  switch (e->kind) {
    case ExprKind::kIntImm:
      os << e->int_value;
      if (e->dtype != DataType::Int()) os << ":" << e->dtype.ToString();
      break;
    case ExprKind::kFloatImm:
      os << FloatLiteral(e->float_value);
      if (e->dtype != DataType::Float()) os << ":" << e->dtype.ToString();
      break;
    case ExprKind::kVar:
      os << e->name;
      break;
    case ExprKind::kNot:
      os << "!";
      Print(os, e->args[0], 10);
      break;
    case ExprKind::kCast:
      os << "cast<" << e->dtype.ToString() << ">(";
      print_args(0);
      os << ")";
      break;
    case ExprKind::kCall:
      os << e->name << "(";
      print_args(0);
      os << ")";
      break;
    case ExprKind::kLoad:
      os << e->buffer->name << "[";
      print_args(0);
      os << "]";
      break;
    case ExprKind::kSelect:
      os << "select(";
      print_args(0);
      os << ")";
      break;
    default:
      if (infix) {
        // Left-associative: the right operand needs parentheses at equal precedence.
        Print(os, e->args[0], prec - 1);
        os << " " << ExprKindName(e->kind) << " ";
        Print(os, e->args[1], prec);
      } else {
        os << ExprKindName(e->kind) << "(";
        print_args(0);
        os << ")";
      }
  }
  if (parens) os << ")";
}

std::string ToString(const PrimExpr& e) {
  std::ostringstream os;
  Print(os, e, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const PrimExpr& e) {
  Print(os, e, 0);
  return os;
}

static int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t FloorModInt(int64_t a, int64_t b) { return a - FloorDivInt(a, b) * b; }

absl::StatusOr<int64_t> EvaluateInt(
    const PrimExpr& e, const std::function<std::optional<int64_t>(const ExprNode&)>& lookup) {
  if (e->kind == ExprKind::kIntImm) return e->int_value;
  if (e->kind == ExprKind::kVar) {
    std::optional<int64_t> v = lookup(*e);
    if (!v) return absl::InvalidArgumentError(absl::StrCat("unbound variable ", e->name));
    return *v;
  }
  std::vector<int64_t> a;
  for (const PrimExpr& arg : e->args) {
    absl::StatusOr<int64_t> v = EvaluateInt(arg, lookup);
    if (!v.ok()) return v.status();
    a.push_back(*v);
  }
  switch (e->kind) {
    case ExprKind::kAdd:
      return a[0] + a[1];
    case ExprKind::kSub:
      return a[0] - a[1];
    case ExprKind::kMul:
      return a[0] * a[1];
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
      if (a[1] == 0)
        return absl::InvalidArgumentError(absl::StrCat("division by zero in ", ToString(e)));
      return e->kind == ExprKind::kFloorDiv ? FloorDivInt(a[0], a[1]) : FloorModInt(a[0], a[1]);
    case ExprKind::kMin:
      return std::min(a[0], a[1]);
    case ExprKind::kMax:
      return std::max(a[0], a[1]);
    case ExprKind::kEQ:
      return a[0] == a[1];
    case ExprKind::kNE:
      return a[0] != a[1];
    case ExprKind::kLT:
      return a[0] < a[1];
    case ExprKind::kLE:
      return a[0] <= a[1];
    case ExprKind::kGT:
      return a[0] > a[1];
    case ExprKind::kGE:
      return a[0] >= a[1];
    case ExprKind::kAnd:
      return a[0] && a[1];
    case ExprKind::kOr:
      return a[0] || a[1];
    case ExprKind::kNot:
      return !a[0];
    case ExprKind::kSelect:
      return a[0] ? a[1] : a[2];
    case ExprKind::kCast:
      return a[0];
    default:
      return absl::InvalidArgumentError(absl::StrCat("not an integer expression: ", ToString(e)));
  }
}

std::vector<PrimExpr> FreeVars(const PrimExpr& e) {
  std::vector<PrimExpr> out;
  std::unordered_set<const ExprNode*> seen;
  std::function<void(const PrimExpr&)> visit = [&](const PrimExpr& x) {
    if (x->kind == ExprKind::kVar) {
      if (seen.insert(x.get()).second) out.push_back(x);
      return;
    }
    for (const PrimExpr& arg : x->args) visit(arg);
  };
  visit(e);
  return out;
}

PrimExpr Substitute(const PrimExpr& e, const std::function<PrimExpr(const PrimExpr&)>& fn) {
  std::vector<PrimExpr> args;
  bool changed = false;
  for (const PrimExpr& arg : e->args) {
    args.push_back(Substitute(arg, fn));
    changed |= args.back() != arg;
  }
  PrimExpr rebuilt = e;
  if (changed) {
    ExprNode copy = *e;
    copy.args = std::move(args);
    rebuilt = Make(std::move(copy));
  }
  PrimExpr replaced = fn(rebuilt);
  return replaced ? replaced : rebuilt;
}

}  // namespace kiln::arith
