#include "compiler/transform/legalize.h"

#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/op/registry.h"

namespace kiln::transform {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

namespace {

using Indices = std::vector<PrimExpr>;

PrimExpr Zero(DataType dtype) {
  return dtype.is_float() ? arith::FloatImm(0, dtype) : arith::IntImm(0, dtype);
}

// for i0, i1, ... over `shape`: body(indices)
Stmt LoopNest(const std::vector<PrimExpr>& shape, const std::string& prefix,
              const std::function<Stmt(const Indices&)>& body) {
  Indices vars;
  for (size_t d = 0; d < shape.size(); ++d) vars.push_back(arith::MakeVar(absl::StrCat(prefix, d)));
  Stmt stmt = body(vars);
  for (size_t d = shape.size(); d-- > 0;) {
    stmt = ir::For(vars[d], arith::IntImm(0), shape[d], ir::ForKind::kSerial, stmt);
  }
  return stmt;
}

// out[idx] = fcompute(idx) for every element of `out`.
Stmt Compute(const Buffer& out, const std::function<PrimExpr(const Indices&)>& fcompute) {
  return LoopNest(out->shape, "i",
                  [&](const Indices& idx) { return ir::Store(out, idx, fcompute(idx)); });
}

// Loads `buf` at the output position `idx`, numpy broadcasting: dims are aligned from the
// right, and a dim of extent 1 is read at 0.
PrimExpr LoadBroadcast(const Buffer& buf, const Indices& idx, const arith::Analyzer& analyzer) {
  size_t offset = idx.size() - buf->shape.size();
  Indices at;
  for (size_t d = 0; d < buf->shape.size(); ++d) {
    at.push_back(buf->shape[d]->is_const_int(1) ? arith::IntImm(0) : idx[offset + d]);
  }
  return arith::Load(buf, at);
}

// ONNX integer division truncates toward zero; floordiv rounds down.
PrimExpr TruncDiv(PrimExpr a, PrimExpr b) {
  PrimExpr q = arith::FloorDiv(a, b);
  PrimExpr zero = arith::IntImm(0, a->dtype);
  PrimExpr signs_differ = arith::Binary(ExprKind::kNE, arith::Binary(ExprKind::kLT, a, zero),
                                        arith::Binary(ExprKind::kLT, b, zero));
  PrimExpr inexact = arith::Binary(ExprKind::kNE, arith::FloorMod(a, b), zero);
  return arith::Select(arith::Binary(ExprKind::kAnd, signs_differ, inexact),
                       q + arith::IntImm(1, a->dtype), q);
}

PrimExpr ApplyBinary(const std::string& op, PrimExpr a, PrimExpr b) {
  if (op == "add") return a + b;
  if (op == "subtract") return a - b;
  if (op == "multiply") return a * b;
  KILN_CHECK(op == "divide") << op;
  if (a->dtype.is_float()) return arith::Binary(ExprKind::kDiv, a, b);
  return TruncDiv(a, b);
}

PrimExpr ApplyUnary(const std::string& op, PrimExpr x) {
  DataType t = x->dtype;
  if (op == "copy") return x;
  if (op == "relu") {
    // Written as a select so that NaN stays NaN, as in numpy's maximum.
    return arith::Select(arith::Binary(ExprKind::kLT, x, Zero(t)), Zero(t), x);
  }
  return arith::Call(t, op, {x});  // sigmoid, tanh, exp: math intrinsics
}

PrimExpr Fold(ExprKind kind, const std::vector<PrimExpr>& x) {
  PrimExpr acc = x[0];
  for (size_t i = 1; i < x.size(); ++i) acc = arith::Binary(kind, acc, x[i]);
  return acc;
}

// Elementwise ops whose body is one scalar expression of the broadcast operands; nullptr
// for ops this table does not define. `out` is the result dtype.
PrimExpr ScalarOp(const std::string& op, const std::vector<PrimExpr>& x, DataType out) {
  static const std::map<std::string, ExprKind> kBinary = {{"equal", ExprKind::kEQ},
                                                          {"less", ExprKind::kLT},
                                                          {"greater", ExprKind::kGT},
                                                          {"less_or_equal", ExprKind::kLE},
                                                          {"greater_or_equal", ExprKind::kGE},
                                                          {"and", ExprKind::kAnd},
                                                          {"or", ExprKind::kOr},
                                                          {"xor", ExprKind::kNE}};
  static const std::set<std::string> kFloatMath = {"sqrt", "log", "floor", "ceil",
                                                   "erf",  "exp", "tanh",  "sigmoid"};
  DataType t = x[0]->dtype;
  if (auto it = kBinary.find(op); it != kBinary.end() && x.size() == 2) {
    return arith::Binary(it->second, x[0], x[1]);
  }
  if (op == "not") return arith::Not(x[0]);
  if (op == "where") return arith::Select(x[0], x[1], x[2]);
  if (op == "max") return Fold(ExprKind::kMax, x);
  if (op == "min") return Fold(ExprKind::kMin, x);
  if (op == "sum") return Fold(ExprKind::kAdd, x);
  if (op == "neg") return Zero(t) - x[0];
  if (!t.is_float()) return nullptr;
  if (kFloatMath.count(op)) return arith::Call(t, op, {x[0]});
  if (op == "abs") return arith::Call(t, "fabs", {x[0]});
  if (op == "reciprocal") return arith::Binary(ExprKind::kDiv, arith::FloatImm(1, t), x[0]);
  if (op == "pow" && x[1]->dtype == t) return arith::Call(t, "pow", {x[0], x[1]});
  if (op == "mean") {
    return arith::Binary(ExprKind::kDiv, Fold(ExprKind::kAdd, x),
                         arith::FloatImm(static_cast<double>(x.size()), t));
  }
  (void)out;
  return nullptr;
}

// What one kernel sees: its input buffers, its output buffer, and the analyzer that knows the
// shape variables.
struct KernelContext {
  const ir::ExprNode& call;
  std::vector<Buffer> inputs;
  Buffer out;
  const arith::Analyzer& analyzer;
};

Stmt MatmulBody(const KernelContext& k) {
  const Buffer &a = k.inputs[0], &b = k.inputs[1], &c = k.out;
  PrimExpr kdim = a->shape.back();
  return LoopNest(c->shape, "i", [&](const Indices& idx) {
    size_t n = idx.size();
    Indices batch(idx.begin(), idx.end() - 2);
    PrimExpr kv = arith::MakeVar("k");
    auto operand = [&](const Buffer& buf, PrimExpr row, PrimExpr col) {
      Indices at = batch;
      at.push_back(row);
      at.push_back(col);
      // Batch dims broadcast like elementwise operands.
      size_t offset = at.size() - buf->shape.size();
      Indices own;
      for (size_t d = 0; d < buf->shape.size(); ++d) {
        bool bcast = d + 2 < buf->shape.size() && buf->shape[d]->is_const_int(1);
        own.push_back(bcast ? arith::IntImm(0) : at[offset + d]);
      }
      return arith::Load(buf, own);
    };
    Stmt init = ir::Store(c, idx, Zero(c->dtype));
    Stmt update = ir::Store(
        c, idx, arith::Load(c, idx) + operand(a, idx[n - 2], kv) * operand(b, kv, idx[n - 1]));
    return ir::Seq({init, ir::For(kv, arith::IntImm(0), kdim, ir::ForKind::kSerial, update)});
  });
}

// Numerically stable softmax along one axis: subtract the max before exponentiating.
Stmt SoftmaxBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &y = k.out;
  int64_t axis = op::GetIntAttr(k.call.attrs, "axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(x->shape.size());
  std::vector<PrimExpr> outer_shape = x->shape;
  outer_shape[axis] = arith::IntImm(1);
  DataType t = x->dtype;
  Buffer max_buf = arith::MakeBuffer("max", t, {arith::IntImm(1)});
  Buffer sum_buf = arith::MakeBuffer("sum", t, {arith::IntImm(1)});
  Indices zero = {arith::IntImm(0)};
  return LoopNest(outer_shape, "o", [&](const Indices& outer) {
    PrimExpr kv = arith::MakeVar("k");
    Indices at = outer;
    at[axis] = kv;
    auto over_axis = [&](Stmt body) {
      return ir::For(kv, arith::IntImm(0), x->shape[axis], ir::ForKind::kSerial, body);
    };
    PrimExpr shifted = arith::Load(x, at) - arith::Load(max_buf, zero);
    Stmt body = ir::Seq({
        ir::Store(max_buf, zero, arith::FloatImm(-INFINITY, t)),
        over_axis(
            ir::Store(max_buf, zero, arith::Max(arith::Load(max_buf, zero), arith::Load(x, at)))),
        ir::Store(sum_buf, zero, Zero(t)),
        over_axis(
            ir::Seq({ir::Store(y, at, arith::Call(t, "exp", {shifted})),
                     ir::Store(sum_buf, zero, arith::Load(sum_buf, zero) + arith::Load(y, at))})),
        over_axis(ir::Store(
            y, at, arith::Binary(ExprKind::kDiv, arith::Load(y, at), arith::Load(sum_buf, zero)))),
    });
    return ir::Allocate(max_buf, ir::Allocate(sum_buf, body));
  });
}

Stmt TransposeBody(const KernelContext& k) {
  std::vector<int64_t> perm = op::GetIntsAttr(k.call.attrs, "perm");
  return Compute(k.out, [&](const Indices& idx) {
    Indices at(idx.size());
    for (size_t d = 0; d < perm.size(); ++d) at[perm[d]] = idx[d];
    return arith::Load(k.inputs[0], at);
  });
}

// Reshape copies in row-major order: the output's linear index, re-split by input extents.
Stmt ReshapeBody(const KernelContext& k) {
  const Buffer& in = k.inputs[0];
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr linear = arith::IntImm(0);
    for (size_t d = 0; d < idx.size(); ++d) linear = linear * k.out->shape[d] + idx[d];
    Indices at(in->shape.size());
    for (size_t d = in->shape.size(); d-- > 0;) {
      at[d] = k.analyzer.Simplify(arith::FloorMod(linear, in->shape[d]));
      linear = arith::FloorDiv(linear, in->shape[d]);
    }
    return arith::Load(in, at);
  });
}

