// Graph-level IR (Relax style): functions of bindings over tensors whose struct info carries
// symbolic shapes. A module holds graph functions, loop-level PrimFuncs and the constants
// (weights) both refer to, so passes can look across levels.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/arith/expr.h"
#include "compiler/ir/loop.h"
#include "compiler/ir/tensor.h"

namespace kiln::ir {

// What is known about a value. A tensor's shape may be unknown (rank only, ndim >= 0) or
// unknown rank too (ndim = -1).
struct StructInfo {
  enum class Kind : uint8_t { kObject, kTensor, kShape, kTuple, kPrim };
  Kind kind = Kind::kObject;
  DataType dtype;                              // kTensor, kPrim
  int ndim = -1;                               // kTensor, kShape
  std::optional<std::vector<PrimExpr>> shape;  // kTensor: dims; kShape: values
  std::vector<StructInfo> fields;              // kTuple

  static StructInfo Tensor(std::vector<PrimExpr> shape, DataType dtype);
  static StructInfo TensorRank(int ndim, DataType dtype);
  static StructInfo Shape(std::vector<PrimExpr> values);
  static StructInfo Tuple(std::vector<StructInfo> fields);
  static StructInfo Prim(DataType dtype);
  bool is_tensor() const { return kind == Kind::kTensor; }
};
bool StructuralEqual(const StructInfo& a, const StructInfo& b);
std::string ToString(const StructInfo& info);

// Operator attributes, as in ONNX: ints, floats, strings and lists of them.
using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                 std::vector<std::string>>;
using Attrs = std::map<std::string, AttrValue>;

enum class ExprKind : uint8_t {
  kVar,           // name; struct_info
  kConstant,      // constant (weights); struct_info from its shape
  kTuple,         // args
  kTupleGetItem,  // args[0], index
  kCall,          // op: an operator name ("matmul"), "call_tir" or "call_extern"; args; attrs
  kShapeExpr,     // values
  kIf,            // args[0]: a bool scalar condition; subgraphs: then, else
};

struct ExprNode;
struct Function;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprKind kind;
  StructInfo struct_info;
  std::string name;                     // kVar: variable name; kCall: op name
  std::vector<Expr> args;               // kTuple, kTupleGetItem, kCall
  Attrs attrs;                          // kCall
  std::string callee;                   // kCall of call_tir/call_extern: kernel or library name
  int index = 0;                        // kTupleGetItem
  std::shared_ptr<const NDArray> data;  // kConstant
  std::vector<PrimExpr> values;         // kShapeExpr
  // kIf: the two branches; kCall of "loop"/"scan": the body. A subgraph may use the
  // variables of the scopes around it directly (lexical scope, as ONNX subgraphs do).
  std::vector<std::shared_ptr<const Function>> subgraphs;
};

Expr MakeVar(std::string name, StructInfo info);
Expr MakeConstant(NDArray data);
Expr MakeTuple(std::vector<Expr> fields);
Expr MakeTupleGetItem(Expr tuple, int index);
// An operator call; struct info is filled by normalization (op registry).
Expr MakeCall(std::string op, std::vector<Expr> args, Attrs attrs = {});
// call_tir(kernel, args) producing a value of struct info `out`.
Expr MakeCallTIR(std::string kernel, std::vector<Expr> args, StructInfo out);
Expr MakeShapeExpr(std::vector<PrimExpr> values);
// if (cond) then_branch else else_branch; both branches take no parameters and return values
// of struct info `out`.
Expr MakeIf(Expr cond, std::shared_ptr<const Function> then_branch,
            std::shared_ptr<const Function> else_branch, StructInfo out);
// An omitted optional operand (an ONNX input left empty): the empty tuple.
Expr MakeNone();
bool IsNone(const Expr& expr);

// `var = value`, or with match_cast `var = match_cast(value, var's struct info)`: binds any new
// symbolic variables in that struct info and checks the rest at run time.
struct Binding {
  Expr var;
  Expr value;
  bool match_cast = false;
};
struct BindingBlock {
  bool dataflow = true;  // pure, side-effect free
  std::vector<Binding> bindings;
};

struct Function {
  std::string name;
  std::vector<Expr> params;  // kVar each
  // The names the model's users know the inputs and outputs by (ONNX value names), which
  // may not be valid IR identifiers.
  std::vector<std::string> input_names, output_names;
  std::vector<BindingBlock> blocks;
  Expr result;
};

struct IRModule {
  std::map<std::string, Function> functions;
  std::map<std::string, PrimFunc> prim_funcs;
  // Constants that host code reaches with kiln.constant(k), after host lowering.
  std::vector<std::shared_ptr<const NDArray>> constants;
};

std::string ToString(const Expr& expr);
std::string ToString(const Function& func);
std::string ToString(const IRModule& module);

}  // namespace kiln::ir
