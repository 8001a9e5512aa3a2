// Elementwise operators: math, activations, comparisons, logic and casts. Every op maps each
// output element from the elements at the same (numpy-broadcast) position of its operands,
// so the result shape is the broadcast of the operand shapes, symbolic dims included.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::op {
namespace {

using arith::DataType;
using arith::PrimExpr;
using ir::StructInfo;

// Which element types an op accepts.
enum class Accept { kFloat, kNumeric, kUnsigned, kBool, kAny };

bool Accepts(Accept accept, DataType dtype) {
  switch (accept) {
    case Accept::kFloat:
      return dtype.is_float();
    case Accept::kNumeric:
      return dtype.is_int() || dtype.is_float();
    case Accept::kUnsigned:
      return dtype.code == DataType::kUInt;
    case Accept::kBool:
      return dtype.code == DataType::kBool;
    case Accept::kAny:
      return true;
  }
  return false;
}

const char* AcceptText(Accept accept) {
  switch (accept) {
    case Accept::kFloat:
      return "a float";
    case Accept::kNumeric:
      return "a numeric";
    case Accept::kUnsigned:
      return "an unsigned integer";
    case Accept::kBool:
      return "a bool";
    case Accept::kAny:
      return "any";
  }
  return "";
}

// Arguments [first, last) as tensors, shapes possibly unknown.
absl::StatusOr<std::vector<const StructInfo*>> ArgInfos(const ir::ExprNode& call, size_t first,
                                                        size_t last) {
  std::vector<const StructInfo*> out;
  for (size_t i = first; i < last; ++i) {
    KILN_ASSIGN_OR_RETURN(const StructInfo* info, TensorArg(call, i));
    out.push_back(info);
  }
  return out;
}

absl::Status CheckArity(const ir::ExprNode& call, size_t min_args, size_t max_args) {
  size_t n = call.args.size();
  if (n >= min_args && n <= max_args) return absl::OkStatus();
  if (min_args == max_args) {
    return OpError(call, absl::StrCat("expects ", min_args, " arguments, got ", n));
  }
  return OpError(call, absl::StrCat("expects at least ", min_args, " arguments, got ", n));
}

absl::Status CheckSameDType(const ir::ExprNode& call, const std::vector<const StructInfo*>& args) {
  for (const StructInfo* a : args) {
    if (a->dtype != args[0]->dtype) {
      return OpError(call, absl::StrCat("operand dtypes differ: ", args[0]->dtype.ToString(),
                                        " and ", a->dtype.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAccepts(const ir::ExprNode& call, Accept accept, DataType dtype) {
  if (Accepts(accept, dtype)) return absl::OkStatus();
  return OpError(call,
                 absl::StrCat("needs ", AcceptText(accept), " tensor, got ", dtype.ToString()));
}

// The numpy broadcast of every argument's shape; only the rank when a shape is unknown (the
// kernel then checks the shapes at run time).
absl::StatusOr<StructInfo> BroadcastInfos(const ir::ExprNode& call,
                                          const std::vector<const StructInfo*>& args,
                                          DataType dtype, const arith::Analyzer& analyzer) {
  std::optional<std::vector<PrimExpr>> shape = std::vector<PrimExpr>{};
  int ndim = 0;
  for (const StructInfo* a : args) {
    ndim = (a->ndim < 0 || ndim < 0) ? -1 : std::max(ndim, a->ndim);
    if (!a->shape) shape.reset();
    if (!shape) continue;
    auto merged = BroadcastShapes(*shape, *a->shape, analyzer);
    if (!merged.ok() && (DependsOnRuntimeValues(*shape) || DependsOnRuntimeValues(*a->shape))) {
      shape.reset();  // dims from run-time values: the kernel checks them then
      continue;
    }
    if (!merged.ok()) return OpError(call, std::string(merged.status().message()));
    shape = *std::move(merged);
  }
  if (shape) return StructInfo::Tensor(*std::move(shape), dtype);
  return StructInfo::TensorRank(ndim, dtype);
}

// Operands of one dtype that `accept` allows, broadcast together; the result has their dtype,
// or bool for comparisons and predicates.
InferFn Elementwise(size_t min_args, size_t max_args, Accept accept, bool bool_result = false) {
  return [=](const ir::ExprNode& call,
             const arith::Analyzer& analyzer) -> absl::StatusOr<StructInfo> {
    KILN_RETURN_IF_ERROR(CheckArity(call, min_args, max_args));
    KILN_ASSIGN_OR_RETURN(auto args, ArgInfos(call, 0, call.args.size()));
    KILN_RETURN_IF_ERROR(CheckSameDType(call, args));
    KILN_RETURN_IF_ERROR(CheckAccepts(call, accept, args[0]->dtype));
    if (min_args == 1 && max_args == 1 && !bool_result) return *args[0];
    return BroadcastInfos(call, args, bool_result ? DataType::Bool() : args[0]->dtype, analyzer);
  };
}

InferFn Unary(Accept accept) { return Elementwise(1, 1, accept); }
InferFn Binary(Accept accept) { return Elementwise(2, 2, accept); }
InferFn Compare() { return Elementwise(2, 2, Accept::kAny, true); }
InferFn Variadic() { return Elementwise(1, SIZE_MAX, Accept::kNumeric); }

// mod: integer mod takes the divisor's sign (Python); fmod=1 the dividend's (C). Floats only
// have the latter, as ONNX requires.
absl::StatusOr<StructInfo> InferMod(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(StructInfo out, Binary(Accept::kNumeric)(call, analyzer));
  int64_t fmod = GetIntAttr(call.attrs, "fmod", 0);
  if (fmod != 0 && fmod != 1) return OpError(call, absl::StrCat("fmod must be 0 or 1, got ", fmod));
  if (out.dtype.is_float() && fmod == 0) {
    return OpError(call, "fmod must be 1 for float operands");
  }
  return out;
}

absl::StatusOr<StructInfo> InferBitShift(const ir::ExprNode& call,
                                         const arith::Analyzer& analyzer) {
  std::string direction = GetStringAttr(call.attrs, "direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return OpError(call, "direction must be \"LEFT\" or \"RIGHT\", got \"" + direction + "\"");
  }
  return Binary(Accept::kUnsigned)(call, analyzer);
}

// pow: base and exponent may have different numeric types; the result has the base's.
absl::StatusOr<StructInfo> InferPow(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  KILN_RETURN_IF_ERROR(CheckArity(call, 2, 2));
  KILN_ASSIGN_OR_RETURN(auto args, ArgInfos(call, 0, 2));
  for (const StructInfo* a : args)
    KILN_RETURN_IF_ERROR(CheckAccepts(call, Accept::kNumeric, a->dtype));
  return BroadcastInfos(call, args, args[0]->dtype, analyzer);
}

absl::StatusOr<StructInfo> InferWhere(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  KILN_RETURN_IF_ERROR(CheckArity(call, 3, 3));
  KILN_ASSIGN_OR_RETURN(auto args, ArgInfos(call, 0, 3));
  if (args[0]->dtype != DataType::Bool()) {
    return OpError(call, "the condition must be a bool tensor, got " + args[0]->dtype.ToString());
  }
  KILN_RETURN_IF_ERROR(CheckSameDType(call, {args[1], args[2]}));
  return BroadcastInfos(call, args, args[1]->dtype, analyzer);
}

// clip(x, min, max): each bound is omitted (none) or a one-element tensor of x's dtype.
absl::StatusOr<StructInfo> InferClip(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_RETURN_IF_ERROR(CheckArity(call, 3, 3));
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_RETURN_IF_ERROR(CheckAccepts(call, Accept::kNumeric, x->dtype));
  for (size_t i = 1; i < 3; ++i) {
    if (ir::IsNone(call.args[i])) continue;
    KILN_ASSIGN_OR_RETURN(const StructInfo* bound, TensorArg(call, i));
    KILN_RETURN_IF_ERROR(CheckSameDType(call, {x, bound}));
    bool scalar = bound->shape && std::all_of(bound->shape->begin(), bound->shape->end(),
                                              [](const PrimExpr& d) { return d->is_const_int(1); });
    if (!scalar) {
      return OpError(call, absl::StrCat(i == 1 ? "min" : "max", " must be a scalar, got ",
                                        ir::ToString(*bound)));
    }
  }
  return *x;
}

absl::StatusOr<StructInfo> InferCast(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_RETURN_IF_ERROR(CheckArity(call, 1, 1));
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  auto to = DataType::Parse(GetStringAttr(call.attrs, "to", ""));
  if (!to.ok()) return OpError(call, std::string(to.status().message()));
  StructInfo out = *x;
  out.dtype = *to;
  return out;
}

// dropout in inference: (x unchanged, mask of all true).
absl::StatusOr<StructInfo> InferDropout(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_RETURN_IF_ERROR(CheckArity(call, 1, 1));
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  StructInfo mask = *x;
  mask.dtype = DataType::Bool();
  return StructInfo::Tuple({*x, mask});
}

}  // namespace

std::vector<OpDef> ElementwiseOps() {
  std::vector<OpDef> ops = {
      {"add", Binary(Accept::kNumeric)},
      {"subtract", Binary(Accept::kNumeric)},
      {"multiply", Binary(Accept::kNumeric)},
      {"divide", Binary(Accept::kNumeric)},
      {"mod", InferMod},
      {"pow", InferPow},
      {"bit_shift", InferBitShift},
      {"equal", Compare()},
      {"greater", Compare()},
      {"greater_or_equal", Compare()},
      {"less", Compare()},
      {"less_or_equal", Compare()},
      {"and", Elementwise(2, 2, Accept::kBool)},
      {"or", Elementwise(2, 2, Accept::kBool)},
      {"xor", Elementwise(2, 2, Accept::kBool)},
      {"not", Unary(Accept::kBool)},
      {"is_nan", Elementwise(1, 1, Accept::kFloat, true)},
      {"is_inf", Elementwise(1, 1, Accept::kFloat, true)},
      {"max", Variadic()},
      {"min", Variadic()},
      {"sum", Variadic()},
      {"mean", Variadic()},
      {"where", InferWhere},
      {"clip", InferClip},
      {"prelu", Binary(Accept::kNumeric)},  // slope broadcasts to x
      {"cast", InferCast},
      {"dropout", InferDropout},
      {"copy", Unary(Accept::kAny)},
  };
  // Ops defined on every numeric type.
  for (const char* name : {"abs", "neg", "sign", "relu", "shrink"}) {
    ops.push_back({name, Unary(Accept::kNumeric)});
  }
  // Float math and activations.
  for (const char* name :
       {"acos",     "acosh",        "asin",       "asinh",      "atan", "atanh",
        "ceil",     "cos",          "cosh",       "erf",        "exp",  "floor",
        "log",      "reciprocal",   "round",      "sigmoid",    "sin",  "sinh",
        "softplus", "softsign",     "sqrt",       "tan",        "tanh", "celu",
        "elu",      "hard_sigmoid", "hard_swish", "leaky_relu", "selu", "thresholded_relu",
        "mish",     "gelu"}) {
    ops.push_back({name, Unary(Accept::kFloat)});
  }
  return ops;
}

}  // namespace kiln::op