absl::StatusOr<Stmt> KernelBody(const KernelContext& k) {
  const std::string& op = k.call.name;
  if (op == "add" || op == "subtract" || op == "multiply" || op == "divide") {
    return Compute(k.out, [&](const Indices& idx) {
      return ApplyBinary(op, LoadBroadcast(k.inputs[0], idx, k.analyzer),
                         LoadBroadcast(k.inputs[1], idx, k.analyzer));
    });
  }
  if (op == "relu" || op == "sigmoid" || op == "tanh" || op == "exp" || op == "copy") {
    if (op != "relu" && op != "copy" && !k.out->dtype.is_float()) {
      return absl::InvalidArgumentError(absl::StrCat("op ", op, " needs a float tensor"));
    }
    return Compute(
        k.out, [&](const Indices& idx) { return ApplyUnary(op, arith::Load(k.inputs[0], idx)); });
  }
  std::vector<PrimExpr> probe;
  for (const Buffer& in : k.inputs) probe.push_back(arith::MakeVar("probe", in->dtype));
  if (!probe.empty() && ScalarOp(op, probe, k.out->dtype)) {
    return Compute(k.out, [&](const Indices& idx) {
      std::vector<PrimExpr> operands;
      for (const Buffer& in : k.inputs) operands.push_back(LoadBroadcast(in, idx, k.analyzer));
      return ScalarOp(op, operands, k.out->dtype);
    });
  }
  if (op == "matmul") return MatmulBody(k);
  if (op == "softmax") return SoftmaxBody(k);
  if (op == "transpose") return TransposeBody(k);
  if (op == "reshape") return ReshapeBody(k);
  return absl::UnimplementedError(absl::StrCat("no loop-level definition for op ", op));
}

