// PrimExpr: the scalar expression language shared by symbolic shapes (graph level) and
// loop-level kernels. One node struct with a kind tag keeps visiting, printing, equality and
// hashing generic: they walk `args` and never need a case per node.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::arith {

// Element type of a scalar or tensor. Codes follow DLPack's order where they overlap.
struct DataType {
  enum Code : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kHandle = 3, kBool = 6 };
  Code code = kInt;
  uint8_t bits = 64;

  static DataType Int(int bits = 64) { return {kInt, static_cast<uint8_t>(bits)}; }
  static DataType UInt(int bits) { return {kUInt, static_cast<uint8_t>(bits)}; }
  static DataType Float(int bits = 32) { return {kFloat, static_cast<uint8_t>(bits)}; }
  static DataType Bool() { return {kBool, 8}; }
  static DataType Handle() { return {kHandle, 64}; }

  bool is_int() const { return code == kInt || code == kUInt; }
  bool is_float() const { return code == kFloat; }
  int bytes() const { return (bits + 7) / 8; }
  // "i64", "u8", "f32", "bool", "handle".
  std::string ToString() const;
  static absl::StatusOr<DataType> Parse(const std::string& text);

  friend bool operator==(DataType a, DataType b) { return a.code == b.code && a.bits == b.bits; }
  friend bool operator!=(DataType a, DataType b) { return !(a == b); }
};

// The node list, declared once.
enum class ExprKind : uint8_t {
  kIntImm,
  kFloatImm,
  kVar,
  kAdd,
  kSub,
  kMul,
  kDiv,  // kDiv is true division (floats only)
  kFloorDiv,
  kFloorMod,
  kMin,
  kMax,
  kEQ,
  kNE,
  kLT,
  kLE,
  kGT,
  kGE,
  kAnd,
  kOr,
  kNot,
  kSelect,  // args: condition, true value, false value
  kCast,    // args: value; dtype is the target type
  kCall,    // name: intrinsic ("exp", "tanh", ...); args: operands
  kLoad,    // buffer; args: one index per buffer dimension
};
const char* ExprKindName(ExprKind kind);
bool IsBinary(ExprKind kind);

struct ExprNode;
using PrimExpr = std::shared_ptr<const ExprNode>;
struct BufferNode;
using Buffer = std::shared_ptr<const BufferNode>;

struct ExprNode {
  ExprKind kind;
  DataType dtype;
  int64_t int_value = 0;       // kIntImm
  double float_value = 0;      // kFloatImm
  std::string name;            // kVar: its name; kCall: the intrinsic
  std::vector<PrimExpr> args;  // operands, in order
  Buffer buffer;               // kLoad

  bool is_const_int(int64_t v) const { return kind == ExprKind::kIntImm && int_value == v; }
};

// A named, typed, row-major array with a (possibly symbolic) shape. Kernels read and write
// buffers; a load names one, so the expression language carries it.
struct BufferNode {
  std::string name;
  DataType dtype;
  std::vector<PrimExpr> shape;
};
Buffer MakeBuffer(std::string name, DataType dtype, std::vector<PrimExpr> shape);

// Constructors build nodes as written; Analyzer::Simplify canonicalizes.
PrimExpr IntImm(int64_t value, DataType dtype = DataType::Int());
PrimExpr FloatImm(double value, DataType dtype = DataType::Float());
// Variables are compared by identity: two calls with one name give two variables.
PrimExpr MakeVar(std::string name, DataType dtype = DataType::Int());
PrimExpr Binary(ExprKind kind, PrimExpr a, PrimExpr b);
PrimExpr Not(PrimExpr a);
PrimExpr Select(PrimExpr cond, PrimExpr t, PrimExpr f);
PrimExpr Cast(DataType dtype, PrimExpr value);
PrimExpr Call(DataType dtype, std::string name, std::vector<PrimExpr> args);
PrimExpr Load(Buffer buffer, std::vector<PrimExpr> indices);

inline PrimExpr operator+(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kAdd, a, b); }
inline PrimExpr operator-(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kSub, a, b); }
inline PrimExpr operator*(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kMul, a, b); }
inline PrimExpr FloorDiv(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kFloorDiv, a, b); }
inline PrimExpr FloorMod(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kFloorMod, a, b); }
inline PrimExpr Min(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kMin, a, b); }
inline PrimExpr Max(PrimExpr a, PrimExpr b) { return Binary(ExprKind::kMax, a, b); }

// Structural equality and hashing: variables and buffers by identity, everything else by
// value.
bool StructuralEqual(const PrimExpr& a, const PrimExpr& b);
size_t StructuralHash(const PrimExpr& e);
struct PrimExprHash {
  size_t operator()(const PrimExpr& e) const { return StructuralHash(e); }
};
struct PrimExprEqual {
  bool operator()(const PrimExpr& a, const PrimExpr& b) const { return StructuralEqual(a, b); }
};

// Infix text: `n * 2 + 1`, `floordiv(n, 4)`, `A[i, j]`, `exp(x)`. Floats print exactly.
std::string ToString(const PrimExpr& e);
// Pieces of that syntax, shared with the IR printer: how tightly an infix operator binds
// (10 for atoms and call syntax), and a float literal that reads back exactly.
int InfixPrecedence(ExprKind kind);
std::string FloatLiteral(double v);
std::ostream& operator<<(std::ostream& os, const PrimExpr& e);

// Evaluates an integer/boolean expression; vars are looked up with `lookup` (nullopt if
// unbound makes Evaluate fail). Used by tests and by the reference shape checks.
absl::StatusOr<int64_t> EvaluateInt(
    const PrimExpr& e, const std::function<std::optional<int64_t>(const ExprNode&)>& lookup);

// Collects the variables an expression uses, each once, in first-use order.
std::vector<PrimExpr> FreeVars(const PrimExpr& e);

// Rebuilds `e` with `fn` applied to every sub-expression bottom-up; `fn` returns nullptr to
// keep a node. Nodes whose operands did not change are reused.
PrimExpr Substitute(const PrimExpr& e, const std::function<PrimExpr(const PrimExpr&)>& fn);

}  // namespace kiln::arith