// A kernel needs every operand's shape as expressions; values whose shape is known only at
// run time (or tuples, omitted operands) cannot be compiled yet.
absl::StatusOr<Buffer> TensorBuffer(const ir::ExprNode& call, const std::string& name,
                                    const ir::StructInfo& info) {
  if (!info.is_tensor() || !info.shape) {
    return absl::UnimplementedError(absl::StrCat(
        "op ", call.name, ": operand ", name, " is ", ir::ToString(info),
        "; only tensors with shapes known at compile time (symbolic or not) are compiled yet"));
  }
  if (info.dtype.is_float() && info.dtype.bits == 16) {
    return absl::UnimplementedError(
        absl::StrCat("op ", call.name, ": float16 tensors are not compiled yet"));
  }
  return arith::MakeBuffer(name, info.dtype, *info.shape);
}

// The symbolic variables a kernel's buffer shapes use, each once: its scalar parameters.
std::vector<PrimExpr> ShapeVars(const std::vector<Buffer>& buffers) {
  std::vector<PrimExpr> vars;
  for (const Buffer& b : buffers) {
    for (const PrimExpr& d : b->shape) {
      for (const PrimExpr& v : arith::FreeVars(d)) {
        bool seen = false;
        for (const PrimExpr& u : vars) seen |= u == v;
        if (!seen) vars.push_back(v);
      }
    }
  }
  return vars;
}

class Legalizer {
 public:
  explicit Legalizer(ir::IRModule& module) : module_(module) {}

  absl::Status Run(ir::Function& func) {
    for (ir::BindingBlock& block : func.blocks) {
      for (ir::Binding& binding : block.bindings) {
        const ir::Expr& value = binding.value;
        if (value->kind != ir::ExprKind::kCall || value->name == "call_tir") continue;
        KILN_ASSIGN_OR_RETURN(binding.value, LegalizeCall(*value));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<ir::Expr> LegalizeCall(const ir::ExprNode& call) {
    std::vector<ir::Expr> tensor_args;
    std::vector<Buffer> inputs;
    for (const ir::Expr& arg : call.args) {
      if (arg->kind == ir::ExprKind::kShapeExpr) continue;  // folded into the output shape
      KILN_ASSIGN_OR_RETURN(Buffer in,
                            TensorBuffer(call, absl::StrCat("A", inputs.size()), arg->struct_info));
      inputs.push_back(in);
      tensor_args.push_back(arg);
    }
    KILN_ASSIGN_OR_RETURN(Buffer out, TensorBuffer(call, "out", call.struct_info));
    KernelContext k{call, inputs, out, analyzer_};
    KILN_ASSIGN_OR_RETURN(Stmt body, KernelBody(k));
    ir::PrimFunc kernel;
    kernel.name = FreshKernelName(call.name);
    kernel.buffers = inputs;
    kernel.buffers.push_back(out);
    kernel.scalars = ShapeVars(kernel.buffers);
    kernel.body = body;
    module_.prim_funcs.emplace(kernel.name, kernel);
    return ir::MakeCallTIR(kernel.name, tensor_args, call.struct_info);
  }

  std::string FreshKernelName(const std::string& op) {
    return absl::StrCat(op, "_", counts_[op]++);
  }

  ir::IRModule& module_;
  arith::Analyzer analyzer_;
  std::map<std::string, int> counts_;
};

}  // namespace

absl::StatusOr<ir::IRModule> Legalize(ir::IRModule module) {
  Legalizer legalizer(module);
  for (auto& [name, func] : module.functions) KILN_RETURN_IF_ERROR(legalizer.Run(func));
  return module;
}

}  // namespace kiln::transform
